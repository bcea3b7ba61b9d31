package agent

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/kafkatrail/kafkatrail/filetail"
)

// stdinLines collects what the stdin path's splitter hands over.
type stdinLines struct {
	t             *testing.T
	max           int
	lines         []string
	starts        []int64
	long, skipped int // pieces cut at max (truncated, or a split part before the last), lines dropped
}

func (c *stdinLines) Line(l filetail.Line) error {
	if len(l.Data) > c.max {
		c.t.Fatalf("line of %d bytes exceeds max %d", len(l.Data), c.max)
	}
	if l.Truncated || (l.Part > 0 && l.Parts == 0) {
		c.long++
	}
	c.lines = append(c.lines, string(l.Data))
	c.starts = append(c.starts, l.Start)
	return nil
}

func (c *stdinLines) Dropped(int64, int64) error {
	c.skipped++
	return nil
}

// readAllLines splits r as RunStdin does, with max-line-bytes max and long-lines policy.
func readAllLines(t *testing.T, r io.Reader, max int, policy filetail.LongLinePolicy) *stdinLines {
	t.Helper()
	a := &Agent{cfg: Config{MaxLineBytes: max, LongLines: string(policy)}}
	c := &stdinLines{t: t, max: max}
	if err := a.readStdin(&a.cfg, r, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLineReaderPolicies(t *testing.T) {
	long := strings.Repeat("x", 25)
	input := "a\n\nbb\r\n" + long + "\nccc\n" + long + "yz" // last line has no newline
	for _, tc := range []struct {
		policy        filetail.LongLinePolicy
		want          []string
		long, skipped int
	}{
		{filetail.LongLinesSplit, []string{"a", "", "bb\r", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxx", "ccc", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxxyz"}, 4, 0},
		{filetail.LongLinesTruncate, []string{"a", "", "bb\r", "xxxxxxxxxx", "ccc", "xxxxxxxxxx"}, 2, 0},
		{filetail.LongLinesDrop, []string{"a", "", "bb\r", "ccc"}, 0, 2},
	} {
		for _, small := range []bool{false, true} {
			name := string(tc.policy)
			var r io.Reader = strings.NewReader(input)
			if small {
				name += "/one-byte-reads"
				r = iotest.OneByteReader(r)
			}
			t.Run(name, func(t *testing.T) {
				c := readAllLines(t, r, 10, tc.policy)
				got, long, skipped := c.lines, c.long, c.skipped
				if strings.Join(got, "|") != strings.Join(tc.want, "|") {
					t.Fatalf("lines %q\nwant  %q", got, tc.want)
				}
				if long != tc.long || skipped != tc.skipped {
					t.Fatalf("long=%d skipped=%d, want %d and %d", long, skipped, tc.long, tc.skipped)
				}
			})
		}
	}
}

// A line far longer than bufio's buffer and than max is handled in bounded pieces.
func TestLineReaderHugeLineBoundedMemory(t *testing.T) {
	const size = 5 << 20
	input := append(bytes.Repeat([]byte("0123456789"), size/10), '\n')
	input = append(input, "after\n"...)
	for _, policy := range []filetail.LongLinePolicy{filetail.LongLinesSplit, filetail.LongLinesTruncate, filetail.LongLinesDrop} {
		t.Run(string(policy), func(t *testing.T) {
			got := readAllLines(t, bytes.NewReader(input), 1<<20, policy).lines
			if got[len(got)-1] != "after" {
				t.Fatalf("line after the huge one lost: last is %.20q", got[len(got)-1])
			}
			total := 0
			for _, l := range got[:len(got)-1] {
				total += len(l)
			}
			switch policy {
			case filetail.LongLinesSplit:
				if total != size || len(got) != 6 {
					t.Fatalf("split gave %d parts, %d bytes; want 5 parts of the %d bytes", len(got)-1, total, size)
				}
				if strings.Join(got[:len(got)-1], "") != string(input[:size]) {
					t.Fatal("the split parts do not add up to the line")
				}
			case filetail.LongLinesTruncate:
				if len(got) != 2 || total != 1<<20 {
					t.Fatalf("truncate gave %d lines of %d bytes", len(got)-1, total)
				}
			case filetail.LongLinesDrop:
				if len(got) != 1 {
					t.Fatalf("drop kept %d lines", len(got)-1)
				}
			}
		})
	}
}

func TestLineReaderOffsets(t *testing.T) {
	starts := readAllLines(t, strings.NewReader("ab\ncdefgh\nij"), 4, filetail.LongLinesSplit).starts
	want := []int64{0, 3, 7, 10}
	if len(starts) != len(want) {
		t.Fatalf("starts %v, want %v", starts, want)
	}
	for i := range want {
		if starts[i] != want[i] {
			t.Fatalf("starts %v, want %v", starts, want)
		}
	}
}
