package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	helmregistry "helm.sh/helm/v4/pkg/registry"
)

// TestChartFromOCIRegistry is `helm install NAME oci://REGISTRY/charts/kafkatrail-agent
// --version VERSION` after `make release` and `make release-push REGISTRY=...`: the release
// tool packages the chart and pushes it to a registry on 127.0.0.1 (go-containerregistry's, in
// memory), and Helm's own registry client pulls it back by version, as helm install does; the
// pulled chart loads, is the release's (version, appVersion) and renders its DaemonSet with the
// release's image.
func TestChartFromOCIRegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release tool and the agent")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dist := filepath.Join(t.TempDir(), "dist")
	release := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./cmd/release"}, args...)...)
		cmd.Dir = "../release"
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("release %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out.String()
	}
	release("build", "--format", "chart", "--arch", runtime.GOARCH, "--out", dist)
	var meta struct {
		Version string `json:"version"`
	}
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
	pushed := release("push", "--registry", host+"/team", "--dir", dist)
	if !strings.Contains(pushed, "oci://"+host+"/team/charts/kafkatrail-agent --version "+meta.Version) {
		t.Fatalf("release push printed %q", pushed)
	}

	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Pull(host + "/team/charts/kafkatrail-agent:" + meta.Version)
	if err != nil {
		t.Fatalf("Helm's registry client: %v", err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(res.Chart.Data))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Name != "kafkatrail-agent" || ch.Metadata.Version != meta.Version || ch.Metadata.AppVersion != meta.Version {
		t.Fatalf("pulled chart %+v, want kafkatrail-agent %s", ch.Metadata, meta.Version)
	}
	r, err := RenderChart(ch, "kafkatrail", "logging", map[string]any{"config": map[string]any{"brokers": []any{"kafka:9092"}}}, RenderOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if img := o.daemonSet.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/kafkatrail/kafkatrail-agent:"+meta.Version {
		t.Errorf("the pulled chart deploys %s, want the release's image", img)
	}
}
