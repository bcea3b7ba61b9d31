package statuspage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/statuspage"
)

// TestAgentInputsOnThePage: an agent with two inputs (one leaving health checks out) on the
// real broker: /api/status has each input's lines by outcome and the lines it left out, and the
// page in headless Chromium draws its Inputs table with a row for each.
func TestAgentInputsOnThePage(t *testing.T) {
	bootstrap := kafkatest.Bootstrap(t)
	chromium := findChromium(t)
	access, app := kafkatest.NewTopic(t, 1), kafkatest.NewTopic(t, 1)
	dir := t.TempDir()
	bin := buildAgent(t, dir)
	accessLog, appLog := filepath.Join(dir, "access.log"), filepath.Join(dir, "app.log")
	var a, b strings.Builder
	for i := range 40 {
		path := "/cart"
		if i%4 == 0 {
			path = "/health"
		}
		fmt.Fprintf(&a, "GET %s %d\n", path, i)
		fmt.Fprintf(&b, "app line %d\n", i)
	}
	for p, data := range map[string]string{accessLog: a.String(), appLog: b.String()} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "agent.yaml")
	body := fmt.Sprintf("inputs:\n  - {name: access, tail: [%s], topic: %s, exclude-lines: ['GET /health']}\n  - {name: app, tail: [%s], topic: %s}\n",
		accessLog, access, appLog, app)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ag := startPageAgent(t, bin, dir, "--config", cfg, "--brokers", bootstrap, "--start-at", "beginning",
		"--state-dir", filepath.Join(dir, "state"))
	var st statuspage.Status
	waitFor(t, 30*time.Second, "both inputs' lines acknowledged in /api/status", ag.logTail, func() bool {
		getJSON(t, ag.base+"/api/status", &st)
		return len(st.Inputs) == 2 && st.Inputs[0].LinesAcked == 30 && st.Inputs[1].LinesAcked == 40
	})
	if in := st.Inputs[0]; in.Name != "access" || in.LinesRead != 40 || in.LinesExcluded != 10 || in.Files != 1 || in.Topic != access {
		t.Errorf("input access in /api/status: %+v, want 40 read, 10 excluded, 30 acknowledged", in)
	}
	if in := st.Inputs[1]; in.Name != "app" || in.LinesExcluded != 0 || in.Source != appLog {
		t.Errorf("input app in /api/status: %+v", in)
	}
	dom := runChromium(t, chromium, "--dump-dom", ag.base+"/")
	for _, name := range []string{"access", "app"} {
		if !strings.Contains(dom, `data-input="`+name+`"`) {
			t.Errorf("the page has no row for input %s in its Inputs table", name)
		}
	}
	row := regexp.MustCompile(`data-input="access">(.*?)</tr>`).FindStringSubmatch(dom)
	if row == nil || !strings.Contains(row[1], "10 excluded") {
		t.Errorf("the page's row of input access %v, want its 10 excluded lines", row)
	}
	ag.stop()
}
