// Package procstat reads a process's memory figures from /proc/PID/status (Linux): the agent's
// resident memory, which the tests bound and the benchmark reports. Shared by the main module's
// tests, the reliability suite and the benchmark harness.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// KiB returns the kB figure of field ("VmRSS:", "VmHWM:", ...) in /proc/pid/status.
func KiB(pid int, field string) (int64, error) {
	f, err := Fields(pid, field)
	if err != nil {
		return 0, err
	}
	v, ok := f[field]
	if !ok {
		return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
	}
	return v, nil
}

// Fields returns the kB figures of the fields named ("VmRSS:", "RssAnon:", ...) in one read of
// /proc/pid/status, so that they describe the same moment; a field the kernel does not report
// is missing from the map.
func Fields(pid int, fields ...string) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(fields))
	for _, l := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(l))
		if len(f) < 2 {
			continue
		}
		for _, want := range fields {
			if f[0] == want {
				if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					out[want] = v
				}
			}
		}
	}
	return out, nil
}

// RSS returns the process's resident memory (VmRSS) in bytes, or -1 if it cannot be read (the
// process is gone).
func RSS(pid int) int64 {
	kb, err := KiB(pid, "VmRSS:")
	if err != nil {
		return -1
	}
	return kb << 10
}
