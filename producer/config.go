package producer

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/kafkatrail/kafkatrail/accumulator"
	"github.com/kafkatrail/kafkatrail/internal/kerberos"
	"github.com/kafkatrail/kafkatrail/internal/mskiam"
	"github.com/kafkatrail/kafkatrail/metadata"
	"github.com/kafkatrail/kafkatrail/network"
)

// Config is the producer's configuration. Field tags carry the Java client's property names, so
// the same keys work in config files, in `-X key=value` and in this struct; defaults follow the
// Java client (DefaultConfig).
type Config struct {
	BootstrapServers []string `koanf:"bootstrap.servers" doc:"host:port pairs used to discover the cluster"`
	ClientID         string   `koanf:"client.id" doc:"name sent with every request and used in metrics"`

	Acks              string `koanf:"acks" doc:"acknowledgements the leader waits for: 0, 1 or all (-1)"`
	EnableIdempotence bool   `koanf:"enable.idempotence" doc:"exactly one copy of each record per partition, in order; requires acks=all"`
	CompressionType   string `koanf:"compression.type" doc:"none, gzip, snappy, lz4 or zstd"`
	// The codecs' levels (KIP-390), as the Java client checks them; each applies when
	// compression.type names its codec.
	CompressionGzipLevel int `koanf:"compression.gzip.level" doc:"gzip's level with compression.type=gzip: 1 (fastest) to 9 (smallest), or -1: zlib's default (6)"`
	CompressionLz4Level  int `koanf:"compression.lz4.level" doc:"lz4's level with compression.type=lz4: 9 (the default) is the fast compressor, any other of 1 to 17 LZ4 HC at that level (levels above 9 compress as 9)"`
	CompressionZstdLevel int `koanf:"compression.zstd.level" doc:"zstd's level with compression.type=zstd: -131072 to 22, 3 by default (mapped to klauspost/compress's fastest, default, better and best speeds)"`

	BatchSize    int   `koanf:"batch.size" doc:"upper bound in bytes of one partition's batch"`
	LingerMs     int   `koanf:"linger.ms" doc:"how long a batch waits for more records before it is sendable"`
	BufferMemory int64 `koanf:"buffer.memory" doc:"bytes of records buffered before Send blocks"`

	MaxInFlightRequestsPerConnection      int    `koanf:"max.in.flight.requests.per.connection" doc:"unacknowledged requests per broker connection; at most 5 with idempotence"`
	Retries                               int    `koanf:"retries" doc:"how often a batch is retried after a retriable error"`
	DeliveryTimeoutMs                     int    `koanf:"delivery.timeout.ms" doc:"upper bound from Send to success or failure; >= linger.ms + request.timeout.ms"`
	RequestTimeoutMs                      int    `koanf:"request.timeout.ms" doc:"how long a request waits for its response before the connection is closed and it is retried"`
	MaxBlockMs                            int    `koanf:"max.block.ms" doc:"how long Send blocks for metadata and buffer memory"`
	MaxRequestSize                        int    `koanf:"max.request.size" doc:"largest request, and so largest record, in bytes"`
	RetryBackoffMs                        int    `koanf:"retry.backoff.ms" doc:"wait before a failed batch is first retried; each further retry doubles it with 20% jitter up to retry.backoff.max.ms (KIP-580); also the wait before a failed request or metadata fetch is retried"`
	RetryBackoffMaxMs                     int    `koanf:"retry.backoff.max.ms" doc:"upper bound of a batch's exponential retry backoff; at or below retry.backoff.ms the backoff stays at retry.backoff.max.ms"`
	ReconnectBackoffMs                    int    `koanf:"reconnect.backoff.ms" doc:"initial wait before reconnecting to a broker"`
	ReconnectBackoffMaxMs                 int    `koanf:"reconnect.backoff.max.ms" doc:"upper bound of the exponential, jittered reconnect backoff"`
	MetadataMaxAgeMs                      int    `koanf:"metadata.max.age.ms" doc:"metadata is refreshed at least this often"`
	MetadataMaxIdleMs                     int    `koanf:"metadata.max.idle.ms" doc:"a topic not sent to for this long is dropped from metadata refreshes; the next send to it waits for its metadata again; at least 5000"`
	MetadataRecoveryStrategy              string `koanf:"metadata.recovery.strategy" doc:"rebootstrap: go back to bootstrap.servers when no known broker can be reached (KIP-899), after metadata.recovery.rebootstrap.trigger.ms without a metadata update and when a broker answers REBOOTSTRAP_REQUIRED (KIP-1102); none: never"`
	MetadataRecoveryRebootstrapTriggerMs  int    `koanf:"metadata.recovery.rebootstrap.trigger.ms" doc:"with metadata.recovery.strategy=rebootstrap: rebootstrap after this long without a successful metadata update"`
	ConnectionsMaxIdleMs                  int    `koanf:"connections.max.idle.ms" doc:"idle connections are closed after this long"`
	SocketConnectionSetupTimeoutMs        int    `koanf:"socket.connection.setup.timeout.ms" doc:"how long a connection (TCP, TLS, SASL) may take to set up"`
	AllowAutoCreateTopics                 bool   `koanf:"allow.auto.create.topics" doc:"ask the broker to create a missing topic (if the broker allows it)"`
	PartitionerIgnoreKeys                 bool   `koanf:"partitioner.ignore.keys" doc:"use sticky partitioning even for keyed records"`
	PartitionerAdaptivePartitioningEnable bool   `koanf:"partitioner.adaptive.partitioning.enable" doc:"keyless records: draw the next sticky partition against the partitions' queues of batches, so a slow broker gets fewer (KIP-794); false: uniformly"`
	PartitionerAvailabilityTimeoutMs      int    `koanf:"partitioner.availability.timeout.ms" doc:"with adaptive partitioning: a broker that has had batches ready and could not take them for this long gets no new keyless records until it can; 0: never left out"`
	MaxReceiveBytes                       int32  `koanf:"max.receive.bytes" doc:"largest response frame accepted from a broker"`
	EnableMetricsPush                     bool   `koanf:"enable.metrics.push" doc:"push the producer's metrics to the broker when the cluster operator subscribed to them (KIP-714: org.apache.kafka.producer.* names, as the Java client); false never asks"`

	TransactionalID      string `koanf:"transactional.id" doc:"enables the transactional API (InitTransactions, BeginTransaction, CommitTransaction, AbortTransaction) for programs built on the producer; a newer producer with the same id fences this one; requires enable.idempotence=true and acks=all. The agent sets it itself with --exactly-once (--transactional-id) and refuses it here"`
	TransactionTimeoutMs int    `koanf:"transaction.timeout.ms" doc:"longest a transaction may stay open before the coordinator aborts it; at most the broker's transaction.max.timeout.ms"`

	ClientDNSLookup  string `koanf:"client.dns.lookup" doc:"use_all_dns_ips (every address a broker's name resolves to is tried in turn) or resolve_canonical_bootstrap_servers_only (each bootstrap server becomes the canonical names of its addresses, as Kerberos needs behind a DNS alias or a load balancer)"`
	SecurityProtocol string `koanf:"security.protocol" doc:"PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"`
	SASLMechanism    string `koanf:"sasl.mechanism" doc:"PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM or GSSAPI"`
	SASLUsername     string `koanf:"sasl.username" doc:"SASL user name"`
	SASLPassword     string `koanf:"sasl.password" doc:"SASL password (never logged)" secret:"true"`

	// SASL OAUTHBEARER (oauth.go): the Java client's names, with librdkafka's where they differ;
	// sasl.jaas.config as a Java client writes it (jaas.go).
	SASLJAASConfig                         string  `koanf:"sasl.jaas.config" doc:"a Java client's JAAS line, read for its credentials: OAuthBearerLoginModule's clientId, clientSecret and scope, PlainLoginModule's or ScramLoginModule's username and password; the properties above win over it (never logged)" secret:"true"`
	SASLLoginCallbackHandlerClass          string  `koanf:"sasl.login.callback.handler.class" doc:"accepted for Java configs: empty or Kafka's OAuthBearerLoginCallbackHandler; software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler makes OAUTHBEARER's tokens with AWS's MSK IAM signer (AWS credentials, no token endpoint)"`
	SASLClientCallbackHandlerClass         string  `koanf:"sasl.client.callback.handler.class" doc:"accepted for Java configs: with sasl.mechanism=AWS_MSK_IAM, empty or software.amazon.msk.auth.iam.IAMClientCallbackHandler"`
	SASLOAuthBearerMethod                  string  `koanf:"sasl.oauthbearer.method" doc:"librdkafka's name for where the token comes from: oidc (the token endpoint, the only one supported; empty means the same)"`
	SASLOAuthBearerTokenEndpointURL        string  `koanf:"sasl.oauthbearer.token.endpoint.url" doc:"OAUTHBEARER: the OAuth/OIDC token endpoint (https:// or http://), asked for a token by the client credentials grant; or file:///path of a file holding one JWT that another process keeps fresh (read again at every authentication)"`
	SASLOAuthBearerClientID                string  `koanf:"sasl.oauthbearer.client.id" doc:"OAUTHBEARER: the client id for the token endpoint (librdkafka's name)"`
	SASLOAuthBearerClientSecret            string  `koanf:"sasl.oauthbearer.client.secret" doc:"OAUTHBEARER: the client secret for the token endpoint (librdkafka's name; never logged)" secret:"true"`
	SASLOAuthBearerClientCredentialsID     string  `koanf:"sasl.oauthbearer.client.credentials.client.id" doc:"OAUTHBEARER: the Java client's name of sasl.oauthbearer.client.id"`
	SASLOAuthBearerClientCredentialsSecret string  `koanf:"sasl.oauthbearer.client.credentials.client.secret" doc:"OAUTHBEARER: the Java client's name of sasl.oauthbearer.client.secret (never logged)" secret:"true"`
	SASLOAuthBearerScope                   string  `koanf:"sasl.oauthbearer.scope" doc:"OAUTHBEARER: the scope asked of the token endpoint (optional)"`
	SASLKerberosServiceName                string  `koanf:"sasl.kerberos.service.name" doc:"GSSAPI: the broker's Kerberos service name (its principal is NAME/host@REALM, host the broker's host name); required, usually kafka"`
	SASLKerberosPrincipal                  string  `koanf:"sasl.kerberos.principal" doc:"GSSAPI: the client's principal (librdkafka's name; a Java client writes principal= in sasl.jaas.config)"`
	SASLKerberosKeytab                     string  `koanf:"sasl.kerberos.keytab" doc:"GSSAPI: the client's keytab file (librdkafka's name; a Java client writes useKeyTab=true keyTab= in sasl.jaas.config)"`
	SASLKerberosKinitCmd                   string  `koanf:"sasl.kerberos.kinit.cmd" doc:"accepted for Java and librdkafka configs, not run: the login and its renewal are the agent's own (Kerberos in Go)"`
	SASLKerberosMinTimeBeforeRelogin       int     `koanf:"sasl.kerberos.min.time.before.relogin" doc:"accepted for Java configs; the ticket is renewed (or the keytab logged in again) at 5/6 of its remaining lifetime"`
	SASLKerberosTicketRenewWindowFactor    float64 `koanf:"sasl.kerberos.ticket.renew.window.factor" doc:"accepted for Java configs (0.5 to 1.0); see sasl.kerberos.min.time.before.relogin"`
	SASLKerberosTicketRenewJitter          float64 `koanf:"sasl.kerberos.ticket.renew.jitter" doc:"accepted for Java configs; see sasl.kerberos.min.time.before.relogin"`
	SASLOAuthBearerJWTRetrieverClass       string  `koanf:"sasl.oauthbearer.jwt.retriever.class" doc:"OAUTHBEARER, the Java client's choice of grant: empty or Kafka's DefaultJwtRetriever, ClientCredentialsJwtRetriever or FileJwtRetriever (client credentials, or a token file), JwtBearerJwtRetriever (the JWT bearer grant, KIP-1139: sasl.oauthbearer.assertion.*)"`
	SASLOAuthBearerGrantType               string  `koanf:"sasl.oauthbearer.grant.type" doc:"OAUTHBEARER, librdkafka's choice of grant: client_credentials (empty) or urn:ietf:params:oauth:grant-type:jwt-bearer"`
	SASLOAuthBearerAssertionAlgorithm      string  `koanf:"sasl.oauthbearer.assertion.algorithm" doc:"JWT bearer grant: RS256 or ES256, the assertion's signature"`
	SASLOAuthBearerAssertionPrivateKeyFile string  `koanf:"sasl.oauthbearer.assertion.private.key.file" doc:"JWT bearer grant: the PEM private key (PKCS#8, PKCS#1 or SEC 1; an encrypted PKCS#8 one with the passphrase below) that signs the assertion"`
	SASLOAuthBearerAssertionKeyPassphrase  string  `koanf:"sasl.oauthbearer.assertion.private.key.passphrase" doc:"JWT bearer grant: the passphrase of an encrypted PKCS#8 key (PBES2, AES-CBC: openssl pkcs8 -topk8 -v2 aes-256-cbc; never logged)" secret:"true"`
	SASLOAuthBearerAssertionTemplateFile   string  `koanf:"sasl.oauthbearer.assertion.template.file" doc:"JWT bearer grant: JSON {\"header\": {...}, \"payload\": {...}} added to the assertion, winning over the claims below (librdkafka: sasl.oauthbearer.assertion.jwt.template.file)"`
	SASLOAuthBearerAssertionJWTTemplate    string  `koanf:"sasl.oauthbearer.assertion.jwt.template.file" doc:"librdkafka's name of sasl.oauthbearer.assertion.template.file"`
	SASLOAuthBearerAssertionFile           string  `koanf:"sasl.oauthbearer.assertion.file" doc:"JWT bearer grant: a file holding a ready assertion that another process keeps fresh, instead of signing one"`
	SASLOAuthBearerAssertionClaimIss       string  `koanf:"sasl.oauthbearer.assertion.claim.iss" doc:"JWT bearer grant: the assertion's iss claim"`
	SASLOAuthBearerAssertionClaimSub       string  `koanf:"sasl.oauthbearer.assertion.claim.sub" doc:"JWT bearer grant: the assertion's sub claim"`
	SASLOAuthBearerAssertionClaimAud       string  `koanf:"sasl.oauthbearer.assertion.claim.aud" doc:"JWT bearer grant: the assertion's aud claim"`
	SASLOAuthBearerAssertionClaimExpSec    int     `koanf:"sasl.oauthbearer.assertion.claim.exp.seconds" doc:"JWT bearer grant: the assertion's exp, this many seconds after it is signed"`
	SASLOAuthBearerAssertionClaimNbfSec    int     `koanf:"sasl.oauthbearer.assertion.claim.nbf.seconds" doc:"JWT bearer grant: the assertion's nbf, this many seconds before it is signed"`
	SASLOAuthBearerAssertionClaimJTI       bool    `koanf:"sasl.oauthbearer.assertion.claim.jti.include" doc:"JWT bearer grant: a random jti claim (a UUID) in each assertion"`
	SASLOAuthBearerExtensions              string  `koanf:"sasl.oauthbearer.extensions" doc:"OAUTHBEARER: SASL extensions sent with the token (KIP-342), name=value pairs separated by commas (librdkafka's form; a Java client writes extension_name=\"value\" in sasl.jaas.config, also read), e.g. logicalCluster=lkc-abc123,identityPoolId=pool-xyz for Confluent Cloud"`
	SASLLoginRefreshWindowFactor           float64 `koanf:"sasl.login.refresh.window.factor" doc:"OAUTHBEARER: the token is refreshed at this fraction of its lifetime, 0.5 to 1.0"`
	SASLLoginRefreshWindowJitter           float64 `koanf:"sasl.login.refresh.window.jitter" doc:"OAUTHBEARER: up to this fraction of the lifetime is added at random to the refresh time, 0 to 0.25"`
	SASLLoginRefreshMinPeriodSeconds       int     `koanf:"sasl.login.refresh.min.period.seconds" doc:"OAUTHBEARER: least time between two refreshes, 0 to 900 (ignored with the buffer for a token too short-lived for both)"`
	SASLLoginRefreshBufferSeconds          int     `koanf:"sasl.login.refresh.buffer.seconds" doc:"OAUTHBEARER: time before expiry kept free of the refresh, 0 to 3600"`
	SASLLoginRetryBackoffMs                int     `koanf:"sasl.login.retry.backoff.ms" doc:"OAUTHBEARER: wait after a failed token fetch, doubled after each further failure"`
	SASLLoginRetryBackoffMaxMs             int     `koanf:"sasl.login.retry.backoff.max.ms" doc:"OAUTHBEARER: upper bound of the token fetch retry backoff"`
	SASLLoginConnectTimeoutMs              int     `koanf:"sasl.login.connect.timeout.ms" doc:"OAUTHBEARER: how long connecting to the token endpoint may take"`
	SASLLoginReadTimeoutMs                 int     `koanf:"sasl.login.read.timeout.ms" doc:"OAUTHBEARER: how long the token endpoint may take to answer"`
	SSLCALocation                          string  `koanf:"ssl.ca.location" doc:"PEM file of CAs to trust; empty: the system roots"`
	SSLCertificateLocation                 string  `koanf:"ssl.certificate.location" doc:"PEM client certificate for mutual TLS"`
	SSLKeyLocation                         string  `koanf:"ssl.key.location" doc:"PEM private key of the client certificate"`
	SSLEndpointIdentificationAlgorithm     string  `koanf:"ssl.endpoint.identification.algorithm" doc:"https verifies the broker's host name; empty turns the check off"`
}

// DefaultConfig returns the Java client's defaults. The settings that the accumulator, the
// network layer and metadata own are read from their constants, so each default is written once.
func DefaultConfig() Config {
	return Config{
		ClientID:                              "kafkatrail",
		Acks:                                  "all",
		EnableIdempotence:                     true,
		CompressionType:                       "none",
		CompressionGzipLevel:                  accumulator.GzipDefaultLevel,
		CompressionLz4Level:                   accumulator.Lz4DefaultLevel,
		CompressionZstdLevel:                  accumulator.ZstdDefaultLevel,
		BatchSize:                             accumulator.DefaultBatchSize,
		LingerMs:                              5,
		BufferMemory:                          accumulator.DefaultBufferMemory,
		MaxInFlightRequestsPerConnection:      network.DefaultMaxInFlight,
		Retries:                               math.MaxInt32,
		DeliveryTimeoutMs:                     millis(accumulator.DefaultDeliveryTimeout),
		RequestTimeoutMs:                      millis(network.DefaultRequestTimeout),
		MaxBlockMs:                            60000,
		MaxRequestSize:                        1 << 20,
		RetryBackoffMs:                        100,
		RetryBackoffMaxMs:                     1000,
		PartitionerAdaptivePartitioningEnable: true,
		ReconnectBackoffMs:                    millis(network.DefaultReconnectBackoff),
		ReconnectBackoffMaxMs:                 millis(network.DefaultReconnectBackoffMax),
		MetadataMaxAgeMs:                      300000,
		MetadataMaxIdleMs:                     millis(metadata.DefaultMaxIdle),
		MetadataRecoveryStrategy:              "rebootstrap",
		MetadataRecoveryRebootstrapTriggerMs:  millis(network.DefaultRebootstrapTrigger),
		ConnectionsMaxIdleMs:                  millis(network.DefaultConnectionsMaxIdle),
		SocketConnectionSetupTimeoutMs:        millis(network.DefaultSocketConnectionSetupTimeout),
		AllowAutoCreateTopics:                 true,
		MaxReceiveBytes:                       network.DefaultMaxReceiveBytes,
		EnableMetricsPush:                     true,
		TransactionTimeoutMs:                  60000,
		SecurityProtocol:                      "PLAINTEXT",
		// SASL OAUTHBEARER: the Java client's login defaults (network/oauth.go).
		SASLLoginRefreshWindowFactor:        network.DefaultLoginRefreshWindowFactor,
		SASLLoginRefreshWindowJitter:        network.DefaultLoginRefreshWindowJitter,
		SASLLoginRefreshMinPeriodSeconds:    int(network.DefaultLoginRefreshMinPeriod / time.Second),
		SASLLoginRefreshBufferSeconds:       int(network.DefaultLoginRefreshBuffer / time.Second),
		SASLLoginRetryBackoffMs:             millis(network.DefaultLoginRetryBackoff),
		SASLLoginRetryBackoffMaxMs:          millis(network.DefaultLoginRetryBackoffMax),
		SASLLoginConnectTimeoutMs:           millis(network.DefaultLoginTimeout),
		SASLLoginReadTimeoutMs:              millis(network.DefaultLoginTimeout),
		ClientDNSLookup:                     dnsUseAllIPs,
		SASLOAuthBearerAssertionAlgorithm:   "RS256",
		SASLOAuthBearerAssertionClaimExpSec: 300,
		SASLOAuthBearerAssertionClaimNbfSec: 60,
		SSLEndpointIdentificationAlgorithm:  "https",
	}
}

// millis is a default duration as the Config's milliseconds.
func millis(d time.Duration) int { return int(d / time.Millisecond) }

// ConfigError names the property that is wrong, so a user can find it in their file.
type ConfigError struct {
	Key    string
	Reason string
}

func (e *ConfigError) Error() string { return e.Key + ": " + e.Reason }

// Validate checks every property and returns all problems joined, each naming its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &ConfigError{Key: key, Reason: fmt.Sprintf(format, args...)})
	}
	if len(c.BootstrapServers) == 0 {
		bad("bootstrap.servers", "at least one host:port is required")
	}
	for _, s := range c.BootstrapServers {
		if i := strings.LastIndexByte(s, ':'); i <= 0 || i == len(s)-1 {
			bad("bootstrap.servers", "%q is not host:port", s)
		}
	}
	acks, err := parseAcks(c.Acks)
	if err != nil {
		bad("acks", "%v", err)
	}
	if _, err := accumulator.ParseCodec(c.CompressionType); err != nil {
		bad("compression.type", "%v", err)
	}
	// ProducerConfig: define(COMPRESSION_GZIP_LEVEL_CONFIG, ..., CompressionType.GZIP.levelValidator(), ...)
	// and the same for lz4 and zstd, whatever compression.type is.
	for _, l := range []struct {
		key   string
		codec accumulator.Codec
		level int
	}{
		{"compression.gzip.level", accumulator.CodecGzip, c.CompressionGzipLevel},
		{"compression.lz4.level", accumulator.CodecLz4, c.CompressionLz4Level},
		{"compression.zstd.level", accumulator.CodecZstd, c.CompressionZstdLevel},
	} {
		if err := accumulator.CheckLevel(l.codec, l.level); err != nil {
			bad(l.key, "%v", err)
		}
	}
	positive := []struct {
		key string
		v   int64
	}{
		{"batch.size", int64(c.BatchSize)},
		{"buffer.memory", c.BufferMemory},
		{"max.in.flight.requests.per.connection", int64(c.MaxInFlightRequestsPerConnection)},
		{"delivery.timeout.ms", int64(c.DeliveryTimeoutMs)},
		{"request.timeout.ms", int64(c.RequestTimeoutMs)},
		{"max.request.size", int64(c.MaxRequestSize)},
		{"metadata.max.age.ms", int64(c.MetadataMaxAgeMs)},
		{"connections.max.idle.ms", int64(c.ConnectionsMaxIdleMs)},
		{"socket.connection.setup.timeout.ms", int64(c.SocketConnectionSetupTimeoutMs)},
		{"max.receive.bytes", int64(c.MaxReceiveBytes)},
		{"transaction.timeout.ms", int64(c.TransactionTimeoutMs)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			bad(p.key, "must be positive, got %d", p.v)
		}
	}
	nonNegative := []struct {
		key string
		v   int
	}{
		{"linger.ms", c.LingerMs},
		{"retries", c.Retries},
		{"max.block.ms", c.MaxBlockMs},
		{"retry.backoff.ms", c.RetryBackoffMs},
		{"retry.backoff.max.ms", c.RetryBackoffMaxMs},
		{"partitioner.availability.timeout.ms", c.PartitionerAvailabilityTimeoutMs},
		{"reconnect.backoff.ms", c.ReconnectBackoffMs},
		{"reconnect.backoff.max.ms", c.ReconnectBackoffMaxMs},
	}
	for _, p := range nonNegative {
		if p.v < 0 {
			bad(p.key, "must not be negative, got %d", p.v)
		}
	}
	// Java's ProducerConfig defines it atLeast(5000): a shorter idle time would drop a topic
	// sent to now and then from every refresh and make each send wait for its metadata.
	switch strings.ToLower(c.MetadataRecoveryStrategy) {
	case "rebootstrap", "none":
	default:
		bad("metadata.recovery.strategy", "must be rebootstrap or none, got %q", c.MetadataRecoveryStrategy)
	}
	if c.MetadataRecoveryRebootstrapTriggerMs <= 0 {
		bad("metadata.recovery.rebootstrap.trigger.ms", "must be positive, got %d", c.MetadataRecoveryRebootstrapTriggerMs)
	}
	if c.MetadataMaxIdleMs < minMetadataMaxIdleMs {
		bad("metadata.max.idle.ms", "must be at least %d, got %d", minMetadataMaxIdleMs, c.MetadataMaxIdleMs)
	}
	if c.DeliveryTimeoutMs > 0 && c.DeliveryTimeoutMs < c.LingerMs+c.RequestTimeoutMs {
		bad("delivery.timeout.ms", "must be at least linger.ms + request.timeout.ms (%d), got %d",
			c.LingerMs+c.RequestTimeoutMs, c.DeliveryTimeoutMs)
	}
	if c.EnableIdempotence {
		if err == nil && acks != -1 {
			bad("enable.idempotence", "enable.idempotence=true requires acks=all")
		}
		if c.MaxInFlightRequestsPerConnection > 5 {
			bad("enable.idempotence", "enable.idempotence=true requires max.in.flight.requests.per.connection <= 5, got %d",
				c.MaxInFlightRequestsPerConnection)
		}
		if c.Retries == 0 {
			bad("enable.idempotence", "enable.idempotence=true requires retries > 0")
		}
	}
	if c.TransactionalID != "" {
		// As in Java: a transaction's records are written idempotently, and its commit means
		// every record is on every in-sync replica.
		if !c.EnableIdempotence {
			bad("enable.idempotence", "transactional.id=%q requires enable.idempotence=true", c.TransactionalID)
		}
		if err == nil && acks != -1 {
			bad("acks", "transactional.id=%q requires acks=all, got %q", c.TransactionalID, c.Acks)
		}
	}
	switch c.ClientDNSLookup {
	case "", dnsUseAllIPs, dnsCanonicalBootstrap:
	default:
		bad("client.dns.lookup", "must be %s or %s, got %q", dnsUseAllIPs, dnsCanonicalBootstrap, c.ClientDNSLookup)
	}
	switch strings.ToUpper(c.SecurityProtocol) {
	case "PLAINTEXT", "SSL":
	case "SASL_PLAINTEXT", "SASL_SSL":
		switch strings.ToUpper(c.SASLMechanism) {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
			c.validateJAAS(bad)
			if c.saslUsername() == "" {
				bad("sasl.username", "required with security.protocol=%s", c.SecurityProtocol)
			}
		case network.SASLOAuthBearer:
			c.validateJAAS(bad)
			if c.awsMSKOAuth() {
				c.validateAWSMSK(bad)
			} else {
				c.validateOAuthBearer(bad)
			}
		case mskiam.Mechanism:
			c.validateJAAS(bad)
			c.validateAWSMSK(bad)
		case kerberos.Mechanism:
			c.validateJAAS(bad)
			c.validateGSSAPI(bad)
		default:
			bad("sasl.mechanism", "must be PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM or GSSAPI with security.protocol=%s, got %q",
				c.SecurityProtocol, c.SASLMechanism)
		}
	default:
		bad("security.protocol", "must be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, got %q", c.SecurityProtocol)
	}
	if (c.SSLCertificateLocation == "") != (c.SSLKeyLocation == "") {
		bad("ssl.certificate.location", "ssl.certificate.location and ssl.key.location must be set together")
	}
	switch c.SSLEndpointIdentificationAlgorithm {
	case "", "https":
	default:
		bad("ssl.endpoint.identification.algorithm", "must be https or empty, got %q", c.SSLEndpointIdentificationAlgorithm)
	}
	return errors.Join(errs...)
}

// minMetadataMaxIdleMs is the least metadata.max.idle.ms the Java client accepts.
const minMetadataMaxIdleMs = 5000

// parseAcks maps the Java spellings to the wire value: "all" and "-1" are -1.
func parseAcks(s string) (int16, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "all", "-1":
		return -1, nil
	case "1":
		return 1, nil
	case "0":
		return 0, nil
	}
	return 0, fmt.Errorf("must be 0, 1, all or -1, got %q", s)
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// maxVersions caps request versions for a transactional producer at the last ones before
// transaction version 2 (KIP-890), as the Java client does while it runs transactions the
// classic way: Produce v11, AddPartitionsToTxn v3 (v4+ is the brokers' batched form), EndTxn v4
// (v5 bumps the epoch at every commit). From Produce v12 a TV2 broker would add partitions to
// the transaction itself and expect the epoch to move under us. Nil when not transactional.
func (c *Config) maxVersions() map[int16]int16 {
	if c.TransactionalID == "" {
		return nil
	}
	return map[int16]int16{0: 11, 24: 3, 26: 4}
}

// NetworkConfig is the network layer's configuration for these properties (security,
// timeouts, reconnect backoff): for another client of the same cluster, such as the agent's
// reader of its exactly-once state topic (package consumer).
func (c *Config) NetworkConfig() (network.Config, error) { return c.networkConfig() }
