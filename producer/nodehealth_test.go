package producer

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkatrail/kafkatrail/internal/testkit"
	"github.com/kafkatrail/kafkatrail/network"
)

// healthHarness feeds a nodeHealth the network layer's events in the order NetworkClient
// makes them, on a clock the test moves.
type healthHarness struct {
	t    *testing.T
	logs *testkit.Logs
	now  time.Time
	h    *nodeHealth
}

func newHealthHarness(t *testing.T) *healthHarness {
	x := &healthHarness{t: t, logs: testkit.NewLogs(), now: time.Unix(1_000_000, 0)}
	x.h = newNodeHealth(x.logs.Logger(), func() time.Time { return x.now })
	return x
}

// connect makes one connection attempt to node at addr: established and READY when err is
// nil; else failed with err, reported the way the selector reports a failed dial
// (Disconnected first, from handleDisconnections, then the setup).
func (x *healthHarness) connect(node int32, addr string, err error) {
	x.h.ConnectionStateChanged(node, network.Connecting)
	if err != nil {
		x.h.ConnectionStateChanged(node, network.Disconnected)
		x.h.ConnectionSetupDone(network.ConnectionSetup{Node: node, Addr: addr, Err: err})
		return
	}
	x.h.ConnectionSetupDone(network.ConnectionSetup{Node: node, Addr: addr})
	x.h.ConnectionStateChanged(node, network.CheckingAPIVersions)
	x.h.ConnectionStateChanged(node, network.Ready)
}

// lines returns what was logged at info or above.
func (x *healthHarness) lines() []testkit.LogRecord { return x.logs.All(slog.LevelInfo) }

func (x *healthHarness) wantLines(n int) []testkit.LogRecord {
	x.t.Helper()
	got := x.lines()
	if len(got) != n {
		x.t.Fatalf("%d lines logged at info or above, want %d:\n%s", len(got), n, x.logs.String())
	}
	return got
}

var errRefused = errors.New("dial tcp 127.0.0.1:9093: connect: connection refused")

// TestNodeHealthWarnsOnceThenEvery30sAndSaysWhenBack: a broker lost under the producer and
// refused for 30 s of attempts every 500 ms is one warning (not one per attempt) with the
// cause, one repeat at 30 s that counts the attempts since, and one info line with how long
// when it is READY again.
func TestNodeHealthWarnsOnceThenEvery30sAndSaysWhenBack(t *testing.T) {
	x := newHealthHarness(t)
	x.connect(2, "127.0.0.1:9093", nil)
	x.h.ConnectionStateChanged(2, network.Disconnected) // the broker went away
	x.wantLines(0)                                      // a closed connection alone is not an outage

	for i := 0; i < 60; i++ { // 0 .. 29.5 s
		x.connect(2, "127.0.0.1:9093", errRefused)
		x.now = x.now.Add(500 * time.Millisecond)
	}
	got := x.wantLines(1)
	want := "broker node 2 (127.0.0.1:9093) unreachable: dial tcp 127.0.0.1:9093: connect: connection refused; records for its partitions wait and retry"
	if got[0].Level != slog.LevelWarn || got[0].Message != want {
		t.Fatalf("got %v %q\nwant WARN %q", got[0].Level, got[0].Message, want)
	}
	if got[0].Attrs["node"].Int64() != 2 || got[0].Attrs["address"].String() != "127.0.0.1:9093" {
		t.Errorf("attributes %v", got[0].Attrs)
	}

	x.connect(2, "127.0.0.1:9093", errRefused) // 30 s after the first warning
	got = x.wantLines(2)
	if want := "broker node 2 (127.0.0.1:9093) still unreachable after 30s: dial tcp 127.0.0.1:9093: connect: connection refused; 60 failed connection attempts since the last warning"; got[1].Level != slog.LevelWarn || got[1].Message != want {
		t.Fatalf("repeat: got %v %q\nwant WARN %q", got[1].Level, got[1].Message, want)
	}
	x.now = x.now.Add(1200 * time.Millisecond)
	x.connect(2, "127.0.0.1:9093", errRefused) // inside the next 30 s: counted, not logged
	x.wantLines(2)

	x.now = x.now.Add(time.Second)
	x.connect(2, "127.0.0.1:9093", nil)
	got = x.wantLines(3)
	if want := "broker node 2 (127.0.0.1:9093) reachable again after 32.2s"; got[2].Level != slog.LevelInfo || got[2].Message != want {
		t.Fatalf("recovery: got %v %q\nwant INFO %q", got[2].Level, got[2].Message, want)
	}
	if got[2].Attrs["down"].Duration() != 32200*time.Millisecond || got[2].Attrs["failed_attempts"].Int64() != 62 {
		t.Errorf("recovery attributes %v", got[2].Attrs)
	}

	// A second outage starts afresh: its first failure warns at once.
	x.h.ConnectionStateChanged(2, network.Disconnected)
	x.connect(2, "127.0.0.1:9093", errRefused)
	if got = x.wantLines(4); !strings.HasPrefix(got[3].Message, "broker node 2 (127.0.0.1:9093) unreachable: ") {
		t.Fatalf("second outage: %q", got[3].Message)
	}
}

// TestNodeHealthReconnectIsQuiet: a connection that closes and opens again at the next
// attempt (an idle close, a broker restarted between two attempts) logs nothing.
func TestNodeHealthReconnectIsQuiet(t *testing.T) {
	x := newHealthHarness(t)
	x.connect(1, "127.0.0.1:9092", nil)
	for range 3 {
		x.h.ConnectionStateChanged(1, network.Disconnected)
		x.now = x.now.Add(time.Minute)
		x.connect(1, "127.0.0.1:9092", nil)
	}
	x.wantLines(0)
}

// TestNodeHealthNoBrokerAtStart: bootstrap servers that all refuse are one outage ("no broker
// reachable"), however many there are, and the first of them to answer ends it.
func TestNodeHealthNoBrokerAtStart(t *testing.T) {
	x := newHealthHarness(t)
	for i := 0; i < 20; i++ {
		x.connect(-1, "127.0.0.1:9092", errRefused)
		x.connect(-2, "127.0.0.1:9192", errRefused)
		x.now = x.now.Add(500 * time.Millisecond)
	}
	got := x.wantLines(1)
	want := "no broker reachable: bootstrap server 127.0.0.1:9092 unreachable: dial tcp 127.0.0.1:9093: connect: connection refused; records wait for metadata (max.block.ms)"
	if got[0].Level != slog.LevelWarn || got[0].Message != want {
		t.Fatalf("got %v %q\nwant WARN %q", got[0].Level, got[0].Message, want)
	}
	x.connect(-2, "127.0.0.1:9192", nil)
	got = x.wantLines(2)
	if want := "bootstrap server 127.0.0.1:9192 reachable after 10s"; got[1].Level != slog.LevelInfo || got[1].Message != want {
		t.Fatalf("got %v %q\nwant INFO %q", got[1].Level, got[1].Message, want)
	}
	if got[1].Attrs["failed_attempts"].Int64() != 40 {
		t.Errorf("failed_attempts %v, want 40", got[1].Attrs["failed_attempts"])
	}
	// Then the brokers by id: the first connection to one is no recovery.
	x.connect(1, "127.0.0.1:9092", nil)
	x.wantLines(2)
}

// TestNodeHealthSetupTimeoutAndAPIVersions: an attempt the client abandoned at
// socket.connection.setup.timeout.ms (no setup report) and a connection lost before
// ApiVersions completed are failed attempts too.
func TestNodeHealthSetupTimeoutAndAPIVersions(t *testing.T) {
	x := newHealthHarness(t)
	x.h.ConnectionStateChanged(3, network.Connecting)
	x.h.ConnectionStateChanged(3, network.Disconnected) // handleTimedOutConnections
	x.wantLines(0)                                      // its cause is known at the next attempt
	x.h.ConnectionStateChanged(3, network.Connecting)
	got := x.wantLines(1)
	if !strings.Contains(got[0].Message, "broker node 3 unreachable: "+network.ErrConnectionSetupTimeout.Error()) {
		t.Fatalf("setup timeout: %q", got[0].Message)
	}

	y := newHealthHarness(t)
	y.h.ConnectionStateChanged(4, network.Connecting)
	y.h.ConnectionSetupDone(network.ConnectionSetup{Node: 4, Addr: "127.0.0.1:9094"})
	y.h.ConnectionStateChanged(4, network.CheckingAPIVersions)
	y.h.ConnectionStateChanged(4, network.Disconnected)
	if got := y.wantLines(1); !strings.Contains(got[0].Message, "broker node 4 (127.0.0.1:9094) unreachable: "+errAPIVersionsFailed.Error()) {
		t.Fatalf("ApiVersions: %q", got[0].Message)
	}
}

// TestNodeHealthAuthenticationFailure: a refused authentication is logged at error, as the
// Java NetworkClient logs it, and rate-limited the same way.
func TestNodeHealthAuthenticationFailure(t *testing.T) {
	x := newHealthHarness(t)
	authErr := &network.AuthenticationError{Node: 1, Mechanism: "PLAIN", Message: "bad password", Err: kerr.SaslAuthenticationFailed}
	for range 5 {
		x.connect(1, "127.0.0.1:9094", authErr)
		x.now = x.now.Add(time.Second)
	}
	got := x.wantLines(1)
	if got[0].Level != slog.LevelError || !strings.HasPrefix(got[0].Message, "broker node 1 (127.0.0.1:9094) failed authentication: ") {
		t.Fatalf("got %v %q", got[0].Level, got[0].Message)
	}
}

// TestNodeHealthOffWithoutWarnings: with a logger that drops warnings (the default discards)
// nothing observes the network for the log.
func TestNodeHealthOffWithoutWarnings(t *testing.T) {
	if newNodeHealth(slog.New(slog.DiscardHandler), time.Now) != nil {
		t.Error("a node health logger for a discarding logger")
	}
	errorsOnly := slog.New(slog.NewTextHandler(nil, &slog.HandlerOptions{Level: slog.LevelError}))
	if newNodeHealth(errorsOnly, time.Now) != nil {
		t.Error("a node health logger for an error-level logger")
	}
}
