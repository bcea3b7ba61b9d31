package agent

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func readAllLines(t *testing.T, r io.Reader, max int, policy string) (lines []string, long, skipped int) {
	t.Helper()
	lr := newLineReader(r, max, policy)
	for {
		l, err := lr.next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(l.data) > max {
			t.Fatalf("line of %d bytes exceeds max %d", len(l.data), max)
		}
		if l.skipped {
			skipped++
			continue
		}
		if l.long {
			long++
		}
		lines = append(lines, string(l.data))
	}
}

func TestLineReaderPolicies(t *testing.T) {
	long := strings.Repeat("x", 25)
	input := "a\n\nbb\r\n" + long + "\nccc\n" + long + "yz" // last line has no newline
	for _, tc := range []struct {
		policy        string
		want          []string
		long, skipped int
	}{
		{"split", []string{"a", "", "bb\r", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxx", "ccc", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxxyz"}, 4, 0},
		{"truncate", []string{"a", "", "bb\r", "xxxxxxxxxx", "ccc", "xxxxxxxxxx"}, 2, 0},
		{"drop", []string{"a", "", "bb\r", "ccc"}, 0, 2},
	} {
		for _, small := range []bool{false, true} {
			name := tc.policy
			var r io.Reader = strings.NewReader(input)
			if small {
				name += "/one-byte-reads"
				r = iotest.OneByteReader(r)
			}
			t.Run(name, func(t *testing.T) {
				got, long, skipped := readAllLines(t, r, 10, tc.policy)
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
	for _, policy := range []string{"split", "truncate", "drop"} {
		t.Run(policy, func(t *testing.T) {
			got, _, _ := readAllLines(t, bytes.NewReader(input), 1<<20, policy)
			if got[len(got)-1] != "after" {
				t.Fatalf("line after the huge one lost: last is %.20q", got[len(got)-1])
			}
			total := 0
			for _, l := range got[:len(got)-1] {
				total += len(l)
			}
			switch policy {
			case "split":
				if total != size || len(got) != 6 {
					t.Fatalf("split gave %d parts, %d bytes; want 5 parts of the %d bytes", len(got)-1, total, size)
				}
				if strings.Join(got[:len(got)-1], "") != string(input[:size]) {
					t.Fatal("the split parts do not add up to the line")
				}
			case "truncate":
				if len(got) != 2 || total != 1<<20 {
					t.Fatalf("truncate gave %d lines of %d bytes", len(got)-1, total)
				}
			case "drop":
				if len(got) != 1 {
					t.Fatalf("drop kept %d lines", len(got)-1)
				}
			}
		})
	}
}

func TestLineReaderOffsets(t *testing.T) {
	lr := newLineReader(strings.NewReader("ab\ncdefgh\nij"), 4, "split")
	var starts []int64
	for {
		l, err := lr.next()
		if err != nil {
			break
		}
		starts = append(starts, l.start)
	}
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
