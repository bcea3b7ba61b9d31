package agent

import (
	"os"
	"strings"
	"testing"
)

const (
	refBegin = "<!-- BEGIN CONFIG REFERENCE (generated: KAFKATRAIL_UPDATE_README=1 go test ./agent/ -run Reference) -->\n"
	refEnd   = "<!-- END CONFIG REFERENCE -->"
)

// TestReadmeReferenceIsCurrent fails when the README's configuration reference differs from
// what the definitions generate. Regenerate with KAFKATRAIL_UPDATE_README=1.
func TestReadmeReferenceIsCurrent(t *testing.T) {
	const path = "../README.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	i := strings.Index(readme, refBegin)
	j := strings.Index(readme, refEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the markers %q ... %q", strings.TrimSpace(refBegin), refEnd)
	}
	want := ReferenceMarkdown()
	got := readme[i+len(refBegin) : j]
	if got == want {
		return
	}
	if os.Getenv("KAFKATRAIL_UPDATE_README") != "" {
		updated := readme[:i+len(refBegin)] + want + readme[j:]
		if err := os.WriteFile(path, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("README.md's configuration reference is stale: run KAFKATRAIL_UPDATE_README=1 go test ./agent/ -run Reference")
}
