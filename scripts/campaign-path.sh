#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The files of src/ a campaign crosses, counted by running it (issue 37,
# docs/DESIGN.md "A campaign, from argv to the Txn").
#
#   scripts/campaign-path.sh [--list] [REV]
#
# Builds the library (the working tree, or `git archive REV`) in a temporary
# directory with -finstrument-functions -fno-inline, links
# bench/campaign_path.c (of the working tree) to it, starts a lone etcd on a
# free loopback port (ELECTOR_ETCD_DIR picks the etcd, as for the tests),
# runs the program and maps every function it recorded to its file with
# addr2line. Prints three paths: a plain Put on the same client (the
# yardstick: what any request crosses), the campaign to ELECTED, and on to
# LOST. For each: the files of src/ in the order first entered (the count is
# of the .c files; a header's static inline functions, out of line under
# -fno-inline, are listed but not counted), how many functions, and how many
# times the path went back to a file it had already left ("returns", headers
# included); for ELECTED and LOST also the files the Put's path does not
# cross (the election's own).
# --list also prints the sequence of files, one line per change of file.
set -euo pipefail

LIST=0
if [ "${1:-}" = --list ]; then LIST=1; shift; fi
REV=${1:-}
ROOT=$(git rev-parse --show-toplevel)
cd "$ROOT"
ETCD_BIN=etcd
[ -n "${ELECTOR_ETCD_DIR:-}" ] && ETCD_BIN=$ELECTOR_ETCD_DIR/etcd
[ "$ETCD_BIN" = etcd ] && ETCD_BIN=$(command -v etcd || echo /usr/bin/etcd)

DIR=$(mktemp -d /tmp/campaign-path.XXXXXX)
ETCD_PID=
cleanup() {
    if [ -n "$ETCD_PID" ]; then
        kill "$ETCD_PID" 2>/dev/null || true
        wait "$ETCD_PID" 2>/dev/null || true
    fi
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

if [ -n "$REV" ]; then
    mkdir "$DIR/src"
    git archive "$REV" | tar -x -C "$DIR/src"
    SRC=$DIR/src
else
    SRC=$ROOT
fi
cmake -S "$SRC" -B "$DIR/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS="-finstrument-functions -fno-inline" \
    -DELECTOR_TESTS=OFF -DELECTOR_BENCH=OFF -DELECTOR_TOOL=OFF -DELECTOR_FAULT=OFF \
    -DELECTOR_EXAMPLES=OFF -DELECTOR_SHARED=OFF -DELECTOR_INSTALL=OFF \
    -DELECTOR_PYTHON=OFF >"$DIR/cmake.log"
cmake --build "$DIR/build" -j2 --target elector >>"$DIR/cmake.log"
LIB=$(find "$DIR/build" -name 'libelector_intree.a' | head -n 1)
PROTO_INC=$(dirname "$(dirname "$(find "$DIR/build" -name 'rpc.pb-c.h' | head -n 1)")")
# shellcheck disable=SC2046 # pkg-config's flags are words
cc -std=c11 -O1 -g -no-pie -D_POSIX_C_SOURCE=200809L -DELECTOR_RPC_API \
    -I"$SRC/include" -I"$PROTO_INC" "$ROOT/bench/campaign_path.c" "$LIB" \
    $(pkg-config --cflags --libs libnghttp2 libprotobuf-c openssl) -lpthread \
    -o "$DIR/campaign_path"

port_free() { ! ss -Htan "( sport = :$1 )" 2>/dev/null | grep . >/dev/null; }
for _ in $(seq 20); do
    P1=$((20000 + RANDOM % 40000))
    P2=$((P1 + 1))
    port_free "$P1" && port_free "$P2" && break
done
"$ETCD_BIN" --name cp --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$P1" --advertise-client-urls "http://127.0.0.1:$P1" \
    --listen-peer-urls "http://127.0.0.1:$P2" --initial-advertise-peer-urls "http://127.0.0.1:$P2" \
    --initial-cluster "cp=http://127.0.0.1:$P2" --log-level error >"$DIR/etcd.log" 2>&1 &
ETCD_PID=$!
for _ in $(seq 100); do
    ss -Htln "( sport = :$P1 )" | grep -q . && break
    sleep 0.1
done
sleep 0.5 # the lone member elects itself

"$DIR/campaign_path" "127.0.0.1:$P1" "$DIR/elected.txt" "$DIR/lost.txt" "$DIR/put.txt"

/usr/bin/python3 - "$DIR/campaign_path" "$SRC" "$LIST" "$DIR/put.txt" "$DIR/elected.txt" "$DIR/lost.txt" <<'EOF'
import os, subprocess, sys

prog, src, show = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3] == "1"
paths = sys.argv[4:]
seqs = [open(p).read().split() for p in paths]
addrs = sorted({a for s in seqs for a in s})
out = subprocess.run(["addr2line", "-f", "-e", prog], input="\n".join(addrs) + "\n",
                     capture_output=True, text=True, check=True).stdout.splitlines()
where = {}
for i, a in enumerate(addrs):
    fn, loc = out[2 * i], out[2 * i + 1].split(":")[0]
    loc = os.path.realpath(loc) if loc != "??" else loc
    rel = os.path.relpath(loc, src) if loc.startswith(src + "/") else None
    where[a] = (fn, rel if rel and rel.startswith("src/") else None)

put_files = set()
for label, seq in zip(("PUT", "ELECTED", "LOST"), seqs):
    files, funcs, changes, returns, cur = [], set(), [], 0, None
    for a in seq:
        fn, f = where[a]
        if f is None:
            continue
        funcs.add((f, fn))
        if f != cur:
            if f in files:
                returns += 1
            else:
                files.append(f)
            changes.append(f)
            cur = f
    cfiles = [f for f in files if f.endswith(".c")]
    print(f"to {label}: {len(cfiles)} .c files of src/ (+{len(files) - len(cfiles)} headers' "
          f"inline functions), {len(funcs)} functions, {returns} returns to a file already visited")
    if label == "PUT":
        put_files = set(cfiles)
    else:
        own = [f for f in cfiles if f not in put_files]
        print(f"  of which {len(own)} not on a bare Put's path (the election's own): "
              + ", ".join(own))
    for f in files:
        print(f"  {f}  ({sum(1 for g, _ in funcs if g == f)} functions)")
    if show:
        print("  sequence: " + " > ".join(changes))
EOF
