#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Coverage of the whole suite (docs/COVERAGE.md). Not part of the test command:
# it takes about as long as one ctest pass at -O0 plus the fault suite's round.
#
#   scripts/coverage.sh            build build-cov/, run everything, report
#   scripts/coverage.sh --report   the report only, from the counters already there
#
# Steps: a gcc build with -DELECTOR_COVERAGE=ON in build-cov/ (--coverage -O0;
# processes that _exit() or exec write their counters too: cmake/coverage.cmake),
# old counters removed, then
#   1. ctest on the machine's etcd (not the `package` label: the installed
#      archive carries gcov references a plain program cannot link);
#   2. the allocation-failure sweeps: test_oom for every N, and again with
#      lease renewals (ELECTOR_OOM_RENEW=1; ctest runs only a sample of N;
#      about 8 min together; ELECTOR_COV_SKIP_OOM=1 skips them), and
#      test_tool_oom's for every N (ELECTOR_TOOL_OOM_FULL=1, a few minutes);
#   3. the fault suite, one round of every scenario (scripts/fault.sh --rounds 1;
#      ELECTOR_COV_SKIP_FAULT=1 skips it);
#   4. the fuzz corpora (fuzz/corpus/) replayed by gcc-built copies of the targets.
# Failing tests do not stop the run (their coverage still counts); the script
# exits 1 when one failed. Report (gcovr, Debian's package): a per-file table
# of src/ and tool/ on stdout and in build-cov/coverage/summary.txt, HTML in
# build-cov/coverage/index.html, and last one line per directory:
#   coverage src/ lines 98.4% branches 91.0%
# Extra arguments go to ctest (e.g. -R test_tool to measure a subset).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-cov
OUT=$BUILD/coverage
cd "$ROOT"

report_only=0
if [ "${1:-}" = --report ]; then
    report_only=1
    shift
fi

scripts/deps.sh          # what the tests use (etcd, clang-format, ...)
scripts/deps.sh coverage # and gcovr
t0=$(date +%s)
failed=()

if [ $report_only -eq 0 ]; then
    echo "== coverage build (build-cov/)"
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DELECTOR_WERROR=ON -DELECTOR_COVERAGE=ON \
        -DELECTOR_BENCH=OFF >/dev/null
    # From clean: a changed test/covwrap.o (compiled at configure time) is no
    # dependency of the links. At -O0 the whole build takes about 30 s.
    # Notes (.gcno) of objects no target builds any more (a source moved to
    # another target) would stay beside the new ones and break gcovr's merge:
    # every note is made again by the build from clean.
    find "$BUILD" -name '*.gcno' -delete
    cmake --build "$BUILD" -j"$(nproc)" --clean-first
    find "$BUILD" -name '*.gcda' -delete

    echo "== ctest (machine's etcd)"
    env -u ELECTOR_ETCD_DIR ctest --test-dir "$BUILD" --output-on-failure --timeout 1200 \
        -LE package "$@" || failed+=(ctest)
    echo "   $(($(date +%s) - t0)) s so far"

    if [ "${ELECTOR_COV_SKIP_OOM:-0}" != 1 ] && [ $# -eq 0 ]; then
        echo "== allocation-failure sweeps (test_oom, every N; then with renewals)"
        env -u ELECTOR_ETCD_DIR ELECTOR_OOM_FULL=1 "$BUILD/test/test_oom" >"$BUILD/oom-full.log" 2>&1 ||
            failed+=(oom-full)
        env -u ELECTOR_ETCD_DIR ELECTOR_OOM_FULL=1 ELECTOR_OOM_RENEW=1 ELECTOR_OOM_FROM=150 \
            "$BUILD/test/test_oom" >"$BUILD/oom-renew.log" 2>&1 || failed+=(oom-renew)
        tail -n 2 "$BUILD/oom-full.log" "$BUILD/oom-renew.log"
        # ctest ran test_tool_oom's sample; every N of its scenarios takes
        # a few minutes more (docs/COVERAGE.md, "test_tool_oom").
        echo "== the tool's allocation-failure sweep (ELECTOR_TOOL_OOM_FULL=1 test_tool_oom)"
        env -u ELECTOR_ETCD_DIR ELECTOR_TOOL_OOM_FULL=1 "$BUILD/test/test_tool_oom" \
            >"$BUILD/tool-oom-full.log" 2>&1 || failed+=(test_tool_oom_full)
        tail -n 2 "$BUILD/tool-oom-full.log"
        echo "   $(($(date +%s) - t0)) s so far"
    fi

    if [ "${ELECTOR_COV_SKIP_FAULT:-0}" != 1 ] && [ $# -eq 0 ]; then
        echo "== fault suite, one round (scripts/fault.sh --rounds 1)"
        env -u ELECTOR_ETCD_DIR ELECTOR_FAULT_BUILD="$BUILD" scripts/fault.sh --rounds 1 ||
            failed+=(fault)
        echo "   $(($(date +%s) - t0)) s so far"
    fi

    echo "== fuzz corpora replayed"
    for p in "$BUILD"/fuzz/replay_fuzz_*; do
        t=${p##*/replay_}
        timeout 600 "$p" "$ROOT/fuzz/corpus/$t" || failed+=("$t")
    done
fi

echo "== report (gcovr)"
mkdir -p "$OUT"
rm -f "$OUT"/*.html "$OUT"/*.css
# One pass over the counters; the text table and the per-directory totals come
# from its JSON summary. Branches that only the compiler can reach (none in C)
# or that sit on lines without code are left out, as usual with gcovr.
gcovr --root "$ROOT" --object-directory "$BUILD" -j "$(nproc)" \
    --filter "$ROOT/src/" --filter "$ROOT/tool/" \
    --exclude-unreachable-branches --exclude-throw-branches \
    --html-details "$OUT/index.html" --html-title "elector coverage" \
    --json-summary "$OUT/summary.json" --json-summary-pretty >/dev/null
/usr/bin/python3 - "$OUT/summary.json" <<'PY' | tee "$OUT/summary.txt"
import json, sys
files = json.load(open(sys.argv[1]))["files"]
def pct(c, t):
    return 100.0 * c / t if t else 100.0
print(f"{'file':<40} {'lines':>13} {'line%':>7} {'branches':>13} {'branch%':>8}")
dirs = {}
for f in sorted(files, key=lambda f: f["filename"]):
    n = f["filename"]
    lc, lt = f["line_covered"], f["line_total"]
    bc, bt = f["branch_covered"], f["branch_total"]
    print(f"{n:<40} {lc:>6}/{lt:<6} {pct(lc, lt):6.1f}% {bc:>6}/{bt:<6} {pct(bc, bt):7.1f}%")
    d = n.split("/")[0] + "/"
    a = dirs.setdefault(d, [0, 0, 0, 0])
    for i, v in enumerate((lc, lt, bc, bt)):
        a[i] += v
for d in ("src/", "tool/"):
    lc, lt, bc, bt = dirs.get(d, [0, 0, 0, 0])
    print(f"coverage {d} lines {pct(lc, lt):.1f}% branches {pct(bc, bt):.1f}%")
PY
echo "HTML: $OUT/index.html; took $(($(date +%s) - t0)) s" >&2
if [ ${#failed[@]} -gt 0 ]; then
    echo "coverage.sh: failed: ${failed[*]} (the figures above include their partial runs)" >&2
    exit 1
fi
