package testkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CheckpointOffset reads the agent's checkpoints.json in stateDir and returns the committed
// offset of path (its current name) in bytes: 0, and no error, while there is no checkpoint
// file or no entry for path yet. The file is replaced by a rename, so a read never sees half
// of one.
func CheckpointOffset(stateDir, path string) (int64, error) {
	off, _, err := Checkpoint(stateDir, path)
	return off, err
}

// Checkpoint is CheckpointOffset, also reporting whether path has an entry.
func Checkpoint(stateDir, path string) (offset int64, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(stateDir, "checkpoints.json"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var cp struct {
		Entries []struct {
			Path   string `json:"path"`
			Offset int64  `json:"offset"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return 0, false, fmt.Errorf("checkpoints.json: %w", err)
	}
	for _, e := range cp.Entries {
		if e.Path == path {
			return e.Offset, true, nil
		}
	}
	return 0, false, nil
}
