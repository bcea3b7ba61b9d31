package filetail

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// StartPosition is where a file with no checkpoint starts when it is found at the first
// discovery (Config.StartAt).
type StartPosition string

// Start positions.
const (
	StartAtBeginning StartPosition = "beginning"
	StartAtEnd       StartPosition = "end" // after the file's last complete line
)

// Valid reports an error unless p is one of the start positions.
func (p StartPosition) Valid() error {
	switch p {
	case StartAtBeginning, StartAtEnd:
		return nil
	}
	return fmt.Errorf("must be %s or %s, got %q", StartAtBeginning, StartAtEnd, string(p))
}

// The file settings' defaults: a zero field of Config takes these, and the agent's own
// configuration reads them rather than restating them.
const (
	DefaultStartAt            = StartAtEnd
	DefaultLongLines          = LongLinesSplit // nothing is lost
	DefaultRescanInterval     = time.Second
	DefaultPollInterval       = 100 * time.Millisecond
	DefaultPartialLineIdle    = 5 * time.Second
	DefaultReleaseIdle        = 30 * time.Second
	DefaultCheckpointInterval = time.Second
	DefaultFingerprintBytes   = 1024
	DefaultReadBufferBytes    = 64 << 10
	DefaultMaxWatches         = 1024 // a node's container log directories, each watched (Config.MaxWatches)
)

// The long-line limit is derived from the largest request the producer may send: a line of
// MaxLineBytesFor(maxRequestSize) bytes still fits with its record's framing and headers.
const (
	// LineHeadroomBytes is what MaxLineBytesFor leaves under the request size for the record
	// batch's framing, the record's headers and its key.
	LineHeadroomBytes = 16 << 10
	// MinMaxLineBytes is the smallest limit MaxLineBytesFor returns, however small the request.
	MinMaxLineBytes = 1024
	// DefaultMaxRequestSize is the Kafka producer's default max.request.size, which
	// DefaultMaxLineBytes is derived from.
	DefaultMaxRequestSize = 1 << 20
	// DefaultMaxLineBytes is MaxLineBytesFor(DefaultMaxRequestSize).
	DefaultMaxLineBytes = DefaultMaxRequestSize - LineHeadroomBytes
)

// MaxLineBytesFor is the longest line sent as one record when requests may be maxRequestSize
// bytes long (the producer's max.request.size).
func MaxLineBytesFor(maxRequestSize int) int {
	return max(maxRequestSize-LineHeadroomBytes, MinMaxLineBytes)
}

// Config configures a Tailer. A zero field takes its Default value above.
type Config struct {
	// Globs are filepath.Glob patterns, re-scanned every RescanInterval; a plain path that does
	// not exist yet is followed once it appears.
	Globs []string
	// StartAt is where a file with no checkpoint starts when it is found at the first discovery:
	// StartAtBeginning or StartAtEnd (after its last complete line). A saved offset always wins;
	// a file that appears later, or that replaced a file the checkpoint knew under the same name
	// while the agent was stopped, is always read from the beginning: it holds new lines only.
	StartAt StartPosition
	// MaxLineBytes is the longest line sent whole; LongLines is the policy for longer ones.
	MaxLineBytes int
	LongLines    LongLinePolicy
	// RescanInterval is how often the globs are matched again. Between scans, the directories
	// of the globs are watched (inotify): a new, renamed or removed file is noticed at once, and
	// the scan is the fallback where watching is not possible.
	RescanInterval time.Duration
	// MaxWatches bounds the directories watched; the others are left to the scans.
	MaxWatches int
	// DisableWatch leaves discovery to the scans and the followers to their polls.
	DisableWatch bool
	// PollInterval is how often a file at its end is looked at again (sooner when the watch
	// sees it written).
	PollInterval time.Duration
	// PartialLineIdle is how long a last line without a newline waits for more bytes before it
	// is sent as it is.
	PartialLineIdle time.Duration
	// ReleaseIdle is how long a file renamed out of the globs, or deleted, is kept open after it
	// stopped growing, in case its writer has not reopened its log yet. It is then released once
	// every line read from it is acknowledged or failed.
	ReleaseIdle time.Duration
	// CheckpointInterval is how often Run saves the checkpoints when they changed.
	CheckpointInterval time.Duration
	// StateDir holds checkpoints.json; it is created if needed and must be writable.
	StateDir string
	// FingerprintBytes is how many first bytes of a file identify it with its inode.
	FingerprintBytes int
	// ReadBufferBytes is the size of one read.
	ReadBufferBytes int
	// Multiline joins lines into events (one record each); the zero value joins nothing.
	Multiline Multiline
	// ContainerFormat is the container runtime's framing taken off every line (see
	// ContainerFormat.ForPath): empty decodes the files under KubeletLogDirs as ContainerAuto and
	// leaves the others as they are.
	ContainerFormat ContainerFormat

	// Initial, when UseInitial is set, replaces the checkpoints of the state directory's file:
	// the exactly-once mode's positions read back from its state topic.
	Initial    []Checkpoint
	UseInitial bool
	// CommittedOnly (exactly-once) leaves checkpoints.json to the transaction committer: Run
	// neither saves every CheckpointInterval nor when it stops, because acknowledged lines are
	// not committed until their transaction is (the committer calls SaveSnapshot). For the same
	// reason File.Ack and File.DeadLetter count nothing: the committer counts the lines with
	// File.CountCommitted once their transaction committed.
	CommittedOnly bool
	// CommittedOf, when set (exactly-once), is the position the last committed transaction
	// holds for a file: Stats reports it as Committed, since an acknowledged line is not
	// committed before its transaction is.
	CommittedOf func(FileKey) (int64, bool)
}

// setDefaults gives every zero field its default (cmp.Or: the first of its arguments that is
// not zero).
func (c *Config) setDefaults() {
	c.StartAt = cmp.Or(c.StartAt, DefaultStartAt)
	c.MaxLineBytes = cmp.Or(c.MaxLineBytes, DefaultMaxLineBytes)
	c.LongLines = cmp.Or(c.LongLines, DefaultLongLines)
	c.RescanInterval = cmp.Or(c.RescanInterval, DefaultRescanInterval)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.MaxWatches = cmp.Or(c.MaxWatches, DefaultMaxWatches)
	c.PartialLineIdle = cmp.Or(c.PartialLineIdle, DefaultPartialLineIdle)
	c.ReleaseIdle = cmp.Or(c.ReleaseIdle, DefaultReleaseIdle)
	c.CheckpointInterval = cmp.Or(c.CheckpointInterval, DefaultCheckpointInterval)
	c.FingerprintBytes = cmp.Or(c.FingerprintBytes, DefaultFingerprintBytes)
	c.ReadBufferBytes = cmp.Or(c.ReadBufferBytes, DefaultReadBufferBytes)
	c.Multiline.setDefaults()
}

// splitter is the Splitter of a follower from offset start, decoding container format (the
// file's: Config.ContainerFormat.ForPath, or what auto decided before), counting what its
// container decoder meets into counts.
func (c *Config) splitter(start int64, format ContainerFormat, counts ...*ContainerCounts) *Splitter {
	s := NewSplitter(c.MaxLineBytes, c.LongLines, c.ReadBufferBytes, start)
	s.JoinEvents(c.Multiline)
	s.DecodeContainer(format, counts...)
	return s
}

func (c *Config) validate() error {
	var errs []error
	if len(c.Globs) == 0 {
		errs = append(errs, errors.New("agent: tail: no file or glob to follow"))
	}
	for _, g := range c.Globs {
		if _, err := filepath.Match(g, ""); err != nil {
			errs = append(errs, fmt.Errorf("agent: tail %q: %w", g, err))
		}
	}
	if err := c.StartAt.Valid(); err != nil {
		errs = append(errs, fmt.Errorf("agent: start-at %w", err))
	}
	if c.MaxLineBytes < 1 {
		errs = append(errs, fmt.Errorf("agent: max-line-bytes must be positive, got %d", c.MaxLineBytes))
	}
	if err := c.LongLines.Valid(); err != nil {
		errs = append(errs, fmt.Errorf("agent: long-lines %w", err))
	}
	for name, d := range map[string]time.Duration{
		"rescan interval": c.RescanInterval, "poll interval": c.PollInterval,
		"partial line idle": c.PartialLineIdle, "release idle": c.ReleaseIdle,
		"checkpoint interval": c.CheckpointInterval,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("agent: %s must not be negative, got %v", name, d))
		}
	}
	if c.FingerprintBytes < 1 {
		errs = append(errs, fmt.Errorf("agent: fingerprint bytes must be positive, got %d", c.FingerprintBytes))
	}
	if c.MaxWatches < 1 {
		errs = append(errs, fmt.Errorf("agent: max watches must be positive, got %d", c.MaxWatches))
	}
	if c.ReadBufferBytes < 1 {
		errs = append(errs, fmt.Errorf("agent: read buffer bytes must be positive, got %d", c.ReadBufferBytes))
	}
	if err := c.Multiline.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.ContainerFormat.Valid(); err != nil {
		errs = append(errs, fmt.Errorf("agent: container-format %w", err))
	}
	return errors.Join(errs...)
}
