package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// signalContext returns a context that ends at the first SIGINT or SIGTERM: the agent stops
// reading, flushes and saves its checkpoints. A second signal exits at once (status 1), for
// when the shutdown timeout is too long to wait. SIGHUP calls onHUP.
func signalContext(log *slog.Logger, onHUP func()) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		stopping := false
		for {
			select {
			case <-done:
				return
			case sig := <-ch:
				switch {
				case sig == syscall.SIGHUP:
					onHUP()
				case !stopping:
					stopping = true
					log.Info("stopping: flushing and waiting for acknowledgements (signal again to exit at once)", "signal", sig.String())
					cancel(&signalError{sig})
				default:
					log.Warn("second signal: exiting without waiting for acknowledgements", "signal", sig.String())
					os.Exit(exitFailed)
				}
			}
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

type signalError struct{ sig os.Signal }

func (e *signalError) Error() string { return "received " + e.sig.String() }
