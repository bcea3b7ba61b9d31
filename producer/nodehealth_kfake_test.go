package producer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// outageProxy stands in front of a kfake broker on an address of its own, which the broker
// advertises, so that every connection of the producer goes through it. down closes its
// listener and every connection through it: the producer's next attempts are refused by the
// kernel, as they are by a host whose broker stopped. up listens on the same address again.
type outageProxy struct {
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newOutageProxy reserves an address for a proxy, down until up.
func newOutageProxy(t *testing.T) *outageProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &outageProxy{addr: l.Addr().String(), conns: map[net.Conn]struct{}{}}
	l.Close()
	t.Cleanup(func() {
		p.down()
		p.wg.Wait()
	})
	return p
}

// listenFn is the broker's kfake.ListenFn: its real listener, on a port of its own, reports
// the proxy's address, which the broker then advertises.
func (p *outageProxy) listenFn(network, _ string) (net.Listener, error) {
	l, err := net.Listen(network, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.target = l.Addr().String()
	return advertisedListener{Listener: l, addr: proxyAddr(p.addr)}, nil
}

type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

type proxyAddr string

func (proxyAddr) Network() string  { return "tcp" }
func (a proxyAddr) String() string { return string(a) }

func (p *outageProxy) up(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = l
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			if !p.track(c, b) {
				return
			}
			p.wg.Add(2)
			go p.pipe(c, b)
			go p.pipe(b, c)
		}
	}()
}

// track keeps a connection pair for down, unless down already ran.
func (p *outageProxy) track(c, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		c.Close()
		b.Close()
		return false
	}
	p.conns[c], p.conns[b] = struct{}{}, struct{}{}
	return true
}

func (p *outageProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

func (p *outageProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// refusalDialer dials as the producer does and counts the attempts the kernel refused.
type refusalDialer struct {
	refused atomic.Int64
	notify  chan struct{} // capacity 1: a refusal since waitRefused last looked
}

func newRefusalDialer() *refusalDialer { return &refusalDialer{notify: make(chan struct{}, 1)} }

func (d *refusalDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if errors.Is(err, syscall.ECONNREFUSED) {
		d.refused.Add(1)
		select {
		case d.notify <- struct{}{}:
		default:
		}
	}
	return c, err
}

// waitRefused waits until at least n attempts were refused in all.
func (d *refusalDialer) waitRefused(t *testing.T, n int64) {
	t.Helper()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	for d.refused.Load() < n {
		select {
		case <-d.notify:
		case <-deadline.C:
			t.Fatalf("%d connection attempts refused within 15 s, want %d", d.refused.Load(), n)
		}
	}
}

// TestLogSaysWhenBrokerGoesAndComesBack runs a producer with nothing listening at its
// bootstrap address, then lets the broker be reached, then takes it away under the producer
// and brings it back, with real refused connections: each outage is one warning however many
// attempts fail, and its end one info line with how long it lasted. In the second, once its
// one known broker is in reconnect backoff, the producer goes back to the bootstrap server
// (KIP-899), the same broker here: one warning and one recovery line for each name.
func TestLogSaysWhenBrokerGoesAndComesBack(t *testing.T) {
	proxy := newOutageProxy(t)
	c := newKfake(t, 1, kfake.ListenFn(proxy.listenFn))
	if got := c.ListenAddrs(); len(got) != 1 || got[0] != proxy.addr {
		t.Fatalf("broker advertises %v, want the proxy's %s", got, proxy.addr)
	}
	logs := testkit.NewLogs()
	dialer := newRefusalDialer()
	p := newTestProducer(t, []string{proxy.addr}, func(cfg *Config) { cfg.ReconnectBackoffMaxMs = 200 },
		WithLogger(logs.Logger()), WithDialer(dialer.dial))

	// No broker at all: the record waits for metadata.
	acked := make(chan error, 2)
	send := func() {
		// An error Send returns is the callback's too.
		_ = p.Send(context.Background(), &Record{Topic: "t", Partition: PartitionAny, Value: []byte("v")},
			func(_ RecordMetadata, err error) { acked <- err })
	}
	go send() // Send blocks until metadata arrives
	dialer.waitRefused(t, 5)
	if got := logs.Records(slog.LevelWarn, "no broker reachable"); len(got) != 1 {
		t.Fatalf("%d warnings for %d refused attempts, want 1:\n%s", len(got), dialer.refused.Load(), logs.String())
	}
	proxy.up(t)
	rec := logs.Wait(t, 10*time.Second, slog.LevelInfo, "bootstrap server "+proxy.addr+" reachable after ")
	if rec.Level != slog.LevelInfo || rec.Attrs["down"].Duration() <= 0 {
		t.Errorf("recovery %v %q %v", rec.Level, rec.Message, rec.Attrs)
	}
	if err := <-acked; err != nil {
		t.Fatalf("first record: %v", err)
	}

	// The broker goes away under the producer, which has a record to send.
	proxy.down()
	before := dialer.refused.Load()
	send()
	dialer.waitRefused(t, before+5)
	node := "broker node 0 (" + proxy.addr + ")"
	warns := logs.Records(slog.LevelWarn, node)
	if len(warns) != 1 || !strings.HasPrefix(warns[0].Message, node+" unreachable: ") {
		t.Fatalf("%d warnings naming %s for %d refused attempts, want 1 'unreachable':\n%s",
			len(warns), node, dialer.refused.Load()-before, logs.String())
	}
	if got := logs.Records(slog.LevelInfo, "rebootstrapping"); len(got) != 1 {
		t.Fatalf("%d rebootstraps logged, want 1 (the bootstrap server's attempts are paced by its backoff):\n%s", len(got), logs.String())
	}
	if got := logs.Records(slog.LevelWarn, "no broker reachable"); len(got) != 2 {
		t.Fatalf("%d 'no broker reachable' warnings, want the first outage's and this one's:\n%s", len(got), logs.String())
	}
	proxy.up(t)
	rec = logs.Wait(t, 10*time.Second, slog.LevelInfo, node+" reachable again after ")
	if d := rec.Attrs["down"].Duration(); d <= 0 || rec.Attrs["failed_attempts"].Int64() < 1 {
		t.Errorf("recovery attributes %v", rec.Attrs)
	}
	if err := <-acked; err != nil {
		t.Fatalf("record sent during the outage: %v", err)
	}
	var recoveries int
	for _, r := range logs.Records(slog.LevelInfo, "reachable") {
		if r.Level == slog.LevelInfo {
			recoveries++
		}
	}
	if recoveries != 3 {
		t.Errorf("%d recovery lines, want 3 (the bootstrap server twice, node 0 once):\n%s", recoveries, logs.String())
	}
	t.Logf("%d attempts refused in all; logged at info and above:\n%s", dialer.refused.Load(), infoLines(logs))
}

func infoLines(logs *testkit.Logs) string {
	var b strings.Builder
	for _, r := range logs.All(slog.LevelInfo) {
		b.WriteString(r.Level.String() + " " + r.Message + "\n")
	}
	return b.String()
}
