package network

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzReadFrame feeds arbitrary bytes to the frame reader: it must not panic, must never return
// a payload larger than the limit, and must return exactly the declared size when it succeeds.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 2, 'h', 'i'}, int32(16))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff}, int32(1024))
	f.Add([]byte{0xff, 0xff, 0xff, 0xfb}, int32(1024))
	f.Add([]byte{0, 0, 0, 5, 1}, int32(16))
	f.Fuzz(func(t *testing.T, data []byte, maxSize int32) {
		if maxSize < 0 {
			maxSize = -maxSize
		}
		maxSize %= 1 << 20 // the guard itself must hold; large limits only cost memory here
		payload, err := readFrame(bytes.NewReader(data), maxSize)
		if err != nil {
			var sizeErr *FrameSizeError
			if errors.As(err, &sizeErr) && sizeErr.Size >= 0 && sizeErr.Size <= maxSize {
				t.Fatalf("size %d within limit %d refused", sizeErr.Size, maxSize)
			}
			if payload != nil {
				t.Fatal("payload returned with an error")
			}
			return
		}
		declared := int32(binary.BigEndian.Uint32(data))
		if int32(len(payload)) != declared || declared > maxSize || declared < 0 {
			t.Fatalf("payload of %d bytes for declared size %d, limit %d", len(payload), declared, maxSize)
		}
		if !bytes.Equal(payload, data[4:4+declared]) {
			t.Fatal("payload differs from the input")
		}
	})
}

// TestReadFrameShortReads pins the errors for truncated input.
func TestReadFrameShortReads(t *testing.T) {
	if _, err := readFrame(bytes.NewReader(nil), 10); !errors.Is(err, io.EOF) {
		t.Fatalf("empty input: %v", err)
	}
	if _, err := readFrame(bytes.NewReader([]byte{0, 0, 0, 4, 1}), 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated payload: %v", err)
	}
}

// fuzzedKeys are the responses the producer reads.
var fuzzedKeys = []kmsg.Key{kmsg.Produce, kmsg.Metadata, kmsg.ApiVersions}

// FuzzDecodeResponse feeds arbitrary response frames (after the size prefix) for Produce, Metadata
// and ApiVersions at any version through the header strip and the kmsg decoder: no panic, and a
// decoded response has the kind and version of its request.
func FuzzDecodeResponse(f *testing.F) {
	for _, k := range fuzzedKeys {
		req := kmsg.RequestForKey(k.Int16())
		for _, v := range []int16{0, req.MaxVersion()} {
			resp := req.ResponseKind()
			resp.SetVersion(v)
			header := []byte{0, 0, 0, 7}
			if req.SetVersion(v); hasFlexibleResponseHeader(req) {
				header = append(header, 0)
			}
			f.Add(uint8(k), v, append(header, resp.AppendTo(nil)...))
		}
	}
	f.Fuzz(func(t *testing.T, keyIndex uint8, version int16, payload []byte) {
		key := fuzzedKeys[int(keyIndex)%len(fuzzedKeys)]
		req := kmsg.RequestForKey(key.Int16())
		if version < 0 {
			version = -(version + 1)
		}
		version %= req.MaxVersion() + 1
		req.SetVersion(version)
		// Expect the id the payload carries, so the decoder runs on every input.
		var expected int32
		if len(payload) >= 4 {
			expected = int32(binary.BigEndian.Uint32(payload))
		}
		resp, err := parseResponse(1, req, expected, payload)
		if err != nil {
			return
		}
		if resp.Key() != key.Int16() {
			t.Fatalf("decoded key %d for request key %d", resp.Key(), key)
		}
		if resp.GetVersion() != version && key != kmsg.ApiVersions {
			t.Fatalf("decoded v%d for request v%d", resp.GetVersion(), version)
		}
	})
}

func TestParseResponseHeader(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(9) // flexible: the header carries tags
	resp := req.ResponseKind()
	resp.SetVersion(9)
	body := resp.AppendTo(nil)
	withTags := append([]byte{0, 0, 0, 3, 1, 5, 2, 'a', 'b'}, body...) // one tag (key 5, 2 bytes)
	if _, err := parseResponse(1, req, 3, withTags); err != nil {
		t.Fatalf("flexible header with a tag: %v", err)
	}
	var mismatch *CorrelationIDMismatchError
	if _, err := parseResponse(1, req, 4, withTags); !errors.As(err, &mismatch) {
		t.Fatalf("err = %v, want a mismatch", err)
	}
	if _, err := parseResponse(1, req, 3, []byte{0, 0}); !errors.Is(err, errShortResponse) {
		t.Fatalf("err = %v, want short response", err)
	}
	// ApiVersions v3+ is flexible, yet its response header never is.
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	avResp := av.ResponseKind()
	avResp.SetVersion(3)
	if _, err := parseResponse(1, av, 9, append([]byte{0, 0, 0, 9}, avResp.AppendTo(nil)...)); err != nil {
		t.Fatalf("ApiVersions v3: %v", err)
	}
	// UNSUPPORTED_VERSION comes back as a v0 body whatever version was asked.
	v0 := kmsg.NewPtrApiVersionsResponse()
	v0.ErrorCode = 35
	v0.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MaxVersion: 2}}
	got, err := parseResponse(1, av, 9, append([]byte{0, 0, 0, 9}, v0.AppendTo(nil)...))
	if err != nil || got.(*kmsg.ApiVersionsResponse).ApiKeys[0].MaxVersion != 2 {
		t.Fatalf("v0 downgrade body: %v, %+v", err, got)
	}
}
