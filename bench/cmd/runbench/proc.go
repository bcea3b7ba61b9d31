package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/procstat"
)

// tailBuffer keeps the last max bytes written to it (a child's stderr can be long).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func newTail(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	return string(b)
}

// lastLines returns the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var out []string
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			out = append([]string{l}, out...)
		}
	}
	r := strings.Join(out, " | ")
	if len(r) > 600 {
		r = r[:600] + "..."
	}
	return r
}

// interrupted is closed when the harness is asked to stop (SIGINT, SIGTERM).
var interrupted = make(chan struct{})

// proc is a started child process whose resource usage is read when it is waited for.
type proc struct {
	name   string
	cmd    *exec.Cmd
	start  time.Time
	stdout *tailBuffer
	stderr *tailBuffer
	done   chan struct{}
	err    error
	end    time.Time
	usage  usage
	hwmKiB atomic.Int64 // the highest VmHWM sampled while it ran (see sampleHWM)
	// peakRSSKiB is the highest VmRSS sampled, peakAnonKiB and peakFileKiB its split in that
	// sample: anonymous memory (heap, stacks) and file-backed pages (the program's own code and
	// tables, its libraries).
	peakRSSKiB, peakAnonKiB, peakFileKiB atomic.Int64
	sampleStop                           chan struct{} // closed once the process was waited for
}

// usage is what getrusage(2) says about a waited-for child.
type usage struct {
	UserSec   float64
	SysSec    float64
	MaxRSSKiB int64
}

func (u usage) CPUSec() float64 { return u.UserSec + u.SysSec }

// startProc starts cmd in its own process group with stdout and stderr captured (their tails).
func startProc(name string, cmd *exec.Cmd) (*proc, error) {
	p := &proc{name: name, cmd: cmd, stdout: newTail(64 << 10), stderr: newTail(64 << 10), done: make(chan struct{}), sampleStop: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = p.stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = p.stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.start = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		p.sampleHWM()
	}()
	go func() {
		p.err = cmd.Wait()
		p.end = time.Now()
		if st := cmd.ProcessState; st != nil {
			if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
				p.usage = usage{
					UserSec:   time.Duration(ru.Utime.Nano()).Seconds(),
					SysSec:    time.Duration(ru.Stime.Nano()).Seconds(),
					MaxRSSKiB: ru.Maxrss,
				}
			}
		}
		// The last sample was taken before the exit: stop the sampler, then prefer its figure.
		close(p.sampleStop)
		<-sampled
		if kb := p.hwmKiB.Load(); kb > 0 {
			p.usage.MaxRSSKiB = kb
		}
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit on its own, stopping it (by its PID) after timeout or
// when the harness is interrupted (interrupted is closed).
func (p *proc) wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-interrupted:
		_ = p.stop(10 * time.Second)
		return fmt.Errorf("%s: interrupted", p.name)
	case <-time.After(timeout):
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		return fmt.Errorf("%s: did not finish within %v (stopped)", p.name, timeout)
	}
}

// stop sends SIGTERM to the process (by its PID), waits up to grace, then SIGKILLs it.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		return p.err
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s: still running %v after SIGTERM: killed", p.name, grace)
	}
}

func (p *proc) wall() time.Duration { return p.end.Sub(p.start) }

// exitErr describes a failed exit with the tail of the process's stderr.
func (p *proc) exitErr() error {
	if p.err == nil {
		return nil
	}
	return fmt.Errorf("%s: %v: %s", p.name, p.err, lastLines(p.stderr.String()+"\n"+p.stdout.String(), 4))
}

// sampleHWM keeps the highest VmHWM of the process until done closes. getrusage's ru_maxrss
// cannot be used for a child of this harness: Go starts children with CLONE_VM, and Linux
// carries the high-water mark of the address space a process exec'd from into its
// ru_maxrss, so every tool's figure was at least the harness's own RSS (42.5 MiB for the
// agent, kcat and the harness alike in one run). VmHWM belongs to the tool's own address
// space; sampled every 10 ms, a peak reached in the last 10 ms of a run can be missed. The
// sample with the highest VmRSS also keeps its RssAnon and RssFile.
func (p *proc) sampleHWM() {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if f, err := procstat.Fields(p.pid(), "VmHWM:", "VmRSS:", "RssAnon:", "RssFile:"); err == nil {
			if kb := f["VmHWM:"]; kb > p.hwmKiB.Load() {
				p.hwmKiB.Store(kb)
			}
			if kb := f["VmRSS:"]; kb > p.peakRSSKiB.Load() {
				p.peakRSSKiB.Store(kb)
				p.peakAnonKiB.Store(f["RssAnon:"])
				p.peakFileKiB.Store(f["RssFile:"])
			}
		}
		select {
		case <-t.C:
		case <-p.sampleStop:
			return
		}
	}
}

// cpuTicks reads utime+stime of a process (any process, e.g. the broker) in seconds.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bad stat")
	}
	f := strings.Fields(s[i+1:])
	// After ')': state(0) ppid(1) ... utime is field 14 of stat (index 11 here), stime 15 (12).
	if len(f) < 13 {
		return 0, errors.New("short stat")
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad stat numbers")
	}
	return (ut + st) / 100, nil // USER_HZ is 100 on Linux
}

// waitFor polls cond every interval until it returns true, ctx ends or the deadline passes.
func waitFor(ctx context.Context, timeout, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done within %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
