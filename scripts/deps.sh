#!/usr/bin/env bash
# Installs what the tests need on a Debian/Ubuntu machine, idempotently and quietly:
#   - Debian packages: kcat (a librdkafka peer), a Java 17+ runtime, Maven, OpenSSL,
#     gcc (go test -race needs cgo), chromium (the status page's headless browser test;
#     about 100 MB to download, 350 MB installed), rpm, skopeo and umoci (make test-release
#     inspects the .rpm and the OCI image with them; dpkg installs the .deb), systemd
#     (systemd-analyze rates the unit's sandbox), strace (its system call filter against
#     the agent's calls), and MIT Kerberos's KDC and tools (krb5-kdc, krb5-admin-server,
#     krb5-user: the test broker's GSSAPI listener has a realm of its own) -- apt-get runs
#     only when one is missing;
#   - the Apache Kafka 4.4.0 jars from Maven Central (scripts/kafka/fetch.sh, cached).
# Go itself is a prerequisite (see go.mod for the version).
#
#   deps.sh          everything the tests need
#   deps.sh --demo   only what `make demo` needs: no gcc, no chromium (the demo's first look
#                    should not wait for a browser download it does not use)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
demo=0
[[ ${1:-} == --demo ]] && demo=1

missing=()
command -v kcat >/dev/null || missing+=(kcat)
command -v java >/dev/null || missing+=(default-jre-headless)
command -v mvn >/dev/null || missing+=(maven)
command -v openssl >/dev/null || missing+=(openssl)
if ((!demo)); then
  command -v gcc >/dev/null || missing+=(gcc libc6-dev)
  command -v chromium >/dev/null || missing+=(chromium)
  command -v rpm >/dev/null || missing+=(rpm)
  command -v skopeo >/dev/null || missing+=(skopeo)
  command -v umoci >/dev/null || missing+=(umoci)
  # systemd-analyze security --offline rates the unit (release/'s TestUnitExposure); strace
  # records the installed agent's system calls for the unit's filter (TestDeb).
  command -v systemd-analyze >/dev/null || missing+=(systemd)
  command -v strace >/dev/null || missing+=(strace)
  # The test broker's Kerberos realm (scripts/kafka/kdc.sh): MIT's KDC, kadmin.local, kinit.
  [[ -x /usr/sbin/krb5kdc ]] || command -v krb5kdc >/dev/null || missing+=(krb5-kdc)
  [[ -x /usr/sbin/kadmin.local ]] || command -v kadmin.local >/dev/null || missing+=(krb5-admin-server)
  command -v kinit >/dev/null || missing+=(krb5-user)
fi
[[ -e /etc/ssl/certs/ca-certificates.crt ]] || missing+=(ca-certificates)

if ((${#missing[@]})); then
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "deps.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  command -v apt-get >/dev/null || { echo "deps.sh: no apt-get; install by hand: ${missing[*]}" >&2; exit 1; }
  echo "deps.sh: installing ${missing[*]}" >&2
  log=$(mktemp)
  if ! { "${sudo[@]}" apt-get update -qq &&
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
    </dev/null >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "deps.sh: apt-get failed" >&2
    exit 1
  fi
  rm -f "$log"
fi

java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
if [[ -z $java_major || ${java_major%%.*} -lt 17 ]]; then
  echo "deps.sh: Kafka 4.x needs Java 17 or newer (found '${java_major:-none}')" >&2
  exit 1
fi
command -v go >/dev/null || { echo "deps.sh: go not found on PATH (see go.mod for the version)" >&2; exit 1; }

"$ROOT/scripts/kafka/fetch.sh" >/dev/null
