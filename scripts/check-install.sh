#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The `install` test: libelector as a user gets it. Installs BUILD into a
# temporary prefix and checks, from that prefix alone:
#   - the files: headers (not elector/etcd_rpc.h), libelector.so.N + .so,
#     libelector.a, elector.pc, the CMake package, the tool and its man page;
#   - each public header compiles on its own, as C11 and as C++; the C++ API
#     (elector/elector.hpp) as C++17 with -Wpedantic;
#   - the SONAME (libelector.so.1) and the exported symbols: only elector_*,
#     exactly the functions the installed headers declare (nm -D);
#   - libelector.a: only elector_* global, and it links beside a program that
#     defines names of our internals (etcd's protobuf-c symbols, elector__*);
#   - a small program (test/install/consumer.c) built with
#     `pkg-config --cflags --libs elector`, with the static archive, and with
#     find_package(elector) (test/install/CMakeLists.txt), and as a subproject
#     (add_subdirectory, which must build the library only), each run against a
#     real etcd started here on random loopback ports: campaign, elected,
#     resign; and the C++ example examples/cpp/myapp.cpp built with pkg-config
#     and with find_package: two instances, Ctrl-C on the leader, the other
#     leads;
#   - the README's C examples (examples/instance.c, threaded.c) built with
#     pkg-config: the leader SIGKILLed hands over through its release helper;
#   - `elector --version` prints the library's version;
#   - the release helper: LIBDIR/elector/elector-release, the path compiled
#     into libelector.so is the configured install's, run by hand it refuses
#     (exit 2), and the consumers linked with libelector.so find it beside the
#     library (not at the configured path: this prefix is another), without
#     $ELECTOR_RELEASE_HELPER: the C++ example SIGKILLed while leading hands
#     over in milliseconds (the time is printed; more than 3 s, about the TTL's
#     share, fails).
#
#   scripts/check-install.sh BUILD_DIR
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: check-install.sh BUILD_DIR}" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/elector-install.XXXXXX")
ETCD_PID=
APP_PIDS=()
cleanup() {
    local p
    for p in "${APP_PIDS[@]}"; do
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    if [ -n "$ETCD_PID" ]; then
        kill -KILL "$ETCD_PID" 2>/dev/null || true
        wait "$ETCD_PID" 2>/dev/null || true
    fi
    rm -rf "$T"
}
trap cleanup EXIT

fail() { echo "check-install: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

prefix=$T/prefix
step "install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$T/install.log"
libdir=$(dirname "$(find "$prefix" -name libelector.so -print -quit)")
[ -d "$libdir" ] || fail "no libelector.so installed"

step "installed files"
for f in include/elector/election.h include/elector/error.h include/elector/etcd.h \
    include/elector/version.h include/elector/elector.hpp bin/elector share/man/man1/elector.1; do
    [ -e "$prefix/$f" ] || fail "missing $f"
done
for f in libelector.so libelector.a pkgconfig/elector.pc cmake/elector/elector-config.cmake \
    cmake/elector/elector-config-version.cmake cmake/elector/elector-targets.cmake; do
    [ -e "$libdir/$f" ] || fail "missing ${libdir#"$prefix"/}/$f"
done
[ -x "$libdir/elector/elector-release" ] || fail "missing ${libdir#"$prefix"/}/elector/elector-release"
[ ! -e "$prefix/include/elector/etcd_rpc.h" ] || fail "elector/etcd_rpc.h is installed"
if grep -rqE '^#include.*pb-c\.h' "$prefix/include"; then
    fail "installed headers include generated protobuf-c headers"
fi

step "each public header compiles on its own (C11, C++)"
for h in "$prefix"/include/elector/*.h; do
    n=elector/$(basename "$h")
    printf '#include <%s>\n' "$n" |
        cc -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$prefix/include" -x c - ||
        fail "$n does not compile on its own (C)"
    if command -v c++ >/dev/null; then
        printf '#include <%s>\n' "$n" |
            c++ -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" -x c++ - ||
            fail "$n does not compile on its own (C++)"
    fi
done

if command -v c++ >/dev/null; then
    printf '#include <elector/elector.hpp>\n' |
        c++ -std=c++17 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$prefix/include" -x c++ - ||
        fail "elector/elector.hpp does not compile on its own (C++17)"
fi

step "SONAME and exported symbols"
so=$(readlink -f "$libdir/libelector.so")
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
echo "SONAME $soname ($(basename "$so"))"
[ "$soname" = libelector.so.1 ] || fail "SONAME is '$soname', not libelector.so.1"
[ -e "$libdir/$soname" ] || fail "no $soname link"
nm -D --defined-only "$so" | awk '$2 != "A" {sub(/@.*/, "", $3); print $3}' | sort >"$T/exported"
bad=$(grep -v '^elector_[a-z]' "$T/exported" || true)
[ -z "$bad" ] || fail "exported beyond elector_*: $(echo "$bad" | head -5 | tr '\n' ' ')"
echo "$(wc -l <"$T/exported") symbols exported, all elector_*"
# Exactly the functions the installed headers declare (and the one table),
# leaving out the in-tree sections (#ifdef ELECTOR_RPC_API ... #endif) and
# inline ones (none today).
for h in "$prefix"/include/elector/*.h; do
    sed -e 's@/\*.*\*/@@' -e '/^ *\*/d' -e '/^\/\*/d' -e '/^static inline/d' "$h" |
        awk '/^#ifdef ELECTOR_RPC_API/ {skip = 1} skip && /^#endif/ {skip = 0; next} !skip'
done | grep -oE '\belector_[a-z0-9_]+ *\(' | tr -d ' (' | sort -u >"$T/declared"
grep -hoE '\bextern const [a-z0-9_]+ elector_[a-z0-9_]+' "$prefix"/include/elector/*.h |
    awk '{print $4}' >>"$T/declared"
sort -u -o "$T/declared" "$T/declared"
if ! diff "$T/declared" "$T/exported" >"$T/diff"; then
    cat "$T/diff" >&2
    fail "exported symbols (>) differ from the functions the headers declare (<)"
fi
nm -g --defined-only "$libdir/libelector.a" | awk 'NF == 3 {print $3}' | sort -u >"$T/archive"
bad=$(grep -v '^elector_[a-z]' "$T/archive" || true)
[ -z "$bad" ] || fail "libelector.a has global symbols beyond elector_*: $(echo "$bad" | head -5)"
diff "$T/exported" "$T/archive" >/dev/null || fail "libelector.a and libelector.so export different names"

step "the release helper"
helper=$libdir/elector/elector-release
"$helper" --version
rc=0
"$helper" </dev/null 2>"$T/helper.err" || rc=$?
[ "$rc" = 2 ] && grep -q "started by libelector" "$T/helper.err" ||
    fail "elector-release run by hand: exit $rc, $(cat "$T/helper.err")"
# The library looks for it where the configured install puts it.
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
want=$(cache CMAKE_INSTALL_LIBDIR)
case $want in /*) ;; *) want=$(cache CMAKE_INSTALL_PREFIX)/$want ;; esac
want=$want/elector/elector-release
grep -qaF "$want" "$(readlink -f "$libdir/libelector.so")" ||
    fail "libelector.so does not look for its helper at $want"
echo "compiled-in helper path: $want"
# The consumers below find the installed helper beside libelector.so on their
# own (the static one is told where it is).
unset ELECTOR_RELEASE_HELPER

step "start etcd on random loopback ports"
port_free() { ! ss -Htan "( sport = :$1 )" 2>/dev/null | grep . >/dev/null; }
EP=
for attempt in 1 2 3; do
    cp=$((20000 + RANDOM % 40000))
    pp=$((20000 + RANDOM % 40000))
    [ "$cp" != "$pp" ] && port_free "$cp" && port_free "$pp" || continue
    rm -rf "$T/etcd"
    etcd --name m0 --data-dir "$T/etcd" --log-level error \
        --listen-client-urls "http://127.0.0.1:$cp" --advertise-client-urls "http://127.0.0.1:$cp" \
        --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
        --initial-cluster "m0=http://127.0.0.1:$pp" --initial-cluster-state new \
        >"$T/etcd.log" 2>&1 &
    ETCD_PID=$!
    for _ in $(seq 100); do
        if etcdctl --endpoints "127.0.0.1:$cp" endpoint health >/dev/null 2>&1; then
            EP=127.0.0.1:$cp
            break 2
        fi
        kill -0 "$ETCD_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$ETCD_PID" 2>/dev/null || true
    wait "$ETCD_PID" 2>/dev/null || true
    ETCD_PID=
done
[ -n "$EP" ] || { tail -5 "$T/etcd.log" >&2; fail "cannot start etcd"; }
echo "etcd at $EP (pid $ETCD_PID)"

run_consumer() { # NAME BINARY
    echo "-- $1"
    "$2" "$EP" "install-check-$1" >"$T/$1.out" 2>&1 || {
        cat "$T/$1.out" >&2
        fail "$1: the consumer failed"
    }
    sed 's/^/   /' "$T/$1.out"
}

# Waits until FILE has a line containing TEXT (fixed string).
wait_line() {
    for _ in $(seq 300); do
        grep -qF -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    cat "$1" >&2
    return 1
}

# SIGKILLs the leader PID; the successor's FILE must show TEXT within 3 s
# (its release helper, found beside the prefix's libelector.so, revoked the
# lease; more is the TTL's share: no helper ran). Prints the time. NAME: the case.
kill_and_time() { # NAME PID FILE TEXT
    local t0 t1
    t0=$(date +%s%N)
    kill -KILL "$2"
    wait "$2" 2>/dev/null || true
    for _ in $(seq 3000); do
        grep -qF "$4" "$3" && break
        sleep 0.001
    done
    t1=$(date +%s%N)
    grep -qF "$4" "$3" || fail "$1: the next candidate never led after the leader's SIGKILL"
    echo "   SIGKILL of the leader -> the next leads: $(((t1 - t0) / 1000000)) ms (release helper beside libelector.so)"
    [ $(((t1 - t0) / 1000000)) -lt 3000 ] || fail "$1: the handover after SIGKILL waited for the TTL: no release helper found"
}

# The C++ example: instance a leads, b follows; Ctrl-C on a resigns (exit 0)
# and b leads.
run_myapp() { # NAME BINARY
    echo "-- $1: myapp a, b; Ctrl-C on a"
    "$2" a "$EP" >"$T/$1-a.out" 2>&1 &
    local pa=$!
    APP_PIDS+=("$pa")
    wait_line "$T/$1-a.out" "[a] I am the leader now" || fail "$1: myapp a never led"
    "$2" b "$EP" >"$T/$1-b.out" 2>&1 &
    local pb=$!
    APP_PIDS+=("$pb")
    wait_line "$T/$1-b.out" "[b] leader is a" || fail "$1: myapp b does not see a lead"
    kill -INT "$pa"
    wait "$pa" || fail "$1: myapp a exited with status $? after Ctrl-C"
    wait_line "$T/$1-a.out" "[a] resigned" || fail "$1: myapp a did not resign"
    wait_line "$T/$1-b.out" "[b] I am the leader now" || fail "$1: myapp b never led"
    # b leads: a SIGKILL hands over to c through b's release helper, found
    # beside the prefix's libelector.so.
    "$2" c "$EP" >"$T/$1-c.out" 2>&1 &
    local pc=$!
    APP_PIDS+=("$pc")
    wait_line "$T/$1-c.out" "[c] leader is b" || fail "$1: myapp c does not see b lead"
    kill_and_time "$1" "$pb" "$T/$1-c.out" "[c] I am the leader now"
    kill -INT "$pc"
    wait "$pc" || fail "$1: myapp c exited with status $? after Ctrl-C"
    grep -h -e 'I am the leader' -e resigned "$T/$1-a.out" "$T/$1-b.out" "$T/$1-c.out" | sed 's/^/   /'
}

step "build with pkg-config --cflags --libs elector, run"
export PKG_CONFIG_PATH=$libdir/pkgconfig
# Nothing of the build tree: only the prefix's headers and libraries.
cflags=$(pkg-config --cflags elector)
libs=$(pkg-config --libs elector)
echo "pkg-config: $cflags $libs"
[ "$(pkg-config --modversion elector)" = "$(sed -n 's/^#define ELECTOR_VERSION_STRING "\(.*\)"/\1/p' \
    "$prefix/include/elector/version.h")" ] || fail "elector.pc's version differs from version.h"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror $cflags "$root/test/install/consumer.c" $libs \
    -Wl,-rpath,"$libdir" -o "$T/consumer-pc"
readelf -d "$T/consumer-pc" | grep 'NEEDED.*\[libelector.so.1\]' >/dev/null ||
    fail "consumer-pc does not need libelector.so.1"
run_consumer pkg-config "$T/consumer-pc"
# shellcheck disable=SC2086
c++ -std=c++17 -Wall -Wextra -Werror $cflags "$root/examples/cpp/myapp.cpp" $libs \
    -Wl,-rpath,"$libdir" -o "$T/myapp-pc"
run_myapp pkg-config "$T/myapp-pc"

# The README's C examples (examples/instance.c, examples/threaded.c, which ask
# for release_on_exit): a leads, b waits; SIGKILL of a -> b leads through a's
# release helper, found beside the prefix's libelector.so.
run_kill_handover() { # NAME BINARY ELECTED-TEXT
    local name=install-check-$1 n
    echo "-- $1: a leads, b waits; SIGKILL of a"
    "$2" a "$EP" "$name" >"$T/$1-a.out" 2>&1 &
    local pa=$!
    APP_PIDS+=("$pa")
    wait_line "$T/$1-a.out" "$3" || fail "$1: a never led"
    "$2" b "$EP" "$name" >"$T/$1-b.out" 2>&1 &
    local pb=$!
    APP_PIDS+=("$pb")
    for _ in $(seq 300); do # b's key is in: it waits behind a
        n=$(etcdctl --endpoints "$EP" get --prefix --keys-only "$name/" | grep -c . || true)
        [ "$n" -ge 2 ] && break
        sleep 0.05
    done
    [ "$n" -ge 2 ] || fail "$1: b's key never appeared"
    kill_and_time "$1" "$pa" "$T/$1-b.out" "$3"
    kill -INT "$pb"
    wait "$pb" || fail "$1: b exited with status $? after Ctrl-C"
    n=$(etcdctl --endpoints "$EP" get --prefix --keys-only "$name/" | grep -c . || true)
    [ "$n" = 0 ] || fail "$1: $n keys left under $name/ after b's Ctrl-C"
}
for ex in instance threaded; do
    # shellcheck disable=SC2086
    cc -std=c11 -Wall -Wextra -Werror $cflags "$root/examples/$ex.c" $libs \
        -Wl,-rpath,"$libdir" -o "$T/$ex-pc"
done
run_kill_handover c-embedded "$T/instance-pc" "I am the leader now"
run_kill_handover c-threaded "$T/threaded-pc" "elected"

step "build with the static archive (pkg-config --static), beside our internals' names, run"
# A program that defines names the library uses inside (etcd's protobuf-c
# descriptors, an elector__ helper): they must not clash with the archive's.
cat >"$T/clash.c" <<'EOC'
const int etcdserverpb__range_request__descriptor = 1;
const int mvccpb__key_value__descriptor = 2;
int elector__grpc_error = 3;
EOC
slibs=$(pkg-config --static --libs elector)
slibs=${slibs/-lelector/$libdir/libelector.a}
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror $cflags "$root/test/install/consumer.c" "$T/clash.c" \
    $slibs -o "$T/consumer-static"
readelf -d "$T/consumer-static" | grep 'NEEDED.*libelector' >/dev/null && fail "consumer-static needs libelector.so"
# Linked statically, far from the prefix: told where the helper is.
ELECTOR_RELEASE_HELPER=$helper run_consumer static "$T/consumer-static"

step "build with find_package(elector), run"
cmake -S "$root/test/install" -B "$T/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DELECTOR_MYAPP="$root/examples/cpp/myapp.cpp" -DCMAKE_BUILD_TYPE=Release >"$T/cmake.log" 2>&1 || { cat "$T/cmake.log" >&2; fail "cmake configure"; }
cmake --build "$T/cmake-build" >>"$T/cmake.log" 2>&1 || { cat "$T/cmake.log" >&2; fail "cmake build"; }
ldd "$T/cmake-build/consumer" | grep "libelector.so.1 => $libdir/" >/dev/null ||
    fail "the find_package build does not use $libdir/libelector.so.1"
run_consumer find_package "$T/cmake-build/consumer"
run_myapp find_package "$T/cmake-build/myapp"

step "build as a subproject (add_subdirectory), run"
# Only the library builds then: no tests, benchmarks, fault programs, tool.
cmake -S "$root/test/install" -B "$T/sub-build" -DELECTOR_SUBPROJECT="$root" \
    -DCMAKE_BUILD_TYPE=Release >"$T/sub.log" 2>&1 || { cat "$T/sub.log" >&2; fail "subproject configure"; }
targets=$(cmake --build "$T/sub-build" --target help)
bad=$(grep -oE 'elector_(test|bench|fault|tool|example|fuzz)[a-z_]*|elector_shared' <<<"$targets" || true)
[ -z "$bad" ] || fail "as a subproject, these targets exist too: $(echo "$bad" | tr '\n' ' ')"
cmake --build "$T/sub-build" -j"$(nproc)" >>"$T/sub.log" 2>&1 || { cat "$T/sub.log" >&2; fail "subproject build"; }
run_consumer subproject "$T/sub-build/consumer"

step "the tool"
v=$("$prefix/bin/elector" --version)
echo "$v"
[ "$v" = "elector $(pkg-config --modversion elector)" ] || fail "elector --version: '$v'"
echo "check-install: ok"
