#!/usr/bin/env bash
# A real single-node Apache Kafka 4.4.0 broker (KRaft, broker+controller) on
# 127.0.0.1, for tests. Jars come from Maven Central (see fetch.sh, pom.xml).
# KAFKA_VERSION=3.9.1 runs Kafka 3.9.1 instead (pom-3.xml, reload4j logging).
#
#   broker.sh start    fresh state (wipes data, regenerates TLS), start, wait until ready;
#                      exits 75 if the state dir or a port is in use by another broker
#   broker.sh resume   start again on the existing data (after stop or kill), wait until ready
#   broker.sh stop     TERM the broker by its PID (KILL after 30 s), remove the pid file
#   broker.sh kill     kill -9 the broker by its PID (a crash, for fault tests)
#   broker.sh status   exit 0 if running (prints PID and bootstrap), 3 if not
#   broker.sh env      print `export KAFKA_...=...` lines for tests: eval "$(broker.sh env)"
#   broker.sh java CLASS [ARGS...]   run a Kafka Java tool (e.g.
#                      org.apache.kafka.tools.ProducerPerformance) with the broker's classpath
#
# Listeners (KAFKA_PORT is the base port, default 9092):
#   PLAINTEXT       127.0.0.1:KAFKA_PORT      (9092)
#   CONTROLLER      127.0.0.1:KAFKA_PORT+1    (9093)
#   SASL_PLAINTEXT  127.0.0.1:KAFKA_PORT+2    (9094)  PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; alice/alice-secret
#   SSL             127.0.0.1:KAFKA_PORT+3    (9095)  cert signed by $STATE/tls/ca.pem; client cert requested
#   OAUTH           127.0.0.1:KAFKA_PORT+4    (9096)  SASL_PLAINTEXT with OAUTHBEARER only: JWTs (RS256) checked
#                   by Kafka's OAuthBearerValidatorCallbackHandler against $STATE/oauth/jwks.json (a file, so
#                   the broker needs no token server to start), audience kafkatrail-broker, issuer
#                   kafkatrail-oauthtest, no clock skew, sessions of at most KAFKA_OAUTH_REAUTH_MS (default
#                   3000) so clients must re-authenticate (KIP-368). The signing key is $STATE/oauth/key.pem:
#                   tests serve tokens signed with it (internal/oauthtest).
#   MSKIAM          127.0.0.1:KAFKA_PORT+5    (9097)  SASL_PLAINTEXT with OAUTHBEARER only: tokens are AWS MSK IAM's
#                   (SigV4-presigned URLs), checked by scripts/kafka/mskiam/MskIamValidator.java (compiled at
#                   start, on the broker's classpath) against the test key pair KAFKA_MSKIAM_ACCESS_KEY /
#                   KAFKA_MSKIAM_SECRET_KEY: Amazon MSK's IAM check, on 127.0.0.1.
#   KERBEROS        127.0.0.1:KAFKA_PORT+6    (9098)  SASL_PLAINTEXT with GSSAPI only: the broker is
#                   kafka/localhost@KAFKATRAIL.TEST (the JDK's Krb5LoginModule, its keytab from the realm that
#                   scripts/kafka/kdc.sh makes and runs on 127.0.0.1:KAFKA_PORT+7, started and stopped with
#                   the broker), sessions of at most KAFKA_KERBEROS_REAUTH_MS (default 10000) so clients
#                   re-authenticate with fresh service tickets (KIP-368).
#
# Environment: KAFKATRAIL_STATE (default /tmp/kafkatrail-kafka), KAFKATRAIL_CACHE (jar cache),
# KAFKA_PORT, KAFKA_HEAP_OPTS (default -Xms512m -Xmx1g), KAFKA_START_TIMEOUT (seconds, default 90),
# KAFKA_ADVERTISED_PORT (PLAINTEXT's advertised port, default KAFKA_PORT: a proxy's port, so that
# clients cannot bypass the proxy; read by start, kept by resume), JAVA (default: java on PATH / $JAVA_HOME),
# KAFKA_VERSION (default 4.4.0; read by start, which records it in the state dir for resume, env, java),
# KAFKA_OAUTH_REAUTH_MS (the OAUTH listener's connections.max.reauth.ms, default 3000; read by start),
# KAFKATRAIL_CLIENT_TELEMETRY_PLUGIN (opt-in, read by start: 1 compiles the test client telemetry
# receiver scripts/kafka/telemetry/FileClientTelemetry.java with javac against the broker's jars,
# puts it on the broker's classpath and in metric.reporters, so that the broker accepts KIP-714
# pushes and appends each payload to $STATE/client-telemetry.bin; env then exports
# KAFKA_CLIENT_TELEMETRY_FILE. Unset: the broker has no receiver and does not offer the APIs).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=broker
STATE=${KAFKATRAIL_STATE:-/tmp/kafkatrail-kafka}
PORT=${KAFKA_PORT:-9092}
CONTROLLER_PORT=$((PORT + 1))
SASL_PORT=$((PORT + 2))
SSL_PORT=$((PORT + 3))
OAUTH_PORT=$((PORT + 4))
MSKIAM_PORT=$((PORT + 5))
KERBEROS_PORT=$((PORT + 6))
KDC_PORT=$((PORT + 7))
ADVERTISED_PORT=${KAFKA_ADVERTISED_PORT:-$PORT}
HOST=127.0.0.1
HEAP=${KAFKA_HEAP_OPTS:--Xms512m -Xmx1g}
START_DEADLINE=${KAFKA_START_TIMEOUT:-90}
STOP_DEADLINE=30

SASL_USER=alice
SASL_PASSWORD=alice-secret
STORE_PASSWORD=kafkatrail-test

KDC_STATE=$STATE/kdc
KERBEROS_REAUTH_MS=${KAFKA_KERBEROS_REAUTH_MS:-10000}
# The KERBEROS listener needs MIT's KDC (krb5-kdc, krb5-admin-server: scripts/deps.sh installs
# them for the tests); without them the broker starts without it (make demo's deps).
if command -v krb5kdc >/dev/null || [[ -x /usr/sbin/krb5kdc && -x /usr/sbin/kadmin.local ]]; then
  KERBEROS=1
  KERBEROS_LISTENER=,KERBEROS://$HOST:$KERBEROS_PORT
else
  KERBEROS=0
  KERBEROS_LISTENER=
fi
MSKIAM_ACCESS_KEY=AKIAKAFKATRAILTEST
MSKIAM_SECRET_KEY=kafkatrail/test+secret/key
MSKIAM_DIR=$STATE/mskiam-plugin
TELEMETRY_DIR=$STATE/telemetry-plugin
TELEMETRY_FILE=$STATE/client-telemetry.bin
TELEMETRY_CLASS=org.kafkatrail.telemetry.FileClientTelemetry
PIDFILE=$STATE/broker.pid
LOG=$STATE/broker.log
CONF=$STATE/config
DATA=$STATE/data
TLS=$STATE/tls
OAUTH=$STATE/oauth
OAUTH_ISSUER=kafkatrail-oauthtest
OAUTH_AUDIENCE=kafkatrail-broker
OAUTH_KID=kafkatrail-test
OAUTH_REAUTH_MS=${KAFKA_OAUTH_REAUTH_MS:-3000}
# The process behind the PID file must be kafka.Kafka with our config.
PID_MATCH="kafka.Kafka $CONF/server.properties"

# shellcheck source=scripts/kafka/common.sh
. "$HERE/common.sh"

write_configs() {
  # Kafka 4.x: log4j2 YAML; 3.x: reload4j properties (logging.sh).
  write_logging "$VERSION" "$CONF"

  cat >"$CONF/server.properties" <<EOF
# Generated by scripts/kafka/broker.sh: single-node KRaft test broker.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=$HOST:$CONTROLLER_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT,SASL_PLAINTEXT://$HOST:$SASL_PORT,SSL://$HOST:$SSL_PORT,OAUTH://$HOST:$OAUTH_PORT,MSKIAM://$HOST:$MSKIAM_PORT$KERBEROS_LISTENER
advertised.listeners=PLAINTEXT://$HOST:$ADVERTISED_PORT,CONTROLLER://$HOST:$CONTROLLER_PORT,SASL_PLAINTEXT://$HOST:$SASL_PORT,SSL://$HOST:$SSL_PORT,OAUTH://$HOST:$OAUTH_PORT,MSKIAM://$HOST:$MSKIAM_PORT$KERBEROS_LISTENER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,OAUTH:SASL_PLAINTEXT,MSKIAM:SASL_PLAINTEXT,KERBEROS:SASL_PLAINTEXT
log.dirs=$DATA

num.partitions=1
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0

# SASL_PLAINTEXT: PLAIN users come from the JAAS line; SCRAM users are added at format time.
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER="$SASL_PASSWORD";
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;

# OAUTH: OAUTHBEARER with JWTs validated against a JWKS file (the JVM is allowed to read it by
# the org.apache.kafka.sasl.oauthbearer.allowed.urls/.files system properties, launch_kafka).
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
listener.name.oauth.oauthbearer.connections.max.reauth.ms=$OAUTH_REAUTH_MS
sasl.oauthbearer.jwks.endpoint.url=file://$OAUTH/jwks.json
sasl.oauthbearer.expected.audience=$OAUTH_AUDIENCE
sasl.oauthbearer.expected.issuer=$OAUTH_ISSUER
sasl.oauthbearer.clock.skew.seconds=0

# MSKIAM: OAUTHBEARER with AWS MSK IAM tokens, checked by the test's SigV4 validator.
listener.name.mskiam.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.mskiam.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker" accessKeyId="$MSKIAM_ACCESS_KEY" secretAccessKey="$MSKIAM_SECRET_KEY";
listener.name.mskiam.oauthbearer.sasl.server.callback.handler.class=org.kafkatrail.mskiam.MskIamValidator

# SSL: broker cert signed by the test CA ($TLS/ca.pem); client certificates requested, not required.
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS/broker.p12
ssl.keystore.password=$STORE_PASSWORD
ssl.key.password=$STORE_PASSWORD
ssl.truststore.type=PEM
ssl.truststore.location=$TLS/ca.pem
ssl.client.auth=requested
EOF
  if ((KERBEROS)); then
    cat >>"$CONF/server.properties" <<EOF

# KERBEROS: GSSAPI, the broker kafka/localhost of the test realm (kdc.sh), the JDK's Krb5LoginModule.
listener.name.kerberos.sasl.enabled.mechanisms=GSSAPI
listener.name.kerberos.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="$KDC_STATE/broker.keytab" principal="kafka/localhost@KAFKATRAIL.TEST";
listener.name.kerberos.gssapi.connections.max.reauth.ms=$KERBEROS_REAUTH_MS
sasl.kerberos.service.name=kafka
EOF
  fi
  if [[ -n ${KAFKATRAIL_CLIENT_TELEMETRY_PLUGIN:-} ]]; then
    cat >>"$CONF/server.properties" <<EOF

# KIP-714: the tests' client telemetry receiver (KAFKATRAIL_CLIENT_TELEMETRY_PLUGIN).
metric.reporters=$TELEMETRY_CLASS
kafkatrail.client.telemetry.file=$TELEMETRY_FILE
EOF
  fi
}

# build_plugin LIB SOURCE DIR: compiles a test plugin of the broker's (the client telemetry
# receiver, the MSK IAM validator) against the broker's jars into DIR (javac from the JDK that
# runs the broker).
build_plugin() {
  local javac log=$3.log
  javac=$(dirname "$(readlink -f "$(command -v "$JAVA")")")/javac
  [[ -x $javac ]] || javac=javac
  rm -rf "$3"
  mkdir -p "$3"
  "$javac" -nowarn -d "$3" -cp "$1/*" "$2" >"$log" 2>&1 || { cat "$log" >&2; die "javac of $2 failed"; }
}
build_telemetry_plugin() { build_plugin "$1" "$HERE/telemetry/FileClientTelemetry.java" "$TELEMETRY_DIR"; }
build_mskiam_plugin() { build_plugin "$1" "$HERE/mskiam/MskIamValidator.java" "$MSKIAM_DIR"; }

# telemetry_enabled: the running (or resumed) configuration has the receiver.
telemetry_enabled() { grep -q "^metric.reporters=$TELEMETRY_CLASS" "$CONF/server.properties" 2>/dev/null; }

# gen_tls: a self-signed CA, a broker cert (SAN IP:127.0.0.1, DNS:localhost) and a client cert.
gen_tls() {
  command -v openssl >/dev/null || die "openssl not found (run scripts/deps.sh)"
  (
    cd "$TLS"
    umask 077
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 -sha256 \
      -subj "/CN=kafkatrail test CA" -keyout ca.key -out ca.pem \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign"
    printf '%s\n' "basicConstraints=CA:FALSE" \
      "keyUsage=critical,digitalSignature" \
      "extendedKeyUsage=serverAuth,clientAuth" \
      "subjectAltName=IP:127.0.0.1,DNS:localhost" >broker.ext
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" -keyout broker.key -out broker.csr
    openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 -sha256 \
      -extfile broker.ext -out broker.pem
    openssl pkcs12 -export -in broker.pem -inkey broker.key -certfile ca.pem -name broker \
      -out broker.p12 -passout "pass:$STORE_PASSWORD"
    printf '%s\n' "basicConstraints=CA:FALSE" \
      "keyUsage=critical,digitalSignature" \
      "extendedKeyUsage=clientAuth" >client.ext
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$SASL_USER" -keyout client.key -out client.csr
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 -sha256 \
      -extfile client.ext -out client.pem
    rm -f ./*.csr ./*.ext ca.srl
    chmod 644 ca.pem broker.pem client.pem
    chmod 600 ca.key broker.key client.key broker.p12
  ) >"$STATE/tls.log" 2>&1 || { cat "$STATE/tls.log" >&2; die "TLS material generation failed"; }
}

# gen_oauth: the RSA key that signs the test tokens and the JWKS (RFC 7517) of its public half,
# the modulus turned from openssl's hex into base64url by printf (no other tool needed).
gen_oauth() {
  (
    cd "$OAUTH"
    umask 077
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out key.pem
    local hex n
    hex=$(openssl rsa -in key.pem -noout -modulus | cut -d= -f2)
    # shellcheck disable=SC2059 # the format is the modulus's bytes as \xHH escapes
    n=$(printf "$(sed 's/../\\x&/g' <<<"$hex")" | base64 -w0 | tr '+/' '-_' | tr -d '=')
    printf '{"keys":[{"kty":"RSA","use":"sig","alg":"RS256","kid":"%s","n":"%s","e":"AQAB"}]}\n' "$OAUTH_KID" "$n" >jwks.json
    chmod 644 jwks.json
  ) >"$STATE/oauth.log" 2>&1 || { cat "$STATE/oauth.log" >&2; die "OAuth key generation failed"; }
}

# broker_ready: true once the broker logged its start and its PLAINTEXT port accepts.
broker_ready() { grep -q 'Kafka Server started' "$LOG" 2>/dev/null && tcp_open "$PORT"; }

cmd_start() {
  local pid
  [[ -n $STATE && $STATE != / ]] || die "refusing state dir '$STATE'"
  mkdir -p "$(dirname "$STATE")"
  # One broker per state dir. The lock is taken here and inherited by the
  # broker JVM, so it is held while that broker lives (the kernel drops it when
  # the process exits); a second start on the same state dir never wipes the
  # state of a live broker. Exit 75 (busy) tells callers to pick another
  # KAFKATRAIL_STATE/KAFKA_PORT (scripts/kafka/with-broker.sh does).
  lock_state "another broker or start" "stop it with '$0 stop' or set KAFKATRAIL_STATE and KAFKA_PORT"
  if pid=$(running_pid); then
    log "already running (pid $pid); stop it with '$0 stop'"
    exit 75
  fi
  rm -f "$PIDFILE"
  ports_free "another broker? set KAFKA_PORT to another base port" "$PORT" "$CONTROLLER_PORT" "$SASL_PORT" "$SSL_PORT" "$OAUTH_PORT" "$MSKIAM_PORT" "$KERBEROS_PORT"
  command -v "$JAVA" >/dev/null || die "java not found (run scripts/deps.sh)"
  local lib
  lib=$(fetch)
  local t0=$SECONDS

  mkdir -p "$STATE"
  local keep=${1:-}
  if [[ $keep == keep && -d $DATA && -f $CONF/server.properties ]]; then
    # resume: the same data, configuration and certificates, as after a broker crash or restart.
    local t_tls=$SECONDS t_format=$SECONDS
    mv -f "$LOG" "$LOG.previous" 2>/dev/null || true
  else
  rm -rf "$DATA" "$CONF" "$TLS" "$OAUTH" "$LOG" "$STATE/format.log" "$STATE/tls.log" "$STATE/oauth.log" "$STATE/version" \
    "$TELEMETRY_DIR" "$TELEMETRY_FILE" "$MSKIAM_DIR"
  mkdir -p "$DATA" "$CONF" "$TLS" "$OAUTH"
  [[ -z ${KAFKATRAIL_CLIENT_TELEMETRY_PLUGIN:-} ]] || build_telemetry_plugin "$lib"
  build_mskiam_plugin "$lib"
  # The KDC must not hold the state dir's lock: it outlives a killed broker, which resumes.
  if ((KERBEROS)); then
    KDC_STATE=$KDC_STATE KDC_PORT=$KDC_PORT "$HERE/kdc.sh" start {lockfd}>&-
  else
    log "no KERBEROS listener: krb5kdc not installed (scripts/deps.sh installs it)"
  fi
  gen_tls
  gen_oauth
  write_configs
  local t_tls=$SECONDS

  local cid
  cid=$(cluster_id)
  # A short-lived tool JVM: C1 only and serial GC start fastest.
  if ! "$JAVA" -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -cp "$lib/*" "$(logging_opt "$VERSION" "$CONF" tools)" \
      kafka.tools.StorageTool format --standalone -t "$cid" -c "$CONF/server.properties" \
      --add-scram "SCRAM-SHA-256=[name=$SASL_USER,password=$SASL_PASSWORD]" \
      --add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$SASL_PASSWORD]" \
      </dev/null >"$STATE/format.log" 2>&1; then
    cat "$STATE/format.log" >&2
    die "kafka-storage format failed"
  fi
  echo "$VERSION" >"$STATE/version"
  local t_format=$SECONDS
  fi

  # Kafka 3.9.1 and 4.x read the JWKS only from a URL (and file) these allow.
  KAFKA_JVM_PROPS=("-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://$OAUTH/jwks.json"
    "-Dorg.apache.kafka.sasl.oauthbearer.allowed.files=$OAUTH/jwks.json")
  [[ -d $MSKIAM_DIR/org ]] || build_mskiam_plugin "$lib"
  if kerberos_enabled; then
    KDC_STATE=$KDC_STATE KDC_PORT=$KDC_PORT "$HERE/kdc.sh" resume {lockfd}>&-
    KAFKA_JVM_PROPS+=("-Djava.security.krb5.conf=$KDC_STATE/krb5.conf")
  fi
  KAFKA_EXTRA_CP=$MSKIAM_DIR
  if telemetry_enabled; then
    [[ -d $TELEMETRY_DIR/org ]] || build_telemetry_plugin "$lib"
    KAFKA_EXTRA_CP=$KAFKA_EXTRA_CP:$TELEMETRY_DIR
  fi
  launch_kafka "$PIDFILE" "$LOG" "$lib" "$CONF/server.properties"
  daemon_wait broker_ready 60
  log "started Kafka $VERSION pid $(cat "$PIDFILE") in $((SECONDS - t0))s (tls $((t_tls - t0))s, format $((t_format - t_tls))s, broker $((SECONDS - t_format))s): PLAINTEXT $HOST:$PORT SASL_PLAINTEXT $HOST:$SASL_PORT SSL $HOST:$SSL_PORT OAUTH $HOST:$OAUTH_PORT MSKIAM $HOST:$MSKIAM_PORT${KERBEROS_LISTENER:+ KERBEROS $HOST:$KERBEROS_PORT} (log: $LOG)"
}

cmd_kill() {
  local pid
  pid=$(running_pid) || { log "not running"; return 0; }
  kill -KILL "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$PIDFILE"
  log "killed pid $pid"
}

# oauth_reauth_ms: the OAUTH listener's connections.max.reauth.ms as the running config has it.
oauth_reauth_ms() {
  local v
  v=$(sed -n 's/^listener.name.oauth.oauthbearer.connections.max.reauth.ms=//p' "$CONF/server.properties" 2>/dev/null)
  echo "${v:-$OAUTH_REAUTH_MS}"
}

cmd_env() {
  local lib
  lib=$(fetch --print)
  printf 'export %s=%q\n' \
    KAFKA_BOOTSTRAP "$HOST:$PORT" \
    KAFKA_SASL_BOOTSTRAP "$HOST:$SASL_PORT" \
    KAFKA_SSL_BOOTSTRAP "$HOST:$SSL_PORT" \
    KAFKA_SASL_USER "$SASL_USER" \
    KAFKA_SASL_PASSWORD "$SASL_PASSWORD" \
    KAFKA_CA_FILE "$TLS/ca.pem" \
    KAFKA_CLIENT_CERT "$TLS/client.pem" \
    KAFKA_CLIENT_KEY "$TLS/client.key" \
    KAFKA_OAUTH_BOOTSTRAP "$HOST:$OAUTH_PORT" \
    KAFKA_OAUTH_KEY "$OAUTH/key.pem" \
    KAFKA_OAUTH_KID "$OAUTH_KID" \
    KAFKA_OAUTH_ISSUER "$OAUTH_ISSUER" \
    KAFKA_OAUTH_AUDIENCE "$OAUTH_AUDIENCE" \
    KAFKA_OAUTH_REAUTH_MS "$(oauth_reauth_ms)" \
    KAFKA_MSKIAM_BOOTSTRAP "$HOST:$MSKIAM_PORT" \
    KAFKA_MSKIAM_ACCESS_KEY "$MSKIAM_ACCESS_KEY" \
    KAFKA_MSKIAM_SECRET_KEY "$MSKIAM_SECRET_KEY" \
    KAFKA_LIB "$lib" \
    KAFKA_BROKER_LOG "$LOG"
  if telemetry_enabled; then
    printf 'export %s=%q\n' KAFKA_CLIENT_TELEMETRY_FILE "$TELEMETRY_FILE"
  fi
  if kerberos_enabled; then
    printf 'export %s=%q\n' KAFKA_KERBEROS_BOOTSTRAP "$HOST:$KERBEROS_PORT" KAFKA_KERBEROS_REAUTH_MS "$(kerberos_reauth_ms)"
    KDC_STATE=$KDC_STATE KDC_PORT=$KDC_PORT "$HERE/kdc.sh" env
  fi
}

# kerberos_enabled: the running (or resumed) configuration has the KERBEROS listener.
kerberos_enabled() { grep -q '^listener.name.kerberos.sasl.enabled.mechanisms=' "$CONF/server.properties" 2>/dev/null; }

# kerberos_reauth_ms: the KERBEROS listener's connections.max.reauth.ms as the running config has it.
kerberos_reauth_ms() {
  local v
  v=$(sed -n 's/^listener.name.kerberos.gssapi.connections.max.reauth.ms=//p' "$CONF/server.properties" 2>/dev/null)
  echo "${v:-$KERBEROS_REAUTH_MS}"
}

# cmd_stop: the broker, then its KDC.
cmd_stop() {
  daemon_stop
  if [[ -f $KDC_STATE/kdc.pid ]]; then
    KDC_STATE=$KDC_STATE KDC_PORT=$KDC_PORT "$HERE/kdc.sh" stop
  fi
}

case ${1:-} in
  start) cmd_start ;;
  resume) cmd_start keep ;;
  stop) cmd_stop ;;
  kill) cmd_kill ;;
  status) daemon_status "PLAINTEXT $HOST:$PORT SASL_PLAINTEXT $HOST:$SASL_PORT SSL $HOST:$SSL_PORT OAUTH $HOST:$OAUTH_PORT" ;;
  env) cmd_env ;;
  java) shift; kafka_java -Xmx512m "$@" ;;
  *) echo "usage: $0 start|stop|status|env|java CLASS [ARGS...]" >&2; exit 2 ;;
esac
