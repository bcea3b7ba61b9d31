package testkit

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// DeadLetters reads the agent's dead-letter file in stateDir (dead-letters.jsonl: one JSON
// object a line), in order; nil when there is none. A line that is not JSON fails the test.
func DeadLetters(t testing.TB, stateDir string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(stateDir, "dead-letters.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("dead-letter line %.100q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
