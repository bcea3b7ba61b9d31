package release

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// buildChart packages HEAD's chart as version into a fresh directory.
func buildChart(t *testing.T, version string) (*Metadata, string) {
	t.Helper()
	dist := filepath.Join(t.TempDir(), "dist")
	meta, err := Build(context.Background(), Options{Repo: repoDir(t), Out: dist, Version: version, Arches: []string{"amd64"},
		Formats: []string{FormatChart}, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	return meta, filepath.Join(dist, ChartArchiveName(version))
}

// TestChartArchive: the packaged chart is the commit's chart under one directory, Chart.yaml's
// version and appVersion the release's, the same bytes from two builds.
func TestChartArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent (the release's version check)")
	}
	meta, p := buildChart(t, "0.1.7")
	tgz, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Artifacts) != 1 || meta.Artifacts[0].Kind != "helm-chart" || meta.Artifacts[0].Name != "kafkatrail-agent-0.1.7.tgz" {
		t.Errorf("artifacts %+v, want the chart alone", meta.Artifacts)
	}
	var names []string
	files := map[string][]byte{}
	if err := readTarGz(bytes.NewReader(tgz), func(n string, b []byte) { names = append(names, n); files[n] = b }); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kafkatrail-agent/Chart.yaml", "kafkatrail-agent/values.yaml", "kafkatrail-agent/values.schema.json",
		"kafkatrail-agent/templates/daemonset.yaml", "kafkatrail-agent/README.md", "kafkatrail-agent/.helmignore"} {
		if !slices.Contains(names, want) {
			t.Errorf("the chart lacks %s: %v", want, names)
		}
	}
	chart := string(files["kafkatrail-agent/Chart.yaml"])
	if !strings.Contains(chart, "\nversion: 0.1.7\n") || !strings.Contains(chart, "\nappVersion: \"0.1.7\"\n") {
		t.Errorf("Chart.yaml:\n%s", chart)
	}
	_, again := buildChart(t, "0.1.7")
	if b, _ := os.ReadFile(again); !bytes.Equal(b, tgz) {
		t.Error("two builds of the same commit give different charts")
	}
}

func TestHelmignore(t *testing.T) {
	p := filepath.Join(t.TempDir(), ".helmignore")
	os.WriteFile(p, []byte("# c\n.git/\n*.swp\ntemplates/tests/\n"), 0o644)
	ignore, err := readHelmignore(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rel  string
		dir  bool
		want bool
	}{
		{".git", true, true}, {".git", false, false}, {"values.yaml.swp", false, true}, {"templates/a.swp", false, true},
		{"templates/tests", true, true}, {"templates", true, false}, {"values.yaml", false, false},
	} {
		if got := ignore(c.rel, c.dir); got != c.want {
			t.Errorf("ignore(%q, dir %v) = %v", c.rel, c.dir, got)
		}
	}
	os.WriteFile(p, []byte("!keep.yaml\n"), 0o644)
	if _, err := readHelmignore(p); err == nil {
		t.Error("a negation: no error")
	}
}

// TestPushChart pushes the chart to go-containerregistry's in-memory registry and reads it
// back as Helm pulls it: an OCI manifest at charts/kafkatrail-agent:VERSION with Helm's config
// and layer media types, the layer the .tgz's bytes, the config the chart's metadata.
func TestPushChart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent (the release's version check)")
	}
	meta, p := buildChart(t, "0.1.7")
	tgz, _ := os.ReadFile(p)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	var digests []string
	for range 2 { // the same chart twice: the same manifest
		ref, d, err := PushChart(ctx, p, PushOptions{Registry: host}, meta.Date)
		if err != nil {
			t.Fatal(err)
		}
		if want := host + "/charts/kafkatrail-agent:0.1.7"; ref != want {
			t.Errorf("pushed %s, want %s", ref, want)
		}
		digests = append(digests, d.String())
	}
	if digests[0] != digests[1] {
		t.Errorf("two pushes, two digests: %v", digests)
	}
	tag, _ := name.NewTag(host + "/charts/kafkatrail-agent:0.1.7")
	desc, err := remote.Get(tag, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		MediaType string
		Config    struct{ MediaType, Digest string }
		Layers    []struct {
			MediaType string
			Digest    string
			Size      int64
		}
		Annotations map[string]string
	}
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Config.MediaType != "application/vnd.cncf.helm.config.v1+json" ||
		len(m.Layers) != 1 || m.Layers[0].MediaType != "application/vnd.cncf.helm.chart.content.v1.tar+gzip" || m.Layers[0].Size != int64(len(tgz)) {
		t.Fatalf("manifest %s", desc.Manifest)
	}
	if m.Annotations["org.opencontainers.image.title"] != ChartName || m.Annotations["org.opencontainers.image.version"] != "0.1.7" ||
		m.Annotations["org.opencontainers.image.created"] != meta.Date {
		t.Errorf("annotations %v", m.Annotations)
	}
	img, err := desc.Image()
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	pulled, _ := io.ReadAll(rc)
	if !bytes.Equal(pulled, tgz) {
		t.Error("the pulled layer is not the .tgz")
	}
	raw, _ := img.RawConfigFile()
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg["name"] != ChartName || cfg["version"] != "0.1.7" || cfg["appVersion"] != "0.1.7" || cfg["apiVersion"] != "v2" {
		t.Errorf("config %s (%v)", raw, err)
	}
}
