package filetail

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
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

// Checkpoint is the committed offset of one file, as checkpoints.json (and the exactly-once
// state topic) records it. Dev, Inode, Fingerprint and
// FingerprintLen are the identity that is matched; ID repeats it for people reading the file.
type Checkpoint struct {
	ID             string    `json:"id"`
	Dev            uint64    `json:"dev"`
	Inode          uint64    `json:"inode"`
	Fingerprint    string    `json:"fingerprint"` // hex: a uint64 does not survive every JSON reader
	FingerprintLen int       `json:"fingerprint_len"`
	Path           string    `json:"path"`
	Offset         int64     `json:"offset"`
	Updated        time.Time `json:"updated"`
	// ContainerFormat is what --container-format auto decided for the file (cri or docker),
	// so that a restart decodes it the same way whatever the lines after the checkpoint are;
	// empty for a file read with a format given, or undecided.
	ContainerFormat ContainerFormat `json:"container_format,omitempty"`
}

type checkpointFile struct {
	Version int          `json:"version"`
	Entries []Checkpoint `json:"entries"`
}

func newCheckpoint(id FileID, path string, offset int64, updated time.Time) Checkpoint {
	return Checkpoint{
		ID: id.String(), Dev: id.Dev, Inode: id.Inode,
		Fingerprint: fmt.Sprintf("%016x", id.Fingerprint), FingerprintLen: id.FingerprintLen,
		Path: path, Offset: offset, Updated: updated.UTC(),
	}
}

// FileID is the identity the checkpoint records; an error means the entry is corrupt.
func (e Checkpoint) FileID() (FileID, error) {
	fp, err := strconv.ParseUint(e.Fingerprint, 16, 64)
	if err != nil {
		return FileID{}, fmt.Errorf("entry %q: fingerprint %q: %w", e.Path, e.Fingerprint, err)
	}
	return FileID{Dev: e.Dev, Inode: e.Inode, Fingerprint: fp, FingerprintLen: e.FingerprintLen}, nil
}

// SameAs compares everything but the time of the update: a checkpoint is only rewritten when an
// offset, a path or an identity changed.
func (e Checkpoint) SameAs(o Checkpoint) bool {
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
	// dirUnsynced is set by a rename not followed by an fsync of the directory yet.
	dirUnsynced bool
}

// openCheckpointStore creates dir if needed, checks that it is writable, removes temporary files
// a crash left behind, and loads the checkpoint. A missing checkpoint is an empty one; a corrupt
// one is an error, never a silent start from scratch (that would resend or skip whole files).
func openCheckpointStore(dir string) (*checkpointStore, []Checkpoint, error) {
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

func (s *checkpointStore) load() ([]Checkpoint, error) {
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
		if _, err := e.FileID(); err != nil {
			return nil, fmt.Errorf("agent: checkpoint %s is corrupt: %w", s.path, err)
		}
		if e.Offset < 0 {
			return nil, fmt.Errorf("agent: checkpoint %s is corrupt: entry %q: negative offset %d", s.path, e.Path, e.Offset)
		}
	}
	return cf.Entries, nil
}

// write replaces the checkpoint with entries, atomically.
func (s *checkpointStore) write(entries []Checkpoint, syncDir bool) error {
	tmp, err := s.writeTemp(entries)
	if err != nil {
		return err
	}
	return s.commit(tmp, syncDir)
}

// writeTemp writes and fsyncs the new checkpoint under a temporary name.
func (s *checkpointStore) writeTemp(entries []Checkpoint) (string, error) {
	if entries == nil {
		entries = []Checkpoint{}
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

// commit renames the temporary file over the checkpoint and, with syncDir, fsyncs the
// directory, so that the rename itself survives a power loss. Without it a power loss may
// leave the checkpoint before this one (whole: its contents were synced before its rename):
// lines sent again, never lost. The periodic saves skip it, the last one at a stop does not.
func (s *checkpointStore) commit(tmp string, syncDir bool) error {
	if err := os.Rename(tmp, s.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("agent: replace checkpoint %s: %w", s.path, err)
	}
	s.dirUnsynced = true
	if !syncDir {
		return nil
	}
	return s.syncDir()
}

// syncDir fsyncs the state directory: the last rename is then durable.
func (s *checkpointStore) syncDir() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("agent: sync state-dir %s: %w", s.dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("agent: sync state-dir %s: %w", s.dir, err)
	}
	s.dirUnsynced = false
	return nil
}

// SaveCheckpoints writes every file's committed offset now, if any changed since the last
// write, and makes it durable (the state directory fsynced after the rename). Run saves when
// it stops; the caller calls it once more after the producer flushed, to record the last
// acknowledgements.
func (t *Tailer) SaveCheckpoints() error { return t.saveCheckpoints(true) }

// saveCheckpoints is SaveCheckpoints; Run's periodic saves leave the directory unsynced.
func (t *Tailer) saveCheckpoints(syncDir bool) error {
	return t.saveSnapshot(t.Snapshot(), syncDir)
}

// Snapshot returns the checkpoint of every file known now: the committed offset of each file
// followed, and the saved entries of files not followed now. The exactly-once committer takes
// one while no line is sent, and SaveSnapshot writes it once its transaction committed.
func (t *Tailer) Snapshot() map[FileKey]Checkpoint {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	entries := make(map[FileKey]Checkpoint, len(t.followers)+len(t.saved))
	for k, e := range t.saved {
		entries[k] = e
	}
	for k, fl := range t.followers {
		entries[k] = fl.entry(now)
	}
	return entries
}

// Starts returns, for every file followed, the position this run began reading it at (a
// checkpoint, --start-at, or 0 for a file found later), and the checkpoints loaded for files
// not followed: where a run that must forget everything it read (an aborted exactly-once round
// with no commit before it) starts again.
func (t *Tailer) Starts() []Checkpoint {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Checkpoint, 0, len(t.followers)+len(t.saved))
	for _, e := range t.saved {
		out = append(out, e)
	}
	for _, fl := range t.followers {
		fl.mu.Lock()
		e := newCheckpoint(fl.id, fl.path, fl.start, now)
		fl.mu.Unlock()
		out = append(out, e)
	}
	return out
}

// SaveSnapshot writes entries (a Snapshot) to checkpoints.json if any changed since the last
// write, durably. Safe for concurrent use: saves are serialized.
func (t *Tailer) SaveSnapshot(entries map[FileKey]Checkpoint) error {
	return t.saveSnapshot(entries, true)
}

// saveSnapshot is SaveSnapshot; without syncDir the rename may not survive a power loss.
func (t *Tailer) saveSnapshot(entries map[FileKey]Checkpoint, syncDir bool) error {
	t.saveMu.Lock()
	defer t.saveMu.Unlock()
	entries = maps.Clone(entries)
	changed := len(entries) != len(t.lastWritten)
	for k, e := range entries {
		if old, ok := t.lastWritten[k]; ok && old.SameAs(e) {
			e.Updated = old.Updated
			entries[k] = e
		} else {
			changed = true
		}
	}
	if !changed {
		if syncDir && t.store.dirUnsynced {
			return t.store.syncDir()
		}
		return nil
	}
	list := make([]Checkpoint, 0, len(entries))
	for _, e := range entries {
		list = append(list, e)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Path != list[j].Path {
			return list[i].Path < list[j].Path
		}
		return list[i].ID < list[j].ID
	})
	if err := t.store.write(list, syncDir); err != nil {
		return err
	}
	t.saves.Add(1)
	t.lastWritten = entries
	now := time.Now()
	t.lastWrite.Store(&now)
	if t.saveHook != nil {
		t.saveHook(now)
	}
	return nil
}
