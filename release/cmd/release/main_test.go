package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/kafkatrail/kafkatrail/release"
)

func TestUsageErrors(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{"deploy"},
		{"push"}, // no --registry
		{"build", "extra"},
		{"build", "--no-such-flag"},
	} {
		if err := run(ctx, args, io.Discard, io.Discard); err == nil {
			t.Errorf("release %s: no error", strings.Join(args, " "))
		}
	}
	var stderr bytes.Buffer
	if err := run(ctx, []string{"push"}, io.Discard, &stderr); err == nil || !strings.Contains(err.Error(), "make release-push REGISTRY=") {
		t.Errorf("push without --registry: %v", err)
	}
}

// TestPushCommand is `make release-push REGISTRY=127.0.0.1:PORT/kafkatrail` against an
// in-memory registry, with the dist/ that make release wrote (make test-release sets
// KAFKATRAIL_DIST).
func TestPushCommand(t *testing.T) {
	dist := os.Getenv("KAFKATRAIL_DIST")
	if dist == "" {
		t.Skip("needs a built dist/ (KAFKATRAIL_DIST; make test-release)")
	}
	var meta release.Metadata
	b, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"push", "--registry", host + "/kafkatrail", "--dir", dist}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	want := "pushed " + host + "/kafkatrail/kafkatrail-agent:" + meta.Version + "@" + meta.Image.IndexDigest + "\n"
	if moving := release.MovingTags(meta.Version); len(moving) > 0 {
		want += "tagged " + strings.Join(moving, ", ") + "\n"
	}
	if !strings.HasPrefix(stdout.String(), want) {
		t.Errorf("printed %q, want it to start with %q", stdout.String(), want)
	}
	chartLine := "pushed " + host + "/kafkatrail/charts/kafkatrail-agent:" + meta.Version + "@sha256:"
	if !strings.Contains(stdout.String(), chartLine) ||
		!strings.Contains(stdout.String(), "(helm install NAME oci://"+host+"/kafkatrail/charts/kafkatrail-agent --version "+meta.Version+")") {
		t.Errorf("printed %q, want the chart pushed as %s…", stdout.String(), chartLine)
	}
}
