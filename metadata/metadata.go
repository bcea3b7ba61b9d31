package metadata

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkatrail/kafkatrail/internal/backoff"
)

// DefaultMaxIdle is how long a topic stays in metadata requests without being used: the default
// of the Java producer's metadata.max.idle.ms. SetMaxIdle changes it.
const DefaultMaxIdle = 5 * time.Minute

var (
	// ErrAwaitTimeout is returned by AwaitUpdate when its deadline passes before an update.
	ErrAwaitTimeout = errors.New("metadata: timed out waiting for a metadata update")
	// ErrClosed is returned by AwaitUpdate once Close was called.
	ErrClosed = errors.New("metadata: closed")
)

// Metadata is the producer's cluster view. The sender goroutine updates it; producing goroutines
// read it and wait for updates.
//
// Metadata is safe for concurrent use: writers take a mutex, readers load an immutable *Cluster
// through an atomic pointer and never block.
type Metadata struct {
	cluster atomic.Pointer[Cluster]

	maxAge, refreshBackoff, maxIdle time.Duration
	// refreshBackoffs makes the wait between refreshes grow after failed ones (KIP-580: Java's
	// Metadata.refreshBackoff, up to retry.backoff.max.ms; SetRefreshBackoffMax); attempts
	// counts the failures since the last success, and refreshWait is the wait they give,
	// drawn once per attempt so that every caller sees the same one.
	refreshBackoffs *backoff.Exponential
	attempts        int
	refreshWait     time.Duration
	allowAutoCreate bool

	mu         sync.Mutex
	version    int
	needUpdate bool
	// requestVersion counts update requests, so a response to a request built before the
	// latest RequestUpdate does not satisfy it (the Java client's requestVersion).
	requestVersion        int
	lastRefresh           time.Time            // last attempt, successful or not: refresh backoff runs from it
	lastSuccessfulRefresh time.Time            // metadata.max.age.ms runs from it
	topics                map[string]time.Time // topic -> when it expires unless used again
	newTopics             map[string]struct{}  // added and not yet seen in a response
	// lastSeenLeaderEpochs is the newest leader epoch seen per partition (the Java client's
	// lastSeenLeaderEpochs). It outlives a response that leaves the topic out, so a lagging
	// broker cannot bring back an old leader after a gap; see updateLatestMetadata.
	lastSeenLeaderEpochs map[TopicPartition]int32
	// bootstrapNodes are the bootstrap.servers, for Rebootstrap.
	bootstrapNodes []Node
	fatal          error
	closed         bool
	// updated is closed and replaced at every version change, so AwaitUpdate can wait on a
	// channel instead of polling.
	updated chan struct{}
}

// New returns a Metadata whose cluster is the bootstrap addresses ("host:port"), as nodes -1, -2, ...
// maxAge is metadata.max.age.ms, refreshBackoff retry.backoff.ms between refresh attempts, and
// allowAutoCreate is sent in every metadata request.
func New(bootstrap []string, maxAge, refreshBackoff time.Duration, allowAutoCreate bool) (*Metadata, error) {
	if len(bootstrap) == 0 {
		return nil, errors.New("metadata: bootstrap.servers: no address given")
	}
	nodes := make([]Node, 0, len(bootstrap))
	for i, addr := range bootstrap {
		host, portStr, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("metadata: bootstrap.servers: %q: %w", addr, err)
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil || host == "" {
			return nil, fmt.Errorf("metadata: bootstrap.servers: %q: invalid host or port", addr)
		}
		nodes = append(nodes, Node{ID: int32(-1 - i), Host: host, Port: int32(port)})
	}
	m := &Metadata{
		maxAge:          maxAge,
		refreshBackoff:  refreshBackoff,
		refreshWait:     refreshBackoff,
		maxIdle:         DefaultMaxIdle,
		allowAutoCreate: allowAutoCreate,
		needUpdate:      true, // the bootstrap view knows no broker by id
		topics:          map[string]time.Time{},
		newTopics:       map[string]struct{}{},
		updated:         make(chan struct{}),

		lastSeenLeaderEpochs: map[TopicPartition]int32{},
		bootstrapNodes:       nodes,
	}
	m.cluster.Store(bootstrapCluster(nodes))
	return m, nil
}

// SetMaxIdle sets metadata.max.idle.ms: a topic not added again (see Add) for that long is
// dropped from metadata requests at the next update. Call it before the first Add.
func (m *Metadata) SetMaxIdle(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.maxIdle = d
}

// Fetch returns the current cluster snapshot without blocking.
func (m *Metadata) Fetch() *Cluster { return m.cluster.Load() }

// AllowAutoCreate reports whether metadata requests ask the broker to create unknown topics.
func (m *Metadata) AllowAutoCreate() bool { return m.allowAutoCreate }

// Add keeps topic in metadata requests for metadata.max.idle.ms from now. A topic not seen before
// requests an update at once, skipping the refresh backoff, as the Java producer does for new
// topics: a Send is waiting for it.
func (m *Metadata) Add(topic string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, known := m.topics[topic]
	m.topics[topic] = now.Add(m.maxIdle)
	if !known {
		m.newTopics[topic] = struct{}{}
		m.needUpdate = true
		m.requestVersion++
		m.lastRefresh = time.Time{}
	}
}

// Topics returns the topics the next metadata request asks for, sorted.
func (m *Metadata) Topics() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sortedTopics()
}

// sortedTopics returns the topics of interest, sorted. The caller holds m.mu.
func (m *Metadata) sortedTopics() []string {
	ts := slices.AppendSeq(make([]string, 0, len(m.topics)), maps.Keys(m.topics))
	slices.Sort(ts)
	return ts
}

// RequestUpdate asks for an update at the next opportunity (after the refresh backoff) and
// returns the current version, to pass to AwaitUpdate.
func (m *Metadata) RequestUpdate() (version int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.needUpdate = true
	m.requestVersion++
	return m.version
}

// NewRequestAndVersion returns the metadata request for the topics of interest and the request
// version to hand back to UpdateFor with its response.
func (m *Metadata) NewRequestAndVersion() (*kmsg.MetadataRequest, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return NewRequest(m.sortedTopics(), m.allowAutoCreate), m.requestVersion
}

// UpdateRequested reports whether an update was asked for and has not happened yet.
func (m *Metadata) UpdateRequested() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.needUpdate
}

// Version returns the number of successful updates so far.
func (m *Metadata) Version() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.version
}

// TimeToNextUpdate returns how long until an update is due, 0 when it is due now: when one was
// requested, or metadata.max.age.ms passed since the last success; either way no sooner than the
// refresh backoff after the last attempt.
func (m *Metadata) TimeToNextUpdate(now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var toExpire time.Duration
	if !m.needUpdate {
		toExpire = max(m.lastSuccessfulRefresh.Add(m.maxAge).Sub(now), 0)
	}
	toAllow := max(m.lastRefresh.Add(m.refreshWait).Sub(now), 0)
	return max(toExpire, toAllow)
}

// invalidMetadataErrors are the error codes of the Java client's InvalidMetadataException
// subclasses (org.apache.kafka.common.errors: UnknownTopicOrPartitionException,
// LeaderNotAvailableException, NotLeaderOrFollowerException, ReplicaNotAvailableException,
// NetworkException, KafkaStorageException, ListenerNotFoundException,
// FencedLeaderEpochException, PreferredLeaderNotAvailableException,
// EligibleLeadersNotAvailableException, ElectionNotNeededException, UnknownTopicIdException,
// InconsistentTopicIdException), each mapped from its code in Errors. Not in it, though
// retriable: NOT_ENOUGH_REPLICAS (the leader is right, its followers are behind) and
// UNKNOWN_LEADER_EPOCH (the broker is behind us, not we behind it).
var invalidMetadataErrors = []error{
	kerr.UnknownTopicOrPartition, kerr.LeaderNotAvailable, kerr.NotLeaderForPartition,
	kerr.ReplicaNotAvailable, kerr.NetworkException, kerr.KafkaStorageError, kerr.ListenerNotFound,
	kerr.FencedLeaderEpoch, kerr.PreferredLeaderNotAvailable, kerr.EligibleLeadersNotAvailable,
	kerr.ElectionNotNeeded, kerr.UnknownTopicID, kerr.InconsistentTopicID,
}

// IsInvalidMetadata reports whether err is one of the Kafka errors that mean the client's
// metadata is stale (the Java client's InvalidMetadataException family): Metadata requests an
// update when a metadata response holds one, and the producer when a produce response does.
func IsInvalidMetadata(err error) bool {
	for _, e := range invalidMetadataErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Update installs the cluster described by resp, bumps the version and wakes AwaitUpdate callers.
// It satisfies every update requested so far; see UpdateFor. A response without brokers is
// ignored as a failed attempt, as the Java client does.
func (m *Metadata) Update(resp *kmsg.MetadataResponse, now time.Time) {
	m.mu.Lock()
	requestVersion := m.requestVersion
	m.mu.Unlock()
	m.UpdateFor(requestVersion, resp, now)
}

// UpdateFor is Update for the response to a request built at requestVersion (from
// NewRequestAndVersion): an update requested after that request went out stays requested,
// because the response may predate what prompted it (a leader change seen by the producer).
func (m *Metadata) UpdateFor(requestVersion int, resp *kmsg.MetadataResponse, now time.Time) {
	if len(resp.Brokers) == 0 {
		m.FailedUpdate(now)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c := clusterFromResponse(resp, m.cluster.Load(), m.lastSeenLeaderEpochs)
	m.needUpdate = requestVersion < m.requestVersion
	m.fatal = nil // a broker answered: whatever failed before is no longer fatal
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		delete(m.newTopics, *t.Topic)
		if IsInvalidMetadata(c.topicErrors[*t.Topic]) {
			m.needUpdate = true
		}
		for _, p := range t.Partitions {
			if IsInvalidMetadata(kerr.ErrorForCode(p.ErrorCode)) {
				m.needUpdate = true
			}
		}
	}
	for t, expires := range m.topics {
		if _, isNew := m.newTopics[t]; !isNew && !now.Before(expires) {
			delete(m.topics, t) // unused for metadata.max.idle.ms: stop asking for it
		}
	}
	// Java drops the epochs of topics it no longer retains; a topic left out of this response
	// but still asked for keeps them (it may be between a delete and a create).
	for tp := range m.lastSeenLeaderEpochs {
		if _, asked := m.topics[tp.Topic]; !asked && c.PartitionCount(tp.Topic) == 0 {
			delete(m.lastSeenLeaderEpochs, tp)
		}
	}
	m.lastRefresh, m.lastSuccessfulRefresh = now, now
	m.attempts = 0
	m.refreshWait = m.nextRefreshWaitLocked()
	m.cluster.Store(c)
	m.bumpVersionLocked()
}

func (m *Metadata) bumpVersionLocked() {
	m.version++
	close(m.updated)
	m.updated = make(chan struct{})
}

// BootstrapAddrs returns the bootstrap servers as host:port, for the log of a rebootstrap.
func (m *Metadata) BootstrapAddrs() []string {
	out := make([]string, len(m.bootstrapNodes))
	for i, n := range m.bootstrapNodes {
		out[i] = net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))
	}
	return out
}

// Rebootstrap forgets every broker the metadata named and goes back to the bootstrap.servers, as
// the Java client's Metadata.rebootstrap does when no broker it knows can be reached (KIP-899),
// or when the cluster says the client's metadata is stale beyond repair (REBOOTSTRAP_REQUIRED,
// KIP-1102): a full update is requested and the version moves, so waiters look at the (now
// bootstrap) cluster again. The leader epochs seen stay, as in Java, though with the topic ids
// forgotten the next response's leaders are taken as they come (see updateLatestMetadata).
func (m *Metadata) Rebootstrap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.needUpdate = true
	m.requestVersion++
	m.cluster.Store(bootstrapCluster(m.bootstrapNodes))
	m.bumpVersionLocked()
}

// FailedUpdate records a failed attempt, so the next one waits out the refresh backoff.
func (m *Metadata) FailedUpdate(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastRefresh = now
	// Java's failedUpdate counts the attempt; timeToAllowUpdate waits backoff(attempts - 1).
	m.attempts++
	m.refreshWait = m.nextRefreshWaitLocked()
}

// SetRefreshBackoffMax makes the wait after failed refreshes grow from retry.backoff.ms,
// doubling with 20 % jitter per failure, up to maxBackoff (retry.backoff.max.ms; Java's
// Metadata.refreshBackoff). rnd is the jitter's source (nil: randomly seeded). Call it before
// the metadata is used.
func (m *Metadata) SetRefreshBackoffMax(maxBackoff time.Duration, rnd *rand.Rand) {
	if rnd == nil {
		rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refreshBackoffs = backoff.New(m.refreshBackoff, backoff.Multiplier, maxBackoff, backoff.Jitter, rnd)
	m.refreshWait = m.nextRefreshWaitLocked()
}

// nextRefreshWaitLocked is the wait after the current attempts: backoff(attempts - 1), or the
// fixed retry.backoff.ms without SetRefreshBackoffMax.
func (m *Metadata) nextRefreshWaitLocked() time.Duration {
	if m.refreshBackoffs == nil {
		return m.refreshBackoff
	}
	return m.refreshBackoffs.Backoff(max(m.attempts-1, 0))
}

// FatalError records an error no retry will fix without a config change (authentication failed):
// AwaitUpdate returns it until the next successful update, so every waiting producer fails fast.
// The Java client's Metadata.fatalError throws it to one waiter only; keeping it serves them all.
func (m *Metadata) FatalError(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fatal = err
	close(m.updated) // wake waiters so they see it; the version does not change
	m.updated = make(chan struct{})
}

// AwaitUpdate waits until the version is greater than lastVersion, the context ends, the deadline
// passes (ErrAwaitTimeout; a zero deadline waits without limit), a fatal error is recorded, or
// Close is called (ErrClosed).
func (m *Metadata) AwaitUpdate(ctx context.Context, lastVersion int, deadline time.Time) error {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	for {
		m.mu.Lock()
		switch {
		case m.fatal != nil:
			err := m.fatal
			m.mu.Unlock()
			return err
		case m.closed:
			m.mu.Unlock()
			return ErrClosed
		case m.version > lastVersion:
			m.mu.Unlock()
			return nil
		}
		updated := m.updated
		m.mu.Unlock()
		select {
		case <-updated:
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return ErrAwaitTimeout
		}
	}
}

// Close wakes every AwaitUpdate caller with ErrClosed; later calls fail at once.
func (m *Metadata) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	close(m.updated)
	m.updated = make(chan struct{})
}
