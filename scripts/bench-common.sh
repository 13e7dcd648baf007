# shellcheck shell=bash disable=SC2034 # the variables set here are for the caller
# SPDX-License-Identifier: MIT
# Sourced by scripts/bench.sh and scripts/bench-gate.sh (not run on its own):
# the benchmark build, a private 3-member etcd cluster on free loopback ports,
# its data under $DIR (the caller's temporary directory), and the client
# endpoint every tool uses.
#
#   bench_build DIR TARGET... [-- CMAKE_ARG...]
#                    configures DIR (RelWithDebInfo, no tests) and builds TARGETs
#   start_cluster    sets ETCD_PIDS, ALL_EPS, MEMBERS; 3 attempts
#   pick_endpoint    sets EP, EP_NAME (a follower), RAFT_LEADER
#   stop_cluster     TERM, then KILL after 5 s, each member reaped by PID
#
# The caller traps EXIT (and INT/TERM) and calls stop_cluster there.

ETCD_PIDS=()

bench_build() {
    local dir=$1 targets=() args=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do targets+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    args=("$@")
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DELECTOR_TESTS=OFF "${args[@]}" >/dev/null
    cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}" >/dev/null
}

port_free() { ! ss -Htan "( sport = :$1 )" 2>/dev/null | grep . >/dev/null; }

start_cluster() {
    local attempt i ports p cluster
    for attempt in 1 2 3; do
        ports=()
        while [ ${#ports[@]} -lt 6 ]; do
            p=$((20000 + RANDOM % 40000))
            if port_free "$p" && [[ " ${ports[*]} " != *" $p "* ]]; then ports+=("$p"); fi
        done
        cluster=""
        for i in 0 1 2; do cluster+="${cluster:+,}m$i=http://127.0.0.1:${ports[$((i + 3))]}"; done
        ALL_EPS="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
        MEMBERS=("127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" "127.0.0.1:${ports[2]}")
        ETCD_PIDS=()
        for i in 0 1 2; do
            rm -rf "$DIR/m$i"
            etcd --name "m$i" --data-dir "$DIR/m$i" \
                --listen-client-urls "http://127.0.0.1:${ports[$i]}" \
                --advertise-client-urls "http://127.0.0.1:${ports[$i]}" \
                --listen-peer-urls "http://127.0.0.1:${ports[$((i + 3))]}" \
                --initial-advertise-peer-urls "http://127.0.0.1:${ports[$((i + 3))]}" \
                --initial-cluster "$cluster" --initial-cluster-token "bench-$$-$attempt" \
                --initial-cluster-state new --log-level error \
                >"$DIR/etcd-m$i.log" 2>&1 &
            ETCD_PIDS+=($!)
        done
        for _ in $(seq 100); do
            etcdctl --endpoints "$ALL_EPS" endpoint health >/dev/null 2>&1 && return 0
            sleep 0.2
        done
        echo "bench: etcd cluster did not become healthy (attempt $attempt)" >&2
        tail -n 3 "$DIR"/etcd-m*.log >&2 || true
        for p in "${ETCD_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
        ETCD_PIDS=()
    done
    echo "bench: cannot start etcd" >&2
    return 1
}

# The client endpoint: one follower, the same for every client (elector, etcdctl,
# the Put floor, the drivers), so no tool gets the Raft leader for free.
pick_endpoint() {
    local st i id
    st=$(etcdctl --endpoints "$ALL_EPS" endpoint status -w fields 2>/dev/null)
    LEADER_ID=$(printf '%s\n' "$st" | awk -F' : ' '/"Leader"/{print $2; exit}')
    RAFT_LEADER="" EP=""
    for i in 0 1 2; do
        id=$(etcdctl --endpoints "${MEMBERS[$i]}" endpoint status -w fields 2>/dev/null |
            awk -F' : ' '/"MemberID"/{print $2; exit}')
        if [ "$id" = "$LEADER_ID" ]; then RAFT_LEADER=m$i; elif [ -z "$EP" ]; then EP=${MEMBERS[$i]}; EP_NAME=m$i; fi
    done
    [ -n "$EP" ] || { EP=${MEMBERS[0]}; EP_NAME=m0; }
}

stop_cluster() {
    local p
    for p in "${ETCD_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${ETCD_PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    ETCD_PIDS=()
}
