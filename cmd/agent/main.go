// Command agent ships log lines into Kafka: `agent --brokers HOST:PORT --topic T --tail PATH`
// follows files, and `some-program | agent --brokers HOST:PORT --topic T` sends standard input.
//
// Exit status: 0 when every line was acknowledged, 1 when a line was lost (stdin) or the run
// broke, 2 for bad usage or configuration, 3 when every line was acknowledged or dead-lettered
// and some were dead-lettered (stdin: none was lost).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkatrail/kafkatrail/agent"
	"github.com/kafkatrail/kafkatrail/internal/version"
	"github.com/kafkatrail/kafkatrail/statuspage"
	"github.com/kafkatrail/kafkatrail/telemetry"
)

const (
	exitOK           = 0
	exitFailed       = 1
	exitUsage        = 2
	exitDeadLettered = 3
)

// defaultGCPercent is the agent's GOGC unless the environment sets one. Most of its heap is
// long-lived (the pooled batch buffers of buffer.memory and the records waiting in them), which
// Go's default of 100 lets the heap grow by again before collecting: peak RSS then ran at
// about 3.2 × buffer.memory. Its steady-state garbage is small (no allocation per record on the
// Send path), so collecting at half the live heap costs 1-2 % of CPU (gctrace, 1M-line file:
// 2-3 % of CPU in the collector against 1 %) for 8-15 MB less peak RSS.
const defaultGCPercent = 50

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	stop := startProfile()
	if os.Getenv("KAFKATRAIL_RELEASE_STARTUP_PAGES") != "0" {
		_, _ = releaseStartupPages() // the packages' initialisation: see startupPagesAfter
		for _, after := range startupPagesAfter {
			time.AfterFunc(after, func() { _, _ = releaseStartupPages() })
		}
	}
	// A process-wide policy, like GOGC: main's, not run's, which tests call in-process.
	procsCtx, stopProcs := context.WithCancel(context.Background())
	procsDone := make(chan struct{})
	go func() {
		defer close(procsDone)
		governProcs(procsCtx, os.Environ())
	}()
	code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
	stopProcs()
	<-procsDone
	stop()
	os.Exit(code)
}

func run(args []string, stdin *os.File, stdout, stderr io.Writer, environ []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "version", "--version", "-version":
			fmt.Fprintln(stdout, version.Get())
			return exitOK
		case "check":
			return check(args[1:], stdout, stderr, environ)
		case "health":
			return health(args[1:], stdout, stderr, environ)
		}
	}
	cfg, code := parse("agent", args, stderr, environ)
	if code >= 0 {
		return code
	}
	level := new(slog.LevelVar)
	log := newLogger(cfg, level, stderr)
	// Once, at start: a reload on SIGHUP reads the same environment and says nothing again.
	agent.ReadEnv(environ).Log(log)
	if len(cfg.Tail) == 0 && !cfg.Stdin && len(cfg.Inputs) == 0 {
		if isTerminal(stdin) {
			fmt.Fprintln(stderr, "agent: nothing to read: give --tail PATH (repeatable) or pipe lines into standard input (see --help)")
			return exitUsage
		}
		cfg.Stdin = true
	}
	if err := cfg.Validate(); err != nil {
		printConfigError(stderr, err)
		return exitUsage
	}

	// The per-record latency histograms: the status page's /metrics and the exporters read them.
	hist := telemetry.NewHistograms()
	// The OTEL_* variables, read here once for the status page, telemetry and the exit.
	otelEnv := telemetry.ReadEnv(func(k string) string { return lookupEnv(environ, k) })
	page, err := newStatusPage(cfg, log, otelEnv, hist) // nil without --http
	if err != nil {
		fmt.Fprintf(stderr, "agent: --http: %v\n", err)
		return exitUsage
	}
	if page != nil {
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = page.Shutdown(ctx)
		}()
	}
	tel, err := setupTelemetry(cfg, log, page, hist, otelEnv)
	if err != nil {
		fmt.Fprintf(stderr, "agent: telemetry: %v\n", err)
		return exitUsage
	}
	// Stamp log records written inside a span with its trace and span ids.
	log = slog.New(tel.Logger(log.Handler()))
	defer func() {
		// After the producer closed: the last records' spans and metrics go out, in bounded time.
		timeout := telemetryFlushTimeout(otelEnv.OTLPEndpoints())
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := tel.Shutdown(ctx); err != nil {
			level := slog.LevelWarn
			if timeout < time.Second {
				level = slog.LevelDebug // no collector answers: nothing was expected to go out
			}
			log.Log(context.Background(), level, "flushing telemetry", "error", err)
		}
	}()
	a, err := agent.New(cfg, log, tel)
	if err != nil {
		printConfigError(stderr, err)
		return exitUsage
	}
	if err := tel.WatchClientInstance(a.ClientInstanceID); err != nil {
		log.Warn("telemetry: the client instance metric", "error", err)
	}
	ctx, stop := signalContext(log, func() { reload(args, environ, level, a, log) })
	defer stop()
	if page != nil {
		src := statuspage.AgentSources(a, tel.Observer())
		src.Telemetry = tel.Status
		src.ClientInstanceID = a.ClientInstanceID
		page.Start(ctx, src)
		log.Info("status page", "url", "http://"+page.Addr()+"/")
		// Connect now, so that /readyz turns ready before the first line.
		go func() {
			if err := a.Connect(ctx); err != nil && ctx.Err() == nil {
				log.Warn("fetching the topic's metadata", "topic", cfg.Topic, "error", err)
			}
		}()
	}
	stdinOnly := a.StdinOnly() // else the files' inputs, and an input that reads stdin beside them
	if stdinOnly {
		stopProgress := func() {}
		if f, ok := stderr.(*os.File); ok && isTerminal(f) {
			pctx, pstop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); progress(pctx, f, a.Stats(), time.Second) }()
			stopProgress = func() { pstop(); <-done }
		}
		err = a.RunStdin(ctx, stdin)
		stopProgress() // clear the line before the result is printed
	} else {
		a.SetStdin(stdin)
		err = a.RunTail(ctx)
	}
	var failed *agent.LinesFailedError
	var deadLettered *agent.DeadLetteredError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &failed):
		fmt.Fprintf(stderr, "agent: %d of %d lines failed; first error: %v\n", failed.Failed, failed.Read, failed.First)
		return exitFailed
	case errors.As(err, &deadLettered):
		fmt.Fprintf(stderr, "agent: %v\n", err)
		return exitDeadLettered
	case errors.Is(err, agent.ErrInterrupted) && !stdinOnly:
		return exitOK // tailing ends by signal: a normal stop
	default:
		fmt.Fprintf(stderr, "agent: %v\n", err)
		return exitFailed
	}
}

// parse reads flags, the config file and the environment. code is -1 to go on, else the exit code.
func parse(name string, args []string, stderr io.Writer, environ []string) (agent.Config, int) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	agent.Flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s --brokers HOST:PORT --topic T [--tail PATH_OR_GLOB ...] [flags]\n", name)
		fmt.Fprintf(stderr, "       some-program | %s --brokers HOST:PORT --topic T\n", name)
		fmt.Fprintf(stderr, "       %s check --config FILE | %s health [--http HOST:PORT] [--ready] | %s version\n\n", name, name, name)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nEvery flag can also be set in the config file (same name) or as %s<NAME> (upper case, '-' as '_');\n", agent.EnvPrefix)
		fmt.Fprintf(stderr, "flags override the environment, which overrides the file. Producer properties: -X key=value, %sPRODUCER_<KEY>.\n", agent.EnvPrefix)
		fmt.Fprintf(stderr, "The former %s<NAME> variables still work in this release, with a warning.\n", agent.LegacyEnvPrefix)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return agent.Config{}, exitOK
		}
		fmt.Fprintf(stderr, "%s: %v (see --help)\n", name, err)
		return agent.Config{}, exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q (paths to follow go after --tail)\n", name, fs.Arg(0))
		return agent.Config{}, exitUsage
	}
	cfg, err := agent.Load(fs, environ)
	if err != nil {
		printConfigError(stderr, err)
		return cfg, exitUsage
	}
	return cfg, -1
}

// check validates a configuration and prints it with secrets masked.
func check(args []string, stdout, stderr io.Writer, environ []string) int {
	cfg, code := parse("agent check", args, stderr, environ)
	if code >= 0 {
		return code
	}
	agent.ReadEnv(environ).Log(newLogger(cfg, new(slog.LevelVar), stderr))
	if err := cfg.Validate(); err != nil {
		printConfigError(stderr, err)
		return exitUsage
	}
	for _, line := range cfg.Redacted() {
		fmt.Fprintln(stdout, line)
	}
	fmt.Fprintln(stdout, "configuration OK")
	return exitOK
}

func printConfigError(w io.Writer, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "agent: configuration: %s\n", line)
	}
}

// newLogger logs text on a terminal and JSON otherwise, unless --log-format says.
func newLogger(cfg agent.Config, level *slog.LevelVar, w io.Writer) *slog.Logger {
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	format := cfg.LogFormat
	if format == "" {
		format = "json"
		if f, ok := w.(*os.File); ok && isTerminal(f) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// reload re-reads the configuration on SIGHUP. The log level and the inputs (Agent.ApplyInputs:
// an input added starts, one removed stops, one changed restarts from its checkpoint, new tail
// patterns are followed) apply at once; other changes at the next start.
func reload(args []string, environ []string, level *slog.LevelVar, a *agent.Agent, log *slog.Logger) {
	cfg, code := parse("agent", args, io.Discard, environ)
	if code >= 0 {
		log.Error("SIGHUP: configuration not reloaded: it does not parse")
		return
	}
	if err := cfg.Validate(); err != nil {
		log.Error("SIGHUP: configuration not reloaded", "error", err)
		return
	}
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	log.Info("SIGHUP: configuration reloaded", "log_level", cfg.LogLevel, "tail", cfg.Tail,
		"note", "log-level and the inputs apply now; other keys at the next start")
	if cfg.Stdin && len(cfg.Inputs) == 0 {
		return
	}
	// Not on the signals' goroutine: stopping an input waits for its acknowledgements, and a
	// SIGTERM meanwhile must still stop the agent.
	go func() {
		if err := a.ApplyInputs(context.Background(), &cfg); err != nil {
			log.Error("SIGHUP: inputs not changed", "error", err)
		}
	}()
}

// newStatusPage listens on --http (nil when it is empty): the page's span processor and
// metric reader must be in place before telemetry is set up.
func newStatusPage(cfg agent.Config, log *slog.Logger, otelEnv telemetry.Env, hist *telemetry.Histograms) (*statuspage.Server, error) {
	if cfg.HTTP == "" {
		return nil, nil
	}
	info := statuspage.Info{Version: version.Version(), Build: version.Get(), Mode: "tail", Topic: cfg.Topic, Tail: cfg.Tail}
	if inputs, err := cfg.InputConfigs(); err == nil && len(cfg.Inputs) > 0 {
		// Several inputs: every topic and pattern, each input's once.
		var topics []string
		info.Tail = nil
		for _, in := range inputs {
			if !slices.Contains(topics, in.Topic) {
				topics = append(topics, in.Topic)
			}
			info.Tail = append(info.Tail, in.Tail...)
		}
		info.Topic = strings.Join(topics, ", ")
	}
	if cfg.Stdin && len(cfg.Inputs) == 0 {
		info.Mode = "stdin"
	}
	if pc, err := cfg.ProducerConfig(); err == nil {
		info.Brokers = pc.BootstrapServers
	}
	info.Sampling = otelEnv.SamplingDescription(sampleRatio(cfg))
	if cfg.TraceSlowerThan != "" {
		info.Sampling += ", and every record slower than " + cfg.TraceSlowerThan + " (--trace-slower-than)"
	}
	if cfg.TraceBatchStages == agent.TraceStagesPerBatch {
		info.Sampling += "; a batch's stages exported once per batch attempt (--trace-batch-stages per-batch)"
	}
	page, err := statuspage.New(statuspage.Config{Addr: cfg.HTTP, Info: info, Log: log.With("component", "statuspage"), MetricProducer: hist})
	if err != nil {
		return nil, err
	}
	if ap, err := netip.ParseAddrPort(page.Addr()); err == nil && !ap.Addr().IsLoopback() {
		log.Warn("the status page is reachable from other machines and has no authentication", "addr", page.Addr())
	}
	return page, nil
}

func lookupEnv(environ []string, name string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// setupTelemetry configures tracing and metrics from the OTEL_* environment, with
// --trace-sample-ratio when given, and feeds the status page when there is one.
func setupTelemetry(cfg agent.Config, log *slog.Logger, page *statuspage.Server, hist *telemetry.Histograms, otelEnv telemetry.Env) (*telemetry.Provider, error) {
	tc := telemetry.Config{
		Env:            &otelEnv,
		Histograms:     hist,
		ServiceVersion: version.Version(),
		TraceHeader:    cfg.TraceHeader,
		ClientID:       agent.AgentClientID,
		ErrorLogger:    log.With("component", "telemetry"),
		// At exit the last spans and metrics are flushed; a collector that is down must not
		// hold the exit (of a stdin run, say) for long.
		ShutdownTimeout: 2 * time.Second,
	}
	if pc, err := cfg.ProducerConfig(); err == nil {
		tc.ClientID = pc.ClientID
	}
	tc.SampleRatio = sampleRatio(cfg)
	tc.SlowerThan, _ = cfg.SlowerThan() // validated with the rest of the configuration
	tc.BatchStages = cfg.TraceBatchStages == agent.TraceStagesPerBatch
	if page != nil {
		tc.ExtraSpanProcessor = page.SpanProcessor()
		tc.ExtraMetricReader = page.MetricReader()
	}
	return telemetry.Setup(context.Background(), tc)
}

// sampleRatio is --trace-sample-ratio, nil when not given (-1).
func sampleRatio(cfg agent.Config) *float64 {
	if cfg.TraceSampleRatio >= 0 {
		return telemetry.Ratio(cfg.TraceSampleRatio)
	}
	return nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
