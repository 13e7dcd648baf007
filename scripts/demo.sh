#!/usr/bin/env bash
# The demo: installs what is missing, builds, starts a local 3-member etcd
# cluster, starts three `elector run` candidates whose job prints a tick with its
# name and fencing token, SIGKILLs the leader and shows the takeover after the
# lease expires, then stops the next leader gracefully and shows the handover in
# milliseconds. Everything it starts is stopped on exit, also on ^C.
set -euo pipefail
cd "$(dirname "$0")/.."

TTL=${TTL:-2}
NAME=demo-service

scripts/deps.sh
echo "== building"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target elector_tool >/dev/null
ELECTOR=$PWD/build/tool/elector

DIR=$(mktemp -d /tmp/elector-demo.XXXXXX)
ETCD_PIDS=()
CAND_PIDS=()
cleanup() {
    trap - EXIT INT TERM
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
    if ! ss -Htln "sport = :$p" | grep -q . && [[ " ${ports[*]} " != *" $p "* ]]; then
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

echo "== starting 3 candidates: elector run $NAME --ttl ${TTL}s -- <job that ticks>"
JOB='while :; do echo "    tick from $ELECTOR_VALUE, fencing token $ELECTOR_TOKEN" >&2; sleep 0.5; done'
for i in 1 2 3; do
    ELECTOR_VALUE=candidate-$i "$ELECTOR" --endpoints "$ENDPOINTS" --ttl "$TTL" -w json \
        run "$NAME" --value "candidate-$i" -- sh -c "$JOB" \
        >"$DIR/events-$i.log" 2> >(sed -u "s/^/[candidate-$i] /" >&2) &
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
now_ms() { date +%s%3N; }

sleep 2
L=$(leader)
echo "== candidate-$L leads ($("$ELECTOR" --endpoints "$ENDPOINTS" leader "$NAME" | head -1))"
sleep 1.5

echo "== SIGKILL candidate-$L: nobody can resign for it; its lease (TTL ${TTL}s) must expire"
t0=$(now_ms)
kill -9 "${CAND_PIDS[$((L - 1))]}"
next=""
for _ in $(seq 200); do
    n=$(leader)
    if [ -n "$n" ] && [ "$n" != "$L" ]; then next=$n; break; fi
    sleep 0.05
done
[ -n "$next" ] || { echo "demo: no takeover" >&2; exit 1; }
t1=$(wait_elected "$DIR/events-$next.log" "$t0")
KILL_MS=$((t1 - t0))
echo "== candidate-$next took over $KILL_MS ms after the SIGKILL (the lease ends at most ${TTL}s after its last renewal)"
sleep 1.5

echo "== SIGTERM candidate-$next: it stops its job, resigns, and the next one leads at once"
t0=$(now_ms)
kill -TERM "${CAND_PIDS[$((next - 1))]}"
third=""
for _ in $(seq 200); do
    n=$(leader)
    if [ -n "$n" ] && [ "$n" != "$next" ]; then third=$n; break; fi
    sleep 0.02
done
[ -n "$third" ] || { echo "demo: no handover" >&2; exit 1; }
wait_elected "$DIR/events-$third.log" "$t0" >/dev/null
resigned=$(grep '"event":"resigned"' "$DIR/events-$next.log" | sed 's/.*"mono_ns":\([0-9]*\).*/\1/' | tail -1)
elected=$(grep '"event":"elected"' "$DIR/events-$third.log" | sed 's/.*"mono_ns":\([0-9]*\).*/\1/' | tail -1)
HAND_US=$(((elected - resigned) / 1000))
printf '== candidate-%s leads %d.%03d ms after candidate-%s resigned\n' "$third" \
    $((HAND_US / 1000)) $((HAND_US % 1000)) "$next"
sleep 1.5

echo
echo "Measured failover:"
echo "  leader SIGKILLed (TTL ${TTL}s):  ${KILL_MS} ms"
printf '  leader resigned (SIGTERM):   %d.%03d ms\n' $((HAND_US / 1000)) $((HAND_US % 1000))
echo "== stopping everything"
