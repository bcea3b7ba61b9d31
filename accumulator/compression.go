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

// The compression levels of the Java client's compression.gzip.level, compression.lz4.level
// and compression.zstd.level (KIP-390): their defaults and ranges (GzipCompression,
// Lz4Compression, ZstdCompression). A level of 0 in Config.CompressionLevel means the codec's
// default.
const (
	GzipDefaultLevel = -1 // zlib's default (6); else 1-9
	GzipMinLevel     = 1
	GzipMaxLevel     = 9
	Lz4DefaultLevel  = 9 // the fast compressor; any other level is LZ4 HC at that level
	Lz4MinLevel      = 1
	Lz4MaxLevel      = 17
	ZstdDefaultLevel = 3
	ZstdMinLevel     = -131072
	ZstdMaxLevel     = 22
)

// CheckLevel reports an error when level is not one the Java client accepts for codec's
// compression.<codec>.level.
func CheckLevel(codec Codec, level int) error {
	switch codec {
	case CodecGzip:
		if level != GzipDefaultLevel && (level < GzipMinLevel || level > GzipMaxLevel) {
			return fmt.Errorf("%d: want 1 to 9, or -1 (the default)", level)
		}
	case CodecLz4:
		if level < Lz4MinLevel || level > Lz4MaxLevel {
			return fmt.Errorf("%d: want 1 to 17", level)
		}
	case CodecZstd:
		if level < ZstdMinLevel || level > ZstdMaxLevel {
			return fmt.Errorf("%d: want -131072 to 22", level)
		}
	}
	return nil
}

// Encoders are pooled rather than built per batch: a gzip or zstd encoder carries hundreds of
// kilobytes of tables, and building one per batch would dominate the cost of closing it. There
// is a pool per codec and level (a producer uses one).
var encoderPools sync.Map // encoderKey -> *sync.Pool

type encoderKey struct {
	codec Codec
	level int32
}

// encoderPool returns the pool of codec's encoders at level (0: the codec's default).
func encoderPool(codec Codec, level int32) *sync.Pool {
	k := encoderKey{codec, level}
	if p, ok := encoderPools.Load(k); ok {
		return p.(*sync.Pool)
	}
	p, _ := encoderPools.LoadOrStore(k, &sync.Pool{New: func() any { return newEncoder(codec, int(level)) }})
	return p.(*sync.Pool)
}

func newEncoder(codec Codec, level int) any {
	switch codec {
	case CodecGzip:
		if level == 0 {
			level = GzipDefaultLevel
		}
		w, err := gzip.NewWriterLevel(nil, level)
		if err != nil {
			panic(fmt.Sprintf("accumulator: gzip level %d: %v", level, err))
		}
		return w
	case CodecLz4:
		// The Java client writes lz4 frames with 64 KiB independent blocks and no checksums
		// (Lz4BlockOutputStream); we match it so a broker decompressing our batches needs no
		// more than a 64 KiB block buffer, instead of the 4 MiB pierrec/lz4 defaults to. Its
		// default level is the fast compressor; another is LZ4 HC at that level, which
		// pierrec/lz4 offers up to 9 (10-17 compress as 9).
		w := lz4.NewWriter(nil)
		opts := []lz4.Option{lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false), lz4.BlockChecksumOption(false)}
		if level != 0 && level != Lz4DefaultLevel {
			hc := []lz4.CompressionLevel{lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4, lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}
			opts = append(opts, lz4.CompressionLevelOption(hc[min(level, 9)-1]))
		}
		if err := w.Apply(opts...); err != nil {
			panic(fmt.Sprintf("accumulator: lz4 level %d: %v", level, err))
		}
		return w
	case CodecZstd:
		// EncodeAll only, so one goroutine-free encoder per concurrent Close; a 64 KiB window
		// (as franz-go uses) bounds the broker's decoder memory, and zero frames keep empty
		// input valid. zstd's numeric level maps to klauspost/compress's four speeds.
		if level == 0 {
			level = ZstdDefaultLevel
		}
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(64<<10),
			zstd.WithZeroFrames(true),
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)))
		if err != nil {
			panic(fmt.Sprintf("accumulator: zstd encoder options rejected: %v", err))
		}
		return enc
	}
	panic(fmt.Sprintf("accumulator: no encoder for %v", codec))
}

// compress writes src compressed with codec at level (0: its default) into w (reset first) and
// returns the compressed bytes, which alias w.b. Snappy is the raw block format: the Java
// broker's xerial SnappyInputStream reads a raw block when the xerial header is absent, as
// franz-go relies on.
func compress(codec Codec, level int32, w *sliceWriter, src []byte) ([]byte, error) {
	w.b = w.b[:0]
	switch codec {
	case CodecGzip:
		if err := compressStream[*gzip.Writer](encoderPool(codec, level), "gzip", w, src); err != nil {
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
		if err := compressStream[*lz4.Writer](encoderPool(codec, level), "lz4", w, src); err != nil {
			return nil, err
		}
	case CodecZstd:
		pool := encoderPool(codec, level)
		enc := pool.Get().(*zstd.Encoder)
		defer pool.Put(enc)
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
	out, err := compress(codec, 0, w, src)
	if err != nil {
		return nil, err
	}
	return out, nil
}
