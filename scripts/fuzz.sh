#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the libFuzzer targets of fuzz/ with clang into build-fuzz/ and runs each
# for a while on a scratch copy of its seed corpus (fuzz/corpus/<target>/ is never
# written to).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# SECONDS per target, default 60. TARGETs default to all of them. Exits non-zero
# when a target crashes, leaks, hangs or fails to run; the reproducer is kept in
# build-fuzz/crashes/<target>/ and its path is printed. Re-run one with
#   build-fuzz/<target> <file>
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
[ $# -gt 0 ] && shift
case $secs in '' | *[!0-9]*) echo "usage: $0 [SECONDS] [TARGET...]" >&2; exit 2 ;; esac
targets=("$@")
[ ${#targets[@]} -eq 0 ] &&
    targets=(fuzz_grpc_recv fuzz_grpc_engine fuzz_election fuzz_endpoints fuzz_tool_args)

# Per target: inputs that script a server may be long (-max_len), and no single
# allocation may exceed what the client's bounds allow (-malloc_limit_mb): the
# engine runs with max_recv_msg_bytes 4 MiB / max_decode_bytes 32 MiB,
# fuzz_election with 256 KiB / 2 MiB.
target_opts() {
    case $1 in
    fuzz_grpc_engine) echo "-max_len=262144 -malloc_limit_mb=96" ;;
    fuzz_election) echo "-max_len=65536 -malloc_limit_mb=64" ;;
    *) echo "" ;;
    esac
}

# Toolchain: the project's packages (clang among them), then the libFuzzer runtime.
"$root/scripts/deps.sh"
probe='int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);
int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}'
if ! printf '%s\n' "$probe" | clang -x c - -fsanitize=fuzzer -o /dev/null 2>/dev/null; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    echo "fuzz: installing the libFuzzer runtime (libclang-rt-14-dev)" >&2
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q --no-install-recommends libclang-rt-14-dev >/dev/null
    printf '%s\n' "$probe" | clang -x c - -fsanitize=fuzzer -o /dev/null ||
        { echo "fuzz: clang -fsanitize=fuzzer does not link" >&2; exit 1; }
fi

bdir=$root/build-fuzz
cmake -S "$root/fuzz" -B "$bdir" -DCMAKE_C_COMPILER=clang >/dev/null
cmake --build "$bdir" -j"$(nproc)" --target "${targets[@]/#/elector_}" >/dev/null ||
    cmake --build "$bdir" -j1 --target "${targets[@]/#/elector_}" # again, to show the error

work=$(mktemp -d "${TMPDIR:-/tmp}/elector-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
printf '%-18s %10s %10s %8s  %s\n' target execs exec/s cov result
for t in "${targets[@]}"; do
    bin=$bdir/$t
    seeds=$root/fuzz/corpus/$t
    corpus=$work/$t
    crashes=$bdir/crashes/$t
    mkdir -p "$corpus" "$crashes"
    [ -d "$seeds" ] && cp -r "$seeds/." "$corpus/"
    log=$bdir/$t.log
    rc=0
    # shellcheck disable=SC2046
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        $(target_opts "$t") -artifact_prefix="$crashes/" "$corpus" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    if [ $rc -eq 0 ]; then
        printf '%-18s %10s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" ok
    else
        printf '%-18s %10s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" \
            "FAILED (exit $rc)"
        failed+=("$t")
        echo "---- $t: $log (last 60 lines)"
        tail -60 "$log"
        art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log")
        echo "---- $t: reproducer: ${art:-none written (see the log)}"
        echo "---- re-run: $bin ${art:-<file>}"
    fi
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz: all targets ran ${secs}s without a finding"
