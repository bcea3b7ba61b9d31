package filetail

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/kafkatrail/kafkatrail/internal/jsonscan"
)

// ContainerFormat is how a container runtime frames each line of the log files it writes
// (Config.ContainerFormat). With a format, the runtime's framing is taken off: the message alone
// is the line, the pieces of a message the runtime cut (it writes at most 16 KiB of one line at a
// time) are joined into one line, and the runtime's time and stream travel with it (Line.Time,
// Line.Stream).
type ContainerFormat string

// The container formats.
const (
	// ContainerOff: lines are sent as they are.
	ContainerOff ContainerFormat = "off"
	// ContainerCRI is the CRI log format that containerd and CRI-O write:
	// "<RFC 3339 time> <stdout|stderr> <P|F> <message>", P for a piece of a longer line, F for
	// its last piece (or a whole line).
	ContainerCRI ContainerFormat = "cri"
	// ContainerDocker is docker's json-file format: {"log":"<message>\n","stream":"stdout",
	// "time":"<RFC 3339 time>"}, a log without its newline being a piece of a longer line.
	ContainerDocker ContainerFormat = "docker"
	// ContainerAuto decides per file, at the first line that is docker's JSON or CRI: until one
	// is, each line is tried as both and sent as it is when it is neither. The choice is kept
	// in the file's checkpoint, so that a restart decodes the file the same way.
	ContainerAuto ContainerFormat = "auto"
)

// KubeletLogDirs are where the kubelet keeps container logs: a file under them is decoded with
// ContainerAuto when Config.ContainerFormat is empty; any other file is not decoded.
var KubeletLogDirs = []string{"/var/log/containers/", "/var/log/pods/"}

// Valid reports an error unless f is empty (the default by path) or one of the formats.
func (f ContainerFormat) Valid() error {
	switch f {
	case "", ContainerOff, ContainerCRI, ContainerDocker, ContainerAuto:
		return nil
	}
	return fmt.Errorf("must be %s, %s, %s or %s, got %q", ContainerAuto, ContainerCRI, ContainerDocker, ContainerOff, string(f))
}

// ForPath is the format a file at path is read with: f itself, or, when f is empty, auto for a
// file under KubeletLogDirs and off for any other.
func (f ContainerFormat) ForPath(path string) ContainerFormat {
	if f != "" {
		return f
	}
	for _, dir := range KubeletLogDirs {
		if strings.HasPrefix(path, dir) {
			return ContainerAuto
		}
	}
	return ContainerOff
}

// Stream is the standard stream a container wrote a line to (Line.Stream).
type Stream uint8

// The streams.
const (
	StreamUnknown Stream = iota // not a container's line, or one that did not parse
	StreamStdout
	StreamStderr
)

// String returns "stdout", "stderr", or "" for StreamUnknown.
func (s Stream) String() string {
	switch s {
	case StreamStdout:
		return "stdout"
	case StreamStderr:
		return "stderr"
	}
	return ""
}

func parseStream(b []byte) Stream {
	switch string(b) {
	case "stdout":
		return StreamStdout
	case "stderr":
		return StreamStderr
	}
	return StreamUnknown
}

// ContainerCounts counts what decoding container logs met. The file path keeps one per file and
// one for all files, stdin one of its own.
type ContainerCounts struct {
	// Joined counts messages the runtime wrote in more than one piece, joined into one line.
	Joined atomic.Uint64
	// Malformed counts lines that were not in the file's format: each is sent as it is.
	Malformed atomic.Uint64
	// Interrupted counts messages whose pieces were not followed by their last one (a line of
	// the other stream came between them, or the file was idle for the partial-line idle): the
	// pieces so far are sent as one line, the rest as another.
	Interrupted atomic.Uint64
}

// containerLines is a Splitter's container decoder: it sits between the line layer (whole raw
// lines of the runtime, or parts of one longer than the limit) and the event layer, which joins
// the pieces of a message as it joins the parts of a long line (a piece is handed over as an
// earlier part until its message's last piece) and applies the long-line policy to the whole
// message. Pieces are joined while they follow one another in the file: the runtime writes a
// long line's pieces one after the other, and a line of the other stream between them (both
// streams written at once) ends the message there (Interrupted), so that every line keeps its
// own span of the file and the checkpoint is never inside one. For the same reason a multiline
// event ends where the stream changes: events are joined per stream.
type containerLines struct {
	format ContainerFormat // cri, docker, or auto until a line decides
	out    *events
	counts []*ContainerCounts

	open    bool   // a piece was handed over and its message's last piece has not come
	stream  Stream // the stream of the last line handed over
	piece   int    // pieces of the open message handed over
	lastEnd int64  // the end of the last raw line (or part) handed over

	// A raw line longer than the limit reaches the decoder in parts: the first has the
	// runtime's framing, the others are the rest of its message.
	rawMid     bool   // the last Line was an earlier part of a raw line
	rawPartial bool   // that raw line is a piece of a longer message
	rawTime    int64  // that raw line's time and stream
	rawStream  Stream //
	rawBad     bool   // that raw line did not parse: its parts are sent as they are

	times   rfc3339Cache
	scratch []byte            // docker's log, unescaped
	members []jsonscan.Member // docker's object's members
}

func newContainerLines(f ContainerFormat, out *events, counts []*ContainerCounts) *containerLines {
	return &containerLines{format: f, out: out, counts: counts}
}

func (c *containerLines) reset() {
	c.open, c.piece, c.rawMid, c.stream = false, 0, false, StreamUnknown
}

// piece is one raw line's (or raw part's) message, as decodeLine reads it.
type piece struct {
	data    []byte
	time    int64
	stream  Stream
	partial bool // a piece of a longer message: more follow
	bad     bool // not in the format: data is the raw line
}

// Line takes a raw line (or a part of a long one) from the line layer.
func (c *containerLines) Line(l Line) error {
	first := !c.rawMid // the first part of a raw line (or a whole one): it has the framing
	var p piece
	switch {
	case !first:
		// The rest of a raw line: its bytes are the message's (docker's JSON cannot be read in
		// parts, so a docker line this long went as it is).
		p = piece{data: l.Data, time: c.rawTime, stream: c.rawStream, partial: c.rawPartial, bad: c.rawBad}
	default:
		p = c.decodeLine(l.Data)
		if l.Part > 0 && c.format == ContainerDocker && !p.bad {
			p = piece{data: l.Data, bad: true}
		}
		if p.bad {
			c.count(func(k *ContainerCounts) { k.Malformed.Add(1) })
		}
	}
	moreParts := l.Part > 0 && l.Parts == 0
	if moreParts {
		c.rawMid, c.rawPartial, c.rawTime, c.rawStream, c.rawBad = true, p.partial, p.time, p.stream, p.bad
	} else {
		c.rawMid = false
	}
	if first && (p.stream != c.stream || p.bad) {
		if err := c.endMessage(); err != nil {
			return err
		}
		if err := c.out.emit(); err != nil { // events are joined per stream
			return err
		}
	}
	c.stream = p.stream
	c.piece++
	out := Line{Data: p.data, Start: l.Start, End: l.End, Written: l.Written, Time: p.time, Stream: p.stream, Part: c.piece}
	if more := moreParts || p.partial; more {
		c.open = true
	} else {
		if c.piece > 1 {
			out.Parts = c.piece
			c.count(func(k *ContainerCounts) { k.Joined.Add(1) })
		} else {
			out.Part = 0 // a whole line
		}
		c.open, c.piece = false, 0
	}
	c.lastEnd = l.End
	return c.out.Line(out)
}

// Dropped passes a drop on; the line layer below splits, so it does not drop.
func (c *containerLines) Dropped(start, end int64) error { return c.out.Dropped(start, end) }

// endMessage ends the open message, if any, where it is (its last piece has not come: counted
// as interrupted): an empty last piece at the end of the last one tells the event layer that the
// pieces so far are a whole line.
func (c *containerLines) endMessage() error {
	if !c.open {
		return nil
	}
	c.piece++
	end := Line{Start: c.lastEnd, End: c.lastEnd, Part: c.piece, Parts: c.piece, Stream: c.stream}
	c.open, c.piece, c.rawMid = false, 0, false
	c.count(func(k *ContainerCounts) { k.Interrupted.Add(1) })
	return c.out.Line(end)
}

func (c *containerLines) count(f func(*ContainerCounts)) {
	for _, k := range c.counts {
		if k != nil {
			f(k)
		}
	}
}

// decodeLine reads one raw line in the file's format. Under auto, the first line that is one of
// the formats decides it for good; a line before it that is neither (a torn write, a stray
// byte, the first part of a docker line longer than the limit) goes as it is and decides
// nothing, as Vector's format picker keeps trying until a line parses.
func (c *containerLines) decodeLine(raw []byte) piece {
	if c.format == ContainerAuto {
		switch {
		case len(raw) == 0:
			return piece{data: raw} // undecided yet: an empty line is an empty line
		case raw[0] == '{':
			if p := c.decodeDocker(raw); !p.bad {
				c.format = ContainerDocker
				return p
			}
		default:
			if p := c.decodeCRI(raw); !p.bad {
				c.format = ContainerCRI
				return p
			}
		}
		return piece{data: raw, bad: true}
	}
	switch c.format {
	case ContainerCRI:
		return c.decodeCRI(raw)
	case ContainerDocker:
		return c.decodeDocker(raw)
	}
	return piece{data: raw}
}

// decodeCRI reads "<time> <stream> <tag> <message>"; the tag is P or F, possibly followed by
// further ':'-separated tags (the CRI log format reserves them).
func (c *containerLines) decodeCRI(raw []byte) piece {
	bad := piece{data: raw, bad: true}
	sp := bytes.IndexByte(raw, ' ')
	if sp < 0 {
		return bad
	}
	ts, ok := c.times.parse(raw[:sp])
	if !ok {
		return bad
	}
	rest := raw[sp+1:]
	sp = bytes.IndexByte(rest, ' ')
	if sp < 0 {
		return bad
	}
	stream := parseStream(rest[:sp])
	if stream == StreamUnknown {
		return bad
	}
	rest = rest[sp+1:]
	tag, msg := rest, []byte(nil)
	if sp = bytes.IndexByte(rest, ' '); sp >= 0 {
		tag, msg = rest[:sp], rest[sp+1:]
	}
	if i := bytes.IndexByte(tag, ':'); i >= 0 {
		tag = tag[:i]
	}
	var partial bool
	switch string(tag) {
	case "P":
		partial = true
	case "F":
	default:
		return bad
	}
	if msg == nil {
		msg = rest[len(rest):] // "<time> <stream> F": an empty line
	}
	return piece{data: msg, time: ts, stream: stream, partial: partial}
}

// decodeDocker reads {"log":"...","stream":"...","time":"..."}, its keys in any order and any
// other key (docker's "attrs") skipped, with the scanner the agent's JSON fields use: a line
// encoding/json would refuse is malformed. The log's escapes are decoded; a log that does not
// end with a newline is a piece of a longer line.
func (c *containerLines) decodeDocker(raw []byte) piece {
	bad := piece{data: raw, bad: true}
	c.members = c.members[:0]
	if len(raw) == 0 || raw[0] != '{' {
		return bad
	}
	if end := jsonscan.Object(raw, 0, 1, &c.members); end < 0 || jsonscan.SkipSpace(raw, end) != len(raw) {
		return bad
	}
	var p piece
	var haveLog, haveTime bool
	for _, m := range c.members { // of duplicate keys the last wins, as in encoding/json
		v := raw[m.ValStart:m.ValEnd]
		if !m.PlainKey || v[0] != '"' {
			continue // docker's keys are plain and its values strings
		}
		v = v[1 : len(v)-1]
		switch string(raw[m.KeyStart:m.KeyEnd]) {
		case "log":
			c.scratch, haveLog = appendUnquoted(c.scratch[:0], v), true
		case "stream":
			p.stream = parseStream(v)
		case "time":
			p.time, haveTime = c.times.parse(v)
		}
	}
	if !haveLog || !haveTime || p.stream == StreamUnknown {
		return bad
	}
	p.data = c.scratch
	if n := len(p.data); n > 0 && p.data[n-1] == '\n' {
		p.data = p.data[:n-1]
	} else {
		p.partial = true
	}
	return p
}

// appendUnquoted appends the contents of a valid JSON string, s (between its quotes), decoded,
// to dst: as they are when s has no escape (docker's logs, but for the newline at their end).
func appendUnquoted(dst, s []byte) []byte {
	if bytes.IndexByte(s, '\\') < 0 {
		return append(dst, s...)
	}
	for r := 0; r < len(s); {
		var ch rune
		ch, r = jsonscan.UnquoteRune(s, r)
		dst = utf8.AppendRune(dst, ch)
	}
	return dst
}

// rfc3339Cache parses the runtimes' RFC 3339 times (time.RFC3339Nano, as containerd, CRI-O and
// docker write them) to Unix nanoseconds. The lines of one second share their date and time of
// day, so it keeps the last second's: a line costs a comparison and its fraction.
type rfc3339Cache struct {
	sec  [19]byte // "2006-01-02T15:04:05" of the last parse
	unix int64    // its Unix seconds, as if in UTC
	set  bool
}

// parse returns s as Unix nanoseconds; ok is false when s is not an RFC 3339 time.
func (c *rfc3339Cache) parse(s []byte) (int64, bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return c.slow(s)
	}
	if !c.set || !bytes.Equal(c.sec[:], s[:19]) {
		t, err := time.Parse("2006-01-02T15:04:05", string(s[:19]))
		if err != nil {
			return 0, false
		}
		copy(c.sec[:], s[:19])
		c.unix, c.set = t.Unix(), true
	}
	rest := s[19:]
	var frac int64
	if rest[0] == '.' {
		digits := 0
		rest = rest[1:]
		for len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9' {
			if digits < 9 {
				frac = frac*10 + int64(rest[0]-'0')
			}
			digits++
			rest = rest[1:]
		}
		if digits == 0 {
			return 0, false
		}
		for ; digits < 9; digits++ {
			frac *= 10
		}
	}
	var offset int64
	switch {
	case len(rest) == 1 && (rest[0] == 'Z' || rest[0] == 'z'):
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		h, m := twoDigits(rest[1:3]), twoDigits(rest[4:6])
		if h < 0 || m < 0 || h > 23 || m > 59 {
			return 0, false
		}
		offset = int64(h*3600 + m*60)
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return 0, false
	}
	return (c.unix-offset)*1e9 + frac, true
}

// slow parses what the fast path does not read (a time of another length): with the standard
// library, or not at all.
func (c *rfc3339Cache) slow(s []byte) (int64, bool) {
	t, err := time.Parse(time.RFC3339Nano, string(s))
	if err != nil {
		return 0, false
	}
	return t.UnixNano(), true
}

func twoDigits(b []byte) int {
	if b[0] < '0' || b[0] > '9' || b[1] < '0' || b[1] > '9' {
		return -1
	}
	return int(b[0]-'0')*10 + int(b[1]-'0')
}
