package network

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func splitAddr(t *testing.T, addr string) (string, int32) {
	t.Helper()
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatal(err)
	}
	return host, int32(port)
}

// fakeRequest is a request as the fake broker read it.
type fakeRequest struct {
	key, version int16
	correlation  int32
	body         kmsg.Request
}

// fakeBroker is a minimal broker of our own, for faults kfake cannot produce (a wrong correlation
// id, an oversized frame, an ApiVersions downgrade). It answers ApiVersions and Metadata (naming
// itself node 1, leader of every partition of "events") and hands other requests to handle, which
// writes whatever bytes the test wants. Connections are served one request at a time.
type fakeBroker struct {
	t  *testing.T
	ln net.Listener
	// apiVersionsMax, when positive, makes ApiVersions above it fail with UNSUPPORTED_VERSION
	// in a v0 body, as a real broker does.
	apiVersionsMax int16
	handle         func(w io.Writer, req fakeRequest)

	mu       sync.Mutex
	requests []fakeRequest
	conns    []net.Conn
	wg       sync.WaitGroup
}

func startFakeBroker(t *testing.T, apiVersionsMax int16, handle func(w io.Writer, req fakeRequest)) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{t: t, ln: ln, apiVersionsMax: apiVersionsMax, handle: handle}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *fakeBroker) addr() string { return b.ln.Addr().String() }

func (b *fakeBroker) close() {
	b.ln.Close()
	b.mu.Lock()
	for _, c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *fakeBroker) seen() []fakeRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]fakeRequest(nil), b.requests...)
}

func (b *fakeBroker) accept() {
	defer b.wg.Done()
	for {
		conn, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns = append(b.conns, conn)
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer conn.Close()
			b.serve(conn)
		}()
	}
}

func (b *fakeBroker) serve(conn net.Conn) {
	br := bufio.NewReader(conn)
	for {
		frame, err := readFrame(br, 1<<20)
		if err != nil {
			return
		}
		req, err := parseFakeRequest(frame)
		if err != nil {
			b.t.Errorf("fake broker: %v", err)
			return
		}
		b.mu.Lock()
		b.requests = append(b.requests, req)
		b.mu.Unlock()
		switch req.key {
		case kmsg.ApiVersions.Int16():
			b.answerAPIVersions(conn, req)
		case kmsg.Metadata.Int16():
			host, port := splitAddr(b.t, b.addr())
			resp := kmsg.NewPtrMetadataResponse()
			broker := kmsg.NewMetadataResponseBroker()
			broker.NodeID, broker.Host, broker.Port = 1, host, port
			resp.Brokers = append(resp.Brokers, broker)
			for _, rt := range req.body.(*kmsg.MetadataRequest).Topics {
				topic := kmsg.NewMetadataResponseTopic()
				topic.Topic = rt.Topic
				p := kmsg.NewMetadataResponseTopicPartition()
				p.Leader = 1
				topic.Partitions = append(topic.Partitions, p)
				resp.Topics = append(resp.Topics, topic)
			}
			writeResponse(conn, req, req.correlation, resp)
		default:
			b.handle(conn, req)
		}
	}
}

func (b *fakeBroker) answerAPIVersions(w io.Writer, req fakeRequest) {
	resp := kmsg.NewPtrApiVersionsResponse()
	if b.apiVersionsMax > 0 && req.version > b.apiVersionsMax {
		resp.SetVersion(0)
		resp.ErrorCode = 35 // UNSUPPORTED_VERSION
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: b.apiVersionsMax}}
		writeFrame(w, binary.BigEndian.AppendUint32(nil, uint32(req.correlation)), resp.AppendTo(nil))
		return
	}
	resp.SetVersion(req.version)
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 0, MinVersion: 3, MaxVersion: 9},
		{ApiKey: 3, MinVersion: 0, MaxVersion: 12},
		{ApiKey: 18, MinVersion: 0, MaxVersion: 4},
	}
	writeResponse(w, req, req.correlation, resp)
}

// parseFakeRequest decodes a request frame: header (v1, or v2 with tags when flexible) and body.
func parseFakeRequest(frame []byte) (fakeRequest, error) {
	if len(frame) < 8 {
		return fakeRequest{}, errors.New("short request")
	}
	r := kbin.Reader{Src: frame}
	var req fakeRequest
	req.key, req.version, req.correlation = r.Int16(), r.Int16(), r.Int32()
	r.NullableString() // client id
	body := kmsg.RequestForKey(req.key)
	if body == nil {
		return req, errors.New("unknown key " + strconv.Itoa(int(req.key)))
	}
	body.SetVersion(req.version)
	if body.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		return req, err
	}
	if err := body.ReadFrom(r.Src); err != nil {
		return req, err
	}
	req.body = body
	return req, nil
}

// writeResponse frames resp (at the request's version) with correlation id corr.
func writeResponse(w io.Writer, req fakeRequest, corr int32, resp kmsg.Response) {
	resp.SetVersion(req.version)
	header := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if req.body.IsFlexible() && req.key != kmsg.ApiVersions.Int16() {
		header = append(header, 0) // no header tags
	}
	writeFrame(w, header, resp.AppendTo(nil))
}

func writeFrame(w io.Writer, header, body []byte) {
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(header)+len(body)))
	frame = append(frame, header...)
	frame = append(frame, body...)
	w.Write(frame) //nolint:errcheck // the client may have closed; the test checks the client side
}
