package telemetry

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkatrail/kafkatrail/inflight"
	"github.com/kafkatrail/kafkatrail/network"
)

// connections is the connection state the observer keeps: each node's state for the gauge,
// and the connection attempts established and waiting for ApiVersions, whose connect span
// ends when the node is READY. Events arrive on the sender goroutine; the gauge reads
// concurrently, hence the mutex (state changes are rare).
type connections struct {
	mu      sync.Mutex
	states  map[int32]network.ConnectionState
	pending map[int32]*pendingConnect
	// addrs is each node's address and lastErr the error of its last connection attempt
	// ("" once one succeeded), for Status.
	addrs   map[int32]string
	lastErr map[int32]string
}

type pendingConnect struct {
	setup                  network.ConnectionSetup
	apiQueued, apiReceived time.Time
	apiCorrelation         int32
	apiVersion             int16
	apiVersionsErr         error
}

// ConnectionStateChanged keeps node's state for the gauge, counts closes of established
// connections, and ends the connect span of a connection that became READY or was lost while
// checking API versions.
func (o *ProducerObserver) ConnectionStateChanged(node int32, state network.ConnectionState) {
	o.conn.mu.Lock()
	prev, known := o.conn.states[node]
	o.conn.states[node] = state
	pc := o.conn.pending[node]
	ended := pc != nil && state != network.CheckingAPIVersions
	if ended {
		delete(o.conn.pending, node)
	}
	o.conn.mu.Unlock()

	lost := state == network.Disconnected || state == network.AuthenticationFailed
	if known && lost && (prev == network.CheckingAPIVersions || prev == network.Ready) {
		o.m.connCloses.Add(context.Background(), 1, o.node(node).opt)
	}
	if ended {
		var err error
		if state != network.Ready {
			err = pc.apiVersionsErr
			if err == nil {
				err = network.ErrDisconnected
			}
		}
		o.connectSpan(pc, time.Now(), err)
	}
}

// ConnectionSetupDone counts the attempt and, for a failed one, records its connect span now;
// an established connection's span waits for ApiVersions (ConnectionStateChanged).
func (o *ProducerObserver) ConnectionSetupDone(s network.ConnectionSetup) {
	ctx := context.Background()
	na := o.node(s.Node)
	o.conn.mu.Lock()
	o.conn.addrs[s.Node] = s.Addr
	if s.Err != nil {
		o.conn.lastErr[s.Node] = s.Err.Error()
	} else {
		delete(o.conn.lastErr, s.Node)
	}
	o.conn.mu.Unlock()
	if s.Err != nil {
		o.m.connFailures.Add(ctx, 1, metric.WithAttributes(na.id, attribute.String(AttrErrorType, ErrorType(s.Err))))
		o.connectSpan(&pendingConnect{setup: s}, s.End, s.Err)
		return
	}
	o.m.connCreations.Add(ctx, 1, na.opt)
	o.m.connSetup.Record(ctx, seconds(s.End.Sub(s.Start)), na.opt)
	if a := na.addr.Load(); a != nil && s.PeerAddr != "" && a.peer != s.PeerAddr {
		// The send spans of records this node leads name where its connection went
		// (network.peer.*); partitions see the new address and rebuild their sets.
		na.addr.CompareAndSwap(a, a.withPeer(s.PeerAddr))
	}
	o.conn.mu.Lock()
	o.conn.pending[s.Node] = &pendingConnect{setup: s}
	o.conn.mu.Unlock()
}

// RequestSent counts the request's bytes.
func (o *ProducerObserver) RequestSent(r *inflight.Request, bytes int) {
	o.m.networkIO.Add(context.Background(), int64(bytes), o.node(r.Destination).tx)
}

// RequestDone records the request's latency and bytes, the throttle time of a produce
// response, the metadata age, and the ApiVersions and Metadata spans.
func (o *ProducerObserver) RequestDone(r *inflight.Request, body kmsg.Response, received time.Time, bytes int, err error) {
	ctx := context.Background()
	na := o.node(r.Destination)
	d := seconds(received.Sub(r.Queued))
	if err == nil {
		o.m.requestDuration.Record(ctx, d, na.apiOpt(r.APIKey))
	} else {
		o.m.requestDuration.Record(ctx, d, metric.WithAttributes(na.id, attribute.String(AttrAPI, kmsg.NameForKey(r.APIKey)),
			attribute.String(AttrErrorType, ErrorType(err))))
	}
	if bytes > 0 {
		o.m.networkIO.Add(ctx, int64(bytes), na.rx)
	}
	switch kmsg.Key(r.APIKey) {
	case kmsg.Produce:
		if tr, ok := body.(kmsg.ThrottleResponse); ok && err == nil {
			ms, _ := tr.Throttle()
			o.m.throttle.Record(ctx, float64(ms)/1000, na.opt)
		}
	case kmsg.Metadata:
		if err == nil && body != nil {
			o.metadataAt.Store(received.UnixNano())
			if mr, ok := body.(*kmsg.MetadataResponse); ok {
				o.metadataSeen(mr)
			}
		}
		o.requestSpan(SpanMetadata, r, received, err)
	case kmsg.ApiVersions:
		o.conn.mu.Lock()
		if pc := o.conn.pending[r.Destination]; pc != nil {
			if pc.apiQueued.IsZero() {
				pc.apiQueued = r.Queued // a retry at a lower version extends the first
			}
			pc.apiReceived, pc.apiCorrelation, pc.apiVersion, pc.apiVersionsErr = received, r.CorrelationID, r.APIVersion, err
		}
		o.conn.mu.Unlock()
	}
}

// connectSpan records a connection attempt as a `connect` span with a child per step taken:
// dial, tlsHandshake, saslAuthenticate and ApiVersions.
func (o *ProducerObserver) connectSpan(pc *pendingConnect, end time.Time, err error) {
	if o.sampler == nil {
		return
	}
	s := pc.setup
	attrs := []attribute.KeyValue{attribute.String(AttrMessagingSystem, messagingSystemKafka), attribute.Int(AttrNodeID, int(s.Node))}
	if s.SASLMechanism != "" {
		attrs = append(attrs, attribute.String(AttrSASLMechanism, s.SASLMechanism))
	}
	attrs = appendServer(attrs, s.Addr)
	if s.PeerAddr != "" {
		attrs = append(attrs, peerAttrs(s.PeerAddr)...)
	}
	ctx, span := o.tracer.Start(markDecided(context.Background(), trace.TraceState{}), SpanConnect,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(s.Start), trace.WithAttributes(attrs...))
	c := tiler{at: nanos(s.Start)}
	steps := []struct {
		name  string
		done  time.Time
		taken bool
	}{
		{SpanDial, s.Dialed, true},
		{SpanTLSHandshake, s.TLSDone, s.TLS},
		{SpanSASLAuthenticate, s.Authenticated, s.SASLMechanism != ""},
	}
	for _, st := range steps {
		if !st.taken {
			continue
		}
		if st.done.IsZero() {
			// The step the attempt failed in (or was abandoned in).
			if s.Err != nil {
				c = c.child(st.name, nanos(s.End), s.Err, attrList{})
			}
			break
		}
		c = c.child(st.name, nanos(st.done), nil, attrList{})
	}
	if !pc.apiQueued.IsZero() {
		c.at = nanos(pc.apiQueued) // a poll may pass between established and ApiVersions queued
		c = c.child(SpanAPIVersions, nanos(pc.apiReceived), pc.apiVersionsErr, attrList{kvs: []attribute.KeyValue{
			attribute.Int(AttrCorrelationID, int(pc.apiCorrelation)), attribute.Int(AttrAPIVersion, int(pc.apiVersion))}})
	}
	startStages(o.tracer, ctx, c.stages)
	if err != nil {
		span.SetAttributes(attribute.String(AttrErrorType, ErrorType(err)))
		span.SetStatus(codes.Error, StatusDescription(err))
	}
	span.End(trace.WithTimestamp(time.Unix(0, max(nanos(end), c.at))))
}

// appendServer appends server.address and server.port of a host:port address.
func appendServer(attrs []attribute.KeyValue, addr string) []attribute.KeyValue {
	if host, port, e := net.SplitHostPort(addr); e == nil {
		attrs = append(attrs, attribute.String(AttrServerAddress, host))
		if p, e := strconv.Atoi(port); e == nil {
			attrs = append(attrs, attribute.Int(AttrServerPort, p))
		}
	}
	return attrs
}

// requestSpan records one request (Metadata) as a root span from doSend to its response. Its
// server.address is the address the connection was made to: a bootstrap server's for the
// first request, a broker's advertised one after.
func (o *ProducerObserver) requestSpan(name string, r *inflight.Request, received time.Time, err error) {
	if o.sampler == nil {
		return
	}
	o.conn.mu.Lock()
	addr := o.conn.addrs[r.Destination]
	o.conn.mu.Unlock()
	attrs := appendServer([]attribute.KeyValue{attribute.String(AttrMessagingSystem, messagingSystemKafka),
		attribute.Int(AttrNodeID, int(r.Destination)),
		attribute.Int(AttrCorrelationID, int(r.CorrelationID)), attribute.Int(AttrAPIVersion, int(r.APIVersion))}, addr)
	_, span := o.tracer.Start(markDecided(context.Background(), trace.TraceState{}), name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(r.Queued), trace.WithAttributes(attrs...))
	if err != nil {
		span.SetAttributes(attribute.String(AttrErrorType, ErrorType(err)))
		span.SetStatus(codes.Error, StatusDescription(err))
	}
	span.End(trace.WithTimestamp(received))
}

// nodeAttrs are a broker node's attribute sets, built once.
type nodeAttrs struct {
	id     attribute.KeyValue
	addr   atomic.Pointer[brokerAddr] // the advertised address, once a metadata response named the node
	opt    metric.MeasurementOption
	tx, rx metric.MeasurementOption
	apis   sync.Map // int16 -> metric.MeasurementOption
}

func (n *nodeAttrs) apiOpt(key int16) metric.MeasurementOption {
	if v, ok := n.apis.Load(key); ok {
		return v.(metric.MeasurementOption)
	}
	opt := metric.WithAttributeSet(attribute.NewSet(n.id, attribute.String(AttrAPI, kmsg.NameForKey(key))))
	v, _ := n.apis.LoadOrStore(key, opt)
	return v.(metric.MeasurementOption)
}

func (o *ProducerObserver) node(id int32) *nodeAttrs {
	if v, ok := o.nodes.Load(id); ok {
		return v.(*nodeAttrs)
	}
	n := &nodeAttrs{id: attribute.Int(AttrNodeID, int(id))}
	n.opt = metric.WithAttributeSet(attribute.NewSet(n.id))
	n.tx = metric.WithAttributeSet(attribute.NewSet(n.id, attribute.String(AttrNetworkIODirection, networkIODirectionTx)))
	n.rx = metric.WithAttributeSet(attribute.NewSet(n.id, attribute.String(AttrNetworkIODirection, networkIODirectionRx)))
	v, _ := o.nodes.LoadOrStore(id, n)
	return v.(*nodeAttrs)
}
