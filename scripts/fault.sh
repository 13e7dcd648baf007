#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The fault-injection suite (docs/FAULTS.md): installs what is missing
# (scripts/deps.sh), builds the fault programs into build-fault/, starts a
# 3-member etcd cluster and runs every scenario against it, checks the recorded
# leadership history and prints a table (also written to fault-results.md in the
# run directory).
#
#   scripts/fault.sh                          every scenario, 3 rounds (< 8 minutes)
#   scripts/fault.sh --duration 30m           random-mix soak, with RSS per candidate
#   scripts/fault.sh --rounds 5 --seed 42 --scenarios kill,stop,partition
#
# Options go to fault-runner: --rounds N, --seed N, --ttl S, --scenarios a,b,
# --duration D (30m, 1h, 90s), --out DIR, --list. Exit status: 0 no violation,
# 1 a safety or liveness violation, 3 the run could not be completed, 130 ^C.
# Every process, the network namespaces and the veth pair are removed on exit.
# The netns scenarios' network lives only in two namespaces the run makes (the
# candidates' and the forwarder's, joined by a veth pair); the runner fails the
# run (status 3) if the root namespace gains an address outside 127.0.0.0/8 and
# ::1 meanwhile (docs/FAULTS.md, "The network namespaces").
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# ELECTOR_FAULT_BUILD=DIR: an already configured build tree (scripts/coverage.sh
# passes its coverage build), built as it is instead of build-fault/.
BUILD=${ELECTOR_FAULT_BUILD:-$ROOT/build-fault}

"$ROOT/scripts/deps.sh"

if ! grep -Eq '^[[:space:]]*add_subdirectory\(fault\)' "$ROOT/CMakeLists.txt"; then
    echo "fault.sh: CMakeLists.txt does not build fault/ yet: add 'add_subdirectory(fault)'" >&2
    exit 3
fi

echo "== building into $BUILD"
if [ -z "${ELECTOR_FAULT_BUILD:-}" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DELECTOR_WERROR=ON -DELECTOR_TESTS=OFF -DELECTOR_BENCH=OFF \
        >/dev/null
fi
cmake --build "$BUILD" -j"$(nproc)" --target elector_fault_runner >/dev/null

args=("$@")
has_out=0
for a in "$@"; do
    case $a in --out|--out=*) has_out=1 ;; --list|--help) has_out=1 ;; esac
done
if [ $has_out -eq 0 ]; then
    OUT=$BUILD/fault-run-$(date +%Y%m%d-%H%M%S)
    args+=(--out "$OUT")
fi

# A tag names this run's network namespaces (elf-TAG: the candidates', elfw-TAG:
# the forwarder's) and its veth pair (elfcTAG, elffTAG: one end in each, gone
# with them); etcd's data directories go under a private TMPDIR. The trap
# removes them even if the runner itself could not (killed with SIGKILL).
TAG=$(( $$ % 10000000 ))
export TMPDIR=$BUILD/tmp-$TAG
mkdir -p "$TMPDIR"
RUNNER_PID=

cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    if [ -n "$RUNNER_PID" ] && kill -0 "$RUNNER_PID" 2>/dev/null; then
        kill -TERM "$RUNNER_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$RUNNER_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$RUNNER_PID" 2>/dev/null || true
        wait "$RUNNER_PID" 2>/dev/null || true
    fi
    if command -v ip >/dev/null; then
        $SUDO ip netns del "elf-$TAG" 2>/dev/null || true
        $SUDO ip netns del "elfw-$TAG" 2>/dev/null || true
    fi
    rm -rf "$TMPDIR"
    exit $rc
}

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then
        SUDO="sudo --preserve-env=TMPDIR,ELECTOR_ETCD_DIR"
    else
        echo "fault.sh: not root and no sudo: the netns scenarios will be skipped" >&2
    fi
fi

trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# In the background, so that a signal to this script runs the trap at once.
$SUDO "$BUILD/fault/fault-runner" --tag "$TAG" "${args[@]}" &
RUNNER_PID=$!
set +e
wait "$RUNNER_PID"
rc=$?
set -e
RUNNER_PID=
exit $rc
