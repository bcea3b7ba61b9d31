package deploy

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The chart's appVersion, which its image tag defaults to, is the release's version (VERSION):
// the chart points at the image `make release` builds.
func TestChartAppVersionIsTheRelease(t *testing.T) {
	b, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	release := strings.TrimSpace(string(b))
	c, err := os.ReadFile("helm/kafkatrail-agent/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(c, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.AppVersion != release {
		t.Errorf("Chart.yaml appVersion %q, VERSION %q: the chart's image tag must be the release's", chart.AppVersion, release)
	}
}
