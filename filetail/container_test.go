package filetail

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
)

// containerSink records the lines a decoding Splitter hands over, with their time and stream.
type containerSink struct{ lines []Line }

func (c *containerSink) Line(l Line) error {
	l.Data = append([]byte(nil), l.Data...)
	c.lines = append(c.lines, l)
	return nil
}

func (c *containerSink) Dropped(start, end int64) error {
	c.lines = append(c.lines, Line{Start: start, End: end, Data: []byte("<dropped>")})
	return nil
}

func (c *containerSink) messages() []string {
	var out []string
	for _, l := range c.lines {
		out = append(out, string(l.Data))
	}
	return out
}

// decodeAll feeds input to a fresh splitter decoding format f (multiline m, if enabled) in reads
// of at most step bytes, then flushes; it returns the lines and the counts.
func decodeAll(t *testing.T, input string, f ContainerFormat, m Multiline, maxLine int, policy LongLinePolicy, step int) (*containerSink, *ContainerCounts) {
	t.Helper()
	s := NewSplitter(maxLine, policy, 64, 0)
	counts := &ContainerCounts{}
	if m.Enabled() && maxLine%2 == 0 {
		s.JoinEvents(m) // either order
		s.DecodeContainer(f, counts)
	} else {
		s.DecodeContainer(f, counts)
		s.JoinEvents(m)
	}
	sink := &containerSink{}
	for rest := input; len(rest) > 0; {
		buf := s.Space()
		k := copy(buf[:min(step, len(buf))], rest)
		rest = rest[k:]
		if err := s.Feed(k, sink); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Flush(sink); err != nil {
		t.Fatal(err)
	}
	checkEnds(t, sink.lines)
	return sink, counts
}

// checkEnds asserts what the checkpoint needs: ends strictly increasing, each past its start.
func checkEnds(t *testing.T, lines []Line) {
	t.Helper()
	var last int64
	for i, l := range lines {
		if l.End <= last || l.End <= l.Start {
			t.Fatalf("line %d (%q) spans %d-%d after an end at %d: ends must increase", i, l.Data, l.Start, l.End, last)
		}
		last = l.End
	}
}

func cri(ts, stream, tag, msg string) string { return ts + " " + stream + " " + tag + " " + msg + "\n" }

const ts1 = "2026-12-03T10:00:00.123456789Z"

func TestCRILines(t *testing.T) {
	big := strings.Repeat("x", 16<<10) + strings.Repeat("y", 16<<10) + strings.Repeat("z", 8<<10)
	input := cri(ts1, "stdout", "F", "GET /health 200") +
		cri("2026-12-03T10:00:01.5Z", "stderr", "F", "warn: slow") +
		cri("2026-12-03T10:00:02Z", "stdout", "P", big[:16<<10]) +
		cri("2026-12-03T10:00:02.1Z", "stdout", "P", big[16<<10:32<<10]) +
		cri("2026-12-03T10:00:02.2Z", "stdout", "F", big[32<<10:]) +
		cri("2026-12-03T11:00:03+01:00", "stdout", "F", "") + // an empty line, in another zone
		ts1 + " stdout F\n" + // an empty line without the space
		cri(ts1, "stdout", "F:x", "a further tag")
	for _, step := range []int{1, 7, 64} {
		sink, counts := decodeAll(t, input, ContainerCRI, Multiline{}, 1<<20, LongLinesSplit, step)
		want := []string{"GET /health 200", "warn: slow", big, "", "", "a further tag"}
		if got := sink.messages(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d: messages differ: got %d, want %d lines (%.80q)", step, len(got), len(want), got)
		}
		l := sink.lines
		if l[0].Time != time.Date(2026, 12, 3, 10, 0, 0, 123456789, time.UTC).UnixNano() || l[0].Stream != StreamStdout {
			t.Errorf("line 0: time %d stream %v", l[0].Time, l[0].Stream)
		}
		if l[1].Time != time.Date(2026, 12, 3, 10, 0, 1, 5e8, time.UTC).UnixNano() || l[1].Stream != StreamStderr {
			t.Errorf("line 1: time %d stream %v", l[1].Time, l[1].Stream)
		}
		// The joined line spans its three pieces and has the first piece's time.
		p0 := int64(len(cri(ts1, "stdout", "F", "GET /health 200")) + len(cri("2026-12-03T10:00:01.5Z", "stderr", "F", "warn: slow")))
		pieces := int64(len(cri("2026-12-03T10:00:02Z", "stdout", "P", big[:16<<10]))+len(cri("2026-12-03T10:00:02.1Z", "stdout", "P", big[16<<10:32<<10]))) +
			int64(len(cri("2026-12-03T10:00:02.2Z", "stdout", "F", big[32<<10:])))
		if l[2].Start != p0 || l[2].End != p0+pieces || l[2].Part != 0 {
			t.Errorf("joined line spans %d-%d part %d, want %d-%d whole", l[2].Start, l[2].End, l[2].Part, p0, p0+pieces)
		}
		if l[2].Time != time.Date(2026, 12, 3, 10, 0, 2, 0, time.UTC).UnixNano() {
			t.Errorf("joined line's time %d: want its first piece's", l[2].Time)
		}
		if l[3].Time != time.Date(2026, 12, 3, 10, 0, 3, 0, time.UTC).UnixNano() {
			t.Errorf("+01:00 time: got %v", time.Unix(0, l[3].Time).UTC())
		}
		if counts.Joined.Load() != 1 || counts.Malformed.Load() != 0 || counts.Interrupted.Load() != 0 {
			t.Errorf("counts joined %d malformed %d interrupted %d, want 1 0 0", counts.Joined.Load(), counts.Malformed.Load(), counts.Interrupted.Load())
		}
	}
}

func TestCRIMalformedLinesGoAsTheyAre(t *testing.T) {
	input := cri(ts1, "stdout", "F", "ok") +
		"not a cri line\n" +
		"2026-13-45T99:00:00Z stdout F bad time\n" +
		cri(ts1, "stdin", "F", "bad stream") +
		cri(ts1, "stdout", "X", "bad tag") +
		cri(ts1, "stdout", "F", "ok again")
	sink, counts := decodeAll(t, input, ContainerCRI, Multiline{}, 1<<20, LongLinesSplit, 64)
	want := []string{"ok", "not a cri line", "2026-13-45T99:00:00Z stdout F bad time",
		ts1 + " stdin F bad stream", ts1 + " stdout X bad tag", "ok again"}
	if got := sink.messages(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if n := counts.Malformed.Load(); n != 4 {
		t.Errorf("malformed %d, want 4", n)
	}
	if sink.lines[1].Stream != StreamUnknown || sink.lines[1].Time != 0 {
		t.Errorf("a malformed line has no stream or time: got %v %d", sink.lines[1].Stream, sink.lines[1].Time)
	}
}

// A line of the other stream between a message's pieces ends the message there: each line keeps
// its own span of the file, so the checkpoint is never inside one.
func TestCRIOtherStreamInterruptsPieces(t *testing.T) {
	input := cri(ts1, "stdout", "P", "first half ") +
		cri(ts1, "stderr", "F", "an error") +
		cri(ts1, "stdout", "F", "second half")
	sink, counts := decodeAll(t, input, ContainerCRI, Multiline{}, 1<<20, LongLinesSplit, 64)
	want := []string{"first half ", "an error", "second half"}
	if got := sink.messages(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if counts.Interrupted.Load() != 1 || counts.Joined.Load() != 0 {
		t.Errorf("interrupted %d joined %d, want 1 0", counts.Interrupted.Load(), counts.Joined.Load())
	}
}

// The long-line policy applies to the joined message, and a part cut inside a piece ends where
// that piece begins: a restart there reads the piece again whole, never half a runtime's line.
func TestCRILongMessagePolicy(t *testing.T) {
	// Raw lines of 341 bytes fit the limit of 400; the message of 700 does not.
	msg := strings.Repeat("a", 300) + strings.Repeat("b", 300) + strings.Repeat("c", 100)
	input := cri(ts1, "stdout", "P", msg[:300]) + cri(ts1, "stdout", "P", msg[300:600]) + cri(ts1, "stdout", "F", msg[600:]) +
		cri(ts1, "stdout", "F", "next")
	pieceLen := int64(len(cri(ts1, "stdout", "P", msg[:300])))
	msgEnd := 2*pieceLen + int64(len(cri(ts1, "stdout", "F", msg[600:])))
	starts := map[int64]bool{0: true, pieceLen: true, 2 * pieceLen: true}
	sink, _ := decodeAll(t, input, ContainerCRI, Multiline{}, 400, LongLinesSplit, 64)
	var joined string
	for _, l := range sink.lines[:len(sink.lines)-1] {
		joined += string(l.Data)
		if len(l.Data) > 400 {
			t.Errorf("part of %d bytes, limit 400", len(l.Data))
		}
		if l.Parts == 0 && !starts[l.End] {
			t.Errorf("an earlier part ends at %d, not where a piece begins (%v)", l.End, starts)
		}
	}
	if joined != msg || string(sink.lines[len(sink.lines)-1].Data) != "next" {
		t.Fatalf("split message does not join back (%d bytes of %d), last %q", len(joined), len(msg), sink.lines[len(sink.lines)-1].Data)
	}
	sink, _ = decodeAll(t, input, ContainerCRI, Multiline{}, 400, LongLinesTruncate, 64)
	if got := sink.messages(); len(got) != 2 || got[0] != msg[:400] || !sink.lines[0].Truncated || sink.lines[0].End != msgEnd {
		t.Fatalf("truncate: got %.40q (%d lines), first truncated %v end %d", got, len(got), sink.lines[0].Truncated, sink.lines[0].End)
	}
	sink, _ = decodeAll(t, input, ContainerCRI, Multiline{}, 400, LongLinesDrop, 64)
	if got := sink.messages(); fmt.Sprint(got) != "[<dropped> next]" || sink.lines[0].End != msgEnd {
		t.Fatalf("drop: got %q", got)
	}
}

func TestDockerLines(t *testing.T) {
	input := `{"log":"GET /health 200\n","stream":"stdout","time":"2026-12-03T10:00:00.123456789Z"}` + "\n" +
		`{"log":"tab\there \"quoted\" \u00e9 \ud83d\ude00 \/\n","stream":"stderr","time":"2026-12-03T10:00:01Z"}` + "\n" +
		`{"log":"a long line, ","stream":"stdout","time":"2026-12-03T10:00:02Z"}` + "\n" +
		`{"log":"its end\n","stream":"stdout","attrs":{"tag":"x","n":[1,{"a":"}"}]},"time":"2026-12-03T10:00:02.5Z"}` + "\n" +
		`{"stream":"stdout","time":"2026-12-03T10:00:03Z","log":"keys in another order\n"}` + "\n" +
		`{"log":"no time\n","stream":"stdout"}` + "\n" +
		`not json` + "\n"
	sink, counts := decodeAll(t, input, ContainerDocker, Multiline{}, 1<<20, LongLinesSplit, 16)
	want := []string{"GET /health 200", "tab\there \"quoted\" é 😀 /", "a long line, its end", "keys in another order",
		`{"log":"no time\n","stream":"stdout"}`, "not json"}
	if got := sink.messages(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if sink.lines[1].Stream != StreamStderr || sink.lines[2].Time != time.Date(2026, 12, 3, 10, 0, 2, 0, time.UTC).UnixNano() {
		t.Errorf("stream %v, joined time %d", sink.lines[1].Stream, sink.lines[2].Time)
	}
	if counts.Joined.Load() != 1 || counts.Malformed.Load() != 2 {
		t.Errorf("joined %d malformed %d, want 1 2", counts.Joined.Load(), counts.Malformed.Load())
	}
}

func TestContainerAutoDecidesPerFile(t *testing.T) {
	for _, c := range []struct {
		input, want string
		format      ContainerFormat
	}{
		{cri(ts1, "stdout", "F", "hello"), "hello", ContainerCRI},
		{`{"log":"hello\n","stream":"stdout","time":"` + ts1 + `"}` + "\n", "hello", ContainerDocker},
		// Neither: undecided, so a later line can still decide.
		{"plain text\n", "plain text", ContainerAuto},
		{`{"msg":"an app's own JSON"}` + "\n", `{"msg":"an app's own JSON"}`, ContainerAuto},
	} {
		s := NewSplitter(1<<20, LongLinesSplit, 64, 0)
		s.DecodeContainer(ContainerAuto)
		sink := &containerSink{}
		for rest := c.input; rest != ""; {
			k := copy(s.Space(), rest)
			rest = rest[k:]
			if err := s.Feed(k, sink); err != nil {
				t.Fatal(err)
			}
		}
		if got := sink.messages(); len(got) != 1 || got[0] != c.want || s.ContainerFormat() != c.format {
			t.Errorf("%q: got %q as %q, want %q as %q", c.input, got, s.ContainerFormat(), c.want, c.format)
		}
	}
}

// TestContainerAutoUndecidedFirstLine: a first line in neither format (a torn write, a stray
// byte, a docker line longer than the limit) goes as it is and decides nothing: the lines after
// it decode. It used to switch decoding off for the whole file.
func TestContainerAutoUndecidedFirstLine(t *testing.T) {
	docker := func(msg, stream string) string {
		return `{"log":"` + msg + `\n","stream":"` + stream + `","time":"` + ts1 + `"}` + "\n"
	}
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		name, input string
		want        []string
		format      ContainerFormat
		malformed   uint64
	}{
		{"torn write, then CRI", "1-03T10:00:00.1Z stdout F half a line\n" + cri(ts1, "stdout", "F", "one") + cri(ts1, "stderr", "F", "two"),
			[]string{"1-03T10:00:00.1Z stdout F half a line", "one", "two"}, ContainerCRI, 1},
		{"a stray byte, then docker", "\x00\n" + docker("one", "stdout") + docker("two", "stderr"),
			[]string{"\x00", "one", "two"}, ContainerDocker, 1},
		// 300 bytes of message over a 256-byte limit: it arrives in parts, which docker's JSON
		// cannot be read in, so it goes as it is (split by the policy); the next lines decode.
		{"a docker line over the limit, then docker", docker(long, "stdout") + docker("one", "stdout") + docker("two", "stderr"),
			nil, ContainerDocker, 1},
		{"CRI, then a malformed line: decided", cri(ts1, "stdout", "F", "one") + "garbage\n" + docker("two", "stdout"),
			[]string{"one", "garbage", docker("two", "stdout")[:len(docker("two", "stdout"))-1]}, ContainerCRI, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, step := range []int{7, 64, 1 << 20} {
				sink, counts := decodeAll(t, c.input, ContainerAuto, Multiline{}, 256, LongLinesSplit, step)
				got := sink.messages()
				if c.want == nil { // the long line's parts, then the two decoded lines
					if len(got) < 3 || got[len(got)-2] != "one" || got[len(got)-1] != "two" || !strings.HasPrefix(got[0], `{"log":"xxx`) {
						t.Fatalf("step %d: got %q", step, got)
					}
				} else if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("step %d: got %q\nwant %q", step, got, c.want)
				}
				if last := sink.lines[len(sink.lines)-1]; last.Stream != StreamStderr && c.format == ContainerDocker {
					t.Errorf("step %d: the last line's stream %v, want stderr", step, last.Stream)
				}
				if counts.Malformed.Load() != c.malformed {
					t.Errorf("step %d: %d malformed, want %d", step, counts.Malformed.Load(), c.malformed)
				}
			}
			s := NewSplitter(256, LongLinesSplit, 64, 0)
			s.DecodeContainer(ContainerAuto)
			for rest := c.input; rest != ""; {
				k := copy(s.Space(), rest)
				rest = rest[k:]
				if err := s.Feed(k, &containerSink{}); err != nil {
					t.Fatal(err)
				}
			}
			if s.ContainerFormat() != c.format {
				t.Errorf("decided %q, want %q", s.ContainerFormat(), c.format)
			}
		})
	}
}

func TestContainerFormatForPath(t *testing.T) {
	for path, want := range map[string]ContainerFormat{
		"/var/log/containers/web-1_default_nginx-0123.log": ContainerAuto,
		"/var/log/pods/default_web-1_uid/nginx/0.log":      ContainerAuto,
		"/var/log/app.log":              ContainerOff,
		"/tmp/var/log/containers/x.log": ContainerOff,
	} {
		if got := ContainerFormat("").ForPath(path); got != want {
			t.Errorf("ForPath(%q) = %q, want %q", path, got, want)
		}
	}
	if got := ContainerCRI.ForPath("/var/log/app.log"); got != ContainerCRI {
		t.Errorf("a set format applies to every path: got %q", got)
	}
}

// Multiline events work on the joined messages, and per stream: a stderr line never joins a
// stdout stack trace.
func TestCRIMultilinePerStream(t *testing.T) {
	input := cri(ts1, "stdout", "F", "Exception in thread main java.lang.IllegalStateException: boom") +
		cri(ts1, "stdout", "P", "\tat com.example.") + cri(ts1, "stdout", "F", "Main.run(Main.java:10)") +
		cri(ts1, "stderr", "F", "\tat not.a.Frame(of.java:1)") +
		cri(ts1, "stdout", "F", "\tat com.example.Main.main(Main.java:3)") +
		cri(ts1, "stdout", "F", "done")
	sink, _ := decodeAll(t, input, ContainerCRI, Multiline{Preset: MultilineJava}, 1<<20, LongLinesSplit, 64)
	want := []string{
		"Exception in thread main java.lang.IllegalStateException: boom\n\tat com.example.Main.run(Main.java:10)",
		"\tat not.a.Frame(of.java:1)",
		"\tat com.example.Main.main(Main.java:3)",
		"done",
	}
	if got := sink.messages(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if sink.lines[1].Stream != StreamStderr {
		t.Errorf("stderr line's stream %v", sink.lines[1].Stream)
	}
}

// A message whose last piece does not come within the idle time goes as it is (Flush), and the
// follower flushes it because the splitter reports it pending.
func TestCRIPiecesWithoutTheirEndAreFlushed(t *testing.T) {
	s := NewSplitter(1<<20, LongLinesSplit, 64, 0)
	s.DecodeContainer(ContainerCRI)
	sink := &containerSink{}
	in := cri(ts1, "stdout", "P", "half")
	for rest := in; rest != ""; {
		k := copy(s.Space(), rest)
		rest = rest[k:]
		if err := s.Feed(k, sink); err != nil {
			t.Fatal(err)
		}
	}
	if len(sink.lines) != 0 || !s.Pending() {
		t.Fatalf("a piece without its end: %d lines handed over, pending %v; want 0, true", len(sink.lines), s.Pending())
	}
	if _, err := s.Flush(sink); err != nil {
		t.Fatal(err)
	}
	if got := sink.messages(); len(got) != 1 || got[0] != "half" || sink.lines[0].End != int64(len(in)) || s.Pending() {
		t.Fatalf("after Flush: %q, pending %v", got, s.Pending())
	}
}

// Random CRI streams, read in random steps: every message comes out whole or in parts that join
// back to it, in order, and every end is a piece boundary where the raw lines allow.
func TestCRIRandomStreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var input strings.Builder
		var want []string
		for range rng.IntN(20) + 1 {
			stream := []string{"stdout", "stderr"}[rng.IntN(2)]
			n := rng.IntN(4) + 1
			var msg string
			for i := range n {
				p := strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(200))
				msg += p
				tag := "P"
				if i == n-1 {
					tag = "F"
				}
				input.WriteString(cri(ts1, stream, tag, p))
			}
			want = append(want, msg)
		}
		maxLine := 64 + rng.IntN(400)
		sink, counts := decodeAll(t, input.String(), ContainerCRI, Multiline{}, maxLine, LongLinesSplit, rng.IntN(100)+1)
		var got []string
		cur := ""
		for _, l := range sink.lines {
			cur += string(l.Data)
			if l.Part == 0 || l.Parts > 0 {
				got = append(got, cur)
				cur = ""
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || counts.Malformed.Load() != 0 {
			t.Fatalf("round %d (max %d): %d messages, want %d; malformed %d", round, maxLine, len(got), len(want), counts.Malformed.Load())
		}
	}
}

var criLineRE = regexp.MustCompile(`^(\S+) (stdout|stderr) ([PF])(?::\S*)?(?: (.*))?$`)

// FuzzCRIDecode: whatever the bytes, the decoder loses none of a well-formed line's message and
// agrees with a regular expression's reading of one line.
func FuzzCRIDecode(f *testing.F) {
	f.Add(cri(ts1, "stdout", "F", "hello"))
	f.Add(ts1 + " stderr P part")
	f.Add("garbage")
	f.Add("0000-01-01T00:00:00,0Z stderr P") // a comma before the fraction: refused, kept whole
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsRune(line, '\n') {
			return
		}
		c := newContainerLines(ContainerCRI, nil, nil)
		p := c.decodeCRI([]byte(line))
		m := criLineRE.FindStringSubmatch(line)
		if p.bad {
			if m != nil {
				// time.Parse takes a comma before the fraction too; the runtimes write a dot
				// (Go's RFC3339Nano), and a line that does not is kept whole, as malformed.
				if _, err := time.Parse(time.RFC3339Nano, m[1]); err == nil && !strings.Contains(line, "  ") && !strings.Contains(m[1], ",") {
					t.Fatalf("%q: refused, but it reads as %q", line, m[1:])
				}
			}
			if string(p.data) != line {
				t.Fatalf("a malformed line must go as it is: %q became %q", line, p.data)
			}
			return
		}
		if m == nil || string(p.data) != m[4] || p.partial != (m[3] == "P") {
			t.Fatalf("%q: decoded %q partial %v; the expression reads %q", line, p.data, p.partial, m)
		}
	})
}

// DecodeContainer before JoinEvents keeps the configured long-line policy.
func TestDecodeContainerThenJoinEventsKeepsThePolicy(t *testing.T) {
	s := NewSplitter(400, LongLinesTruncate, 64, 0)
	s.DecodeContainer(ContainerCRI)
	s.JoinEvents(Multiline{Preset: MultilineJava})
	sink := &containerSink{}
	for rest := cri(ts1, "stdout", "F", strings.Repeat("x", 1000)); rest != ""; {
		k := copy(s.Space(), rest)
		rest = rest[k:]
		if err := s.Feed(k, sink); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Flush(sink); err != nil {
		t.Fatal(err)
	}
	if len(sink.lines) != 1 || !sink.lines[0].Truncated || len(sink.lines[0].Data) != 400 {
		t.Fatalf("got %d lines (first truncated %v, %d bytes): want one truncated to 400", len(sink.lines), len(sink.lines) > 0 && sink.lines[0].Truncated, len(sink.lines[0].Data))
	}
}
