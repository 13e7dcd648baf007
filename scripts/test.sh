#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The test command: installs what is missing (Debian packages), builds with
# warnings as errors, runs every test against real etcd processes, then builds
# again with AddressSanitizer + UndefinedBehaviorSanitizer and runs the suite
# once more. Each test starts and reaps its own etcd members on free loopback
# ports in temporary directories. A subset also runs under valgrind memcheck,
# each libFuzzer target runs for 20 seconds, and the fault-injection suite
# (scripts/fault.sh, docs/FAULTS.md) runs every scenario twice (once more
# on the second etcd version). The ctest
# label `package` installs the build into a temporary prefix and builds programs
# from it (scripts/check-install.sh) and builds the Debian packages from a copy
# of the tree (scripts/check-debian.sh); not in the sanitizer build. Last, the
# tests of the threaded parts (the driver, the C++ API: label `threads`) run
# once more under ThreadSanitizer (build-tsan/). The Python tests run under
# Debian 12's Python 3.11 in ctest and once more under Debian 13's 3.13
# (scripts/python313.sh fetches it into a cache).
#
# The benchmark gate (scripts/bench-gate.sh, bench/RESULTS.md "Regression
# gate") runs after the first pass on build/'s programs, on the machine's etcd:
# graceful handover elector vs etcdctl elect (same run, 100 rounds each), crash
# handover with the release helper (10 rounds), etcd requests per leadership
# change at N = 1000; it fails the run when a figure passes its threshold in
# bench/gate.conf (about 1.5 minutes; a failing section runs once more). Its
# self-test (a build with a planted 2 ms delay in the graceful path must fail
# the gate; about 2 minutes more) runs on demand: scripts/bench-gate.sh
# --self-test, or ELECTOR_GATE_SELF_TEST=1 here.
#
# Two etcd versions: the ctest suite and the fault suite run once on the
# machine's etcd (Debian 12: 3.4) and once on etcd 3.5, which
# scripts/etcd35.sh fetches from a newer Debian suite into a cache (no install;
# the harness picks it up from ELECTOR_ETCD_DIR). The normal build's whole
# suite runs on the first version, the ASan+UBSan build's whole suite on the
# last: each version sees every test once, in one build or the other (a third
# pass, the normal build's etcd tests on 3.5, took 11 more minutes). With
# ELECTOR_SKIP_ASAN=1 the normal build runs the tests with label etcd on the
# other versions instead. Valgrind, the fuzzers and TSan run
# on the first version: what they check does not depend on the server's.
#
#   ./scripts/test.sh            everything (estimated 50-55 minutes on 2 cores)
#   ELECTOR_SKIP_ASAN=1 ./scripts/test.sh     skip the ASan pass
#   ELECTOR_SKIP_TSAN=1 ./scripts/test.sh     skip the TSan pass
#   ELECTOR_SKIP_PY313=1 ./scripts/test.sh    skip the Python tests under 3.13
#   ELECTOR_SKIP_GATE=1 ./scripts/test.sh     skip the benchmark gate
#   ELECTOR_GATE_SELF_TEST=1 ./scripts/test.sh   the gate with its self-test
#   ELECTOR_ETCD_VERSIONS=3.4 ./scripts/test.sh   only the machine's etcd
#   ELECTOR_ETCD_VERSIONS=3.5 ./scripts/test.sh   only etcd 3.5
#   ELECTOR_ETCD_DIR=DIR ./scripts/test.sh     DIR's etcd as the second version
#   ELECTOR_FAULT_ROUNDS=2 ./scripts/test.sh   2 fault rounds on the second version too
#   ./scripts/test.sh -R election              only tests whose name matches
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh

VERSIONS=${ELECTOR_ETCD_VERSIONS:-3.4 3.5}
ETCD35_DIR=""
for v in $VERSIONS; do
    case $v in
        3.4) ;;
        3.5)
            # A directory given in ELECTOR_ETCD_DIR is used as it is (another
            # build of etcd, 3.6 for instance); else the download. A failed
            # download stops the run: etcd35.sh names what is missing.
            if [ -n "${ELECTOR_ETCD_DIR:-}" ]; then
                ETCD35_DIR=$ELECTOR_ETCD_DIR
                continue
            fi
            echo "== fetching etcd 3.5 (scripts/etcd35.sh)"
            ETCD35_DIR=$(scripts/etcd35.sh) || {
                echo "test.sh: etcd 3.5 is not available (see above);" \
                    "ELECTOR_ETCD_VERSIONS=3.4 runs the machine's etcd only" >&2
                exit 1
            } ;;
        *) echo "test.sh: ELECTOR_ETCD_VERSIONS: unknown version '$v' (3.4, 3.5)" >&2; exit 1 ;;
    esac
done

# Runs "$@" with the harness pointed at etcd version $1.
with_etcd() {
    local v=$1; shift
    if [ "$v" = 3.5 ]; then
        ELECTOR_ETCD_DIR=$ETCD35_DIR "$@"
    else
        env -u ELECTOR_ETCD_DIR "$@"
    fi
}

build_dir() {
    local dir=$1; shift
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DELECTOR_WERROR=ON "$@" >/dev/null
    cmake --build "$dir" -j"$(nproc)"
}

# One test program at a time: the fault tests time leases of 2 s and must
# not compete with each other for two cores.
run_ctest() {
    local v=$1 dir=$2; shift 2
    with_etcd "$v" ctest --test-dir "$dir" --output-on-failure --timeout 900 "$@" "${CTEST_ARGS[@]}"
}

CTEST_ARGS=("$@")
echo "== build (build/)"
build_dir build
read -r -a versions <<<"$VERSIONS"
first=${versions[0]} last=${versions[-1]}
first_version=yes
for v in $VERSIONS; do
    if [ $first_version = yes ]; then
        echo "== test on etcd $v (build/)"
        run_ctest "$v" build
    elif [ "$v" = "$last" ] && [ "${ELECTOR_SKIP_ASAN:-0}" != 1 ]; then
        # the ASan pass below runs the whole suite on this version
        echo "== etcd $v: the whole suite runs in the ASan pass (build-asan/) below"
    else
        # The tests that talk to no etcd (labels unit, hostile, package: parsing,
        # the scripted hostile server, the install and Debian package checks)
        # ran on the first version already: they do not depend on it.
        echo "== test on etcd $v (build/; the tests with label etcd)"
        run_ctest "$v" build -L etcd
    fi
    first_version=no
done
if [ ${#CTEST_ARGS[@]} -eq 0 ] && [ "${ELECTOR_SKIP_GATE:-0}" != 1 ]; then
    # The benchmark gate on build/'s programs, on the machine's etcd (PATH).
    gate_args=(--build build)
    [ "${ELECTOR_GATE_SELF_TEST:-0}" != 1 ] || gate_args+=(--self-test)
    echo "== benchmark gate (scripts/bench-gate.sh ${gate_args[*]}; thresholds: bench/gate.conf)"
    env -u ELECTOR_ETCD_DIR scripts/bench-gate.sh "${gate_args[@]}"
fi
if [ ${#CTEST_ARGS[@]} -eq 0 ] && [ "${ELECTOR_SKIP_PY313:-0}" != 1 ]; then
    # The Python package under Debian 13's interpreter as well (Debian 12 has
    # 3.11 only): fetched into a cache like etcd 3.5, run under its own loader,
    # on the last etcd version (the ctest pass ran them on the first).
    echo "== the Python tests under Python 3.13 (scripts/python313.sh) on etcd $last"
    with_etcd "$last" scripts/python313.sh build
fi
if [ ${#CTEST_ARGS[@]} -eq 0 ]; then
    echo "== valgrind memcheck over a subset"
    scripts/valgrind.sh build
    echo "== fuzzing, 20 s per target (scripts/fuzz.sh 600 for a longer run)"
    scripts/fuzz.sh 20
    # Every scenario twice on the first version, once on the second: the
    # scenarios are the same, and more rounds would take the run past its 45
    # minutes (ELECTOR_FAULT_ROUNDS=2 for two on both; scripts/fault.sh
    # --rounds N or --duration 30m for more).
    rounds=2
    for v in $VERSIONS; do
        echo "== fault injection on etcd $v with the leadership-history checker ($rounds round(s))"
        with_etcd "$v" scripts/fault.sh --rounds "$rounds"
        # cert-rotate needs a TLS cluster, nospace a small quota: each runs on
        # its own (about 20 s each)
        with_etcd "$v" scripts/fault.sh --rounds "$rounds" --scenarios cert-rotate
        with_etcd "$v" scripts/fault.sh --rounds "$rounds" --scenarios nospace
        rounds=${ELECTOR_FAULT_ROUNDS:-1}
    done
fi
if [ "${ELECTOR_SKIP_ASAN:-0}" != 1 ]; then
    echo "== build and test with ASan+UBSan (build-asan/) on etcd $last"
    # Leak checking stays on; halt at the first UBSan report.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    build_dir build-asan -DELECTOR_SANITIZE=ON -DELECTOR_BENCH=OFF
    run_ctest "$last" build-asan
fi
if [ "${ELECTOR_SKIP_TSAN:-0}" != 1 ]; then
    echo "== the threaded tests (label threads) with TSan (build-tsan/)"
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DELECTOR_WERROR=ON \
        -DELECTOR_TSAN=ON -DELECTOR_BENCH=OFF -DELECTOR_FAULT=OFF >/dev/null
    # Only what the label's tests run (test NAME is target elector_NAME): the
    # whole tree under TSan would add minutes for programs with one thread.
    mapfile -t tsan_targets < <(ctest --test-dir build-tsan -N -L threads 2>/dev/null |
        sed -n 's/^ *Test *#[0-9]*: *\([A-Za-z0-9_]*\)$/elector_\1/p')
    [ ${#tsan_targets[@]} -gt 0 ] || { echo "test.sh: no test with label threads" >&2; exit 1; }
    cmake --build build-tsan -j"$(nproc)" --target "${tsan_targets[@]}" \
        elector_example_myapp elector_release
    ctest --test-dir build-tsan --output-on-failure --timeout 900 -L threads "${CTEST_ARGS[@]}"
fi
echo "== all tests passed"
