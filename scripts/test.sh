#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The test command: installs what is missing (Debian packages), builds with
# warnings as errors, runs every test against real etcd processes, then builds
# again with AddressSanitizer + UndefinedBehaviorSanitizer and runs the suite
# once more. Each test starts and reaps its own etcd members on free loopback
# ports in temporary directories. A subset also runs under valgrind memcheck,
# each libFuzzer target runs for 20 seconds, and the fault-injection suite
# (scripts/fault.sh, docs/FAULTS.md) runs every scenario 3 times. The ctest
# label `package` installs the build into a temporary prefix and builds programs
# from it (scripts/check-install.sh) and builds the Debian packages from a copy
# of the tree (scripts/check-debian.sh); not in the sanitizer build. Last, the
# tests of the threaded parts (the driver, the C++ API: label `threads`) run
# once more under ThreadSanitizer (build-tsan/).
#
#   ./scripts/test.sh            everything (about 20 minutes on 2 cores)
#   ELECTOR_SKIP_ASAN=1 ./scripts/test.sh     skip the ASan pass
#   ELECTOR_SKIP_TSAN=1 ./scripts/test.sh     skip the TSan pass
#   ./scripts/test.sh -R election              only tests whose name matches
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh

run_suite() {
    local dir=$1; shift
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DELECTOR_WERROR=ON "$@" >/dev/null
    cmake --build "$dir" -j"$(nproc)"
    # One test program at a time: the fault tests time leases of 2 s and must
    # not compete with each other for two cores.
    ctest --test-dir "$dir" --output-on-failure --timeout 900 "${CTEST_ARGS[@]}"
}

CTEST_ARGS=("$@")
echo "== build and test (build/)"
run_suite build
if [ ${#CTEST_ARGS[@]} -eq 0 ]; then
    echo "== valgrind memcheck over a subset"
    scripts/valgrind.sh build
    echo "== fuzzing, 20 s per target (scripts/fuzz.sh 600 for a longer run)"
    scripts/fuzz.sh 20
    echo "== fault injection with the leadership-history checker (about 4 minutes)"
    scripts/fault.sh
fi
if [ "${ELECTOR_SKIP_ASAN:-0}" != 1 ]; then
    echo "== build and test with ASan+UBSan (build-asan/)"
    # Leak checking stays on; halt at the first UBSan report.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    run_suite build-asan -DELECTOR_SANITIZE=ON -DELECTOR_BENCH=OFF
fi
if [ "${ELECTOR_SKIP_TSAN:-0}" != 1 ]; then
    echo "== the threaded tests (label threads) with TSan (build-tsan/)"
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DELECTOR_WERROR=ON \
        -DELECTOR_TSAN=ON -DELECTOR_BENCH=OFF -DELECTOR_FAULT=OFF >/dev/null
    cmake --build build-tsan -j"$(nproc)"
    ctest --test-dir build-tsan --output-on-failure --timeout 900 -L threads "${CTEST_ARGS[@]}"
fi
echo "== all tests passed"
