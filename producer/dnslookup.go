package producer

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"
)

// client.dns.lookup values (Java's ClientDnsLookup).
const (
	dnsUseAllIPs            = "use_all_dns_ips"
	dnsCanonicalBootstrap   = "resolve_canonical_bootstrap_servers_only"
	canonicalLookupDeadline = 10 * time.Second
)

// resolver is the DNS the bootstrap servers are resolved with (a test's own).
type resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
	LookupAddr(ctx context.Context, addr string) ([]string, error)
}

// canonicalBootstrap is ClientUtils.parseAndValidateAddresses under
// client.dns.lookup=resolve_canonical_bootstrap_servers_only: each bootstrap server becomes one
// address per IP address its name resolves to, named by that address's canonical host name
// (InetAddress.getCanonicalHostName: the reverse lookup's name, or the IP itself when there is
// none). A DNS alias or a load balancer's name in bootstrap.servers thus turns into the
// brokers' own names, which Kerberos needs for their service principals and TLS for their
// certificates. Under use_all_dns_ips (the default) the list is kept as given.
func canonicalBootstrap(ctx context.Context, r resolver, servers []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, s := range servers {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", s, err)
		}
		ips, err := r.LookupHost(ctx, host)
		if err != nil || len(ips) == 0 {
			// Java logs the unresolvable address and goes on with the others.
			continue
		}
		for _, ip := range ips {
			name := ip
			if names, err := r.LookupAddr(ctx, ip); err == nil && len(names) > 0 {
				name = strings.TrimSuffix(names[0], ".")
			}
			addr := net.JoinHostPort(name, port)
			if !seen[addr] {
				seen[addr] = true
				out = append(out, addr)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no resolvable bootstrap urls given in bootstrap.servers %v", servers)
	}
	return out, nil
}
