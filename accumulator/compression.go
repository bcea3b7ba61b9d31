package accumulator

import (
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a record batch compression codec. Its value is the one Kafka stores in bits 0-2 of a
// v2 record batch's attributes, so it can be written into the header as is.
type Codec int8

// The codecs Kafka defines, with their attribute values.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLz4    Codec = 3
	CodecZstd   Codec = 4
)

// ParseCodec maps a compression.type value ("none", "gzip", "snappy", "lz4", "zstd") to its
// Codec. Like the Java client's config validator it is case-sensitive.
func ParseCodec(name string) (Codec, error) {
	switch name {
	case "none":
		return CodecNone, nil
	case "gzip":
		return CodecGzip, nil
	case "snappy":
		return CodecSnappy, nil
	case "lz4":
		return CodecLz4, nil
	case "zstd":
		return CodecZstd, nil
	}
	return CodecNone, fmt.Errorf("compression.type: unknown codec %q (want none, gzip, snappy, lz4 or zstd)", name)
}

// String returns the codec's compression.type name.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLz4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// sliceWriter is an io.Writer appending to a byte slice. A closed batch keeps one for its
// compressed records until the batch is deallocated, then it goes back to outputPool, so a
// producer in steady state compresses into memory it already owns.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

var outputPool = sync.Pool{New: func() any { return new(sliceWriter) }}

// Encoders are pooled rather than built per batch: a gzip or zstd encoder carries hundreds of
// kilobytes of tables, and building one per batch would dominate the cost of closing it.
var (
	gzipPool = sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
		return w
	}}
	// The Java client writes lz4 frames with 64 KiB independent blocks and no checksums
	// (KafkaLZ4BlockOutputStream); we match it so a broker decompressing our batches needs no
	// more than a 64 KiB block buffer, instead of the 4 MiB pierrec/lz4 defaults to.
	lz4Pool = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false), lz4.BlockChecksumOption(false))
		return w
	}}
	// zstd: EncodeAll only, so one goroutine-free encoder per concurrent Close; a 64 KiB window
	// (as franz-go uses) bounds the broker's decoder memory, and zero frames keep empty input valid.
	zstdPool = sync.Pool{New: func() any {
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(64<<10),
			zstd.WithZeroFrames(true))
		if err != nil {
			panic(fmt.Sprintf("accumulator: zstd encoder options rejected: %v", err))
		}
		return enc
	}}
)

// compress writes src compressed with codec into w (reset first) and returns the compressed
// bytes, which alias w.b. Snappy is the raw block format: the Java broker's xerial
// SnappyInputStream reads a raw block when the xerial header is absent, as franz-go relies on.
func compress(codec Codec, w *sliceWriter, src []byte) ([]byte, error) {
	w.b = w.b[:0]
	switch codec {
	case CodecGzip:
		if err := compressStream[*gzip.Writer](&gzipPool, "gzip", w, src); err != nil {
			return nil, err
		}
	case CodecSnappy:
		n := s2.MaxEncodedLen(len(src))
		if n < 0 {
			return nil, fmt.Errorf("accumulator: snappy: %d bytes is too large to compress", len(src))
		}
		if cap(w.b) < n {
			w.b = make([]byte, 0, n)
		}
		w.b = s2.EncodeSnappy(w.b[:n], src)
	case CodecLz4:
		if err := compressStream[*lz4.Writer](&lz4Pool, "lz4", w, src); err != nil {
			return nil, err
		}
	case CodecZstd:
		enc := zstdPool.Get().(*zstd.Encoder)
		defer zstdPool.Put(enc)
		w.b = enc.EncodeAll(src, w.b)
	default:
		return nil, fmt.Errorf("accumulator: cannot compress with %v", codec)
	}
	return w.b, nil
}

// streamEncoder is a pooled streaming encoder: gzip's and lz4's writers.
type streamEncoder interface {
	io.WriteCloser
	Reset(w io.Writer)
}

// compressStream writes src into w through an encoder from pool, closed at the end, which
// flushes its last frame.
func compressStream[E streamEncoder](pool *sync.Pool, codec string, w *sliceWriter, src []byte) error {
	enc := pool.Get().(E)
	defer pool.Put(enc)
	enc.Reset(w)
	// Drop the encoder's reference to w so a pooled encoder does not pin a batch's output.
	defer enc.Reset(nil)
	if _, err := enc.Write(src); err != nil {
		return fmt.Errorf("accumulator: %s: %w", codec, err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("accumulator: %s: %w", codec, err)
	}
	return nil
}

// Compress appends src compressed with codec (not CodecNone) to a new slice: for payloads other
// than record batches, such as the client metrics pushed to the broker (KIP-714), which use the
// same codecs with the same framing.
func Compress(codec Codec, src []byte) ([]byte, error) {
	w := new(sliceWriter)
	out, err := compress(codec, w, src)
	if err != nil {
		return nil, err
	}
	return out, nil
}
