#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what elector needs from Debian's packages, when it is missing.
# Idempotent; runs as root or through sudo.
#   scripts/deps.sh build   what building the library and the tool needs (a
#                           compiler, cmake, the -dev packages): nothing else
#   scripts/deps.sh demo    what scripts/demo.sh needs: the build's packages,
#                           etcd (server and client), ss and ps; nothing else
#   scripts/deps.sh         the build's packages and what the tests, benchmarks and package
#                           checks use (etcd, curl, valgrind, clang, clang-format,
#                           iproute2, gnuplot, prometheus, systemd, lintian, ...);
#                           scripts/test.sh and the other scripts call this
#   scripts/deps.sh bench   the same and the benchmark-only anchors
#                           (python3-etcd3, python3-etcd3gw: bench/python_locks.py)
#   scripts/deps.sh coverage  the same and gcovr (scripts/coverage.sh;
#                           optional, not in the default set)
set -euo pipefail

BUILD=(build-essential cmake pkg-config libnghttp2-dev libprotobuf-c-dev
       protobuf-c-compiler libssl-dev libmicrohttpd-dev)
TEST=(etcd-server etcd-client openssl curl valgrind clang clang-format iproute2
      gnuplot-nox prometheus systemd debhelper dpkg-dev lintian dh-python python3-all-dev
      python3-dev python3-setuptools python3-pytest python3-eventlet python3-gevent
      mypy python3-tooz universal-ctags spin doxygen)
# The demo: etcd and etcdctl, ss (free ports) and ps (the frozen leader's tree).
DEMO=(etcd-server etcd-client iproute2 procps)
BENCH=(python3-etcd3 python3-etcd3gw)
COVERAGE=(gcovr)

case "${1:-all}" in
build) PKGS=("${BUILD[@]}") ;;
demo) PKGS=("${BUILD[@]}" "${DEMO[@]}") ;;
all | test) PKGS=("${BUILD[@]}" "${TEST[@]}") ;;
bench) PKGS=("${BUILD[@]}" "${TEST[@]}" "${BENCH[@]}") ;;
coverage) PKGS=("${BUILD[@]}" "${TEST[@]}" "${COVERAGE[@]}") ;;
*) echo "usage: scripts/deps.sh [build|demo|test|bench|coverage]" >&2; exit 2 ;;
esac

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null ||
        missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
