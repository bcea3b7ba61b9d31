package agent

import (
	"os"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/kafkatrail/kafkatrail/filetail"
)

// validateMultiline checks the multiline keys: one way to say where events begin (a preset, a
// start pattern or a continue pattern), patterns that compile, positive limits.
func (c *Config) validateMultiline(bad func(key, format string, args ...any)) {
	if err := filetail.MultilinePreset(c.Multiline).Valid(); err != nil {
		bad("multiline", "%v", err)
	}
	if c.Multiline != "" && (c.MultilineStart != "" || c.MultilineContinue != "") {
		bad("multiline", "the preset %q cannot be combined with multiline-start or multiline-continue: set one", c.Multiline)
	}
	if c.MultilineStart != "" && c.MultilineContinue != "" {
		bad("multiline-continue", "set multiline-start or multiline-continue, not both")
	}
	for key, pattern := range map[string]string{"multiline-start": c.MultilineStart, "multiline-continue": c.MultilineContinue} {
		if _, err := regexp.Compile(pattern); err != nil {
			bad(key, "%v", err)
		}
	}
	if c.MultilineTimeout <= 0 {
		bad("multiline-timeout", "must be positive, got %v", c.MultilineTimeout)
	}
	if c.MultilineMaxLines < 1 {
		bad("multiline-max-lines", "must be at least 1, got %d", c.MultilineMaxLines)
	}
}

// multilineRule is the validated multiline configuration for the file and stdin splitters.
func (c *Config) multilineRule() filetail.Multiline {
	m := filetail.Multiline{
		Preset:   filetail.MultilinePreset(c.Multiline),
		MaxLines: c.MultilineMaxLines,
		Timeout:  c.MultilineTimeout,
	}
	if c.MultilineStart != "" {
		m.Start, _ = regexp.Compile(c.MultilineStart) // Validate compiled it
	}
	if c.MultilineContinue != "" {
		m.Continue, _ = regexp.Compile(c.MultilineContinue)
	}
	return m
}

// stdinFile is stdin when it is an *os.File: the splitter sets a read deadline to send a held
// event once stdin is idle (filetail.Splitter.ReadLines), and a signal sets one in the past to
// stop the read. Once stopped, every deadline is in the past, so the splitter's next deadline
// cannot undo the stop.
type stdinFile struct {
	f       *os.File
	mu      sync.Mutex
	stopped bool
}

func (s *stdinFile) Read(p []byte) (int, error) { return s.f.Read(p) }

// SetReadDeadline sets the deadline of the reads to come (or to now, once stopped).
func (s *stdinFile) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		t = time.Now()
	}
	return s.f.SetReadDeadline(t)
}

// stop makes the blocked read, and every one after it, return os.ErrDeadlineExceeded.
func (s *stdinFile) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	_ = s.f.SetReadDeadline(time.Now())
}

// pollable returns f as a file that Go's poller watches, so that a blocked Read returns at its
// deadline, and a func that undoes it. os.Stdin is made by os.NewFile, which does not poll a
// descriptor that is in blocking mode (a pipe's usually is): its SetReadDeadline fails, and a
// read of an idle pipe could neither be stopped by a signal nor send a held event. So a pipe or
// a socket is duplicated, put in non-blocking mode and made a new *os.File; anything else (a
// regular file, whose reads do not block, or a terminal) is left as it is.
func pollable(f *os.File) (*os.File, func()) {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 || f.SetReadDeadline(time.Time{}) == nil {
		return f, func() {}
	}
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return f, func() {}
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return f, func() {}
	}
	nf := os.NewFile(uintptr(fd), f.Name())
	return nf, func() {
		// The flag belongs to the pipe, shared with the original descriptor: give it back.
		_ = syscall.SetNonblock(fd, false)
		_ = nf.Close()
	}
}
