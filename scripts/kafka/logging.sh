# Shared by broker.sh and cluster.sh (sourced, not run): Kafka's logging configuration for
# the version in use. Kafka 4.x logs through log4j2 (a YAML file, -Dlog4j2.configurationFile);
# Kafka 3.x through reload4j, a log4j 1.x (a properties file, -Dlog4j.configuration=file:...),
# and ignores the other's option. Both write everything to the console, which the callers
# redirect to a log file.

# kafka_major VERSION: prints the major version (3, 4, ...).
kafka_major() { echo "${1%%.*}"; }

# write_logging VERSION DIR: writes DIR's broker (INFO to stdout) and tools (WARN to stderr)
# logging configurations for VERSION.
write_logging() {
  local version=$1 dir=$2
  mkdir -p "$dir"
  if (($(kafka_major "$version") >= 4)); then
    cat >"$dir/log4j2.yaml" <<'EOF'
# Broker logging: everything to the console, which the script redirects to the broker's log.
Configuration:
  name: kafkatrail-test-broker
  Appenders:
    Console:
      name: STDOUT
      target: SYSTEM_OUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.raft
        level: INFO
      - name: state.change.logger
        level: WARN
EOF
    cat >"$dir/tools-log4j2.yaml" <<'EOF'
Configuration:
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDERR
EOF
  else
    cat >"$dir/log4j.properties" <<'EOF'
# Broker logging (Kafka 3.x, reload4j): everything to the console, which the script
# redirects to the broker's log.
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.raft=INFO
log4j.logger.state.change.logger=WARN
EOF
    cat >"$dir/tools-log4j.properties" <<'EOF'
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
EOF
  fi
}

# logging_opt VERSION DIR broker|tools: prints the JVM option that selects the configuration
# write_logging wrote.
logging_opt() {
  local version=$1 dir=$2 which=$3 prefix=
  [[ $which == tools ]] && prefix=tools-
  if (($(kafka_major "$version") >= 4)); then
    echo "-Dlog4j2.configurationFile=$dir/${prefix}log4j2.yaml"
  else
    echo "-Dlog4j.configuration=file:$dir/${prefix}log4j.properties"
  fi
}

# have_logging VERSION DIR: true if write_logging VERSION DIR was done.
have_logging() {
  if (($(kafka_major "$1") >= 4)); then
    [[ -f $2/log4j2.yaml && -f $2/tools-log4j2.yaml ]]
  else
    [[ -f $2/log4j.properties && -f $2/tools-log4j.properties ]]
  fi
}
