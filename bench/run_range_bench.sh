#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Client-overhead benchmark: N sequential etcd Range calls through libelector
# (bench_range, sync and async modes) against a hand-rolled nghttp2 + protobuf-c
# loop (bare_range, the floor), on a private single-member etcd.
#
#   bench/run_range_bench.sh [BUILD_DIR]        (default /work/main/build)
#
# Environment: R (rounds, default 5), N (calls per run, 2000), WARMUP (200),
# KEY (bench-key), MODES (elector modes, "sync async"), ETCD (etcd binary),
# PIN=1 pins etcd to CPU 1 and the clients to CPU 0 (needs 2+ CPUs).
#
# Each round runs every program once, alternating the order between rounds so
# machine noise hits all of them. Prints every result line, then a summary: the
# median over rounds of us_p50 (and us_mean, us_p99, client CPU per call) per
# program and the ratios elector/bare. Latency is dominated by etcd itself; the
# client CPU per call isolates what the client library costs.
set -euo pipefail

BUILD=${1:-/work/main/build}
R=${R:-5}
N=${N:-2000}
WARMUP=${WARMUP:-200}
KEY=${KEY:-bench-key}
MODES=${MODES:-sync async}
ETCD=${ETCD:-etcd}
ETCDCTL=${ETCDCTL:-etcdctl}
PIN=${PIN:-0}

BARE=$BUILD/bench/bare_range
ELECTOR=$BUILD/bench/bench_range
for p in "$BARE" "$ELECTOR"; do
    [[ -x $p ]] || { echo "missing $p (build first: cmake --build $BUILD)" >&2; exit 1; }
done

ETCD_PIN=() CLIENT_PIN=()
if [[ $PIN == 1 ]]; then
    ETCD_PIN=(taskset -c 1)
    CLIENT_PIN=(taskset -c 0)
fi

DIR=$(mktemp -d "${TMPDIR:-/tmp}/range-bench.XXXXXX")
ETCD_PID=
cleanup() {
    if [[ -n $ETCD_PID ]]; then
        kill "$ETCD_PID" 2>/dev/null || true
        wait "$ETCD_PID" 2>/dev/null || true
    fi
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A loopback port nobody listens on now (the start below retries if it is taken
# by the time etcd binds it).
free_port() {
    local p
    for _ in $(seq 1 200); do
        p=$((20000 + RANDOM % 40000))
        if ! ss -Htan "( sport = :$p )" 2>/dev/null | grep . >/dev/null; then
            echo "$p"
            return 0
        fi
    done
    echo "no free port found" >&2
    return 1
}

start_etcd() {
    local attempt cport pport
    for attempt in 1 2 3 4 5; do
        cport=$(free_port)
        pport=$(free_port)
        [[ $cport != "$pport" ]] || continue
        rm -rf "$DIR/data"
        "${ETCD_PIN[@]}" "$ETCD" --name bench --data-dir "$DIR/data" \
            --listen-client-urls "http://127.0.0.1:$cport" \
            --advertise-client-urls "http://127.0.0.1:$cport" \
            --listen-peer-urls "http://127.0.0.1:$pport" \
            --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
            --initial-cluster "bench=http://127.0.0.1:$pport" \
            --initial-cluster-state new \
            >"$DIR/etcd.log" 2>&1 &
        ETCD_PID=$!
        ENDPOINT=127.0.0.1:$cport
        for _ in $(seq 1 100); do
            if ! kill -0 "$ETCD_PID" 2>/dev/null; then break; fi
            if ETCDCTL_API=3 "$ETCDCTL" --endpoints "$ENDPOINT" --dial-timeout 1s \
                endpoint health >/dev/null 2>&1; then
                return 0
            fi
            sleep 0.1
        done
        echo "etcd did not become healthy (attempt $attempt):" >&2
        tail -n 5 "$DIR/etcd.log" >&2 || true
        kill "$ETCD_PID" 2>/dev/null || true
        wait "$ETCD_PID" 2>/dev/null || true
        ETCD_PID=
    done
    echo "cannot start etcd" >&2
    return 1
}

start_etcd
echo "# etcd $("$ETCD" --version | head -n1 | awk '{print $3}') on $ENDPOINT;" \
    "R=$R N=$N WARMUP=$WARMUP modes: $MODES; pin=$PIN; build=$BUILD"

COMMON=(--endpoint "$ENDPOINT" --n "$N" --warmup "$WARMUP" --key "$KEY")
RESULTS=$DIR/results
: >"$RESULTS"

run_bare() { "${CLIENT_PIN[@]}" "$BARE" "${COMMON[@]}"; }
run_elector() { "${CLIENT_PIN[@]}" "$ELECTOR" "${COMMON[@]}" --mode "$1"; }

for ((r = 1; r <= R; r++)); do
    progs=(bare)
    for m in $MODES; do progs+=("$m"); done
    if ((r % 2 == 0)); then # reverse the order every other round
        rev=()
        for ((i = ${#progs[@]} - 1; i >= 0; i--)); do rev+=("${progs[i]}"); done
        progs=("${rev[@]}")
    fi
    for p in "${progs[@]}"; do
        if [[ $p == bare ]]; then line=$(run_bare); else line=$(run_elector "$p"); fi
        echo "round=$r $line"
        echo "$line" >>"$RESULTS"
    done
done

# Summary: medians over the rounds.
awk '
function field(name,   i, kv) {
    for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == name) return kv[2] }
    return ""
}
function median(arr, n,   i, j, t) {
    for (i = 2; i <= n; i++) for (j = i; j > 1 && arr[j-1] > arr[j]; j--) {
        t = arr[j]; arr[j] = arr[j-1]; arr[j-1] = t
    }
    return n % 2 ? arr[(n+1)/2] : (arr[n/2] + arr[n/2+1]) / 2
}
{
    b = field("bench")
    if (!(b in cnt)) order[++nb] = b
    k = ++cnt[b]
    p50[b, k] = field("us_p50") + 0; mean[b, k] = field("us_mean") + 0
    p99[b, k] = field("us_p99") + 0; cpu[b, k] = field("cpu_us_per_call") + 0; rss[b] = field("rss_kb"); thr[b] = field("threads")
}
END {
    for (i = 1; i <= nb; i++) {
        b = order[i]
        for (k = 1; k <= cnt[b]; k++) {
            a[k] = p50[b, k]; m[k] = mean[b, k]; q[k] = p99[b, k]; c[k] = cpu[b, k]
        }
        mp50[b] = median(a, cnt[b]); mmean[b] = median(m, cnt[b]); mp99[b] = median(q, cnt[b])
        mcpu[b] = median(c, cnt[b])
    }
    for (i = 1; i <= nb; i++) {
        b = order[i]
        printf "summary bench=%s runs=%d median_us_p50=%.1f median_us_mean=%.1f median_us_p99=%.1f median_cpu_us_per_call=%.2f rss_kb=%s threads=%s",
            b, cnt[b], mp50[b], mmean[b], mp99[b], mcpu[b], rss[b], thr[b]
        if (b != "bare" && mp50["bare"] > 0 && mcpu["bare"] > 0)
            printf " ratio_p50=%.3f ratio_mean=%.3f ratio_cpu=%.3f", mp50[b] / mp50["bare"],
                mmean[b] / mmean["bare"], mcpu[b] / mcpu["bare"]
        printf "\n"
    }
}' "$RESULTS"
