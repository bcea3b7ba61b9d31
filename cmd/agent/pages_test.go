package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestReleasableMappings: only the executable's mappings that are not writable and hold no
// anonymous (written) pages are released.
func TestReleasableMappings(t *testing.T) {
	smaps := `00400000-01030000 r-xp 00000000 08:01 123 /usr/bin/kafkatrail-agent
Size:              12480 kB
Rss:               11312 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
01030000-01d8a000 r--p 00c30000 08:01 123 /usr/bin/kafkatrail-agent
Size:              13672 kB
Anonymous:             0 kB
01d8a000-01e28000 rw-p 0198a000 08:01 123 /usr/bin/kafkatrail-agent
Anonymous:           120 kB
02000000-02100000 r--p 00000000 08:01 124 /usr/bin/kafkatrail-agent
Anonymous:             8 kB
7f0000000000-7f0000100000 r-xp 00000000 08:01 125 /usr/lib/libother.so
Anonymous:             0 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
Anonymous:          1024 kB
`
	got := releasableMappings([]byte(smaps), "/usr/bin/kafkatrail-agent")
	want := []releasable{{0x400000, 0x1030000}, {0x1030000, 0x1d8a000}}
	if len(got) != len(want) {
		t.Fatalf("got %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("mapping %d: got %x, want %x", i, got[i], want[i])
		}
	}
}

// TestReleaseStartupPages: the test binary's file-backed resident pages drop once released (its
// code faults back in as it runs, as this test's own does to read the figure again).
func TestReleaseStartupPages(t *testing.T) {
	before := rssFileKiB(t)
	n, err := releaseStartupPages()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFileKiB(t)
	if n == 0 || after >= before {
		t.Fatalf("released %d bytes of address space: RssFile %d kB before, %d kB after", n, before, after)
	}
	t.Logf("released %d MiB of mappings: RssFile %d kB before, %d kB after", n>>20, before, after)
}

func rssFileKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}
