package network

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CorrelationIDMismatchError reports a response whose correlation id is not the one of the oldest
// request in flight on its connection. Responses come in request order, so the connection's
// stream can no longer be trusted and it is closed.
type CorrelationIDMismatchError struct {
	Node          int32
	Expected, Got int32
}

// Error implements error.
func (e *CorrelationIDMismatchError) Error() string {
	return fmt.Sprintf("network: correlation id mismatch on node %d: expected %d, got %d", e.Node, e.Expected, e.Got)
}

// errShortResponse reports a response frame too short for its header.
var errShortResponse = errors.New("network: response shorter than its header")

// readResponseHeader splits a response frame into its correlation id and body. A flexible header
// (KIP-482) ends with tagged fields, skipped here since none is defined yet.
func readResponseHeader(payload []byte, flexibleHeader bool) (correlationID int32, body []byte, err error) {
	if len(payload) < 4 {
		return 0, nil, errShortResponse
	}
	correlationID = int32(binary.BigEndian.Uint32(payload))
	body = payload[4:]
	if flexibleHeader {
		b := kbin.Reader{Src: body}
		kmsg.SkipTags(&b)
		if err := b.Complete(); err != nil {
			return 0, nil, fmt.Errorf("network: response header tags: %w", err)
		}
		body = b.Src
	}
	return correlationID, body, nil
}

// hasFlexibleResponseHeader reports whether the response to req has a flexible header: when the
// request version is flexible, except for ApiVersions, whose response header is never flexible so
// that a broker can answer a version it does not know (KIP-511).
func hasFlexibleResponseHeader(req kmsg.Request) bool {
	return req.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16()
}

// decodeResponse decodes the body of the response to req (whose version is set).
func decodeResponse(req kmsg.Request, body []byte) (kmsg.Response, error) {
	resp := req.ResponseKind()
	version := req.GetVersion()
	// A broker that does not support our ApiVersions version answers UNSUPPORTED_VERSION in a
	// v0 body, whatever version we asked for; the error code leads every version's body.
	if req.Key() == kmsg.ApiVersions.Int16() && len(body) >= 2 &&
		int16(binary.BigEndian.Uint16(body)) == kerr.UnsupportedVersion.Code {
		version = 0
	}
	resp.SetVersion(version)
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("network: decode %s v%d response: %w", kmsg.NameForKey(req.Key()), version, err)
	}
	return resp, nil
}

// parseResponse checks the correlation id of payload against expected and decodes the response.
func parseResponse(node int32, req kmsg.Request, expected int32, payload []byte) (kmsg.Response, error) {
	got, body, err := readResponseHeader(payload, hasFlexibleResponseHeader(req))
	if err != nil {
		return nil, err
	}
	if got != expected {
		return nil, &CorrelationIDMismatchError{Node: node, Expected: expected, Got: got}
	}
	return decodeResponse(req, body)
}
