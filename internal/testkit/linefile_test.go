package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLineFileWritesNumberedLinesThroughRotations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.log")
	lf := NewLineFile(t, path, 70)
	defer lf.Close()
	lf.Write(3)
	lf.RotateRename(path + ".1")
	lf.Write(2)
	lf.RotateCopyTruncate(path + ".2")
	lf.Write(1)

	read := func(name string) []string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	next := 0
	for _, f := range []struct {
		name  string
		lines int
	}{{path + ".1", 3}, {path + ".2", 2}, {path, 1}} {
		lines := read(f.name)
		if len(lines) != f.lines {
			t.Fatalf("%s: %d lines, want %d", f.name, len(lines), f.lines)
		}
		for _, l := range lines {
			l = strings.TrimSuffix(l, "\n") + "\n"
			if want := NumberedLine(nil, next, 70); l != string(want) || len(l) != 70 {
				t.Fatalf("%s: line %q, want %q (70 bytes)", f.name, l, want)
			}
			next++
		}
	}
	if lf.Next != 6 {
		t.Fatalf("Next = %d after 6 lines", lf.Next)
	}
	if l := string(NumberedLine(nil, 42, 100)); !strings.HasPrefix(l, "line-000000042 ") || len(l) != 100 {
		t.Fatalf("line 42 of 100 bytes = %q", l)
	}
}
