package producer

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// fakeDNS answers forward lookups from hosts and reverse ones from addrs.
type fakeDNS struct{ hosts, addrs map[string][]string }

func (f fakeDNS) LookupHost(_ context.Context, h string) ([]string, error) {
	if ips, ok := f.hosts[h]; ok {
		return ips, nil
	}
	return nil, errors.New("no such host")
}

func (f fakeDNS) LookupAddr(_ context.Context, a string) ([]string, error) {
	if n, ok := f.addrs[a]; ok {
		return n, nil
	}
	return nil, errors.New("no PTR")
}

// TestCanonicalBootstrap: under resolve_canonical_bootstrap_servers_only a bootstrap name (an
// alias, a load balancer's) becomes the canonical names of every address it resolves to, as
// Java's ClientUtils.parseAndValidateAddresses does; an address without a reverse name stays
// an IP; an unresolvable server is left out, and none resolvable is an error.
func TestCanonicalBootstrap(t *testing.T) {
	dns := fakeDNS{
		hosts: map[string][]string{"kafka.example.com": {"10.0.0.1", "10.0.0.2", "10.0.0.3"}, "b4.example.com": {"10.0.0.1"}},
		addrs: map[string][]string{"10.0.0.1": {"b1.corp.example.com."}, "10.0.0.2": {"b2.corp.example.com."}},
	}
	got, err := canonicalBootstrap(context.Background(), dns, []string{"kafka.example.com:9092", "b4.example.com:9092", "gone.example.com:9092"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"b1.corp.example.com:9092", "b2.corp.example.com:9092", "10.0.0.3:9092"}
	if !slices.Equal(got, want) {
		t.Fatalf("canonical bootstrap %v, want %v", got, want)
	}
	if _, err := canonicalBootstrap(context.Background(), dns, []string{"gone.example.com:9092"}); err == nil {
		t.Fatal("no resolvable server: no error")
	}
	c := DefaultConfig()
	c.BootstrapServers = []string{"127.0.0.1:9"}
	c.ClientDNSLookup = "default"
	if err := c.Validate(); err == nil {
		t.Fatal("client.dns.lookup=default accepted (Kafka 3+ removed it)")
	}
}
