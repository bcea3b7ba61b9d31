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
	b, err := os.ReadFile(filepath.Join(stateDir, "checkpoints.json"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var cp struct {
		Entries []struct {
			Path   string `json:"path"`
			Offset int64  `json:"offset"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		return 0, fmt.Errorf("checkpoints.json: %w", err)
	}
	for _, e := range cp.Entries {
		if e.Path == path {
			return e.Offset, nil
		}
	}
	return 0, nil
}
