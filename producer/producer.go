// Package producer is kafkatrail's Kafka producer: the public API (New, Send, Flush, Close), its
// configuration, the partitioner, the Sender loop and the idempotent producer's state. It follows
// the Apache Kafka Java producer's design, defaults and property names.
//
// Every record handed to Send gets its callback called exactly once: with the record's offset
// when the broker acknowledged it, or with an error that names why it failed (the broker's error
// code, delivery.timeout.ms, max.block.ms, a record too large, or a close).
package producer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/internal/clock"
	"github.com/kafkatrail/kafkatrail/internal/mskiam"
	"github.com/kafkatrail/kafkatrail/metadata"
	"github.com/kafkatrail/kafkatrail/network"
)

// PartitionAny lets the partitioner choose: by key when there is one, else sticky.
const PartitionAny int32 = -1

// Header is a record header.
type Header = kmsg.Header

// RecordMetadata describes an acknowledged record: where it was written.
type RecordMetadata = accumulator.RecordMetadata

// FailedRecord is a failed record's content, in RecordMetadata.Record during its callback.
type FailedRecord = accumulator.FailedRecord

// Callback receives a record's outcome. It runs on the sender goroutine: keep it short, and
// never call Flush or Close from it.
type Callback = accumulator.Callback

// Record is one message to produce.
type Record struct {
	Topic     string
	Partition int32 // PartitionAny (-1) unless the caller chooses
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time // CreateTime; zero means now
	// Written is when the record's data came to be, before Send (a log line written), zero when
	// not known. Not sent: telemetry measures from it the read stage (Written to Send) and the
	// record's age at acknowledgement.
	Written time.Time
	// Tag is the caller's, not sent: the callback finds it in RecordMetadata.Tag, so one
	// callback can serve many records without a closure (an allocation) per record.
	Tag int64
}

// Producer sends records to Kafka. It is safe for concurrent use by many goroutines.
type Producer struct {
	cfg    Config
	sasl   *network.SASLConfig // nil without SASL; its counters for SASLStats
	acks   int16
	log    *slog.Logger
	meta   *metadata.Metadata
	acc    *accumulator.RecordAccumulator
	client KafkaClient
	sender *Sender
	sticky *stickyPartitioner
	// lastTopic is what Send needs of the topic it last sent to, for the metadata snapshot it
	// was read from: a producer mostly sends to one topic, and this saves three map lookups by
	// topic name per record (partition count, available partitions, sticky state).
	lastTopic atomic.Pointer[topicView]
	// views are the views of every topic sent to since the metadata snapshot changed, for a
	// producer that sends to several topics in turn (the agent's --topic template): without
	// them every record whose topic is not the last one's would wait on metadata's mutex and
	// build a view again.
	views atomic.Pointer[topicViews]
	// touchEvery is how old (in ns) a view's last Metadata.Add may grow before Send adds the
	// topic again: see maybeTouch.
	touchEvery int64
	clock      func() time.Time
	obs        Observer // nil: no telemetry

	maxBlock time.Duration

	closeOnce  sync.Once
	closing    chan struct{} // closed when Close begins
	senderDone chan struct{} // closed when the sender goroutine returns
}

// Option adjusts how a Producer is built (not what it does: that is Config).
type Option func(*options)

type options struct {
	logger *slog.Logger
	dialer func(ctx context.Context, netw, addr string) (net.Conn, error)
	clock  func() time.Time
	client func(network.Config, *metadata.Metadata) KafkaClient
	// observer is nil unless WithObserver: every telemetry call is guarded by it.
	observer Observer
	// expireInOrder: see WithExpiryInOrder.
	expireInOrder bool
	// resolver resolves the bootstrap servers under client.dns.lookup=resolve_canonical_bootstrap_servers_only.
	resolver resolver
}

// WithExpiryInOrder makes a batch that expires (delivery.timeout.ms) take every other batch of
// its partition with it, queued or in flight, younger ones included, each failing with a
// DeliveryTimeoutError whose Behind is set. For a caller that sends failed records again (the
// agent), that keeps a partition's records in order: otherwise the younger batches, not yet
// expired, would be written before the records sent again. It trades order for duplicates: a
// younger batch already sent may have been written. The Java client has no such setting (its
// callers are told of each expiry and decide).
func WithExpiryInOrder() Option { return func(o *options) { o.expireInOrder = true } }

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithDialer replaces how connections are opened (for proxies and tests).
func WithDialer(d func(ctx context.Context, netw, addr string) (net.Conn, error)) Option {
	return func(o *options) { o.dialer = d }
}

// New validates cfg and starts a producer: its sender goroutine and, lazily, its connections.
// The configuration error, if any, names every wrong key.
func New(cfg Config, opts ...Option) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("producer config: %w", err)
	}
	// Send stamps every record twice: a clock that reads only the monotonic clock costs less.
	o := options{clock: new(clock.Clock).Now, resolver: net.DefaultResolver}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	acks, _ := parseAcks(cfg.Acks)

	bootstrap := cfg.BootstrapServers
	if cfg.ClientDNSLookup == dnsCanonicalBootstrap {
		ctx, cancel := context.WithTimeout(context.Background(), canonicalLookupDeadline)
		var err error
		bootstrap, err = canonicalBootstrap(ctx, o.resolver, cfg.BootstrapServers)
		cancel()
		if err != nil {
			return nil, &ConfigError{Key: "bootstrap.servers", Reason: err.Error()}
		}
	}
	meta, err := metadata.New(bootstrap, ms(cfg.MetadataMaxAgeMs), ms(cfg.RetryBackoffMs), cfg.AllowAutoCreateTopics)
	if err != nil {
		return nil, fmt.Errorf("bootstrap.servers: %w", err)
	}
	meta.SetRefreshBackoffMax(ms(cfg.RetryBackoffMaxMs), nil)
	meta.SetMaxIdle(ms(cfg.MetadataMaxIdleMs))
	netCfg, err := cfg.networkConfig()
	if err != nil {
		return nil, err
	}
	netCfg.Dialer = o.dialer
	netCfg.Log = o.logger.With("component", "network")
	netCfg.Clock = o.clock // the network's stage stamps read the clock the accumulator's do
	if o.observer != nil {
		netCfg.Observer = o.observer
	}
	if h := newNodeHealth(o.logger, o.clock); h != nil {
		// Brokers going away and coming back, in the log.
		netCfg.Observer = joinNetworkObservers(netCfg.Observer, h)
	}
	var cm *clientMetrics
	if cfg.EnableMetricsPush {
		// KIP-714: the numbers pushed to the broker; the network layer's share through its
		// Observer, beside the telemetry one if any.
		cm = newClientMetrics(o.clock())
		netCfg.Observer = joinNetworkObservers(netCfg.Observer, cm)
	}
	var client KafkaClient
	if o.client != nil {
		client = o.client(netCfg, meta)
	} else {
		client = network.NewClient(netCfg, meta)
	}

	accCfg := cfg.accumulatorConfig(o.clock)
	if o.observer != nil {
		accCfg.Observer = o.observer
		accCfg.TraceAtCompletion = o.observer.TracesAtCompletion()
	}
	sticky := newStickyPartitioner(cfg.BatchSize)
	if cfg.PartitionerAdaptivePartitioningEnable {
		accCfg.LoadStats = sticky.updateLoadStats
		accCfg.AvailabilityTimeout = ms(cfg.PartitionerAvailabilityTimeoutMs)
	}
	acc := accumulator.New(accCfg)
	p := &Producer{
		cfg:        cfg,
		acks:       acks,
		log:        o.logger,
		meta:       meta,
		acc:        acc,
		client:     client,
		sticky:     sticky,
		touchEvery: int64(ms(cfg.MetadataMaxIdleMs) / touchFraction),
		clock:      o.clock,
		obs:        o.observer,
		maxBlock:   ms(cfg.MaxBlockMs),
		closing:    make(chan struct{}),
		senderDone: make(chan struct{}),
	}
	p.sasl = netCfg.SASL
	p.sender = newSender(cfg, acks, client, acc, meta, o.logger, o.clock)
	p.sender.expireInOrder = o.expireInOrder
	p.sender.obs = o.observer
	if cm != nil {
		cm.pool = acc.BufferPool()
		p.sender.metrics = cm
		p.sender.telemetry = newTelemetryPusher(client, cm, o.logger, cfg, p.sender.sendTelemetryRequest)
	}
	var stopped func()
	if o.observer != nil {
		stopped = o.observer.ProducerStarted(acc.BufferPool())
	}
	p.sender.running.Store(true)
	go func() {
		defer close(p.senderDone)
		if stopped != nil {
			defer stopped()
		}
		p.sender.run()
	}()
	return p, nil
}

// accumulatorConfig is the accumulator's share of the configuration.
func (c *Config) accumulatorConfig(clock func() time.Time) accumulator.Config {
	codec, _ := accumulator.ParseCodec(c.CompressionType)
	level := map[accumulator.Codec]int{accumulator.CodecGzip: c.CompressionGzipLevel,
		accumulator.CodecLz4: c.CompressionLz4Level, accumulator.CodecZstd: c.CompressionZstdLevel}[codec]
	return accumulator.Config{
		BatchSize:        c.BatchSize,
		BufferMemory:     c.BufferMemory,
		Linger:           ms(c.LingerMs),
		RetryBackoff:     ms(c.RetryBackoffMs),
		RetryBackoffMax:  ms(c.RetryBackoffMaxMs),
		DeliveryTimeout:  ms(c.DeliveryTimeoutMs),
		Compression:      codec,
		CompressionLevel: level,
		Idempotent:       c.EnableIdempotence,
		Now:              clock,
	}
}

// newSender wires a Sender; New and the Sender tests share it.
func newSender(cfg Config, acks int16, client KafkaClient, acc *accumulator.RecordAccumulator,
	meta *metadata.Metadata, log *slog.Logger, clock func() time.Time) *Sender {
	s := &Sender{
		client:                client,
		acc:                   acc,
		meta:                  meta,
		log:                   log,
		acks:                  acks,
		maxRequestSize:        cfg.MaxRequestSize,
		retries:               cfg.Retries,
		requestTimeout:        ms(cfg.RequestTimeoutMs),
		deliveryTimeout:       ms(cfg.DeliveryTimeoutMs),
		retryBackoff:          ms(cfg.RetryBackoffMs),
		guaranteeMessageOrder: cfg.MaxInFlightRequestsPerConnection == 1,
		inFlightBatches:       make(map[metadata.TopicPartition][]*accumulator.ProducerBatch),
		clock:                 clock,
	}
	if cfg.EnableIdempotence {
		s.txn = newTransactionManager(cfg.TransactionalID, cfg.TransactionTimeoutMs)
		acc.SetSequenceSource(s.txn)
	}
	return s
}

// networkConfig turns the security and connection properties into the network layer's config.
func (c *Config) networkConfig() (network.Config, error) {
	nc := network.Config{
		ClientID:                     c.ClientID,
		RequestTimeout:               ms(c.RequestTimeoutMs),
		ConnectionsMaxIdle:           ms(c.ConnectionsMaxIdleMs),
		ReconnectBackoff:             ms(c.ReconnectBackoffMs),
		ReconnectBackoffMax:          ms(c.ReconnectBackoffMaxMs),
		SocketConnectionSetupTimeout: ms(c.SocketConnectionSetupTimeoutMs),
		MaxInFlight:                  c.MaxInFlightRequestsPerConnection,
		MaxReceiveBytes:              c.MaxReceiveBytes,
		MaxVersions:                  c.maxVersions(),
		NoRebootstrap:                strings.EqualFold(c.MetadataRecoveryStrategy, "none"),
		RebootstrapTrigger:           ms(c.MetadataRecoveryRebootstrapTriggerMs),
	}
	proto := strings.ToUpper(c.SecurityProtocol)
	if proto == "SSL" || proto == "SASL_SSL" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.SSLCALocation != "" {
			pem, err := os.ReadFile(c.SSLCALocation)
			if err != nil {
				return nc, &ConfigError{Key: "ssl.ca.location", Reason: err.Error()}
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nc, &ConfigError{Key: "ssl.ca.location", Reason: "no PEM certificate in " + c.SSLCALocation}
			}
			tc.RootCAs = pool
		}
		if c.SSLCertificateLocation != "" {
			cert, err := tls.LoadX509KeyPair(c.SSLCertificateLocation, c.SSLKeyLocation)
			if err != nil {
				return nc, &ConfigError{Key: "ssl.certificate.location", Reason: err.Error()}
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		if c.SSLEndpointIdentificationAlgorithm == "" {
			// The user turned host name verification off, as ssl.endpoint.identification.algorithm=""
			// does in Java; the chain is still verified against the CAs.
			tc.InsecureSkipVerify = true
			tc.VerifyPeerCertificate = verifyChainOnly(tc)
		}
		nc.TLS = tc
	}
	if proto == "SASL_PLAINTEXT" || proto == "SASL_SSL" {
		nc.SASL = &network.SASLConfig{
			Mechanism: strings.ToUpper(c.SASLMechanism),
			Username:  c.saslUsername(),
			Password:  c.saslPassword(),
			OAuth:     c.oauthBearerConfig(),
		}
		if c.gssapi() {
			l, err := c.kerberosLogin()
			if err != nil {
				return nc, err
			}
			nc.SASL.Exchange = l
		}
		if c.awsMSK() {
			s, err := c.awsMSKSession(context.Background())
			if err != nil {
				return nc, err
			}
			if nc.SASL.OAuth != nil {
				nc.SASL.OAuth.TokenSource, nc.SASL.OAuth.DescribeToken = s.OAuthToken, mskiam.DescribeToken
			} else {
				nc.SASL.Exchange = s
			}
		}
	}
	return nc, nil
}

// verifyChainOnly checks the broker's chain against the configured roots without the host name.
func verifyChainOnly(tc *tls.Config) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("tls: broker sent no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: tc.RootCAs, Intermediates: inter})
		return err
	}
}

// Send hands a record to the producer. It blocks only while it waits for the topic's metadata or
// for buffer memory, together at most max.block.ms and never past ctx. cb (which may be nil) is
// called exactly once with the outcome. When the record could not be buffered at all, Send also
// returns that error (the same one cb gets), so a caller can stop early.
func (p *Producer) Send(ctx context.Context, r *Record, cb Callback) error {
	if p.obs != nil {
		return p.sendObserved(ctx, r, cb)
	}
	_, err := p.send(ctx, r, r.Headers, nil, cb, p.clock())
	if err != nil && cb != nil {
		cb(failedMetadata(r), err)
	}
	return err
}

// failedMetadata is what the callback of a record that failed in Send gets.
func failedMetadata(r *Record) RecordMetadata {
	md := RecordMetadata{Topic: r.Topic, Partition: r.Partition, Offset: -1, Tag: r.Tag,
		SerializedKeySize: -1, SerializedValueSize: -1}
	if r.Key != nil {
		md.SerializedKeySize = len(r.Key)
	}
	if r.Value != nil {
		md.SerializedValueSize = len(r.Value)
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	md.Record = &FailedRecord{Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: ts}
	return md
}

// sendObserved is Send with an observer: it may trace the record (a sampled record's token
// travels in its batch, and its headers carry the trace context), and it reports the append
// stage. A record that fails here completes its trace after its callback, as the sender does.
func (p *Producer) sendObserved(ctx context.Context, r *Record, cb Callback) error {
	now := p.clock()
	trace, headers := p.obs.StartSend(ctx, r, now)
	end, err := p.send(ctx, r, headers, trace, cb, now)
	if end.IsZero() && err != nil {
		end = p.clock()
	}
	p.obs.Appended(r.Topic, trace, now, end, err)
	if err != nil {
		md := failedMetadata(r)
		if trace != nil {
			trace.Appended(nil, end) // the append stage ends with the failure
		}
		if cb != nil {
			cb(md, err)
		}
		if trace != nil {
			trace.RecordDone(nil, md, err, end, p.clock())
		}
	}
	return err
}

// send appends the record with headers (r.Headers, or a copy carrying the trace context) and
// trace (nil unless sampled); now is when Send was called. appended is when the record went
// into its batch, if the accumulator stamped it (a traced record, or
// accumulator.Config.TraceAtCompletion) or Send waited (for metadata or buffer memory); zero
// otherwise, which spares an untraced record that did not wait a clock read.
func (p *Producer) send(ctx context.Context, r *Record, headers []Header, trace accumulator.RecordTrace, cb Callback, now time.Time) (appended time.Time, err error) {
	select {
	case <-p.closing:
		return time.Time{}, ErrProducerClosed
	default:
	}
	if r.Topic == "" {
		return time.Time{}, errors.New("record has no topic")
	}
	deadline := now.Add(p.maxBlock)
	view, waited, err := p.view(ctx, r.Topic, r.Partition, now, deadline)
	if err != nil {
		return time.Time{}, err
	}
	n := view.n
	size := accumulator.EstimateRecordSize(r.Key, r.Value, headers)
	if size > p.cfg.MaxRequestSize {
		return time.Time{}, &RecordTooLargeError{Size: size, Limit: int64(p.cfg.MaxRequestSize), Key: "max.request.size"}
	}
	if int64(size) > p.cfg.BufferMemory {
		return time.Time{}, &RecordTooLargeError{Size: size, Limit: p.cfg.BufferMemory, Key: "buffer.memory"}
	}
	partition := r.Partition
	switch {
	case partition >= 0:
	case n == 1:
		partition = 0
	case len(r.Key) > 0 && !p.cfg.PartitionerIgnoreKeys:
		partition = keyPartition(r.Key, n)
	default:
		partition = p.sticky.partitionOf(view.sticky, size, view.available, n)
	}
	tp := metadata.TopicPartition{Topic: r.Topic, Partition: partition}
	// A transactional producer sends only inside a transaction, to partitions it adds to it.
	if err := p.sender.txn.maybeAddPartition(tp); err != nil {
		return time.Time{}, err
	}
	var ready time.Time
	if waited {
		ready = p.clock() // the metadata wait ended: the append stage's end, unless traced
	}
	res, err := p.acc.Append(ctx, tp, accumulator.AppendRecord{Timestamp: r.Timestamp, Key: r.Key, Value: r.Value,
		Headers: headers, Callback: cb, Tag: r.Tag, Trace: trace, MaxBlockDeadline: deadline, Now: now, Written: r.Written,
		Ready: ready})
	if err != nil {
		return time.Time{}, err
	}
	// KafkaProducer.doSend wakes the sender for a full batch or a new one. A new batch that only
	// linger.ms makes sendable is due no sooner than that: the sender is asked to wake then,
	// where Java's wakes at once, finds nothing ready and sleeps again until then: a wakeup of
	// the sender saved per new batch (one per burst of a log written in bursts).
	switch {
	case res.BatchIsFull, res.NewBatchCreated && res.LingerDue.IsZero():
		p.client.Wakeup()
	case res.NewBatchCreated:
		p.client.WakeIn(res.LingerDue.Sub(p.clock()))
	}
	if res.Appended.IsZero() {
		res.Appended = ready
	}
	return res.Appended, nil
}

// topicView is a topic as one metadata snapshot shows it, with its sticky partitioner state.
type topicView struct {
	cluster   *metadata.Cluster
	topic     string
	n         int     // partitions
	available []int32 // with a leader
	sticky    *stickyTopic
	// added is when (Unix ns) the topic was last added to metadata through this view.
	added atomic.Int64
}

// touchFraction sets how often Send's fast path adds its topic to metadata again: every
// metadata.max.idle.ms / touchFraction of sending at most.
const touchFraction = 16

// view returns topic's view in the current metadata snapshot, waiting for metadata as
// waitOnMetadata does when the topic (or partition) is not known yet (waited).
func (p *Producer) view(ctx context.Context, topic string, partition int32, now, deadline time.Time) (v *topicView, waited bool, err error) {
	cluster := p.meta.Fetch()
	v = p.lastTopic.Load()
	if v == nil || v.cluster != cluster || v.topic != topic {
		v = nil
		if vs := p.views.Load(); vs != nil && vs.cluster == cluster {
			v = vs.byTopic[topic]
		}
	}
	if v != nil && partition < int32(v.n) {
		if d := now.UnixNano() - v.added.Load(); d < 0 || d >= p.touchEvery {
			p.maybeTouch(v, now)
		}
		return v, false, nil
	}
	cluster, n, err := p.waitOnMetadata(ctx, topic, partition, now, deadline)
	if err != nil {
		return nil, true, err
	}
	v = &topicView{cluster: cluster, topic: topic, n: n, available: cluster.AvailablePartitions(topic), sticky: p.sticky.topic(topic)}
	v.added.Store(now.UnixNano()) // waitOnMetadata added it
	p.lastTopic.Store(v)
	p.addView(v)
	return v, true, nil
}

// topicViews are the topic views of one metadata snapshot, by topic. Immutable once published:
// addView publishes a copy with one view more.
type topicViews struct {
	cluster *metadata.Cluster
	byTopic map[string]*topicView
}

// addView adds v to the views of its snapshot; views of an older snapshot are dropped, so the
// map never holds more than the topics in metadata. Copy on write: a topic is added once per
// snapshot, and the map is read on every record.
func (p *Producer) addView(v *topicView) {
	for {
		old := p.views.Load()
		next := &topicViews{cluster: v.cluster}
		switch {
		case old != nil && old.cluster == v.cluster:
			if old.byTopic[v.topic] != nil {
				return // another Send added it
			}
			next.byTopic = maps.Clone(old.byTopic)
		case v.cluster != p.meta.Fetch():
			return // metadata changed since v was built: v is stale already
		default:
			next.byTopic = make(map[string]*topicView, 1)
		}
		next.byTopic[v.topic] = v
		if p.views.CompareAndSwap(old, next) {
			return
		}
	}
}

// maybeTouch adds v's topic to metadata again, so that a topic in use does not expire after
// metadata.max.idle.ms: Java's waitOnMetadata calls metadata.add(topic, nowMs) on every send.
// Send's fast path reuses a view without calling waitOnMetadata, to stay free of locks at a
// million records a second, so it comes here only once the view's last add is
// metadata.max.idle.ms/touchFraction old (or in the future: the wall clock stepped back). A
// topic in use therefore never expires, and one left idle expires between 15/16 of
// metadata.max.idle.ms and all of it after its last send. Of the goroutines that find the add
// due at once, the one whose compare-and-swap wins adds.
func (p *Producer) maybeTouch(v *topicView, now time.Time) {
	last := v.added.Load()
	if d := now.UnixNano() - last; d >= 0 && d < p.touchEvery {
		return
	}
	if v.added.CompareAndSwap(last, now.UnixNano()) {
		p.meta.Add(v.topic, now)
	}
}

// waitOnMetadata is KafkaProducer.waitOnMetadata: the cluster and the topic's partition count,
// fetching them first if needed, for at most max.block.ms. Like Java it adds the topic to
// metadata first, known or not, which resets its metadata.max.idle.ms.
func (p *Producer) waitOnMetadata(ctx context.Context, topic string, partition int32, now, deadline time.Time) (*metadata.Cluster, int, error) {
	p.meta.Add(topic, now)
	cluster := p.meta.Fetch()
	if n := cluster.PartitionCount(topic); n > 0 && partition < int32(n) {
		return cluster, n, nil
	}
	for {
		cluster = p.meta.Fetch()
		n := cluster.PartitionCount(topic)
		if n > 0 {
			if partition >= int32(n) {
				return nil, 0, fmt.Errorf("partition %d of topic %q does not exist: the topic has %d partitions", partition, topic, n)
			}
			return cluster, n, nil
		}
		topicErr := cluster.TopicError(topic)
		if errors.Is(topicErr, kerr.TopicAuthorizationFailed) || errors.Is(topicErr, kerr.InvalidTopicException) {
			return nil, 0, fmt.Errorf("topic %q: %w", topic, topicErr)
		}
		if waited := p.clock(); waited.After(now) {
			p.meta.Add(topic, waited) // as Java does with nowMs + elapsed: the wait is a use
		}
		version := p.meta.RequestUpdate()
		p.client.Wakeup()
		if err := p.meta.AwaitUpdate(ctx, version, deadline); err != nil {
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			if !errors.Is(err, metadata.ErrAwaitTimeout) {
				// Authentication failed, or the producer is closing: say so, not "timed out".
				return nil, 0, fmt.Errorf("topic %q: %w", topic, err)
			}
			return nil, 0, &MetadataTimeoutError{Topic: topic, MaxBlock: p.maxBlock, Cause: topicErr}
		}
	}
}

// PartitionsFor returns the number of partitions of topic, fetching its metadata first when it
// is not known (which connects to a broker), for at most max.block.ms and never past ctx: the
// Java client's partitionsFor. The agent calls it at start, so that it is connected and ready
// before the first line.
func (p *Producer) PartitionsFor(ctx context.Context, topic string) (int, error) {
	select {
	case <-p.closing:
		return 0, ErrProducerClosed
	default:
	}
	now := p.clock()
	_, n, err := p.waitOnMetadata(ctx, topic, PartitionAny, now, now.Add(p.maxBlock))
	if err != nil {
		return 0, err
	}
	return n, nil
}

// AwaitCluster fetches metadata for the topics already in use (none at start: a request for no
// topic, which names the brokers and creates nothing), which connects to a broker, for at most
// max.block.ms and never past ctx. It is for a caller that does not know its topics yet but
// wants to know the cluster answers: NetworkClient's metadata update with an empty topic list
// (MetadataRequest.Builder with no topics, not allTopics), forced now.
func (p *Producer) AwaitCluster(ctx context.Context) error {
	select {
	case <-p.closing:
		return ErrProducerClosed
	default:
	}
	version := p.meta.RequestUpdate()
	p.client.Wakeup()
	err := p.meta.AwaitUpdate(ctx, version, p.clock().Add(p.maxBlock))
	if errors.Is(err, metadata.ErrAwaitTimeout) {
		return fmt.Errorf("no metadata from the cluster after %d ms (max.block.ms): %w", p.maxBlock.Milliseconds(), err)
	}
	return err
}

// Flush makes every buffered record sendable at once and waits until each has completed
// (acknowledged or failed), or ctx ends.
func (p *Producer) Flush(ctx context.Context) error {
	p.acc.BeginFlush()
	p.client.Wakeup()
	return p.acc.AwaitFlushCompletion(ctx)
}

// Close stops accepting records, sends everything buffered and waits for the acknowledgements.
// When ctx ends first, what is left fails with ErrProducerClosed through its callbacks, and
// Close returns ctx's error. Nothing is dropped silently.
func (p *Producer) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		close(p.closing)
		p.sender.initiateClose()
	})
	select {
	case <-p.senderDone:
		p.closeSASL()
		return nil
	case <-ctx.Done():
	}
	p.sender.forceClose()
	<-p.senderDone
	p.closeSASL()
	return fmt.Errorf("close: %w; buffered records failed with %w", ctx.Err(), ErrProducerClosed)
}
