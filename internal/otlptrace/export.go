package otlptrace

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/resource"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // registers the "gzip" compressor
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP trace protocols and the defaults of the exporter, as the SDK's OTLP trace
// exporters (otlptracegrpc, otlptracehttp) have them.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"

	defaultOTLPTimeout   = 10 * time.Second
	DefaultGRPCHost      = "localhost:4317"
	DefaultHTTPHost      = "localhost:4318"
	defaultOTLPTracePath = "/v1/traces"

	otlpTraceExportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
	otlpUserAgent         = "kafkatrail OTLP trace exporter"
)

// The SDK exporters' retry policy (their retry.DefaultConfig): exponential backoff from 5 s
// up to 30 s between attempts, for at most a minute, and never beyond the export's deadline.
const (
	retryInitialInterval = 5 * time.Second
	retryMaxInterval     = 30 * time.Second
	retryMaxElapsed      = time.Minute
)

// Config is the OTLP trace exporter's configuration.
type Config struct {
	protocol string
	// grpcTarget is the gRPC dial target; httpHost and httpPath the HTTP endpoint.
	grpcTarget         string
	httpHost, httpPath string
	insecure           bool
	tls                *tls.Config // nil: the host's roots
	headers            map[string]string
	gzip               bool
	timeout            time.Duration
	retryInitial       time.Duration // the first wait before a retry (tests shorten it)
}

// ConfigFromEnv reads the OTEL_EXPORTER_OTLP_* variables and their _TRACES_
// variants by the rules of the SDK's exporters (their internal otlpconfig.getOptionsFromEnv):
// the generic variable, then the signal's, each overriding what came before, in the order
// endpoint (whose scheme says secure or not), certificates, insecure, headers, compression,
// protocol, timeout. The protocol is gRPC when none is set: kafkatrail's default, where the
// specification's is http/protobuf (see otlpOverGRPC).
func ConfigFromEnv(getenv func(string) string, readFile func(string) ([]byte, error)) (Config, error) {
	c := Config{protocol: ProtocolGRPC, grpcTarget: DefaultGRPCHost, httpHost: DefaultHTTPHost,
		httpPath: defaultOTLPTracePath, timeout: defaultOTLPTimeout, retryInitial: retryInitialInterval}
	get := func(key string) (string, bool) {
		v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + key))
		return v, v != ""
	}
	endpoint := func(key string, perSignal bool) {
		v, ok := get(key)
		if !ok {
			return
		}
		u, err := url.Parse(v)
		if err != nil {
			otel.Handle(fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_%s: %w", key, err))
			return
		}
		scheme := strings.ToLower(u.Scheme)
		c.insecure = scheme == "http" || scheme == "unix"
		c.httpHost = u.Host
		if perSignal {
			// A signal's URL is used as it is; one without a path means the root.
			c.httpPath = u.Path
			if c.httpPath == "" {
				c.httpPath = "/"
			}
		} else {
			c.httpPath = path.Join(u.Path, defaultOTLPTracePath)
		}
		c.grpcTarget = u.String()
		switch scheme {
		case "http", "https":
			c.grpcTarget = u.Host
		case "":
			if u.Host != "" {
				c.grpcTarget = path.Join(u.Host, u.Path)
			}
		}
	}
	endpoint("ENDPOINT", false)
	endpoint("TRACES_ENDPOINT", true)

	var tlsConf tls.Config
	for _, key := range []string{"CERTIFICATE", "TRACES_CERTIFICATE"} {
		if file, ok := get(key); ok {
			pem, err := readFile(file)
			if err != nil {
				otel.Handle(fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_%s: %w", key, err))
				continue
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				otel.Handle(fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_%s: no certificate in %s", key, file))
				continue
			}
			tlsConf.RootCAs = pool
		}
	}
	for _, prefix := range []string{"", "TRACES_"} {
		certFile, okc := get(prefix + "CLIENT_CERTIFICATE")
		keyFile, okk := get(prefix + "CLIENT_KEY")
		if !okc || !okk {
			continue
		}
		cert, err := readFile(certFile)
		var key []byte
		if err == nil {
			key, err = readFile(keyFile)
		}
		var pair tls.Certificate
		if err == nil {
			pair, err = tls.X509KeyPair(cert, key)
		}
		if err != nil {
			otel.Handle(fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_%sCLIENT_CERTIFICATE: %w", prefix, err))
			continue
		}
		tlsConf.Certificates = []tls.Certificate{pair}
	}
	if tlsConf.RootCAs != nil || len(tlsConf.Certificates) > 0 {
		c.tls = &tlsConf
	}
	for _, key := range []string{"INSECURE", "TRACES_INSECURE"} {
		if v, ok := get(key); ok {
			c.insecure = strings.EqualFold(v, "true")
		}
	}
	for _, key := range []string{"HEADERS", "TRACES_HEADERS"} {
		if v, ok := get(key); ok {
			c.headers = parseOTLPHeaders(v)
		}
	}
	for _, key := range []string{"COMPRESSION", "TRACES_COMPRESSION"} {
		if v, ok := get(key); ok {
			c.gzip = v == "gzip"
		}
	}
	for _, key := range []string{"PROTOCOL", "TRACES_PROTOCOL"} {
		if v, ok := get(key); ok {
			switch v {
			case ProtocolGRPC, ProtocolHTTP:
				c.protocol = v
			default:
				return c, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_%s: unsupported OTLP protocol %q (grpc or http/protobuf)", key, v)
			}
		}
	}
	for _, key := range []string{"TIMEOUT", "TRACES_TIMEOUT"} {
		if v, ok := get(key); ok {
			ms, err := strconv.Atoi(v)
			if err != nil {
				otel.Handle(fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_%s: %w", key, err))
				continue
			}
			c.timeout = time.Duration(ms) * time.Millisecond
		}
	}
	return c, nil
}

// parseOTLPHeaders reads OTEL_EXPORTER_OTLP_HEADERS: comma-separated key=value pairs, values
// percent-decoded; a malformed pair is reported and skipped, as the SDK does.
func parseOTLPHeaders(v string) map[string]string {
	h := map[string]string{}
	for pair := range strings.SplitSeq(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || !validHeaderKey(k) {
			otel.Handle(fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_HEADERS: malformed header %q", pair))
			continue
		}
		dec, err := url.PathUnescape(val)
		if err != nil {
			otel.Handle(fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_HEADERS: %w", err))
			continue
		}
		h[k] = strings.TrimSpace(dec)
	}
	return h
}

// validHeaderKey reports whether k is an HTTP token (RFC 9110).
func validHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if c > unicode.MaxASCII || !(unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// Exporter sends batches of spans as OTLP ExportTraceServiceRequests, encoded by a
// TraceEncoder, over gRPC or HTTP. Only the export goroutine calls export.
type Exporter struct {
	cfg Config
	enc *TraceEncoder
	// resourceOf, when set, is asked for the resource before each export (res is the one
	// encoded): the process's resource can gain an attribute after start.
	resourceOf func() *resource.Resource
	res        *resource.Resource
	gz         *gzip.Writer
	zbf        bytes.Buffer // the compressed request, reused

	// gRPC
	conn *grpc.ClientConn
	md   metadata.MD
	resp []byte
	// HTTP
	client *http.Client
	url    string

	closeOnce sync.Once
}

// NewExporter builds the exporter for cfg; spans are res's. A gRPC connection is
// made lazily, at the first export, as the SDK's is.
func NewExporter(cfg Config, res *resource.Resource) (*Exporter, error) {
	e := &Exporter{cfg: cfg, enc: NewTraceEncoder(res), res: res}
	if cfg.gzip && cfg.protocol == ProtocolHTTP {
		e.gz = gzip.NewWriter(io.Discard)
	}
	switch cfg.protocol {
	case ProtocolGRPC:
		creds := insecure.NewCredentials()
		if !cfg.insecure {
			tc := cfg.tls
			if tc == nil {
				tc = &tls.Config{}
			}
			creds = credentials.NewTLS(tc)
		}
		conn, err := grpc.NewClient(cfg.grpcTarget, grpc.WithTransportCredentials(creds), grpc.WithUserAgent(otlpUserAgent))
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP/gRPC trace exporter: %w", err)
		}
		e.conn = conn
		if len(cfg.headers) > 0 {
			e.md = metadata.New(cfg.headers)
		}
	case ProtocolHTTP:
		scheme := "https"
		if cfg.insecure {
			scheme = "http"
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.tls != nil && !cfg.insecure {
			tr.TLSClientConfig = cfg.tls
		}
		e.client = &http.Client{Transport: tr}
		e.url = (&url.URL{Scheme: scheme, Host: cfg.httpHost, Path: cfg.httpPath}).String()
	}
	return e, nil
}

// FollowResource makes each export ask resourceOf for the spans' resource, and encode it again
// when it changed: for a resource attribute known only after start. Call it before the first
// export.
func (e *Exporter) FollowResource(resourceOf func() *resource.Resource) { e.resourceOf = resourceOf }

// Endpoint is where the exporter sends, for the log.
func (e *Exporter) Endpoint() string {
	if e.client != nil {
		return e.url
	}
	return e.cfg.grpcTarget
}

// Export sends spans in one request, retrying as the SDK's exporters do, within ctx and the
// exporter's timeout. A partial success is reported through otel.Handle and is no error.
func (e *Exporter) Export(ctx context.Context, spans []Span) error {
	if len(spans) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.timeout)
	defer cancel()
	if e.resourceOf != nil {
		if res := e.resourceOf(); res != e.res {
			e.enc.SetResource(res)
			e.res = res
		}
	}
	body := e.enc.Encode(spans)
	send := e.sendGRPC
	if e.client != nil {
		if e.gz != nil {
			e.zbf.Reset()
			e.gz.Reset(&e.zbf)
			_, _ = e.gz.Write(body)
			if err := e.gz.Close(); err != nil {
				return err
			}
			body = e.zbf.Bytes()
		}
		send = e.sendHTTP
	}
	start := time.Now()
	wait := e.cfg.retryInitial
	for {
		retry, throttle, err := send(ctx, body)
		if err == nil || !retry {
			return err
		}
		d := max(wait, throttle)
		if time.Since(start)+d > retryMaxElapsed {
			return err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
			return fmt.Errorf("%w (no time left to retry)", err)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(wait*3/2, retryMaxInterval)
	}
}

// rawCodec hands gRPC an encoded request as it is and takes a response's bytes as they came.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }

func (rawCodec) Unmarshal(data []byte, v any) error {
	p := v.(*[]byte)
	*p = append((*p)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// sendGRPC makes one Export call. The codes the SDK's gRPC exporter retries are retried;
// RESOURCE_EXHAUSTED only when the server says when (RetryInfo).
func (e *Exporter) sendGRPC(ctx context.Context, body []byte) (retry bool, throttle time.Duration, err error) {
	if e.md != nil {
		ctx = metadata.NewOutgoingContext(ctx, e.md)
	}
	opts := []grpc.CallOption{grpc.ForceCodec(rawCodec{})}
	if e.cfg.gzip {
		opts = append(opts, grpc.UseCompressor("gzip"))
	}
	err = e.conn.Invoke(ctx, otlpTraceExportMethod, &body, &e.resp, opts...)
	if err == nil {
		e.partialSuccess(e.resp)
		return false, 0, nil
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange, codes.Unavailable, codes.DataLoss:
		return true, retryDelay(st), err
	case codes.ResourceExhausted:
		d := retryDelay(st)
		return d > 0, d, err
	}
	return false, 0, err
}

// retryDelay is the delay a status's RetryInfo asks for, zero without one.
func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// sendHTTP makes one POST. 429, 502, 503 and 504 are retried (after Retry-After, when the
// server sends one), as the SDK's HTTP exporter does.
func (e *Exporter) sendHTTP(ctx context.Context, body []byte) (retry bool, throttle time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	for k, v := range e.cfg.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", otlpUserAgent)
	if e.gz != nil {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		// A transport failure (refused, reset): the SDK's client retries those too.
		return ctx.Err() == nil, 0, err
	}
	defer resp.Body.Close()
	// A response is small; a bound keeps a misbehaving server from growing the buffer.
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
		if rerr == nil && resp.Header.Get("Content-Type") == "application/x-protobuf" {
			e.partialSuccess(data)
		}
		return false, 0, nil
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		var d time.Duration
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			d = time.Duration(s) * time.Second
		}
		return true, d, fmt.Errorf("telemetry: OTLP/HTTP trace export: %s", resp.Status)
	}
	return false, 0, fmt.Errorf("telemetry: OTLP/HTTP trace export: %s: %s", resp.Status, bytes.TrimSpace(data))
}

// partialSuccess reports an ExportTraceServiceResponse's partial_success, when it says
// spans were rejected or carries a message.
func (e *Exporter) partialSuccess(resp []byte) {
	rejected, msg, ok := decodePartialSuccess(resp)
	if ok && (rejected > 0 || msg != "") {
		if msg == "" {
			msg = "empty message"
		}
		otel.Handle(fmt.Errorf("OTLP partial success: %s (%d spans rejected)", msg, rejected))
	}
}

// decodePartialSuccess reads ExportTraceServiceResponse.partial_success (field 1):
// rejected_spans (1) and error_message (2).
func decodePartialSuccess(b []byte) (rejected int64, msg string, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, "", false
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			ps, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, "", false
			}
			b = b[n:]
			ok = true
			for len(ps) > 0 {
				num, typ, n := protowire.ConsumeTag(ps)
				if n < 0 {
					return 0, "", false
				}
				ps = ps[n:]
				switch {
				case num == 1 && typ == protowire.VarintType:
					v, n := protowire.ConsumeVarint(ps)
					if n < 0 {
						return 0, "", false
					}
					rejected, ps = int64(v), ps[n:]
				case num == 2 && typ == protowire.BytesType:
					v, n := protowire.ConsumeBytes(ps)
					if n < 0 {
						return 0, "", false
					}
					msg, ps = string(v), ps[n:]
				default:
					n := protowire.ConsumeFieldValue(num, typ, ps)
					if n < 0 {
						return 0, "", false
					}
					ps = ps[n:]
				}
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, "", false
		}
		b = b[n:]
	}
	return rejected, msg, ok
}

// Shutdown closes the connection; ctx is not needed: nothing is buffered here.
func (e *Exporter) Shutdown(context.Context) error {
	var err error
	e.closeOnce.Do(func() {
		if e.conn != nil {
			err = e.conn.Close()
		}
		if e.client != nil {
			e.client.CloseIdleConnections()
		}
	})
	return err
}

// ExporterFromEnv builds the OTLP exporter the environment describes.
func ExporterFromEnv(res *resource.Resource, getenv func(string) string) (*Exporter, error) {
	cfg, err := ConfigFromEnv(getenv, os.ReadFile)
	if err != nil {
		return nil, err
	}
	return NewExporter(cfg, res)
}
