package agent

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkatrail/kafkatrail/filetail"
)

// TestPendingDeadLetters: dead-letter-pending.json is written whole (sorted, readable back),
// an entry the committed positions passed is dropped at load and after a commit, so is the
// entry of a file the commit released, and the file is removed once no entry is left.
func TestPendingDeadLetters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, PendingDeadLetterFileName)
	log := slog.New(slog.DiscardHandler)
	fa, fb := filetail.FileKey{Dev: 1, Inode: 10}, filetail.FileKey{Dev: 1, Inode: 20}
	p := loadPendingDeadLetters(dir, nil, log, false)
	if _, ok := p.lookup(fa, 100); ok {
		t.Fatal("an empty list found a line")
	}
	p.add(pendingDeadLetter{Dev: 1, Inode: 20, Path: "/b.log", End: 200, Reason: DeadLetterTooLarge, Error: "MESSAGE_TOO_LARGE", Code: kerr.MessageTooLarge.Code, Message: "m"})
	p.add(pendingDeadLetter{Dev: 1, Inode: 10, Path: "/a.log", End: 100, Reason: DeadLetterInvalidRecord, Error: "INVALID_RECORD", Code: kerr.InvalidRecord.Code, Message: "i"})
	p.add(pendingDeadLetter{Dev: 1, Inode: 10, Path: "/a.log", End: 300, Reason: DeadLetterTooLarge, Error: "MESSAGE_TOO_LARGE", Code: kerr.MessageTooLarge.Code, Message: "m", ToFile: true})
	if e, ok := p.lookup(fa, 100); !ok || e.Reason != DeadLetterInvalidRecord {
		t.Fatalf("lookup after add: %+v %v", e, ok)
	}
	if err := p.save(); err != nil {
		t.Fatal(err)
	}
	entries := readPending(t, dir)
	if len(entries) != 3 || entries[0].End != 100 || entries[1].End != 300 || entries[2].End != 200 {
		t.Fatalf("saved %+v, want /a.log 100, 300, /b.log 200", entries)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(matches) != 0 {
		t.Fatalf("temporary files left: %v", matches)
	}

	// A restart whose committed positions passed /a.log's first line drops it.
	committed := map[filetail.FileKey]filetail.Checkpoint{fa: {Dev: 1, Inode: 10, Offset: 100}, fb: {Dev: 1, Inode: 20, Offset: 150}}
	p = loadPendingDeadLetters(dir, committed, log, false)
	if _, ok := p.lookup(fa, 100); ok {
		t.Error("an entry the committed position passed was loaded")
	}
	e, ok := p.lookup(fa, 300)
	if !ok || !e.ToFile {
		t.Fatalf("lookup(/a.log, 300) = %+v %v", e, ok)
	}
	if err := e.refusal(); !err.toFile || err.Error() != "m" || errorName(err) != "MESSAGE_TOO_LARGE" {
		t.Errorf("refusal %+v: name %q", err, errorName(err))
	}
	if f, reason := classify(e.refusal(), false); f != fateDeadLetter || reason != DeadLetterTooLarge {
		t.Errorf("classify(kept refusal) = %d %q", f, reason)
	}

	// A commit passes /a.log's line; /b.log was released.
	p.passed(map[filetail.FileKey]filetail.Checkpoint{fa: {Dev: 1, Inode: 10, Offset: 300}}, committed)
	if _, ok := p.lookup(fb, 200); ok {
		t.Error("the entry of a released file was kept")
	}
	if err := p.save(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the list is still there with no entry left: %v", err)
	}
}

// TestPendingDeadLettersUnreadable: a list that cannot be parsed is taken as empty (its lines
// are refused again and named again) and replaced at the next save.
func TestPendingDeadLettersUnreadable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, PendingDeadLetterFileName)
	for _, content := range []string{"{not json", `{"version":9,"entries":[]}`} {
		if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		var logged strings.Builder
		p := loadPendingDeadLetters(dir, nil, slog.New(slog.NewTextHandler(&logged, nil)), false)
		if p.view.Load() != nil || !strings.Contains(logged.String(), "cannot read") {
			t.Fatalf("%q: entries %v, log %q", content, p.view.Load(), logged.String())
		}
		if err := p.save(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%q: not replaced at the save: %v", content, err)
		}
	}
}

// TestExactlyOnceDeadLetterTopicRefusalGoesToTheFile: the broker refuses a line (the
// transaction aborts, the line is pending), then the dead-letter topic refuses its dead letter
// too (the next round aborts, the line is pending for the dead-letter file), and the round
// after writes it to the dead-letter file and gets past it, all in one run: the lines around it
// arrive once at read_committed, the dead-letter topic holds nothing committed.
func TestExactlyOnceDeadLetterTopicRefusalGoesToTheFile(t *testing.T) {
	small := "3000"
	c := eosCluster(t, map[string]map[string]*string{"logs": {"max.message.bytes": &small}, "dlq": {"max.message.bytes": &small}})
	long := strings.Repeat("L", 4000)
	data := "a\n" + long + "\n" + "b\n"
	stateDir := t.TempDir()
	cfg := eosConfig(c, "logs", writeTemp(t, "app.log", []byte(data)), stateDir)
	cfg.DeadLetterTopic = "dlq"
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntilCommitted(t, a, int64(len(data))); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("run: %v, want a normal stop", err)
	}
	letters := readDeadLetters(t, stateDir)
	if len(letters) != 1 || *letters[0].Value != long || letters[0].Error != "MESSAGE_TOO_LARGE" || letters[0].Topic != "logs" {
		t.Fatalf("dead-letter file %+v, want the long line", letters)
	}
	if got := valueCounts(topicRecords(t, c, "logs", true)); len(got) != 2 || got["a"] != 1 || got["b"] != 1 {
		t.Errorf("logs at read_committed: %v, want a and b once", got)
	}
	if got := topicRecords(t, c, "dlq", true); len(got) != 0 {
		t.Errorf("dlq at read_committed: %d records, want none", len(got))
	}
	if got, want := a.Delivery().DeadLettered, []DeadLetterCount{{DeadLetterTooLarge, DeadLetterToFile, 1}}; len(got) != 1 || got[0] != want[0] {
		t.Errorf("dead letters %+v, want %+v", got, want)
	}
	if p := readPending(t, stateDir); p != nil {
		t.Errorf("pending after the run: %+v, want none", p)
	}
}

// TestExactlyOncePendingLineIsKeptNotSent: a start whose dead-letter-pending.json names a line
// (file identity, end offset, value size) dead-letters that line in its transaction instead of
// sending it, with the kept reason and error; an entry whose value size the line read again
// does not have (the file was rewritten) names another line, which is sent as usual.
func TestExactlyOncePendingLineIsKeptNotSent(t *testing.T) {
	c := eosCluster(t, map[string]map[string]*string{"logs": nil, "dlq": nil})
	data := "one\ntwo\nthree\n"
	path := writeTemp(t, "app.log", []byte(data))
	stateDir := t.TempDir()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	p := loadPendingDeadLetters(stateDir, nil, slog.New(slog.DiscardHandler), false)
	p.add(pendingDeadLetter{Dev: uint64(st.Dev), Inode: st.Ino, Path: path, End: 8, Topic: "logs", ValueBytes: 3,
		Reason: DeadLetterInvalidRecord, Error: "INVALID_RECORD", Code: kerr.InvalidRecord.Code, Message: "INVALID_RECORD: kept"})
	p.add(pendingDeadLetter{Dev: uint64(st.Dev), Inode: st.Ino, Path: path, End: 14, Topic: "logs", ValueBytes: 99,
		Reason: DeadLetterTooLarge, Error: "MESSAGE_TOO_LARGE", Code: kerr.MessageTooLarge.Code, Message: "another line"})
	if err := p.save(); err != nil {
		t.Fatal(err)
	}
	cfg := eosConfig(c, "logs", path, stateDir)
	cfg.DeadLetterTopic = "dlq"
	a, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntilCommitted(t, a, int64(len(data))); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("RunTail: %v, want a normal stop", err)
	}
	if got := valueCounts(topicRecords(t, c, "logs", true)); len(got) != 2 || got["one"] != 1 || got["three"] != 1 {
		t.Errorf("logs at read_committed: %v, want one and three once", got)
	}
	dlq := topicRecords(t, c, "dlq", true)
	if len(dlq) != 1 || string(dlq[0].Value) != "two" {
		t.Fatalf("dlq at read_committed: %d records, want two once", len(dlq))
	}
	if h := headerMap(dlq[0]); h[HeaderDeadLetterReason] != DeadLetterInvalidRecord || h[HeaderDeadLetterError] != "INVALID_RECORD" ||
		h[HeaderDeadLetterMessage] != "INVALID_RECORD: kept" || h[HeaderDeadLetterOffset] != "8" {
		t.Errorf("dead letter's headers %v", h)
	}
	if got := a.Delivery().DeadLettered; len(got) != 1 || got[0] != (DeadLetterCount{DeadLetterInvalidRecord, DeadLetterToTopic, 1}) {
		t.Errorf("dead letters %+v", got)
	}
	if p := readPending(t, stateDir); p != nil {
		t.Errorf("pending after the run: %+v, want none (the commit passed both lines)", p)
	}
}
