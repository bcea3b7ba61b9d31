package filetail

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCheckpointStoreRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "nested")
	s, entries, err := openCheckpointStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("new store has entries: %v", entries)
	}
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	want := []Checkpoint{
		newCheckpoint(FileID{Dev: 1, Inode: 2, Fingerprint: 0xfedcba9876543210, FingerprintLen: 1024}, "/var/log/a.log", 42, now),
		newCheckpoint(FileID{Dev: 1, Inode: 3}, "/var/log/b.log", 0, now),
	}
	if err := s.write(want, true); err != nil {
		t.Fatal(err)
	}
	_, got, err := openCheckpointStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}
	id, err := got[0].FileID()
	if err != nil || id.Fingerprint != 0xfedcba9876543210 {
		t.Fatalf("fingerprint did not survive: %v %v", id, err)
	}
}

// TestCheckpointCrashBeforeRename simulates a crash after the temporary file was written and
// before the rename: the old checkpoint is what the next start loads, and the leftover is removed.
func TestCheckpointCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	s, _, err := openCheckpointStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := []Checkpoint{newCheckpoint(FileID{Dev: 1, Inode: 2}, "a.log", 100, time.Unix(1, 0))}
	if err := s.write(old, true); err != nil {
		t.Fatal(err)
	}
	tmp, err := s.writeTemp([]Checkpoint{newCheckpoint(FileID{Dev: 1, Inode: 2}, "a.log", 200, time.Unix(2, 0))})
	if err != nil {
		t.Fatal(err)
	}
	// A torn temporary file, as a crash in the middle of the write leaves it, too.
	if err := os.WriteFile(filepath.Join(dir, checkpointTemp+"torn"), []byte(`{"version":1,"entr`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, got, err := openCheckpointStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Offset != 100 {
		t.Fatalf("after a crash before the rename: %+v, want the old offset 100", got)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("leftover temporary file %s not removed: %v", tmp, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, checkpointTemp+"*"))
	if len(left) != 0 {
		t.Fatalf("leftovers: %v", left)
	}
}

func TestCheckpointStoreErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{name: "not json", content: "garbage", want: "corrupt"},
		{name: "truncated", content: `{"version":1,"entries":[{"id":"x"`, want: "corrupt"},
		{name: "trailing data", content: `{"version":1,"entries":[]} {}`, want: "corrupt"},
		{name: "unknown field", content: `{"version":1,"entries":[],"extra":1}`, want: "corrupt"},
		{name: "bad fingerprint", content: `{"version":1,"entries":[{"fingerprint":"zz"}]}`, want: "corrupt"},
		{name: "negative offset", content: `{"version":1,"entries":[{"fingerprint":"00","offset":-1}]}`, want: "negative offset"},
		{name: "other version", content: `{"version":2,"entries":[]}`, want: "version 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, checkpointName)
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := openCheckpointStore(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want one naming %s and saying %q", err, path, tt.want)
			}
		})
	}
}

// TestCheckpointStoreUnwritable: tests run as root, so permissions cannot make the directory
// unwritable; a state dir below a regular file cannot be created or written either.
func TestCheckpointStoreUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(file, "state"), file} {
		_, _, err := openCheckpointStore(dir)
		if err == nil || !strings.Contains(err.Error(), dir) {
			t.Fatalf("state dir %s: error %v, want one naming it", dir, err)
		}
	}
	if os.Geteuid() != 0 {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o700)
		if _, _, err := openCheckpointStore(dir); err == nil || !strings.Contains(err.Error(), "not writable") {
			t.Fatalf("read-only state dir: %v", err)
		}
	}
}
