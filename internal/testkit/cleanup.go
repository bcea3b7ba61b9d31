package testkit

import (
	"context"
	"testing"
	"time"
)

// CloseAtCleanup registers close to run when the test ends, with a context that expires after
// timeout, so a close that hangs cannot hold the test binary past its own deadline. The error
// is ignored: by then the test has asserted what it meant to, and a close racing the end of a
// failed test is not a finding of its own.
func CloseAtCleanup(t testing.TB, timeout time.Duration, close func(context.Context) error) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_ = close(ctx)
	})
}
