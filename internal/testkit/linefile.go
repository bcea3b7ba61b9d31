// Package testkit holds test helpers shared by the main module's tests (cmd/agent) and the
// reliability module: a log file that an application appends numbered lines to, and rotates.
// Go lets the reliability module import it, its module path lying below this module's.
package testkit

import (
	"fmt"
	"os"
	"testing"
)

// NumberedLine appends line i to buf: "line-<9 digits> " padded with letters to length-1 bytes,
// and "\n". The first field names the line, so a reader can count lost and duplicated lines,
// and every line has the same length, so a byte offset converts to a line count.
func NumberedLine(buf []byte, i, length int) []byte {
	start := len(buf)
	buf = fmt.Appendf(buf, "line-%09d ", i)
	for len(buf)-start < length-1 {
		buf = append(buf, 'a'+byte((len(buf)-start+i)%26))
	}
	return append(buf, '\n')
}

// LineFile appends numbered lines (NumberedLine) to a file, as an application logging would.
// Its methods fail the test on an I/O error.
type LineFile struct {
	// Path is the file's name.
	Path string
	// Next is the number of the next line written; set it to continue another file's numbers.
	Next int
	t    testing.TB
	len  int
	f    *os.File
	buf  []byte
}

// NewLineFile opens (creates) path for appending lines of lineLen bytes, newline included.
func NewLineFile(t testing.TB, path string, lineLen int) *LineFile {
	lf := &LineFile{t: t, Path: path, len: lineLen}
	lf.open()
	return lf
}

func (lf *LineFile) open() {
	f, err := os.OpenFile(lf.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		lf.t.Fatal(err)
	}
	lf.f = f
}

// Write appends n lines, in one write per 64 KiB.
func (lf *LineFile) Write(n int) {
	for n > 0 {
		lf.buf = lf.buf[:0]
		for n > 0 && len(lf.buf) < 64<<10 {
			lf.buf = NumberedLine(lf.buf, lf.Next, lf.len)
			lf.Next++
			n--
		}
		if _, err := lf.f.Write(lf.buf); err != nil {
			lf.t.Fatal(err)
		}
	}
}

// RotateRename is logrotate's default: rename the file to to, create a new one.
func (lf *LineFile) RotateRename(to string) {
	lf.f.Close()
	if err := os.Rename(lf.Path, to); err != nil {
		lf.t.Fatal(err)
	}
	lf.open()
}

// RotateCopyTruncate is logrotate's copytruncate done by the writer itself, so that nothing is
// written between the copy and the truncation: copy the content to to, truncate in place; the
// writer keeps its descriptor (O_APPEND, so it continues at the new end).
func (lf *LineFile) RotateCopyTruncate(to string) {
	data, err := os.ReadFile(lf.Path)
	if err != nil {
		lf.t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		lf.t.Fatal(err)
	}
	if err := os.Truncate(lf.Path, 0); err != nil {
		lf.t.Fatal(err)
	}
}

// Close closes the file.
func (lf *LineFile) Close() { lf.f.Close() }
