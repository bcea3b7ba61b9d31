package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Starting, the agent runs the initialisation of every package linked into it (the OpenTelemetry
// SDK and gRPC, the AWS SDK, Kerberos, YAML, ...), which touches code and tables all over the
// executable. The kernel maps a file's pages around each one touched (fault-around: 64 KiB at a
// time), so once started the agent has most of its executable resident, though its steady work
// runs through a small part of it. releaseStartupPages gives those
// mappings back once the start is over: the pages stay in the page cache, shared and clean, and
// the agent's next touch of one maps it again (a minor fault, no read), so only what the agent
// keeps using stays in its RSS, and the rest is the kernel's to reclaim.
//
// Only the executable's mappings that cannot be written and hold no private copy (smaps's
// Anonymous is 0: nothing was ever written to them, as a relocated read-only segment of a
// position-independent build would be) are released: for those, MADV_DONTNEED drops nothing but
// the page table entries.

// releasable is a mapping of the executable that releaseStartupPages may release.
type releasable struct {
	start, end uintptr
}

// releasableMappings reads /proc/self/smaps (its text, for tests) for the mappings of the file
// exe that are not writable and have no anonymous pages.
func releasableMappings(smaps []byte, exe string) []releasable {
	var out []releasable
	var cur *releasable
	var curOK bool
	flush := func() {
		if cur != nil && curOK {
			out = append(out, *cur)
		}
		cur, curOK = nil, false
	}
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			// A mapping's header: "start-end perms offset dev inode [path]".
			flush()
			if len(fields) < 6 || fields[5] != exe || len(fields[1]) < 2 || fields[1][1] == 'w' {
				continue
			}
			lo, hi, ok := strings.Cut(fields[0], "-")
			s, err1 := strconv.ParseUint(lo, 16, 64)
			e, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil || e <= s {
				continue
			}
			cur, curOK = &releasable{start: uintptr(s), end: uintptr(e)}, false
			continue
		}
		if cur != nil && fields[0] == "Anonymous:" && len(fields) >= 2 {
			curOK = fields[1] == "0"
		}
	}
	flush()
	return out
}

// releaseStartupPages releases the executable's clean, read-only mappings (see above) and
// returns how many bytes of address space it released. It changes nothing the program can see:
// an error only means the pages stay mapped.
func releaseStartupPages() (int, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	released := 0
	for _, m := range releasableMappings(smaps, exe) {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise %#x-%#x: %w", m.start, m.end, errno)
		}
		released += int(m.end - m.start)
	}
	return released, nil
}

// startupPagesAfter is when releaseStartupPages runs after main's own call, made as main begins
// (the packages' initialisation behind it: most of what the start touches, released before a
// backlog is read, whose peak then holds only the pages it uses): once the configuration,
// the telemetry's setup and the first connections are behind, then when the agent has
// connected, read its checkpoints and started its inputs, whatever that touched for the start
// alone.
var startupPagesAfter = []time.Duration{300 * time.Millisecond, 5 * time.Second}
