package procstat

import (
	"os"
	"testing"
)

func TestOwnMemory(t *testing.T) {
	rss := RSS(os.Getpid())
	if rss <= 0 {
		t.Fatalf("RSS of this process = %d", rss)
	}
	hwm, err := KiB(os.Getpid(), "VmHWM:")
	if err != nil || hwm<<10 < rss {
		t.Fatalf("VmHWM %d KiB (err %v) below VmRSS %d bytes", hwm, err, rss)
	}
	if _, err := KiB(os.Getpid(), "NoSuchField:"); err == nil {
		t.Fatal("a missing field is no error")
	}
	if RSS(-1) != -1 {
		t.Fatal("RSS of no process is not -1")
	}
}

// Fields reads several figures of one moment: the resident memory is its anonymous part and its
// file-backed part (and shared memory, none here), and a field the kernel lacks is left out.
func TestFieldsSplitResidentMemory(t *testing.T) {
	f, err := Fields(os.Getpid(), "VmRSS:", "RssAnon:", "RssFile:", "RssShmem:", "NoSuchField:")
	if err != nil {
		t.Fatal(err)
	}
	if f["RssAnon:"] <= 0 || f["RssFile:"] <= 0 {
		t.Fatalf("RssAnon %d KiB, RssFile %d KiB: both should be above zero", f["RssAnon:"], f["RssFile:"])
	}
	if sum := f["RssAnon:"] + f["RssFile:"] + f["RssShmem:"]; sum != f["VmRSS:"] {
		t.Fatalf("RssAnon+RssFile+RssShmem = %d KiB, VmRSS %d KiB", sum, f["VmRSS:"])
	}
	if _, ok := f["NoSuchField:"]; ok {
		t.Fatal("a field the kernel does not report is in the map")
	}
	if _, err := Fields(-1, "VmRSS:"); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}
