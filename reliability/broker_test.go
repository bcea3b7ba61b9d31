package reliability

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkatrail/kafkatrail/internal/freeport"
	"github.com/kafkatrail/kafkatrail/internal/oauthtest"
)

// suite is the suite's own real broker (scripts/kafka/broker.sh with a private state dir and
// ports), whose PLAINTEXT listener advertises the address of a toxiproxy proxy running in this
// process: every PLAINTEXT client, the agent included, goes through the proxy and cannot bypass
// it. The SASL listener is not proxied: the suite reads Kafka through it, so that toxics never
// slow the measurements.
type suite struct {
	port  int // base port: PLAINTEXT; +1 controller, +2 SASL_PLAINTEXT, +3 SSL, +4 OAUTH
	state string
	env   []string

	srv   *toxiproxy.ApiServer
	proxy *toxiproxy.Proxy
}

// noProxy (RELIABILITY_NO_PROXY=1, to investigate a failure) leaves the proxy out of the
// clients' path; the network fault scenarios then do not apply.
var noProxy = os.Getenv("RELIABILITY_NO_PROXY") == "1"

var (
	suiteOnce   sync.Once
	suiteBroker *suite
	suiteErr    error
)

const (
	saslUser     = "alice"
	saslPassword = "alice-secret"
)

// theBroker returns the suite broker, starting it at the first call.
func theBroker(t *testing.T) *suite {
	t.Helper()
	suiteOnce.Do(func() { suiteBroker, suiteErr = startSuite() })
	if suiteErr != nil {
		t.Fatalf("suite broker: %v", suiteErr)
	}
	return suiteBroker
}

func startSuite() (*suite, error) {
	s := &suite{}
	s.srv = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	// Below the ephemeral range: the broker is killed and resumed on the same ports.
	base, err := freeport.Base(freeport.Fixed+4000+os.Getpid()%300*10, freeport.FixedEnd, 8)
	if err != nil {
		return nil, err
	}
	s.port = base
	s.proxy = toxiproxy.NewProxy(s.srv, "kafka", "127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", base))
	if err := s.srv.Collection.Add(s.proxy, true); err != nil {
		return nil, fmt.Errorf("toxiproxy: %w", err)
	}
	_, proxyPort, _ := net.SplitHostPort(s.proxy.Listen)
	s.state = filepath.Join(os.TempDir(), fmt.Sprintf("kafkatrail-reliability-%d", base))
	s.env = append(os.Environ(), fmt.Sprintf("KAFKA_PORT=%d", base), "KAFKATRAIL_STATE="+s.state,
		"KAFKA_HEAP_OPTS=-Xms256m -Xmx768m")
	if noProxy {
		s.proxy.Listen = s.direct() // investigation only: clients connect to the broker directly
	} else {
		s.env = append(s.env, "KAFKA_ADVERTISED_PORT="+proxyPort)
	}
	if out, err := s.run("start"); err != nil {
		s.srv.Collection.Clear()
		return nil, fmt.Errorf("broker.sh start: %v\n%s", err, out)
	}
	return s, nil
}

func stopSuiteBroker() {
	if suiteBroker == nil {
		return
	}
	s := suiteBroker
	if out, err := s.run("stop"); err != nil {
		fmt.Fprintf(os.Stderr, "broker.sh stop: %v\n%s", err, out)
	}
	os.RemoveAll(s.state)
	os.Remove(s.state + ".lock")
	_ = s.srv.Collection.Clear()
}

// run runs broker.sh verb for the suite broker.
func (s *suite) run(verb string) (string, error) {
	cmd := exec.Command(filepath.Join(repoRoot, "scripts/kafka/broker.sh"), verb)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (s *suite) mustRun(t *testing.T, verb string) {
	t.Helper()
	if out, err := s.run(verb); err != nil {
		t.Fatalf("broker.sh %s: %v\n%s", verb, err, out)
	}
}

// bootstrap is the PLAINTEXT address clients get: the proxy's.
func (s *suite) bootstrap() string { return s.proxy.Listen }

// direct is the broker's own PLAINTEXT port (it advertises the proxy: only bootstrap goes here).
func (s *suite) direct() string   { return fmt.Sprintf("127.0.0.1:%d", s.port) }
func (s *suite) saslAddr() string { return fmt.Sprintf("127.0.0.1:%d", s.port+2) }
func (s *suite) sslAddr() string  { return fmt.Sprintf("127.0.0.1:%d", s.port+3) }
func (s *suite) caFile() string   { return filepath.Join(s.state, "tls", "ca.pem") }

// brokerEnv is what `broker.sh env` says of the suite broker.
func (s *suite) brokerEnv(t *testing.T) map[string]string {
	t.Helper()
	out, err := s.run("env")
	if err != nil {
		t.Fatalf("broker.sh env: %v\n%s", err, out)
	}
	env := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(l, "export "), "="); ok {
			env[k] = v // the script's values need no shell quoting
		}
	}
	return env
}

// mskIAM is the MSKIAM listener (not proxied) and the AWS key pair it accepts.
func (s *suite) mskIAM(t *testing.T) (addr, accessKey, secretKey string) {
	t.Helper()
	env := s.brokerEnv(t)
	addr, accessKey, secretKey = env["KAFKA_MSKIAM_BOOTSTRAP"], env["KAFKA_MSKIAM_ACCESS_KEY"], env["KAFKA_MSKIAM_SECRET_KEY"]
	if addr == "" || secretKey == "" {
		t.Fatalf("broker.sh env has no MSKIAM listener: %v", env)
	}
	return addr, accessKey, secretKey
}

// oauthBroker is the OAUTH listener (not proxied) and what tokens for it need, from
// `broker.sh env`.
func (s *suite) oauthBroker(t *testing.T) oauthtest.Broker {
	t.Helper()
	env := s.brokerEnv(t)
	out := fmt.Sprint(env)
	b := oauthtest.Broker{Bootstrap: env["KAFKA_OAUTH_BOOTSTRAP"], KeyFile: env["KAFKA_OAUTH_KEY"],
		KID: env["KAFKA_OAUTH_KID"], Issuer: env["KAFKA_OAUTH_ISSUER"], Audience: env["KAFKA_OAUTH_AUDIENCE"]}
	if b.Bootstrap == "" || b.KeyFile == "" {
		t.Fatalf("broker.sh env has no OAUTH listener:\n%s", out)
	}
	return b
}
func (s *suite) brokerLog() string {
	return filepath.Join(s.state, "broker.log")
}

// reader reads the suite broker through its SASL listener, outside the proxy.
func (s *suite) reader() kafkaAccess {
	return kafkaAccess{seeds: []string{s.saslAddr()}, opts: []kgo.Opt{saslPlain(saslUser, saslPassword)}}
}

// newTopic creates a topic with a unique name.
func (s *suite) newTopic(t *testing.T, partitions int32) string {
	t.Helper()
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	if len(clean) > 180 {
		clean = clean[:180]
	}
	name := fmt.Sprintf("rel-%s-%d", clean, time.Now().UnixNano()%1e6)
	cl := s.reader().client(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return name
}

// addToxic adds a toxic to the proxy (JSON as toxiproxy's API takes it).
func (s *suite) addToxic(t *testing.T, js string) {
	t.Helper()
	if _, err := s.proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatalf("add toxic %s: %v", js, err)
	}
}

func (s *suite) removeToxic(t *testing.T, name string) {
	t.Helper()
	if err := s.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
		t.Fatalf("remove toxic %s: %v", name, err)
	}
}
