package consumer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one record read back. Value is nil for a tombstone (a null value), which a compacted
// topic uses to delete a key.
type Record struct {
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
}

// Record batch attributes (the v2 batch header), as in the Java client's DefaultRecordBatch.
const (
	attrCompression   = 0x07
	attrTransactional = 0x10
	attrControl       = 0x20
)

// batchHeaderLen is the bytes of a v2 batch before its records; the batch's Length field counts
// from the partition leader epoch, 12 bytes in (offset and length).
const (
	batchHeaderLen   = 61
	batchLengthStart = 12
)

// maxDecompressed bounds one batch's decompressed size: a corrupt or hostile batch must not make
// the reader allocate without limit.
const maxDecompressed = 256 << 20

// batch is one decoded v2 record batch.
type batch struct {
	kmsg.RecordBatch
	records []kmsg.Record
}

func (b *batch) lastOffset() int64     { return b.FirstOffset + int64(b.LastOffsetDelta) }
func (b *batch) isTransactional() bool { return b.Attributes&attrTransactional != 0 }
func (b *batch) isControl() bool       { return b.Attributes&attrControl != 0 }

// controlType returns the type of a control batch's marker: 0 ABORT, 1 COMMIT (-1: unknown).
func (b *batch) controlType() int16 {
	if len(b.records) == 0 || len(b.records[0].Key) < 4 {
		return -1
	}
	return int16(binary.BigEndian.Uint16(b.records[0].Key[2:4]))
}

const (
	controlAbort  = 0
	controlCommit = 1
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt marks bytes that do not decode as record batches.
var errCorrupt = errors.New("consumer: corrupt record batch")

// decodeBatches decodes the record batches of a fetch response's partition. A batch cut off at
// the end (the response's size limit) is left out: the next fetch starts at it. Every complete
// batch's CRC-32C is checked, and its records are decompressed and decoded.
func decodeBatches(data []byte) ([]batch, error) {
	var out []batch
	for len(data) >= batchLengthStart {
		length := int32(binary.BigEndian.Uint32(data[8:12]))
		if length < batchHeaderLen-batchLengthStart {
			return out, fmt.Errorf("%w: length %d", errCorrupt, length)
		}
		size := batchLengthStart + int(length)
		if size > len(data) {
			break // partial batch at the end of the response
		}
		raw := data[:size]
		data = data[size:]
		if magic := int8(raw[16]); magic != 2 {
			return out, fmt.Errorf("%w: magic %d (only v2 record batches are read)", errCorrupt, magic)
		}
		var b batch
		if err := b.ReadFrom(raw); err != nil {
			return out, fmt.Errorf("%w: %v", errCorrupt, err)
		}
		if crc := crc32.Checksum(raw[21:], crc32c); crc != uint32(b.CRC) {
			return out, fmt.Errorf("%w: CRC mismatch at offset %d", errCorrupt, b.FirstOffset)
		}
		records, err := decompress(b.Attributes&attrCompression, b.Records)
		if err != nil {
			return out, fmt.Errorf("%w at offset %d: %v", errCorrupt, b.FirstOffset, err)
		}
		if b.NumRecords < 0 || int(b.NumRecords) > len(records) {
			return out, fmt.Errorf("%w: %d records in %d bytes", errCorrupt, b.NumRecords, len(records))
		}
		b.records = make([]kmsg.Record, 0, b.NumRecords)
		for i := int32(0); i < b.NumRecords; i++ {
			l, n := binary.Varint(records)
			if n <= 0 || l < 0 || int64(len(records)-n) < l {
				return out, fmt.Errorf("%w: record %d of the batch at offset %d is cut off", errCorrupt, i, b.FirstOffset)
			}
			var r kmsg.Record
			if err := r.ReadFrom(records[:n+int(l)]); err != nil {
				return out, fmt.Errorf("%w: record %d of the batch at offset %d: %v", errCorrupt, i, b.FirstOffset, err)
			}
			records = records[n+int(l):]
			b.records = append(b.records, r)
		}
		out = append(out, b)
	}
	return out, nil
}

// xerialHeader starts snappy data framed by the Java client's xerial SnappyOutputStream.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress returns the records of a batch with the given codec (attributes bits 0-2).
func decompress(codec int16, src []byte) ([]byte, error) {
	switch codec {
	case 0:
		return src, nil
	case 1:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return readBounded(zr, "gzip")
	case 2:
		if bytes.HasPrefix(src, xerialHeader) {
			return unxerial(src)
		}
		return snappyBlock(src)
	case 3:
		return readBounded(lz4.NewReader(bytes.NewReader(src)), "lz4")
	case 4:
		zr, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressed))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		return readBounded(zr, "zstd")
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

func snappyBlock(src []byte) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	if n > maxDecompressed {
		return nil, fmt.Errorf("snappy: %d bytes decompressed is more than %d", n, maxDecompressed)
	}
	out, err := s2.Decode(nil, src)
	if err != nil {
		return nil, fmt.Errorf("snappy: %w", err)
	}
	return out, nil
}

// unxerial decodes xerial framing: the 8-byte header, version and compatible version (4 bytes
// each), then blocks, each a 4-byte big-endian length and a raw snappy block.
func unxerial(src []byte) ([]byte, error) {
	if len(src) < 16 {
		return nil, errors.New("snappy: short xerial header")
	}
	src = src[16:]
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, errors.New("snappy: xerial block length cut off")
		}
		n := binary.BigEndian.Uint32(src)
		src = src[4:]
		if uint64(n) > uint64(len(src)) {
			return nil, errors.New("snappy: xerial block cut off")
		}
		block, err := snappyBlock(src[:n])
		if err != nil {
			return nil, err
		}
		if len(out)+len(block) > maxDecompressed {
			return nil, fmt.Errorf("snappy: more than %d bytes decompressed", maxDecompressed)
		}
		out = append(out, block...)
		src = src[n:]
	}
	return out, nil
}

func readBounded(r io.Reader, codec string) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", codec, err)
	}
	if len(out) > maxDecompressed {
		return nil, fmt.Errorf("%s: more than %d bytes decompressed", codec, maxDecompressed)
	}
	return out, nil
}
