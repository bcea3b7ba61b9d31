package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kafkatrail/kafkatrail/producer"
)

// Dead-letter destinations: the destination label of kafkatrail.agent.lines.dead_lettered.
const (
	DeadLetterToTopic = "topic"
	DeadLetterToFile  = "file"
)

// DeadLetterFileName is the local dead-letter file in the state directory.
const DeadLetterFileName = "dead-letters.jsonl"

// Headers a dead letter carries in the dead-letter topic, beside the line's own key and headers.
const (
	HeaderDeadLetterReason  = "kafkatrail.dead_letter.reason"  // too_large, invalid_record, ...
	HeaderDeadLetterError   = "kafkatrail.dead_letter.error"   // the Kafka error's name: MESSAGE_TOO_LARGE
	HeaderDeadLetterMessage = "kafkatrail.dead_letter.message" // the whole error, as the log says it
	HeaderDeadLetterTopic   = "kafkatrail.dead_letter.topic"   // the topic that refused it ("" when unroutable)
	HeaderDeadLetterSource  = "kafkatrail.dead_letter.source"  // the file's path, or stdin
	HeaderDeadLetterOffset  = "kafkatrail.dead_letter.offset"  // a file line's end: the byte offset after it
	HeaderDeadLetterTime    = "kafkatrail.dead_letter.time"    // when it was dead-lettered, RFC 3339
)

// sendDeadLetter sends l to the dead-letter topic. If that topic refuses it too (a line too
// large for any topic), or cannot take it, it goes to the local file.
func (r *redelivery) sendDeadLetter(ctx context.Context, l *redoLine) {
	headers := make([]producer.Header, 0, len(l.headers)+7)
	headers = append(headers, l.headers...)
	headers = append(headers,
		producer.Header{Key: HeaderDeadLetterReason, Value: []byte(l.reason)},
		producer.Header{Key: HeaderDeadLetterError, Value: []byte(errorName(l.err))},
		producer.Header{Key: HeaderDeadLetterMessage, Value: []byte(l.err.Error())},
		producer.Header{Key: HeaderDeadLetterTopic, Value: []byte(l.topic)},
		producer.Header{Key: HeaderDeadLetterSource, Value: []byte(sourceName(l.src))},
		producer.Header{Key: HeaderDeadLetterTime, Value: []byte(time.Now().UTC().Format(time.RFC3339Nano))},
	)
	if l.src.file != nil {
		headers = append(headers, producer.Header{Key: HeaderDeadLetterOffset, Value: []byte(strconv.FormatInt(l.end, 10))})
	}
	topic := l.src.in.cfg.DeadLetterTopic
	rec := &producer.Record{Topic: topic, Partition: producer.PartitionAny, Key: l.key, Value: l.value,
		Headers: headers, Timestamp: l.ts, Tag: l.end}
	r.release(l.src)
	r.a.sendRecord(ctx, rec, func(_ producer.RecordMetadata, err error) {
		switch {
		case err == nil:
			r.deadLettered(l, DeadLetterToTopic, "topic "+topic)
		case notBuffered(err):
		default:
			if f, _ := classify(err, false); f == fateGivenUp {
				r.giveUp(l, l.err)
				return
			}
			if r.a.deadLetterRefusedInTransaction(l, err) {
				return // --exactly-once: its transaction aborts (poison.go)
			}
			r.a.log.Warn("the dead-letter topic did not take a line: it goes to the dead-letter file",
				"source", sourceName(l.src), "offset", l.end, "dead_letter_topic", topic, "error", err,
				"file", r.dlf.path)
			l.local = true
			r.enqueue(l, time.Now())
		}
	})
}

// writeDeadLetter appends l to the local dead-letter file. A file that is full or cannot be
// written stops sending (nothing is dropped) until it takes lines again. A line of stdin, which
// cannot be read again and must not hold the pipe, fails at once instead (exit status 1).
func (r *redelivery) writeDeadLetter(l *redoLine) {
	l.local = true
	r.release(l.src)
	if err := r.dlf.write(deadLetterEntry(l)); err != nil {
		if l.src.file == nil {
			r.giveUp(l, fmt.Errorf("refused (%w), and the dead-letter file cannot keep it: %w", l.err, err))
			return
		}
		l.attempts++
		r.stopFor(l.src.in, fmt.Errorf("cannot keep a dead letter: %w", err), time.Now())
		r.enqueue(l, time.Now().Add(r.backoff(l)))
		return
	}
	r.deadLettered(l, DeadLetterToFile, r.dlf.path)
}

// deadLetterRecord is one line of the dead-letter file.
type deadLetterRecord struct {
	Time        string           `json:"time"`
	Reason      string           `json:"reason"`
	Error       string           `json:"error"`
	Message     string           `json:"message"`
	Topic       string           `json:"topic"`
	Source      string           `json:"source"`
	Offset      *int64           `json:"offset,omitempty"`
	Timestamp   string           `json:"timestamp,omitempty"`
	Key         *string          `json:"key,omitempty"`
	KeyBase64   []byte           `json:"key_base64,omitempty"`
	Headers     []deadLetterPair `json:"headers,omitempty"`
	Value       *string          `json:"value,omitempty"`
	ValueBase64 []byte           `json:"value_base64,omitempty"`
}

type deadLetterPair struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 []byte  `json:"value_base64,omitempty"`
}

// deadLetterEntry is l as one JSON line: text where the bytes are UTF-8, else base64.
func deadLetterEntry(l *redoLine) []byte {
	e := deadLetterRecord{
		Time: time.Now().UTC().Format(time.RFC3339Nano), Reason: l.reason, Error: errorName(l.err),
		Message: l.err.Error(), Topic: l.topic, Source: sourceName(l.src),
	}
	if l.src.file != nil {
		e.Offset = &l.end
	}
	if !l.ts.IsZero() {
		e.Timestamp = l.ts.UTC().Format(time.RFC3339Nano)
	}
	e.Key, e.KeyBase64 = textOrBase64(l.key)
	e.Value, e.ValueBase64 = textOrBase64(l.value)
	if e.Value == nil && e.ValueBase64 == nil {
		empty := ""
		e.Value = &empty
	}
	for _, h := range l.headers {
		p := deadLetterPair{Key: h.Key}
		p.Value, p.ValueBase64 = textOrBase64(h.Value)
		e.Headers = append(e.Headers, p)
	}
	b, err := json.Marshal(e)
	if err != nil { // only strings and bytes: cannot fail
		panic(fmt.Sprintf("agent: encoding a dead letter: %v", err))
	}
	return append(b, '\n')
}

func textOrBase64(b []byte) (*string, []byte) {
	switch {
	case b == nil:
		return nil, nil
	case utf8.Valid(b):
		s := string(b)
		return &s, nil
	default:
		return nil, b // encoding/json writes []byte as base64
	}
}

// deadLetterFile is the local dead-letter file: JSON lines appended, each written and synced
// (and the directory, when the write created the file) before its line's checkpoint may pass
// it. It holds at most max bytes: once full it refuses lines (sending stops, nothing is
// dropped) until it is moved away or emptied, and a new one is started at its name; an entry
// larger than max is refused even by an empty file.
type deadLetterFile struct {
	path string
	max  int64
	log  *slog.Logger
	mu   sync.Mutex
}

func newDeadLetterFile(stateDir string, max int64, log *slog.Logger) *deadLetterFile {
	return &deadLetterFile{path: filepath.Join(stateDir, DeadLetterFileName), max: max, log: log}
}

// write appends entry, synced. A write that failed part of the way (a full disk) or a crash
// during one leaves a torn entry at the end, which would make the entry after it unreadable
// too: the end is made whole first, cut back to the last whole line. That loses nothing: a
// torn entry's line was never counted as kept (its write failed, or its checkpoint did not pass
// it), and is written again.
func (d *deadLetterFile) write(entry []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if int64(len(entry)) > d.max {
		return fmt.Errorf("%s: a dead letter of %d bytes: %w", d.path, len(entry), errDeadLetterTooLarge)
	}
	if err := os.MkdirAll(filepath.Dir(d.path), 0o750); err != nil {
		return err
	}
	_, statErr := os.Lstat(d.path)
	created := errors.Is(statErr, fs.ErrNotExist)
	f, err := os.OpenFile(d.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	size, err := d.wholeEnd(f)
	if err == nil && size > 0 && size+int64(len(entry)) > d.max {
		err = fmt.Errorf("%s: %w", d.path, errDeadLetterFull)
	}
	if err == nil {
		if _, err = f.Write(entry); err != nil {
			_ = f.Truncate(size) // the torn entry, cut now if the disk lets us (else at the next write)
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && created {
		err = syncDirFunc(filepath.Dir(d.path)) // the file's name survives a power loss too
	}
	return err
}

// syncDirFunc is syncDir; tests count its calls.
var syncDirFunc = syncDir

// repair makes the end of an existing dead-letter file whole (see write): at start, after a
// crash during a write.
func (d *deadLetterFile) repair() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, err := os.OpenFile(d.path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = d.wholeEnd(f)
	return err
}

// wholeEnd returns the size of f once it ends with a whole entry: anything after its last
// newline is cut off (and synced).
func (d *deadLetterFile) wholeEnd(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	if size == 0 {
		return 0, nil
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return 0, err
	}
	if last[0] == '\n' {
		return size, nil // whole: the usual case, at the cost of one byte read
	}
	buf := make([]byte, 64<<10)
	end := size
	for end > 0 {
		n := min(int64(len(buf)), end)
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			end = end - n + int64(i) + 1
			break
		}
		end -= n
	}
	if end == size {
		return size, nil
	}
	if err := f.Truncate(end); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	if d.log != nil {
		d.log.Warn("dead-letter file: a torn entry at its end (a write that failed, or a crash during one) was cut off; its line is written again",
			"file", d.path, "bytes_cut", size-end)
	}
	return end, nil
}
