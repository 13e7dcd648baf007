#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The benchmark gate (issue 39 item 3): a few minutes of scripts/bench.sh's
# measurements whose figures must stay under the thresholds of bench/gate.conf.
# It prints the figures and exits non-zero when one passes its threshold.
#
#   scripts/bench-gate.sh                 the gate (builds build-bench/ as bench.sh)
#   scripts/bench-gate.sh --build DIR     the programs of an existing build tree
#                                         (scripts/test.sh: build/)
#   scripts/bench-gate.sh --only graceful,crash,herd
#   scripts/bench-gate.sh --self-test     the gate, then its own test: the graceful
#                                         section again with a build that has a
#                                         planted 2 ms delay (build-gate-plant/,
#                                         -DELECTOR_BENCH_PLANT_DELAY_US=2000) on
#                                         the same cluster; passes only when the
#                                         gate passes and the planted build fails
#   scripts/bench-gate.sh --out DIR       keep the raw samples and summaries in DIR
#   scripts/bench-gate.sh --conf FILE     other thresholds (default bench/gate.conf)
#
# On a private 3-member etcd cluster on free loopback ports (the cluster code of
# scripts/bench-common.sh, shared with bench.sh), every client on one follower:
#   graceful  `elector campaign` vs `etcdctl elect`, alternating in the same run
#             (bench/proc_bench.c graceful): p50 and p99 ratios elector/etcdctl
#             (signal -> the successor's line, timed here for both tools), and
#             the p50 of elector's handover (the old leader's resign -> the
#             successor's elected, on the two processes' CLOCK_MONOTONIC stamps)
#             over the "Delete -> watch event" floor measured in the same gaps
#   crash     `elector campaign` with the release helper, its leader SIGKILLed
#             (proc_bench releasecrash, TTL 10 s): p50 and p99 in ms
#   herd      N = 1000 waiting candidates (bench/herd.c): etcd requests per
#             leadership change (etcd's own grpc counters)
# A section with a figure past its threshold runs once more (GATE_ATTEMPTS in
# bench/gate.conf) and fails the gate only if it fails again.
# About 1.5 minutes on 2 cores (--self-test: about 1.5 more, and a build).
# Every process it starts (etcd members, the benchmark programs and through
# them the candidates) is killed by PID on exit, also on failure or ^C.
#
# Exit status: 0 every figure within its threshold, 1 a figure past it (or,
# with --self-test, the planted delay not caught), 2 usage, 3 the benchmark
# could not run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# bench_build, start_cluster, pick_endpoint, stop_cluster
. "$ROOT/scripts/bench-common.sh"

CONF=$ROOT/bench/gate.conf
BUILD=""
ONLY=graceful,crash,herd
SELF_TEST=0
OUT=""
while [ $# -gt 0 ]; do
    case $1 in
    --build) BUILD=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --self-test) SELF_TEST=1 ;;
    --out) OUT=$2; shift ;;
    --conf) CONF=$2; shift ;;
    -h | --help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-gate: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }
# shellcheck source=bench/gate.conf
. "$CONF"

TARGETS=(elector_tool elector_release elector_bench_proc_bench elector_bench_herd)
if [ -z "$BUILD" ]; then
    echo "== bench-gate: building build-bench (RelWithDebInfo)"
    bench_build build-bench "${TARGETS[@]}"
    BUILD=$ROOT/build-bench
else
    BUILD=$(cd "$BUILD" && pwd)
    cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}" >/dev/null
fi
PLANT=$ROOT/build-gate-plant
if [ $SELF_TEST = 1 ]; then
    echo "== bench-gate: building build-gate-plant (a planted 2 ms delay in the graceful path)"
    bench_build "$PLANT" elector_tool elector_release elector_bench_proc_bench -- \
        -DCMAKE_C_FLAGS=-DELECTOR_BENCH_PLANT_DELAY_US=2000 -DELECTOR_WERROR=ON
fi

DIR=$(mktemp -d "${TMPDIR:-/tmp}/elector-gate.XXXXXX")
JOB_PID=
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$JOB_PID" ]; then
        # proc_bench SIGKILLs its candidates on SIGTERM; a killed leader's
        # release helper revokes its lease within milliseconds: let it, while
        # the cluster is up, so that it exits at once.
        kill -TERM "$JOB_PID" 2>/dev/null || true
        wait "$JOB_PID" 2>/dev/null || true
        sleep 0.5
    fi
    stop_cluster
    if [ -n "$OUT" ]; then mkdir -p "$OUT" && cp -r "$DIR"/res-* "$OUT"/ 2>/dev/null || true; fi
    rm -rf "$DIR"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a benchmark program in the background (a signal to this script reaches
# its trap at once, which ends the program by PID); its stdout to $1.
run() {
    local out=$1 rc=0
    shift
    "$@" >"$out" &
    JOB_PID=$!
    wait "$JOB_PID" || rc=$?
    JOB_PID=
    if [ $rc != 0 ]; then
        echo "bench-gate: $(basename "$2") failed (status $rc); its log:" >&2
        tail -n 20 "$DIR/children.log" >&2 || true
        exit 3
    fi
}

# fig FILE BENCH TOOL MEASURE FIELD: one figure of a summary line
fig() {
    awk -v b="$2" -v t="tool=$3" -v m="measure=$4" -v f="$5" '
        $1 == b && $2 == t && $3 == m {
            for (i = 4; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) { print kv[2]; exit } }
        }' "$1"
}
# the herd line's field FIELD
herd_fig() { awk -v f="$2" '$1 == "herd" { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) { print kv[2]; exit } } }' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 <= 0) print "inf"; else printf "%.3f\n", a / b }'; }

# check NAME VALUE MAX GOAL: one row; SEC_FAILED=1 when VALUE > MAX
SEC_FAILED=0
check() {
    local verdict=ok
    if [ -z "$2" ] || awk -v v="$2" -v m="$3" 'BEGIN { exit !(v == "inf" || v + 0 > m + 0) }'; then
        verdict=FAIL
        SEC_FAILED=1
    fi
    printf '  %-4s %-44s %9s  (threshold %s; goal %s)\n' "$verdict" "$1" "${2:-none}" "$3" "$4"
}

echo "== bench-gate: starting a 3-member etcd cluster"
start_cluster || exit 3
pick_endpoint
echo "== bench-gate: cluster $ALL_EPS; Raft leader $RAFT_LEADER; clients use $EP_NAME, a follower;" \
    "load average $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$DIR/children.log"

# graceful_section LABEL BUILD: the graceful figures of BUILD's elector
graceful_section() {
    local label=$1 b=$2 res=$DIR/res-graceful-$1 s p50e p50c p99e p99c p50f p50h
    mkdir -p "$res"
    echo "== graceful ($label): $GRACEFUL_ROUNDS rounds each, elector campaign vs etcdctl elect" \
        "(release helper: $GRACEFUL_HELPER)"
    s=$res/summary.txt
    run "$s" "$b/bench/proc_bench" graceful --endpoints "$EP" --elector "$b/tool/elector" \
        --etcdctl "$(command -v etcdctl)" --log "$DIR/children.log" --out "$res" \
        --rounds "$GRACEFUL_ROUNDS" --helper "$GRACEFUL_HELPER" \
        --release-helper "$b/lib/elector/elector-release"
    p50e=$(fig "$s" graceful elector ext p50_ms) p99e=$(fig "$s" graceful elector ext p99_ms)
    p50c=$(fig "$s" graceful etcdctl ext p50_ms) p99c=$(fig "$s" graceful etcdctl ext p99_ms)
    p50f=$(fig "$s" graceful chain_ser event p50_ms)
    p50h=$(fig "$s" graceful elector hand p50_ms)
    echo "  signal -> the successor's line read here: elector p50 $p50e ms, p99 $p99e ms;" \
        "etcdctl p50 $p50c ms, p99 $p99c ms"
    echo "  elector's handover (the old leader's resign -> the successor's elected, their own" \
        "stamps) p50 $p50h ms; floor (Delete -> watch event) p50 $p50f ms;" \
        "signal -> line over the floor $(ratio "$p50e" "$p50f") (not gated)"
    check "graceful p50 elector/etcdctl" "$(ratio "$p50e" "$p50c")" "$GRACEFUL_P50_RATIO_MAX" "<= 0.50"
    check "graceful p99 elector/etcdctl" "$(ratio "$p99e" "$p99c")" "$GRACEFUL_P99_RATIO_MAX" "<= 0.70"
    check "graceful p50 handover/event floor" "$(ratio "$p50h" "$p50f")" "$GRACEFUL_P50_FLOOR_MAX" "<= 1.30"
}

crash_section() {
    local res=$DIR/res-crash-$1 p50 p99
    mkdir -p "$res"
    echo "== crash: $CRASH_ROUNDS rounds, elector campaign with the release helper, leader SIGKILLed (TTL ${CRASH_TTL_S}s)"
    run "$res/summary.txt" "$BUILD/bench/proc_bench" releasecrash --endpoints "$EP" \
        --elector "$BUILD/tool/elector" --log "$DIR/children.log" --out "$res" \
        --rounds "$CRASH_ROUNDS" --ttl "$CRASH_TTL_S" \
        --release-helper "$BUILD/lib/elector/elector-release"
    p50=$(fig "$res/summary.txt" releasecrash elector_release ext p50_ms)
    p99=$(fig "$res/summary.txt" releasecrash elector_release ext p99_ms)
    echo "  SIGKILL -> successor's line: p50 $p50 ms, p99 $p99 ms"
    check "crash (release helper) p50 ms" "$p50" "$CRASH_P50_MS_MAX" "worst <= 300 ms"
    check "crash (release helper) p99 ms" "$p99" "$CRASH_P99_MS_MAX" "worst <= 300 ms"
}

herd_section() {
    local res=$DIR/res-herd-$1 s
    mkdir -p "$res"
    echo "== herd: N = $HERD_N waiting candidates, $HERD_CHANGES leadership changes"
    run "$res/summary.txt" "$BUILD/bench/herd" --endpoints "$EP" --metrics "$ALL_EPS" \
        --mode elector --n "$HERD_N" --changes "$HERD_CHANGES" --out "$res"
    s=$res/summary.txt
    echo "  requests per change mean $(herd_fig "$s" req_per_change_mean)" \
        "(min $(herd_fig "$s" req_per_change_min), max $(herd_fig "$s" req_per_change_max));" \
        "by method $(herd_fig "$s" methods); failover p50 $(herd_fig "$s" failover_p50_ms) ms," \
        "p99 $(herd_fig "$s" failover_p99_ms) ms (not gated)"
    check "herd requests per change (N = $HERD_N)" "$(herd_fig "$s" req_per_change_mean)" \
        "$HERD_REQ_MEAN_MAX" "<= 6, constant in N"
}

# gated SECTION LABEL [BUILD]: runs a section; a figure past its threshold is
# measured again (up to GATE_ATTEMPTS runs of the section): the machine is
# shared and its outliers come and go, a regression stays. FAILED=1 when the
# last attempt failed too.
FAILED=0
gated() {
    local attempt
    for attempt in $(seq "$GATE_ATTEMPTS"); do
        SEC_FAILED=0
        "$1_section" "$2-$attempt" "${3:-}"
        [ $SEC_FAILED = 1 ] || return 0
        [ "$attempt" = "$GATE_ATTEMPTS" ] ||
            echo "  (a figure past its threshold: $1 once more, attempt $((attempt + 1)) of $GATE_ATTEMPTS)"
    done
    FAILED=1
}

START=$(date +%s)
if want graceful; then gated graceful gate "$BUILD"; fi
if want crash; then gated crash gate; fi
if want herd; then gated herd gate; fi
GATE_FAILED=$FAILED
echo "== bench-gate: $([ $GATE_FAILED = 0 ] && echo passed || echo FAILED) in $(($(date +%s) - START)) s" \
    "(thresholds: ${CONF#"$ROOT"/}; load average $(cut -d' ' -f1-3 /proc/loadavg))"

if [ $SELF_TEST = 1 ]; then
    echo "== bench-gate self-test: the graceful section with the planted 2 ms delay (build-gate-plant)"
    FAILED=0
    gated graceful planted "$PLANT"
    if [ $FAILED = 1 ] && [ $GATE_FAILED = 0 ]; then
        echo "== bench-gate self-test: passed (the gate passed; the planted delay failed it)"
        exit 0
    fi
    [ $FAILED = 1 ] || echo "== bench-gate self-test: FAILED: the planted 2 ms delay was not caught" >&2
    [ $GATE_FAILED = 0 ] || echo "== bench-gate self-test: FAILED: the gate itself failed" >&2
    exit 1
fi
exit "$GATE_FAILED"
