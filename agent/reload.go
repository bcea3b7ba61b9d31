package agent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"
)

// ApplyInputs makes the running inputs those of cfg (a configuration read again on SIGHUP,
// validated): an input cfg adds starts; one it no longer has stops reading, waits until every
// line it sent was acknowledged (up to the shutdown timeout) and saves its checkpoints; one
// whose settings of how lines become records changed does both, so that it goes on from its
// checkpoint with its new settings; one whose tail patterns alone changed follows the new
// patterns from its next scan. Nothing is lost or sent twice: a stopped input's checkpoint
// covers exactly the lines Kafka acknowledged, and its files are read again from there.
//
// It returns what it could not do; the inputs it could change are changed. Before and after
// RunTail, and with --exactly-once (whose transactions carry the positions of the inputs that
// started with them), it changes nothing and returns an error.
func (a *Agent) ApplyInputs(ctx context.Context, cfg *Config) error {
	named, err := cfg.InputConfigs()
	if err != nil {
		return err
	}
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	run := a.run
	switch {
	case a.cfg.ExactlyOnce:
		return errors.New("inputs: not changed with --exactly-once: they change at the next start")
	case run == nil:
		return errors.New("inputs: not changed: the agent is not following files")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(run.ctx, cancel)() // the run ends: it waits for nothing of this

	old := a.inputList()
	var errs []error
	var keep, added []*input
	var removed []*input
	for _, in := range old {
		i := slices.IndexFunc(named, func(n NamedConfig) bool { return n.Name == in.name })
		switch {
		case in.cfg.Stdin:
			// Standard input cannot be read again: its input stays as it started.
			if i < 0 || !sameLines(&in.cfg, &named[i].Config) {
				errs = append(errs, fmt.Errorf("input %s reads stdin: not changed (stdin cannot be read again; it changes at the next start)", in.name))
			}
			keep = append(keep, in)
		case i < 0:
			removed = append(removed, in)
		case sameLines(&in.cfg, &named[i].Config):
			if err := in.tailer.Load().SetGlobs(named[i].Tail); err != nil {
				errs = append(errs, fmt.Errorf("input %s: %w", in.name, err))
			}
			keep = append(keep, in)
		default:
			removed = append(removed, in) // and started again with its new settings, below
		}
	}
	for _, n := range named {
		if slices.ContainsFunc(keep, func(in *input) bool { return in.name == n.Name }) {
			continue
		}
		if n.Stdin {
			errs = append(errs, fmt.Errorf("input %s reads stdin: not started (stdin is read by an input that starts with the agent)", n.Name))
			continue
		}
		in, err := newInput(n, a.cfg.StateDir, &a.stats.Encoding, a.limit, a.topicTemplate)
		if err != nil {
			errs = append(errs, fmt.Errorf("input %s: %w", n.Name, err))
			continue
		}
		added = append(added, in)
	}
	for _, in := range removed {
		if err := a.stopInput(ctx, in); err != nil {
			errs = append(errs, err)
		}
	}
	a.inputsMu.Lock()
	a.inputs, a.retired = keep, append(a.retired, removed...)
	a.inputsMu.Unlock()
	for _, in := range added {
		if run.ctx.Err() != nil {
			break
		}
		if err := a.startInput(run, in); err != nil {
			errs = append(errs, err)
			continue
		}
		a.inputsMu.Lock()
		a.inputs = append(slices.Clip(a.inputs), in)
		a.inputsMu.Unlock()
		a.inputLog(in).Info("input started", "tail", in.cfg.Tail)
	}
	return errors.Join(errs...)
}

// sameLines reports whether two effective configurations of an input read and build lines the
// same way: every key an input sets (inputKeys) but its tail patterns.
func sameLines(x, y *Config) bool {
	mx, my := toMap(*x), toMap(*y)
	for _, key := range inputKeys {
		if key != "tail" && !reflect.DeepEqual(mx[key], my[key]) {
			return false
		}
	}
	return true
}

// stopInput stops in's reading, waits until each line it sent has an outcome (acknowledged,
// dead-lettered, or given up) for up to the shutdown timeout, and saves its checkpoints: its
// files' positions then cover every line it read, so a restart of the input neither skips nor
// repeats any. A line still without an outcome at the timeout keeps its file's checkpoint
// before it: the input that follows the file next reads it again.
func (a *Agent) stopInput(ctx context.Context, in *input) error {
	t := in.tailer.Load()
	in.cancel()
	<-in.done
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for t.Stats().Totals.InFlight > 0 && ctx.Err() == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	log := a.inputLog(in)
	if n := t.Stats().Totals.InFlight; n > 0 {
		log.Warn("input stopped with lines not yet acknowledged: they are read again by the input that follows their files next",
			"lines", n, "waited", a.cfg.ShutdownTimeout)
	}
	if err := t.SaveCheckpoints(); err != nil {
		return fmt.Errorf("input %s: saving checkpoints: %w", in.name, err)
	}
	log.Info("input stopped", "tail", in.cfg.Tail)
	return nil
}
