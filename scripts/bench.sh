#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The side-by-side benchmark: elector against its anchors (etcdctl, the etcd3
# Node client, one etcd Put, the protocol floors, a naive election, a bare
# nghttp2 loop).
#
#   scripts/bench.sh            full run (about 10 minutes on 2 cores)
#   scripts/bench.sh --quick    fewer rounds (about 3 minutes)
#   scripts/bench.sh --only graceful,floor,crash,runcrash,embedcrash,herd,footprint,range,many
#
# Installs what is missing (scripts/deps.sh), builds into build-bench/
# (RelWithDebInfo), starts a private 3-member etcd cluster on free loopback ports
# with data in a temporary directory, runs:
#   graceful   leader resigns (SIGTERM/SIGINT): elector vs `etcdctl elect` vs the
#              etcd3 Node client's Election (npm; bench/node, installed with
#              `npm ci` when missing), alternating; between rounds one Put and
#              the protocol floors: Delete -> watch event, then -> linearizable
#              check, or -> serializable check on the same member
#   floor      the protocol floors alone (the same two checks, alternating)
#   crash      leader SIGKILLed, TTL 2 s: elector vs `etcdctl lock --ttl 2`
#   runcrash   `elector run` leader SIGKILLed (host alive), TTL 5 s, 10 rounds:
#              SIGKILL -> the successor's command's first line, vs
#              `etcdctl lock --ttl 5 NAME CMD` (which waits for the TTL)
#   embedcrash a leader embedding libelector SIGKILLed, TTL 10 s, 10 rounds:
#              `elector campaign` with the release helper (release_on_exit) vs
#              without it (which waits for the TTL)
#   herd       N waiting candidates: etcd requests per leadership change and
#              failover latency, elector vs the naive design (bench/herd.c)
#   footprint  RSS, threads, idle CPU of a waiting candidate: elector vs etcdctl
#   range      client overhead: libelector vs a bare nghttp2 loop
#              (bench/run_range_bench.sh, on its own single-member etcd)
#   many       1, 100, 10000 elections on one session (bench/many.c)
# then writes bench/RESULTS.md, bench/plots/*.png and bench/results/ (raw data)
# and prints the table. Figures are reported, never asserted: the exit status
# says only whether the benchmark ran.
#
# Every process it starts is killed by PID on exit, also on ^C; the temporary
# directory is removed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# bench_build, start_cluster, pick_endpoint, stop_cluster
. "$ROOT/scripts/bench-common.sh"

QUICK=0
ALL_BENCHES=graceful,floor,crash,runcrash,embedcrash,herd,footprint,range,many
ONLY=$ALL_BENCHES
while [ $# -gt 0 ]; do
    case $1 in
    --quick) QUICK=1 ;;
    --only) ONLY=$2; shift ;;
    --only=*) ONLY=${1#--only=} ;;
    -h | --help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }

if [ $QUICK = 1 ]; then
    GRACEFUL_ROUNDS=20 CRASH_ROUNDS=6 HERD_CHANGES=10 HERD_NS="2 10 100 1000"
    FOOT_IDLE=5 RANGE_R=3 RANGE_N=1000 MANY_COUNTS="1 100 10000" MANY_IDLE=5 PUT_N=300
else
    GRACEFUL_ROUNDS=150 CRASH_ROUNDS=30 HERD_CHANGES=50 HERD_NS="2 10 100 1000"
    FOOT_IDLE=10 RANGE_R=5 RANGE_N=2000 MANY_COUNTS="1 100 10000" MANY_IDLE=10 PUT_N=1000
fi
TTL_CRASH=2
RUNCRASH_ROUNDS=10 TTL_RUNCRASH=5
EMBEDCRASH_ROUNDS=10 TTL_EMBEDCRASH=10

scripts/deps.sh
# The etcd3 anchor (graceful): Node.js and npm from Debian's packages when
# missing, the client itself from the lock file (bench/node/package-lock.json).
NODE_DIR=$ROOT/bench/node
if want graceful; then
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "== installing nodejs and npm (Debian) for the etcd3 anchor"
        SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends nodejs npm >/dev/null
    fi
    if [ ! -f "$NODE_DIR/node_modules/.package-lock.json" ] ||
        [ "$NODE_DIR/package-lock.json" -nt "$NODE_DIR/node_modules/.package-lock.json" ]; then
        echo "== npm ci (bench/node: the etcd3 client)"
        (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    fi
fi
echo "== building build-bench (RelWithDebInfo)"
bench_build build-bench elector_tool elector_release elector_bench_proc_bench \
    elector_bench_herd elector_bench_many elector_bench_bench_range elector_bench_bare_range
B=$ROOT/build-bench
ELECTOR=$B/tool/elector

DIR=$(mktemp -d "${TMPDIR:-/tmp}/elector-bench.XXXXXX")
RES=$DIR/results
mkdir -p "$RES"
JOB_PID=
cleanup() {
    trap - EXIT INT TERM
    if [ -n "$JOB_PID" ]; then kill -TERM "$JOB_PID" 2>/dev/null || true; wait "$JOB_PID" 2>/dev/null || true; fi
    stop_cluster
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a benchmark program in the background (so a signal to this script reaches
# its trap at once, which kills the program by PID), its stdout appended to $SUM
# and shown.
run() {
    "$@" >"$DIR/job.out" &
    JOB_PID=$!
    local rc=0
    wait "$JOB_PID" || rc=$?
    JOB_PID=
    cat "$DIR/job.out" >>"$SUM"
    cat "$DIR/job.out"
    return $rc
}

echo "== starting a 3-member etcd cluster (data in $DIR)"
start_cluster
pick_endpoint
METRICS=$ALL_EPS
LOG=$RES/children.log
: >"$LOG"
{
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "quick=$QUICK"
    echo "host_cpus=$(nproc)"
    echo "cpu_model=$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
    echo "kernel=$(uname -r)"
    echo "loadavg_at_start=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "other_etcd_processes=$(($(pgrep -xc etcd || true) - 3))"
    echo "etcd_version=$(etcd --version | awk '/etcd Version/{print $3}')"
    echo "etcdctl_version=$(etcdctl version | awk '/etcdctl version/{print $3}')"
    echo "data_fs=$(df -T "$DIR" | awk 'NR==2{print $2}')"
    echo "raft_leader=$RAFT_LEADER"
    echo "client_endpoint=$EP_NAME"
    echo "elector_commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- src include tool 2>/dev/null || echo +dirty)"
    echo "rounds=graceful $GRACEFUL_ROUNDS per tool (+ as many anchor samples), crash $CRASH_ROUNDS per tool, herd $HERD_CHANGES changes per N and design, back-to-back Puts $PUT_N, footprint idle ${FOOT_IDLE}s, range R=$RANGE_R N=$RANGE_N, many idle ${MANY_IDLE}s"
    echo "range_n=$RANGE_N"
} >"$RES/env.txt"
echo "== cluster $ALL_EPS; Raft leader $RAFT_LEADER; clients use $EP_NAME ($EP), a follower"

PB=(run "$B/bench/proc_bench")
COMMON=(--endpoints "$EP" --elector "$ELECTOR" --etcdctl "$(command -v etcdctl)" --log "$LOG" --out "$RES")

# Conditions of a section measured on its own (a partial run keeps the full
# run's env.txt): date, load, and what else ran on the machine.
# What else keeps the CPUs busy: processes above 2% of a CPU over one second
# (command and %CPU, busiest first; this benchmark's cluster is idle then).
busy() {
    top -b -n 2 -d 1 -w 200 2>/dev/null | awk '
        /^top -/ { it++ }
        it == 2 && $1 ~ /^[0-9]+$/ && $9 + 0 > 2.0 && $12 != "top" { printf "%s%s(%s%%)", n++ ? ", " : "", $12, $9 }
        n == 10 { exit }'
}
section_env() { # FILE
    {
        echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "quick=$QUICK"
        echo "loadavg_at_start=$(cut -d' ' -f1-3 /proc/loadavg)"
        echo "other_etcd_processes=$(($(pgrep -xc etcd || true) - 3))"
        echo "busy_at_start=$(busy)"
        echo "raft_leader=$RAFT_LEADER"
        echo "client_endpoint=$EP_NAME"
        echo "elector_commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- src include tool 2>/dev/null || echo +dirty)"
        echo "node_version=$(node --version 2>/dev/null || echo none)"
        echo "etcd3_version=$(node -p "require('$NODE_DIR/node_modules/etcd3/package.json').version" 2>/dev/null || echo none)"
    } >"$1"
}
section_env_end() { # FILE
    echo "loadavg_at_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$1"
    echo "busy_at_end=$(busy)" >>"$1"
    echo "other_etcd_processes_at_end=$(($(pgrep -xc etcd || true) - 3))" >>"$1"
}

if want graceful; then
    echo "== graceful failover: $GRACEFUL_ROUNDS rounds each (elector, etcdctl elect, etcd3), + $PUT_N Puts"
    SUM=$RES/sum-graceful.txt
    section_env "$RES/env-graceful.txt"
    echo "rounds=$GRACEFUL_ROUNDS" >>"$RES/env-graceful.txt"
    "${PB[@]}" put "${COMMON[@]}" --n "$PUT_N" --warmup 100
    LOG_FROM=$(($(wc -l <"$LOG") + 1))
    "${PB[@]}" graceful "${COMMON[@]}" --rounds "$GRACEFUL_ROUNDS" \
        --node "$(command -v node)" --etcd3 "$NODE_DIR/etcd3_elect.js"
    section_env_end "$RES/env-graceful.txt"
    # Which check elected each elector successor: its debug line after
    # "elected" (each process is elected once; "serializable checks: 0" is a
    # queue's first leader, elected without a predecessor's DELETE event).
    tail -n +"$LOG_FROM" "$LOG" | awk '
        /decided by a (serializable|linearizable) check \(serializable checks: [1-9]/ {
            n++
            if ($0 ~ /decided by a serializable/) ser++; else lin++
            for (i = 1; i <= NF; i++) {
                w = $i; v = $(i + 1); sub(/[,)]$/, "", v)
                if (w == "error") e += v; else if (w == "member") m += v
                else if (w == "connection") c += v; else if (w == "delete") st += v
            }
        }
        END { printf "graceful tool=elector measure=checks n=%d serializable=%d linearizable=%d error=%d member=%d connection=%d stale=%d\n", n, ser, lin, e, m, c, st }' |
        tee -a "$SUM"
fi
if want floor; then
    echo "== protocol floors alone: $GRACEFUL_ROUNDS rounds per check"
    SUM=$RES/sum-floor.txt
    section_env "$RES/env-floor.txt"
    echo "rounds=$GRACEFUL_ROUNDS" >>"$RES/env-floor.txt"
    "${PB[@]}" chain "${COMMON[@]}" --n "$GRACEFUL_ROUNDS" --gap-ms 150
    section_env_end "$RES/env-floor.txt"
fi
if want crash; then
    echo "== crash failover (TTL ${TTL_CRASH}s): $CRASH_ROUNDS rounds each"
    SUM=$RES/sum-crash.txt
    "${PB[@]}" crash "${COMMON[@]}" --rounds "$CRASH_ROUNDS" --ttl "$TTL_CRASH"
fi
if want runcrash; then
    echo "== \`elector run\` leader SIGKILLed, host alive (TTL ${TTL_RUNCRASH}s): $RUNCRASH_ROUNDS rounds each"
    SUM=$RES/sum-runcrash.txt
    {
        echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "loadavg_at_start=$(cut -d' ' -f1-3 /proc/loadavg)"
        echo "other_etcd_processes=$(($(pgrep -xc etcd || true) - 3))"
        echo "raft_leader=$RAFT_LEADER"
        echo "client_endpoint=$EP_NAME"
        echo "elector_commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- src include tool 2>/dev/null || echo +dirty)"
        echo "rounds=$RUNCRASH_ROUNDS"
        echo "ttl_s=$TTL_RUNCRASH"
    } >"$RES/env-runcrash.txt"
    "${PB[@]}" runcrash "${COMMON[@]}" --rounds "$RUNCRASH_ROUNDS" --ttl "$TTL_RUNCRASH"
    echo "loadavg_at_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RES/env-runcrash.txt"
fi
if want embedcrash; then
    echo "== leader embedding libelector SIGKILLed (TTL ${TTL_EMBEDCRASH}s): $EMBEDCRASH_ROUNDS rounds each"
    SUM=$RES/sum-embedcrash.txt
    {
        echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "loadavg_at_start=$(cut -d' ' -f1-3 /proc/loadavg)"
        echo "other_etcd_processes=$(($(pgrep -xc etcd || true) - 3))"
        echo "raft_leader=$RAFT_LEADER"
        echo "client_endpoint=$EP_NAME"
        echo "elector_commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- src include tool helper 2>/dev/null || echo +dirty)"
        echo "rounds=$EMBEDCRASH_ROUNDS"
        echo "ttl_s=$TTL_EMBEDCRASH"
    } >"$RES/env-embedcrash.txt"
    "${PB[@]}" embedcrash "${COMMON[@]}" --rounds "$EMBEDCRASH_ROUNDS" --ttl "$TTL_EMBEDCRASH" \
        --release-helper "$B/lib/elector/elector-release"
    echo "loadavg_at_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RES/env-embedcrash.txt"
fi
if want herd; then
    echo "== thundering herd: N = $HERD_NS, $HERD_CHANGES leadership changes each"
    SUM=$RES/sum-herd.txt
    for n in $HERD_NS; do
        for mode in elector naive; do
            run "$B/bench/herd" --endpoints "$EP" --metrics "$METRICS" --mode "$mode" --n "$n" \
                --changes "$HERD_CHANGES" --out "$RES"
        done
    done
fi
if want footprint; then
    echo "== footprint of a waiting candidate (idle ${FOOT_IDLE}s)"
    SUM=$RES/sum-footprint.txt
    "${PB[@]}" footprint "${COMMON[@]}" --idle-s "$FOOT_IDLE"
fi
if want many; then
    echo "== many elections on one session (idle ${MANY_IDLE}s)"
    SUM=$RES/sum-many.txt
    for c in $MANY_COUNTS; do
        run "$B/bench/many" --endpoints "$EP" --metrics "$METRICS" --count "$c" \
            --idle-s "$MANY_IDLE"
    done
fi
if want range; then
    echo "== client overhead (bench/run_range_bench.sh, R=$RANGE_R N=$RANGE_N)"
    SUM=$RES/range.txt
    run env R="$RANGE_R" N="$RANGE_N" bench/run_range_bench.sh "$B"
    grep '^summary' "$RES/range.txt" | sed 's/^summary /range /' >"$RES/sum-range.txt"
fi

echo "loadavg_at_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RES/env.txt"

# Raw results into the repository (a partial run with --only replaces only the
# files of what it ran), then the report.
mkdir -p "$ROOT/bench/results"
if [ "$ONLY" = "$ALL_BENCHES" ]; then rm -f "$ROOT"/bench/results/*.txt; fi
# A partial run keeps the full run's env.txt (the conditions of the other
# sections); what it ran carries its own conditions where it writes them.
if [ "$ONLY" != "$ALL_BENCHES" ] && [ -f "$ROOT/bench/results/env.txt" ]; then rm -f "$RES/env.txt"; fi
cp "$RES"/*.txt "$ROOT/bench/results/"
rm -f "$ROOT/bench/results/children.log"
bench/report.sh "$ROOT/bench/results" "$ROOT/bench"
