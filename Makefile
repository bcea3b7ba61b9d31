# kafkatrail: build and test entry points. `make test` installs what it needs
# (scripts/deps.sh), starts a real Apache Kafka 4.4.0 broker on 127.0.0.1
# (scripts/kafka/broker.sh), runs vet and every test against it, and always
# stops the broker; then the Helm chart's tests (test-deploy, no broker); then the producer's
# and network's tests against Kafka 3.9.1 (test-kafka39). See docs/testing.md.

GO ?= go
GOTEST_FLAGS ?= -race -count=1 -timeout 25m
PKGS ?= ./...

.PHONY: all agent deps broker-start broker-stop broker-status test test-short fmt vet test-kafka39
.PHONY: tools dashboards test-tools test-e2e test-deploy k8s-manifest
.PHONY: release release-push test-release

all: vet test-short

# The agent as it is meant to run: a static binary (no cgo, so no C library mapped into it and
# less resident memory; the Go DNS resolver instead of glibc's), paths trimmed.
agent:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/agent ./cmd/agent

deps:
	scripts/deps.sh

# A broker by hand needs Java, Maven and kcat, not the tests' browser and packagers.
.PHONY: deps-demo
deps-demo:
	scripts/deps.sh --demo

broker-start cluster-start: deps-demo

broker-start broker-stop broker-status: broker-%:
	scripts/kafka/broker.sh $*

# A three-node KRaft cluster (scripts/kafka/cluster.sh) on 127.0.0.1:29092,29102,29112, for
# iterating by hand on fault tests: eval "$$(scripts/kafka/cluster.sh env)".
.PHONY: cluster-start cluster-stop cluster-status
cluster-start cluster-stop cluster-status: cluster-%:
	scripts/kafka/cluster.sh $*

# vet and the tests both run; the target fails if either failed.
# The broker has the tests' KIP-714 client telemetry receiver (KAFKATRAIL_CLIENT_TELEMETRY_PLUGIN):
# it offers the telemetry APIs, and subscribes only the client ids a test subscribes.
test: test-go
	$(MAKE) test-deploy
	$(MAKE) test-release
	$(MAKE) test-kafka39
	$(MAKE) test-e2e
	$(MAKE) reliability-ci

# make test's first step: vet and every Go test against the 4.4.0 broker. Under load (the
# command docs/testing.md gives): scripts/under-load.sh make test-go
.PHONY: test-go
test-go: deps
	KAFKATRAIL_CLIENT_TELEMETRY_PLUGIN=1 scripts/kafka/with-broker.sh sh -c '\
	  rc=0; \
	  $(GO) vet $(PKGS) || rc=$$?; \
	  $(GO) test $(GOTEST_FLAGS) $(PKGS) || rc=$$?; \
	  (cd tools && $(GO) vet ./... && $(GO) test -short -count=1 ./...) || rc=$$?; \
	  exit $$rc'

# The producer's and network's real-broker tests against Kafka 3.9.1 (older fleets): a
# single 3.9.1 broker (scripts/kafka/broker.sh with KAFKA_VERSION=3.9.1, jars fetched once into
# kafka-3.9.1/lib) on its own ports and state dir, always stopped afterwards.
KAFKA39_PORT ?= 19192
KAFKA39_STATE ?= /tmp/kafkatrail-kafka-39
KAFKA39_PKGS ?= ./producer/ ./network/ ./internal/kafkatest/
test-kafka39: deps
	KAFKA_VERSION=3.9.1 KAFKA_PORT=$(KAFKA39_PORT) KAFKATRAIL_STATE=$(KAFKA39_STATE) KAFKATRAIL_CLIENT_TELEMETRY_PLUGIN=1 \
	  scripts/kafka/with-broker.sh $(GO) test $(GOTEST_FLAGS) $(KAFKA39_PKGS)

# Unit tests only: no broker (tests needing it skip themselves under -short).
test-short:
	$(GO) test -race -short $(PKGS)

fmt:
	$(GO) fmt $(PKGS)

vet:
	$(GO) vet $(PKGS)

# The observability tools (tools/go.mod): Jaeger and Prometheus built once into
# ${KAFKATRAIL_CACHE:-~/.cache/kafkatrail}/bin (about 25 min for both on a busy 2-core
# machine the first time, module download included; a second run takes under a second).
tools:
	scripts/tools.sh build

# Regenerate dashboards/*.json from tools/dashboards and telemetry/names.go.
dashboards:
	cd tools && $(GO) run ./dashboards

# The tools module's own tests (dashboards up to date, strict decoding, PromQL parses);
# the end-to-end tests skip under -short.
test-tools:
	cd tools && $(GO) vet ./... && $(GO) test -short -count=1 ./...

# The Helm chart (deploy/helm/kafkatrail-agent) and its own module (deploy/go.mod, Helm v4 as a
# library): helm lint, rendered with the defaults and with every option on, each object decoded
# strictly into its Kubernetes type and checked (read-only host mounts, probes, grace period,
# security context, credentials from Secrets, config checksum), the rendered agent.yaml through
# `agent check`, configs/kubernetes-daemonset.yaml up to date. No broker, and no -race: it tests
# YAML, not concurrency. Its first build is long: Helm's packages bring the whole Kubernetes
# client (docs/testing.md has the times).
test-deploy:
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 ./...

# Regenerate configs/kubernetes-daemonset.yaml: the chart rendered with its defaults (release
# kafkatrail-agent, namespace logging), as test-deploy expects it.
k8s-manifest:
	cd deploy && KAFKATRAIL_UPDATE_MANIFEST=1 $(GO) test -count=1 -run '^TestPlainManifestUpToDate$$' .

# Release artifacts of HEAD in dist/ (release/, a module of its own; see release/README.md):
# static binaries in tarballs, .deb and .rpm for amd64 and arm64, the multi-arch OCI image
# (dist/oci and an OCI archive), SHA256SUMS; reproducible (SOURCE_DATE_EPOCH: the commit's time).
# RELEASE_VERSION=x.y.z overrides VERSION.
release:
	cd release && $(GO) run ./cmd/release --out ../dist $(if $(RELEASE_VERSION),--version $(RELEASE_VERSION))

# dist/'s image to $(REGISTRY)/kafkatrail-agent:VERSION (and MAJOR.MINOR and latest for a
# release that is not a pre-release), its Helm chart to $(REGISTRY)/charts/kafkatrail-agent:VERSION,
# with the docker credentials: make release-push REGISTRY=ghcr.io/kafkatrail
release-push:
	cd release && $(GO) run ./cmd/release push --registry "$(REGISTRY)" --dir ../dist

# As root: the .deb installed, upgraded, removed and purged on this machine, the .rpm queried,
# the image read by skopeo and run in a chroot, against a broker of its own (base port 19292).
test-release: deps release
	GO=$(GO) scripts/release-test.sh

# End to end: the real broker, Jaeger and Prometheus (scripts/with-observability.sh), the
# agent built from cmd/agent; traces must reach Jaeger with all six stages and every
# dashboard query must return data. The first run builds the tools (see `tools`).
test-e2e: deps tools
	scripts/kafka/with-broker.sh scripts/with-observability.sh \
	  sh -c 'cd tools && $(GO) test -count=1 -timeout 15m -v ./e2e/'

# Side by side (issue 6, docs/benchmarks.md): the agent against kcat, a franz-go program and
# Kafka's ProducerPerformance; the file path against kcat -l, the OpenTelemetry Collector and
# rsyslog; telemetry's cost; CPU a minute at steady rates beside tail -F | kcat and the
# Collector; memory with the broker down. Installs what it needs, starts its own broker,
# writes docs/benchmarks.md and docs/benchmarks.json (about 50 min in full on 2 cores;
# about 9 min for a quick BENCH_RECORDS=200000 BENCH_RUNS=1). CI does not run it.
.PHONY: bench
bench:
	scripts/bench.sh

# A real broker and the agent tailing a rotating sample log, with its page, on 127.0.0.1;
# Jaeger and Prometheus join when found or built (the first build takes about 15 minutes on 2
# cores, in the background); prints where to look; Ctrl-C stops everything (scripts/demo.sh).
.PHONY: demo demo-check
demo:
	scripts/demo.sh

# The unattended demo: a trace with all six stages must be on the page and in Jaeger within
# 90 s (Jaeger must be built already, `make tools`, or on PATH). scripts/demo-time.sh times a
# fresh clone with empty caches.
demo-check:
	DEMO_SECONDS=90 DEMO_HTTP_PORT=18686 scripts/demo.sh

# Reliability figures (scripts/reliability.sh; the reliability/ module starts its own broker):
# `reliability` runs the full sizes and rewrites docs/reliability.md; `reliability-ci` is the
# shortened form (about 14 minutes: scenarios, the three-node cluster scenarios (about 10
# minutes; they start scripts/kafka/cluster.sh), then each fuzz target briefly), the last step of
# make test.
.PHONY: reliability reliability-ci
reliability: deps
	scripts/reliability.sh full
reliability-ci: deps
	scripts/reliability.sh ci
