#!/usr/bin/env bash
# The release's install tests (make test-release, after make release): the Go tests of the
# release/ module against dist/ and a real Kafka broker of their own (scripts/kafka/with-broker.sh
# on base port 19292, state in /tmp/kafkatrail-kafka-release, always stopped afterwards):
#   - dist/ as a whole: SHA256SUMS, the tarballs, every binary (static, its arch, --version,
#     go version -m), a second build of the same commit byte for byte identical, the image
#     pushed to an in-memory registry on 127.0.0.1;
#   - the .deb installed on this machine (dpkg -i), the installed agent shipping lines as its
#     unit runs it, an upgrade to a higher version keeping a changed agent.yaml and the
#     checkpoints, dpkg -r, dpkg -P; the .rpm queried with rpm (-qip, -qlp, -qcp, scripts);
#   - the OCI image read by skopeo (layout, archive, containers-storage), unpacked by umoci and
#     run in a chroot as its user, shipping lines.
# It needs root (dpkg, chroot), and refuses to start when kafkatrail-agent, its user or its
# directories are already on the machine; it leaves none of them behind.
#
#   scripts/release-test.sh [go test flags, e.g. -run TestDeb]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
DIST=${KAFKATRAIL_DIST:-$ROOT/dist}

[[ $(id -u) -eq 0 ]] || { echo "release-test.sh: needs root (dpkg -i, chroot)" >&2; exit 1; }
[[ -f $DIST/metadata.json ]] || { echo "release-test.sh: no $DIST/metadata.json: run make release first" >&2; exit 1; }
for tool in dpkg rpm skopeo umoci chroot; do
  command -v "$tool" >/dev/null || { echo "release-test.sh: $tool not found: run scripts/deps.sh" >&2; exit 1; }
done

export KAFKA_PORT=${RELEASE_KAFKA_PORT:-19292}
export KAFKATRAIL_STATE=${RELEASE_KAFKA_STATE:-/tmp/kafkatrail-kafka-release}
export KAFKATRAIL_RELEASE_TEST=1 KAFKATRAIL_DIST=$DIST GO
cd "$ROOT/release"
exec "$ROOT/scripts/kafka/with-broker.sh" sh -c '"$GO" vet ./... && "$GO" test -count=1 -timeout 20m -v "$@" ./...' sh "$@"
