package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// checkpointName is the checkpoint file in the state directory; temporary files written before
// the rename share its name as a prefix.
const (
	checkpointName    = "checkpoints.json"
	checkpointTemp    = checkpointName + ".tmp-"
	checkpointVersion = 1
)

// checkpointEntry is the committed offset of one file. Dev, Inode, Fingerprint and
// FingerprintLen are the identity that is matched; ID repeats it for people reading the file.
type checkpointEntry struct {
	ID             string    `json:"id"`
	Dev            uint64    `json:"dev"`
	Inode          uint64    `json:"inode"`
	Fingerprint    string    `json:"fingerprint"` // hex: a uint64 does not survive every JSON reader
	FingerprintLen int       `json:"fingerprint_len"`
	Path           string    `json:"path"`
	Offset         int64     `json:"offset"`
	Updated        time.Time `json:"updated"`
}

type checkpointFile struct {
	Version int               `json:"version"`
	Entries []checkpointEntry `json:"entries"`
}

func newCheckpointEntry(id FileID, path string, offset int64, updated time.Time) checkpointEntry {
	return checkpointEntry{
		ID: id.String(), Dev: id.Dev, Inode: id.Inode,
		Fingerprint: fmt.Sprintf("%016x", id.Fingerprint), FingerprintLen: id.FingerprintLen,
		Path: path, Offset: offset, Updated: updated.UTC(),
	}
}

func (e checkpointEntry) fileID() (FileID, error) {
	fp, err := strconv.ParseUint(e.Fingerprint, 16, 64)
	if err != nil {
		return FileID{}, fmt.Errorf("entry %q: fingerprint %q: %w", e.Path, e.Fingerprint, err)
	}
	return FileID{Dev: e.Dev, Inode: e.Inode, Fingerprint: fp, FingerprintLen: e.FingerprintLen}, nil
}

// sameAs compares everything but the time of the update: a checkpoint is only rewritten when an
// offset, a path or an identity changed.
func (e checkpointEntry) sameAs(o checkpointEntry) bool {
	e.Updated, o.Updated = time.Time{}, time.Time{}
	return e == o
}

// checkpointStore reads and writes the checkpoint file of one state directory. Writes are atomic:
// a temporary file is written and fsynced, renamed over the checkpoint, and the directory is
// fsynced, so a crash at any point leaves either the old or the new checkpoint, whole. Not safe
// for concurrent use (the Tailer serializes saves).
type checkpointStore struct {
	dir  string
	path string
}

// openCheckpointStore creates dir if needed, checks that it is writable, removes temporary files
// a crash left behind, and loads the checkpoint. A missing checkpoint is an empty one; a corrupt
// one is an error, never a silent start from scratch (that would resend or skip whole files).
func openCheckpointStore(dir string) (*checkpointStore, []checkpointEntry, error) {
	if dir == "" {
		return nil, nil, errors.New("agent: state-dir is empty")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, nil, fmt.Errorf("agent: state-dir %s: %w", dir, err)
	}
	probe, err := os.CreateTemp(dir, checkpointTemp+"probe-*")
	if err != nil {
		return nil, nil, fmt.Errorf("agent: state-dir %s is not writable: %w", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())

	s := &checkpointStore{dir: dir, path: filepath.Join(dir, checkpointName)}
	if leftovers, err := filepath.Glob(filepath.Join(dir, checkpointTemp+"*")); err == nil {
		for _, name := range leftovers {
			os.Remove(name) // an interrupted write: the checkpoint itself is intact
		}
	}
	entries, err := s.load()
	if err != nil {
		return nil, nil, err
	}
	return s, entries, nil
}

func (s *checkpointStore) load() ([]checkpointEntry, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent: read checkpoint %s: %w", s.path, err)
	}
	var cf checkpointFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(&cf)
	if err == nil && dec.More() {
		err = errors.New("data after the checkpoint object")
	}
	if err != nil {
		return nil, fmt.Errorf("agent: checkpoint %s is corrupt (move it away to start over, which resends or skips files): %w", s.path, err)
	}
	if cf.Version != checkpointVersion {
		return nil, fmt.Errorf("agent: checkpoint %s has version %d, this agent reads version %d", s.path, cf.Version, checkpointVersion)
	}
	for _, e := range cf.Entries {
		if _, err := e.fileID(); err != nil {
			return nil, fmt.Errorf("agent: checkpoint %s is corrupt: %w", s.path, err)
		}
		if e.Offset < 0 {
			return nil, fmt.Errorf("agent: checkpoint %s is corrupt: entry %q: negative offset %d", s.path, e.Path, e.Offset)
		}
	}
	return cf.Entries, nil
}

// write replaces the checkpoint with entries, atomically.
func (s *checkpointStore) write(entries []checkpointEntry) error {
	tmp, err := s.writeTemp(entries)
	if err != nil {
		return err
	}
	return s.commit(tmp)
}

// writeTemp writes and fsyncs the new checkpoint under a temporary name.
func (s *checkpointStore) writeTemp(entries []checkpointEntry) (string, error) {
	if entries == nil {
		entries = []checkpointEntry{}
	}
	data, err := json.MarshalIndent(checkpointFile{Version: checkpointVersion, Entries: entries}, "", "  ")
	if err != nil {
		return "", fmt.Errorf("agent: encode checkpoint: %w", err)
	}
	f, err := os.CreateTemp(s.dir, checkpointTemp+"*")
	if err != nil {
		return "", fmt.Errorf("agent: write checkpoint in %s: %w", s.dir, err)
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("agent: write checkpoint %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// commit renames the temporary file over the checkpoint and fsyncs the directory, so that the
// rename itself survives a power loss.
func (s *checkpointStore) commit(tmp string) error {
	if err := os.Rename(tmp, s.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("agent: replace checkpoint %s: %w", s.path, err)
	}
	d, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("agent: sync state-dir %s: %w", s.dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("agent: sync state-dir %s: %w", s.dir, err)
	}
	return nil
}
