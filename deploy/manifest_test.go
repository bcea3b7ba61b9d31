package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// manifestPath is configs/kubernetes-daemonset.yaml, from this module's directory.
var manifestPath = filepath.Join("..", "configs", "kubernetes-daemonset.yaml")

// configs/kubernetes-daemonset.yaml is the chart rendered with its defaults. With
// KAFKATRAIL_UPDATE_MANIFEST=1 (make k8s-manifest) the test writes it instead.
func TestPlainManifestUpToDate(t *testing.T) {
	want, err := PlainManifest(ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("KAFKATRAIL_UPDATE_MANIFEST") != "" {
		if err := os.WriteFile(manifestPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", manifestPath)
		return
	}
	got, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date: run make k8s-manifest (KAFKATRAIL_UPDATE_MANIFEST=1 go test -run TestPlainManifestUpToDate ./ in deploy/)", manifestPath)
	}
}
