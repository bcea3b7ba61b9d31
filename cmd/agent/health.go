package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kafkatrail/kafkatrail/agent"
)

// health asks a running agent's page whether it is alive (/healthz) or, with --ready, ready to
// ship lines (/readyz), and exits 0 when it says so, 1 when it does not, cannot be reached or
// cannot be asked (a usage error too: Docker's HEALTHCHECK reserves exit status 2):
// the image has no shell or curl, so a container runtime's HEALTHCHECK and Kubernetes' exec
// probes run this. The page's address is the agent's own setting (--http, KAFKATRAIL_HTTP, the
// config file's http:), read the way the agent reads it; a wildcard host is asked on loopback.
func health(args []string, stdout, stderr io.Writer, environ []string) int {
	fs := pflag.NewFlagSet("agent health", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.StringP("config", "c", "", "the running agent's config file, to read its http: address from")
	addr := fs.String("http", "", "HOST:PORT of the running agent's page (default: the agent's own http setting)")
	ready := fs.Bool("ready", false, "ask /readyz (a broker answered, sending not stopped) instead of /healthz (alive)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: agent health [--http HOST:PORT | --config FILE] [--ready] [--timeout D]")
		fmt.Fprintln(stderr, "Exits 0 when the running agent's page says it is alive (ready, with --ready), else 1 (never 2: a HEALTHCHECK reserves it).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "agent health: %v (see --help)\n", err)
		return exitFailed
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agent health: unexpected argument %q\n", fs.Arg(0))
		return exitFailed
	}
	if *addr == "" {
		afs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
		agent.Flags(afs)
		if *config != "" {
			_ = afs.Set("config", *config)
		}
		cfg, err := agent.Load(afs, environ)
		if err != nil {
			printConfigError(stderr, err)
			return exitFailed
		}
		*addr = cfg.HTTP
	}
	if *addr == "" {
		fmt.Fprintln(stderr, "agent health: the agent's page is off (no --http, KAFKATRAIL_HTTP or http: in the config): nothing to ask")
		return exitFailed
	}
	url, err := healthURL(*addr, *ready)
	if err != nil {
		fmt.Fprintf(stderr, "agent health: http %q: %v\n", *addr, err)
		return exitFailed
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "agent health: %v\n", err)
		return exitFailed
	}
	// No proxy: the page is this host's (or this pod's) own.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "agent health: %s: %v\n", url, err)
		return exitFailed
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	answer := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "agent health: %s: %s: %s\n", url, resp.Status, answer)
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s: %s\n", url, answer)
	return exitOK
}

// healthURL is the page's /healthz or /readyz at addr; a host that is empty or a wildcard
// (the agent listening on every interface) is asked on loopback.
func healthURL(addr string, ready bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	path := "/healthz"
	if ready {
		path = "/readyz"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
