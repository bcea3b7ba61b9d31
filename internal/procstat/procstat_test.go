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
