package accumulator

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/metadata"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLz4, CodecZstd}

var testTP = metadata.TopicPartition{Topic: "logs", Partition: 3}

type testRecord struct {
	ts         int64
	key, value []byte
	headers    []kmsg.Header
}

// decompressForTest undoes compress with the same libraries, independently of compression.go.
func decompressForTest(codec Codec, src []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return src, nil
	case CodecGzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	case CodecSnappy:
		return s2.Decode(nil, src)
	case CodecLz4:
		return io.ReadAll(lz4.NewReader(bytes.NewReader(src)))
	case CodecZstd:
		d, err := zstd.NewReader(nil)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return d.DecodeAll(src, nil)
	}
	return nil, fmt.Errorf("codec %v", codec)
}

// decodeBatch parses an encoded v2 batch as a broker would: header, Length, CRC-32C,
// decompression, then every record.
func decodeBatch(t *testing.T, enc []byte) (kmsg.RecordBatch, []kmsg.Record) {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(enc); err != nil {
		t.Fatalf("RecordBatch.ReadFrom: %v", err)
	}
	if int(rb.Length) != len(enc)-12 {
		t.Fatalf("Length = %d, want %d", rb.Length, len(enc)-12)
	}
	if want := int32(crc32.Checksum(enc[21:], crc32.MakeTable(crc32.Castagnoli))); rb.CRC != want {
		t.Fatalf("CRC = %#x, want %#x", rb.CRC, want)
	}
	if rb.Magic != 2 || rb.PartitionLeaderEpoch != -1 || rb.FirstOffset != 0 {
		t.Fatalf("magic %d epoch %d first offset %d", rb.Magic, rb.PartitionLeaderEpoch, rb.FirstOffset)
	}
	raw, err := decompressForTest(Codec(rb.Attributes&0x7), rb.Records)
	if err != nil {
		t.Fatalf("decompress %v: %v", Codec(rb.Attributes&0x7), err)
	}
	var recs []kmsg.Record
	for len(raw) > 0 {
		var r kmsg.Record
		length, n := binary.Varint(raw)
		if n <= 0 {
			t.Fatalf("bad record length varint")
		}
		end := n + int(length)
		if err := r.ReadFrom(raw[:end]); err != nil {
			t.Fatalf("Record.ReadFrom: %v", err)
		}
		recs = append(recs, r)
		raw = raw[end:]
	}
	if len(recs) != int(rb.NumRecords) {
		t.Fatalf("decoded %d records, header says %d", len(recs), rb.NumRecords)
	}
	return rb, recs
}

func sampleRecords() []testRecord {
	big := bytes.Repeat([]byte("compressible log line "), 40)
	return []testRecord{
		{ts: 1_700_000_000_000, key: []byte("k0"), value: []byte("first")},
		{ts: 1_700_000_000_500, key: nil, value: big},
		{ts: 1_699_999_999_000, key: []byte{}, value: nil}, // earlier than the first: negative delta
		{ts: 1_700_000_003_000, key: []byte("k3"), value: []byte("v3"), headers: []kmsg.Header{
			{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
			{Key: "empty", Value: nil},
		}},
		{ts: 1_700_000_001_000, key: []byte("k4"), value: big},
	}
}

func buildBatch(t *testing.T, codec Codec, recs []testRecord, cb Callback) *ProducerBatch {
	t.Helper()
	size := 1 << 16
	for _, r := range recs {
		size += EstimateRecordSize(r.key, r.value, r.headers)
	}
	b := newBatch(testTP, make([]byte, 0, size), codec, 0, time.UnixMilli(recs[0].ts))
	for i, r := range recs {
		th := thunk{cb: cb, tag: testTag(i), keySize: -1, valueSize: -1} // sent 0: r.ts is an explicit create time
		if r.key != nil {
			th.keySize = int32(len(r.key))
		}
		if r.value != nil {
			th.valueSize = int32(len(r.value))
		}
		before := len(b.buf)
		if !b.tryAppend(r.ts, r.key, r.value, r.headers, th, nil, time.UnixMilli(r.ts)) {
			t.Fatalf("record %d did not fit", i)
		}
		// The size check must match the bytes kmsg wrote exactly, or batches overflow.
		var delta int64
		if i > 0 {
			delta = r.ts - recs[0].ts
		}
		body := recordBodySize(delta, int32(i), r.key, r.value, r.headers)
		if got, want := len(b.buf)-before, len(binary.AppendVarint(nil, int64(body)))+body; got != want {
			t.Fatalf("record %d took %d bytes, size computed %d", i, got, want)
		}
	}
	return b
}

func TestEncodedBatchDecodes(t *testing.T) {
	recs := sampleRecords()
	for _, codec := range allCodecs {
		for _, idempotent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/idempotent=%v", codec, idempotent), func(t *testing.T) {
				b := buildBatch(t, codec, recs, nil)
				if idempotent {
					b.SetProducerState(4242, 7, 100)
				}
				b.Close()
				prefix := []byte("request-so-far")
				enc := b.AppendEncoded(append([]byte(nil), prefix...))
				if !bytes.Equal(enc[:len(prefix)], prefix) {
					t.Fatal("AppendEncoded overwrote dst")
				}
				enc = enc[len(prefix):]
				if len(enc) != b.EstimatedSize() {
					t.Fatalf("encoded %d bytes, EstimatedSize %d", len(enc), b.EstimatedSize())
				}
				rb, got := decodeBatch(t, enc)

				if Codec(rb.Attributes&0x7) != codec || rb.Attributes&^0x7 != 0 {
					t.Fatalf("attributes %#x, want codec %v only", rb.Attributes, codec)
				}
				if codec != CodecNone && len(rb.Records) >= b.UncompressedSize() {
					t.Fatalf("%v: %d compressed bytes from %d", codec, len(rb.Records), b.UncompressedSize())
				}
				wantPID, wantEpoch, wantSeq := int64(-1), int16(-1), int32(-1)
				if idempotent {
					wantPID, wantEpoch, wantSeq = 4242, 7, 100
				}
				if rb.ProducerID != wantPID || rb.ProducerEpoch != wantEpoch || rb.FirstSequence != wantSeq {
					t.Fatalf("producer state %d/%d/%d, want %d/%d/%d", rb.ProducerID, rb.ProducerEpoch,
						rb.FirstSequence, wantPID, wantEpoch, wantSeq)
				}
				if rb.LastOffsetDelta != int32(len(recs)-1) || rb.FirstTimestamp != recs[0].ts || rb.MaxTimestamp != 1_700_000_003_000 {
					t.Fatalf("last offset delta %d first ts %d max ts %d", rb.LastOffsetDelta, rb.FirstTimestamp, rb.MaxTimestamp)
				}
				for i, r := range got {
					w := recs[i]
					if r.OffsetDelta != int32(i) || rb.FirstTimestamp+r.TimestampDelta64 != w.ts || r.Attributes != 0 {
						t.Fatalf("record %d: offset delta %d ts %d attrs %d", i, r.OffsetDelta, rb.FirstTimestamp+r.TimestampDelta64, r.Attributes)
					}
					if !sameBytes(r.Key, w.key) || !sameBytes(r.Value, w.value) {
						t.Fatalf("record %d: key %q value %.20q, want %q %.20q", i, r.Key, r.Value, w.key, w.value)
					}
					if len(r.Headers) != len(w.headers) {
						t.Fatalf("record %d: %d headers, want %d", i, len(r.Headers), len(w.headers))
					}
					for j, h := range r.Headers {
						if h.Key != w.headers[j].Key || !sameBytes(h.Value, w.headers[j].Value) {
							t.Fatalf("record %d header %d: %q=%q", i, j, h.Key, h.Value)
						}
					}
				}

				// Encoding again (a retry) gives the same bytes; a new producer state changes
				// only the header.
				if again := b.AppendEncoded(nil); !bytes.Equal(again, enc) {
					t.Fatal("second AppendEncoded differs")
				}
				b.SetProducerState(4243, 0, 0)
				rb2, got2 := decodeBatch(t, b.AppendEncoded(nil))
				if rb2.ProducerID != 4243 || rb2.ProducerEpoch != 0 || rb2.FirstSequence != 0 || len(got2) != len(recs) {
					t.Fatalf("after reset: %d/%d/%d with %d records", rb2.ProducerID, rb2.ProducerEpoch, rb2.FirstSequence, len(got2))
				}
			})
		}
	}
}

// sameBytes distinguishes nil (a null key or value on the wire) from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

type callRecord struct {
	md  RecordMetadata
	err error
}

func recordingCallback(calls *[]callRecord) Callback {
	return func(md RecordMetadata, err error) { *calls = append(*calls, callRecord{md, err}) }
}

// testTag is the tag buildBatch gives record i.
func testTag(i int) int64 { return 1000 + int64(i) }

func TestBatchCompletion(t *testing.T) {
	errBroker := errors.New("broker said no")
	errRecord := errors.New("record 1 invalid")
	recs := sampleRecords()[:3]
	tests := []struct {
		name     string
		complete func(b *ProducerBatch) bool
		check    func(t *testing.T, i int, c callRecord)
	}{
		{"success with create time", func(b *ProducerBatch) bool { return b.Complete(500, -1) }, func(t *testing.T, i int, c callRecord) {
			if c.err != nil || c.md.Offset != 500+int64(i) || c.md.Timestamp.UnixMilli() != recs[i].ts {
				t.Errorf("record %d: %+v", i, c)
			}
			if c.md.Topic != testTP.Topic || c.md.Partition != testTP.Partition {
				t.Errorf("record %d: partition %s-%d", i, c.md.Topic, c.md.Partition)
			}
			if wantKey := len(recs[i].key); (recs[i].key == nil && c.md.SerializedKeySize != -1) || (recs[i].key != nil && c.md.SerializedKeySize != wantKey) {
				t.Errorf("record %d: key size %d", i, c.md.SerializedKeySize)
			}
		}},
		{"success with log append time", func(b *ProducerBatch) bool { return b.Complete(0, 1_800_000_000_000) }, func(t *testing.T, i int, c callRecord) {
			if c.err != nil || c.md.Offset != int64(i) || c.md.Timestamp.UnixMilli() != 1_800_000_000_000 {
				t.Errorf("record %d: %+v", i, c)
			}
		}},
		{"success without offset (acks=0)", func(b *ProducerBatch) bool { return b.Complete(-1, -1) }, func(t *testing.T, i int, c callRecord) {
			if c.err != nil || c.md.Offset != -1 {
				t.Errorf("record %d: %+v", i, c)
			}
		}},
		{"failure with record errors", func(b *ProducerBatch) bool {
			return b.CompleteExceptionally(errBroker, map[int]error{1: errRecord})
		}, func(t *testing.T, i int, c callRecord) {
			want := errBroker
			if i == 1 {
				want = errRecord
			}
			if c.err != want || c.md.Offset != -1 || c.md.Partition != testTP.Partition {
				t.Errorf("record %d: %+v, want err %v", i, c, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []callRecord
			b := buildBatch(t, CodecNone, recs, recordingCallback(&calls))
			if !tt.complete(b) {
				t.Fatal("first completion returned false")
			}
			if len(calls) != len(recs) {
				t.Fatalf("%d callbacks, want %d", len(calls), len(recs))
			}
			for i, c := range calls {
				tt.check(t, i, c)
				// Success or failure, a callback gets its record's tag and sizes.
				wantValue := len(recs[i].value)
				if recs[i].value == nil {
					wantValue = -1
				}
				if c.md.Tag != testTag(i) || c.md.SerializedValueSize != wantValue {
					t.Errorf("record %d: tag %d value size %d, want %d and %d", i, c.md.Tag, c.md.SerializedValueSize, testTag(i), wantValue)
				}
			}
			// Every later attempt, of either kind, is refused and runs nothing.
			if b.Complete(9, -1) || b.CompleteExceptionally(errBroker, nil) {
				t.Fatal("second completion returned true")
			}
			if len(calls) != len(recs) || !b.IsDone() {
				t.Fatalf("%d callbacks after second completion", len(calls))
			}
		})
	}
}

func TestBatchFullness(t *testing.T) {
	value := bytes.Repeat([]byte("x"), 100)
	// Deltas stay one byte each, so every record has the same size (TestEncodedBatchDecodes
	// checks that these computed sizes are what kmsg writes).
	body := recordBodySize(0, 0, []byte("kk"), value, nil)
	recSize := len(binary.AppendVarint(nil, int64(body))) + body
	if recSize != 111 {
		t.Fatalf("record size %d, want 111 (2-byte zigzag varints for 100 and 109)", recSize)
	}
	tests := []struct {
		name      string
		limit     int
		wantCount int
	}{
		{"exact fit", recordBatchOverhead + 3*recSize, 3},
		{"one byte short", recordBatchOverhead + 3*recSize - 1, 2},
		{"first record always fits", 10, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBatch(testTP, make([]byte, 0, max(tt.limit, 200)), CodecNone, 0, time.Unix(0, 0))
			b.writeLimit = tt.limit
			n := 0
			for b.tryAppend(0, []byte("kk"), value, nil, thunk{}, nil, time.Unix(0, 0)) {
				n++
				if n > 10 {
					t.Fatal("no limit")
				}
			}
			if n != tt.wantCount {
				t.Fatalf("%d records fit, want %d", n, tt.wantCount)
			}
		})
	}
}

func TestParseCodec(t *testing.T) {
	for _, c := range allCodecs {
		got, err := ParseCodec(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCodec(%q) = %v, %v", c.String(), got, err)
		}
	}
	for _, bad := range []string{"", "GZIP", "brotli"} {
		if _, err := ParseCodec(bad); err == nil {
			t.Errorf("ParseCodec(%q) accepted", bad)
		}
	}
}

// BenchmarkCloseAndEncode measures what the sender pays per batch: compressing a full batch
// of 100-byte log lines (batch.size 16384) and encoding it into a request buffer, per codec.
func BenchmarkCloseAndEncode(b *testing.B) {
	const batchSize = 16384
	value := []byte(`2024-05-01T12:00:00.000Z INFO  request served method=GET path=/api/v1/items status=200 ms=1`)
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			batch := newBatch(testTP, make([]byte, 0, batchSize), codec, 0, time.Unix(0, 0))
			for batch.tryAppend(1_700_000_000_000, nil, value, nil, thunk{}, nil, time.Unix(0, 0)) {
			}
			dst := make([]byte, 0, 2*batchSize)
			b.SetBytes(int64(batch.UncompressedSize()))
			b.ReportAllocs()
			for b.Loop() {
				batch.drainClosed = false // reopen, so every iteration compresses
				batch.compressed.Store(false)
				if batch.out != nil {
					outputPool.Put(batch.out)
					batch.out = nil
				}
				batch.Close()
				dst = batch.AppendEncoded(dst[:0])
			}
			b.ReportMetric(float64(len(dst)), "bytes/batch")
			b.ReportMetric(float64(batch.RecordCount()), "records/batch")
		})
	}
}

// FuzzBatchRoundTrip encodes arbitrary records with every codec and decodes them back: the exact
// size computation, negative and large timestamp deltas, nil against empty fields and the
// split path must all survive.
func FuzzBatchRoundTrip(f *testing.F) {
	f.Add([]byte("k"), []byte("v"), "h", []byte("hv"), int64(1_700_000_000_000), int64(-5), uint8(0), uint8(3))
	f.Add([]byte(nil), bytes.Repeat([]byte("x"), 300), "", []byte(nil), int64(0), int64(1<<40), uint8(4), uint8(0))
	f.Fuzz(func(t *testing.T, key, val []byte, hkey string, hval []byte, ts, delta int64, codecByte, nilMask uint8) {
		codec := allCodecs[int(codecByte)%len(allCodecs)]
		if nilMask&1 != 0 {
			key = nil
		}
		if nilMask&2 != 0 {
			val = nil
		}
		var headers []kmsg.Header
		if nilMask&4 == 0 {
			headers = []kmsg.Header{{Key: hkey, Value: hval}}
		}
		recs := []testRecord{
			{ts: ts, key: key, value: val, headers: headers},
			{ts: ts + delta, key: val, value: key},
			{ts: ts - delta, key: key, value: val, headers: headers},
		}
		b := buildBatch(t, codec, recs, nil)
		b.SetProducerState(1, 1, 0)
		_, got := decodeBatch(t, b.AppendEncoded(nil))
		for i, r := range got {
			if !sameBytes(r.Key, recs[i].key) || !sameBytes(r.Value, recs[i].value) || len(r.Headers) != len(recs[i].headers) {
				t.Fatalf("record %d differs after the round trip", i)
			}
		}
		parts := b.split(recordBatchOverhead + 1)
		n := 0
		for _, p := range parts {
			_, got := decodeBatch(t, p.AppendEncoded(nil))
			for _, r := range got {
				if !sameBytes(r.Value, recs[n].value) {
					t.Fatalf("split record %d differs", n)
				}
				n++
			}
		}
		if n != len(recs) {
			t.Fatalf("split kept %d of %d records", n, len(recs))
		}
	})
}

// testTrace records what the batch told a sampled record.
type testTrace struct {
	done     []RecordMetadata
	appended time.Time
}

func (tt *testTrace) RecordDone(_ *ProducerBatch, md RecordMetadata, _ error, _, _ time.Time) {
	tt.done = append(tt.done, md)
}
func (tt *testTrace) Appended(_ *ProducerBatch, at time.Time) { tt.appended = at }

// TestBatchSideData: what only some records have (a trace, a create time that is not the Send
// time, an append time) is kept beside the thunks by index, and reaches the right record at
// completion, after a split too.
func TestBatchSideData(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			sent := time.UnixMilli(1_700_000_000_000).Add(123 * time.Microsecond)
			b := newBatch(testTP, make([]byte, 0, 1<<16), CodecNone, 0, sent)
			b.keepAttempts = true
			traces := map[int]*testTrace{2: {}, 5: {}}
			var got []RecordMetadata
			for i := range 8 {
				ts := sentMilli(sent.UnixNano())
				if i == 4 {
					ts -= 60_000 // the record's own create time, a minute before Send
				}
				var trace RecordTrace
				if tt := traces[i]; tt != nil {
					trace = tt
				}
				th := thunk{cb: func(md RecordMetadata, err error) { got = append(got, md) }, sent: sent.UnixNano(), keySize: -1, valueSize: int32(i)}
				if !b.tryAppend(ts, nil, make([]byte, i), nil, th, trace, sent) {
					t.Fatalf("record %d did not fit", i)
				}
				b.appendedAt[i] = sent.UnixNano() + int64(i)
			}
			batches := []*ProducerBatch{b}
			if split {
				b.Close()
				batches = b.split(recordBatchOverhead + len(b.buf)/3)
				if len(batches) < 2 {
					t.Fatalf("split into %d batches", len(batches))
				}
			}
			var timings []RecordTiming
			for _, nb := range batches {
				for _, rt := range nb.Records() {
					timings = append(timings, rt)
				}
				nb.Complete(int64(100*len(timings)), -1)
			}
			if len(got) != 8 {
				t.Fatalf("%d callbacks, want 8", len(got))
			}
			for i, md := range got {
				want := sent.Truncate(time.Millisecond)
				if i == 4 {
					want = want.Add(-time.Minute)
				}
				if !md.Timestamp.Equal(want) || md.SerializedValueSize != i {
					t.Errorf("record %d: timestamp %v value size %d, want %v and %d", i, md.Timestamp, md.SerializedValueSize, want, i)
				}
				if tt := traces[i]; tt != nil && (len(tt.done) != 1 || tt.done[0].SerializedValueSize != i) {
					t.Errorf("record %d: its trace saw %+v, want its own completion once", i, tt.done)
				}
				if traced := traces[i] != nil; timings[i].Traced != traced || timings[i].Appended.UnixNano() != sent.UnixNano()+int64(i) {
					t.Errorf("record %d: timing %+v, want traced=%v appended +%d ns", i, timings[i], traced, i)
				}
			}
		})
	}
}

// TestCompressionLevels: each codec's level (KIP-390's compression.<codec>.level) changes what
// the encoder writes, and every level's output decompresses to the input. The fastest level
// writes more than the strongest on compressible log lines (gzip, lz4); lz4's default (9) is the
// fast compressor, its other levels LZ4 HC.
func TestCompressionLevels(t *testing.T) {
	var src bytes.Buffer
	for i := range 4000 {
		fmt.Fprintf(&src, "2026-12-07T17:%02d:%02d.%03dZ INFO request served path=/api/v1/items/%d status=200 took=%dms\n",
			i/3600%60, i/60%60, i%1000, i*7919%100000, i%97)
	}
	for _, tc := range []struct {
		codec        Codec
		fast, strong int32
	}{
		{CodecGzip, GzipMinLevel, GzipMaxLevel},
		{CodecLz4, Lz4DefaultLevel, 1},
		{CodecLz4, Lz4DefaultLevel, Lz4MaxLevel},
		{CodecZstd, -5, 19},
	} {
		sizes := map[int32]int{}
		for _, level := range []int32{0, tc.fast, tc.strong} {
			out, err := compress(tc.codec, level, new(sliceWriter), src.Bytes())
			if err != nil {
				t.Fatalf("%v level %d: %v", tc.codec, level, err)
			}
			back, err := decompressForTest(tc.codec, out)
			if err != nil || !bytes.Equal(back, src.Bytes()) {
				t.Fatalf("%v level %d: does not decompress to its input (%v)", tc.codec, level, err)
			}
			sizes[level] = len(out)
		}
		// zstd's speeds (klauspost/compress) do not order by size on every input: that the
		// level reached the encoder shows as a different output.
		if sizes[tc.strong] == sizes[tc.fast] || (tc.codec != CodecZstd && sizes[tc.strong] > sizes[tc.fast]) {
			t.Errorf("%v: level %d wrote %d bytes, level %d %d: want the stronger level smaller", tc.codec, tc.strong, sizes[tc.strong], tc.fast, sizes[tc.fast])
		}
		t.Logf("%v: %d bytes in; by level %v", tc.codec, src.Len(), sizes)
	}
	for _, bad := range []struct {
		codec Codec
		level int
	}{{CodecGzip, 0}, {CodecGzip, 10}, {CodecLz4, 0}, {CodecLz4, 18}, {CodecZstd, 23}, {CodecZstd, -131073}} {
		if CheckLevel(bad.codec, bad.level) == nil {
			t.Errorf("CheckLevel(%v, %d) accepted a level the Java client refuses", bad.codec, bad.level)
		}
	}
}
