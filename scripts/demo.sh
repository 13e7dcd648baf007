#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The demo: installs what is missing for it (scripts/deps.sh demo: the build's
# packages and etcd, not the test tools), builds, starts a local 3-member etcd
# cluster, starts four `elector run` candidates whose job prints a tick with its
# name and fencing token, then shows three failovers: the leader's elector
# SIGKILLed (its guard stops the job and releases the lease: milliseconds), the
# next leader stopped with SIGTERM (it resigns: milliseconds), and the next
# leader's whole "machine" frozen (elector, guard and job SIGSTOPped: nobody can
# release the lease, so it expires after the TTL). Everything it starts is
# stopped on exit, also on ^C.
set -euo pipefail
cd "$(dirname "$0")/.."

TTL=${TTL:-2}
NAME=demo-service

scripts/deps.sh demo
echo "== building"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target elector_tool >/dev/null
ELECTOR=$PWD/build/tool/elector

DIR=$(mktemp -d /tmp/elector-demo.XXXXXX)
ETCD_PIDS=()
CAND_PIDS=()
FROZEN=() # processes the demo froze itself; killed on exit
cleanup() {
    trap - EXIT INT TERM
    # The frozen "machine" wakes up: its guard finds the deadline passed, ends the
    # job, and its elector reports the loss and exits.
    for p in "${FROZEN[@]}"; do kill -CONT -- "$p" 2>/dev/null || true; done
    # Candidates first (gracefully: each stops its job, resigns and revokes its lease).
    for p in "${CAND_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for _ in $(seq 50); do
        alive=0
        for p in "${CAND_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for p in "${CAND_PIDS[@]}" "${ETCD_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    for p in "${ETCD_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Free loopback ports: six of them, not in use now.
ports=()
while [ ${#ports[@]} -lt 6 ]; do
    p=$((20000 + RANDOM % 10000))
    if ! ss -Htln "sport = :$p" | grep . >/dev/null && [[ " ${ports[*]} " != *" $p "* ]]; then
        ports+=("$p")
    fi
done
cluster=""
for i in 0 1 2; do cluster+="${cluster:+,}m$i=http://127.0.0.1:${ports[$((i + 3))]}"; done
ENDPOINTS="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"

echo "== starting a 3-member etcd cluster on $ENDPOINTS (data in $DIR)"
for i in 0 1 2; do
    etcd --name "m$i" --data-dir "$DIR/m$i" \
        --listen-client-urls "http://127.0.0.1:${ports[$i]}" \
        --advertise-client-urls "http://127.0.0.1:${ports[$i]}" \
        --listen-peer-urls "http://127.0.0.1:${ports[$((i + 3))]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${ports[$((i + 3))]}" \
        --initial-cluster "$cluster" --initial-cluster-token "demo-$$" \
        --log-level error >"$DIR/etcd-m$i.log" 2>&1 &
    ETCD_PIDS+=($!)
done
for _ in $(seq 100); do
    etcdctl --endpoints "$ENDPOINTS" endpoint health >/dev/null 2>&1 && break
    sleep 0.2
done
etcdctl --endpoints "$ENDPOINTS" endpoint health >/dev/null

echo "== starting 4 candidates: elector run $NAME --ttl ${TTL}s -- <job that ticks>"
JOB='while :; do echo "    tick from $ELECTOR_VALUE, fencing token $ELECTOR_TOKEN" >&2; sleep 0.5; done'
for i in 1 2 3 4; do
    # -w json events go to fd 3 (stdout is the job's), elector's messages to stderr
    # (shown without their time and level, to keep the lines short).
    ELECTOR_VALUE=candidate-$i "$ELECTOR" --endpoints "$ENDPOINTS" --ttl "$TTL" -w json \
        run "$NAME" --value "candidate-$i" --events-fd 3 -- sh -c "$JOB" \
        3>"$DIR/events-$i.log" \
        2> >(sed -u -E "s/^[0-9]{4}-[0-9-]+T[0-9:.]+Z [a-z]+ //; s/^/[candidate-$i] /" >&2) &
    CAND_PIDS+=($!)
    disown $! # no "Killed" notice from bash when the demo kills it
    sleep 0.3
done

# The candidate number that leads now, by the value it campaigned with.
leader() { "$ELECTOR" --endpoints "$ENDPOINTS" leader "$NAME" 2>/dev/null | sed -n 2p | sed 's/candidate-//'; }
wait_elected() { # $1: events file, $2: after unix_ms -> prints the elected unix_ms
    for _ in $(seq 300); do
        t=$(grep '"event":"elected"' "$1" 2>/dev/null | sed 's/.*"unix_ms":\([0-9]*\).*/\1/' |
            awk -v a="$2" '$1 >= a' | tail -1)
        [ -n "$t" ] && { echo "$t"; return; }
        sleep 0.05
    done
    echo "demo: no successor elected" >&2
    exit 1
}
next_leader() { # $1: the current leader -> prints the next one
    for _ in $(seq 300); do
        n=$(leader)
        if [ -n "$n" ] && [ "$n" != "$1" ]; then echo "$n"; return; fi
        sleep 0.02
    done
    echo "demo: no takeover" >&2
    exit 1
}
now_ms() { date +%s%3N; }

sleep 2
L=$(leader)
echo "== candidate-$L leads ($("$ELECTOR" --endpoints "$ENDPOINTS" leader "$NAME" | head -1))"
sleep 1.5

echo "== SIGKILL candidate-$L's elector: its guard stops the job, then releases the lease"
t0=$(now_ms)
kill -9 "${CAND_PIDS[$((L - 1))]}"
next=$(next_leader "$L")
t1=$(wait_elected "$DIR/events-$next.log" "$t0")
KILL_MS=$((t1 - t0))
echo "== candidate-$next took over $KILL_MS ms after the SIGKILL (no need to wait for the ${TTL}s TTL)"
sleep 1.5

echo "== SIGTERM candidate-$next: it stops its job, resigns, and the next one leads at once"
t0=$(now_ms)
kill -TERM "${CAND_PIDS[$((next - 1))]}"
third=$(next_leader "$next")
wait_elected "$DIR/events-$third.log" "$t0" >/dev/null
resigned=$(grep '"event":"resigned"' "$DIR/events-$next.log" | sed 's/.*"mono_ns":\([0-9]*\).*/\1/' | tail -1)
elected=$(grep '"event":"elected"' "$DIR/events-$third.log" | sed 's/.*"mono_ns":\([0-9]*\).*/\1/' | tail -1)
HAND_US=$(((elected - resigned) / 1000))
printf '== candidate-%s leads %d.%03d ms after candidate-%s resigned\n' "$third" \
    $((HAND_US / 1000)) $((HAND_US % 1000)) "$next"
sleep 1.5

echo "== candidate-$third's machine freezes (elector, its guard and its job SIGSTOPped):"
echo "   nobody can release the lease; the next one leads once the ${TTL}s lease has expired"
E=${CAND_PIDS[$((third - 1))]}
# elector's children: the guard (an elector process) and the sed of 2> >(...).
G=$(ps -o pid=,comm= --ppid "$E" | awk '$2 == "elector" { print $1 }')
J=$(ps -o pid= --ppid "$G" | tr -d ' ')
FROZEN+=("$E" "$G" "-$J")
t0=$(now_ms)
kill -STOP -- "$E" "$G" "-$J"
fourth=$(next_leader "$third")
t1=$(wait_elected "$DIR/events-$fourth.log" "$t0")
FREEZE_MS=$((t1 - t0))
echo "== candidate-$fourth took over $FREEZE_MS ms after the freeze"
sleep 1

echo
echo "Measured failover:"
echo "  leader's elector SIGKILLed:      ${KILL_MS} ms (the guard released the lease)"
printf '  leader resigned (SIGTERM):       %d.%03d ms\n' $((HAND_US / 1000)) $((HAND_US % 1000))
echo "  leader's machine frozen:         ${FREEZE_MS} ms (TTL ${TTL}s)"
echo "== stopping everything"
