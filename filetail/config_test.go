package filetail

import (
	"testing"
	"time"
)

// TestConfigDefaults pins what a zero Config field becomes: the defaults the agent documents
// (README.md, `agent --help`, configs/agent.yaml) are these values, read from here.
func TestConfigDefaults(t *testing.T) {
	var c Config
	c.setDefaults()
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"start at", c.StartAt, StartAtEnd},
		{"max line bytes", c.MaxLineBytes, 1<<20 - 16<<10},
		{"long lines", c.LongLines, LongLinesSplit},
		{"rescan interval", c.RescanInterval, time.Second},
		{"poll interval", c.PollInterval, 100 * time.Millisecond},
		{"partial line idle", c.PartialLineIdle, 5 * time.Second},
		{"release idle", c.ReleaseIdle, 30 * time.Second},
		{"checkpoint interval", c.CheckpointInterval, time.Second},
		{"fingerprint bytes", c.FingerprintBytes, 1024},
		{"read buffer bytes", c.ReadBufferBytes, 64 << 10},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: default %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// Set fields are kept.
	c = Config{StartAt: StartAtBeginning, MaxLineBytes: 7, LongLines: LongLinesDrop, PollInterval: time.Millisecond}
	c.setDefaults()
	if c.StartAt != StartAtBeginning || c.MaxLineBytes != 7 || c.LongLines != LongLinesDrop || c.PollInterval != time.Millisecond {
		t.Errorf("setDefaults changed set fields: %+v", c)
	}
}

// TestMaxLineBytesFor pins the one rule for the long-line limit: max.request.size less 16 KiB
// for the record's framing and headers, never below 1 KiB.
func TestMaxLineBytesFor(t *testing.T) {
	for _, tc := range []struct{ request, want int }{
		{1 << 20, 1<<20 - 16<<10},
		{2 << 20, 2<<20 - 16<<10},
		{16<<10 + 1024, 1024},
		{16 << 10, 1024},
		{100, 1024},
	} {
		if got := MaxLineBytesFor(tc.request); got != tc.want {
			t.Errorf("MaxLineBytesFor(%d) = %d, want %d", tc.request, got, tc.want)
		}
	}
	if got := MaxLineBytesFor(DefaultMaxRequestSize); got != DefaultMaxLineBytes {
		t.Errorf("DefaultMaxLineBytes %d is not MaxLineBytesFor(DefaultMaxRequestSize) = %d", DefaultMaxLineBytes, got)
	}
}
