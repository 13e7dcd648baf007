#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The layer rule of docs/DESIGN.md, checked on the includes: src/ has one folder
# per layer, bottom to top as ELECTOR_LAYERS in src/sources.cmake lists them
# (transport, etcd, election, driver). A file of a layer may include
#   - the headers of its own folder,
#   - LAYER_internal.h of any layer below it (what that layer offers upward),
#   - the public headers "elector/...", and system headers <...>;
# never a header of a layer above (an upward arrow), nor the private headers
# of a layer below. tool/ uses the public headers and its own only. Every .c
# file of a layer folder must be in that layer's list in src/sources.cmake.
# Given a build directory, it also checks the compiled objects: no layer refers
# to a symbol that a layer above it defines (a call up, whatever the headers).
#
#   scripts/check-layers.sh [ROOT [BUILD]]  check the tree at ROOT (default: here)
#                                           and the objects of the layers in BUILD
#   scripts/check-layers.sh --self-test     check that planted violations are found
#
# Prints one line per violation; exit status 1 if there is any.
set -euo pipefail

check() {
    local root=$1 bad=0
    local layers
    layers=$(sed -n 's/^set(ELECTOR_LAYERS \(.*\))$/\1/p' "$root/src/sources.cmake")
    [ -n "$layers" ] || { echo "check-layers: no ELECTOR_LAYERS in src/sources.cmake"; return 1; }
    local -a order=($layers)
    local i j f inc lower found
    for ((i = 0; i < ${#order[@]}; i++)); do
        local L=${order[i]} dir=$root/src/${order[i]}
        [ -d "$dir" ] || { echo "src/$L: missing layer folder"; bad=1; continue; }
        # Every source file is built.
        local listed
        listed=$(sed -n "/^set(ELECTOR_${L^^}_SRCS/,/)/p" "$root/src/sources.cmake")
        for f in "$dir"/*.c; do
            [ -e "$f" ] || continue
            grep -qw "$(basename "$f")" <<<"$listed" ||
                { echo "src/$L/$(basename "$f"): not in ELECTOR_${L^^}_SRCS"; bad=1; }
        done
        for f in "$dir"/*.[ch]; do
            [ -e "$f" ] || continue
            while IFS= read -r inc; do
                [[ $inc == elector/* ]] && continue
                [ -e "$dir/$inc" ] && continue
                found=""
                for ((j = 0; j < ${#order[@]}; j++)); do
                    [ -e "$root/src/${order[j]}/$inc" ] && found=$j
                done
                local where="src/$L/$(basename "$f")"
                if [ -z "$found" ]; then
                    echo "$where: includes \"$inc\", which is no header of src/"; bad=1
                elif ((found > i)); then
                    echo "$where: includes \"$inc\" of src/${order[found]}, a layer above: arrows point down"
                    bad=1
                elif [ "$inc" != "${order[found]}_internal.h" ]; then
                    lower=${order[found]}
                    echo "$where: includes \"$inc\", private to src/$lower (use ${lower}_internal.h)"
                    bad=1
                fi
            done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
        done
    done
    [ -n "${2:-}" ] && { check_symbols "$2" "${order[@]}" || bad=1; }
    if [ -d "$root/tool" ]; then
        for f in "$root"/tool/*.[ch]; do
            [ -e "$f" ] || continue
            while IFS= read -r inc; do
                [[ $inc == elector/* ]] && continue
                [ -e "$root/tool/$inc" ] && continue
                echo "tool/$(basename "$f"): includes \"$inc\": the tool uses the public API only"
                bad=1
            done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
        done
    fi
    return $bad
}

# The objects of layer L in build directory B (CMake's layout for an object
# library elector_L).
layer_objects() {
    find "$1/CMakeFiles/elector_$2.dir" -name '*.o' 2>/dev/null | sort
}

check_symbols() {
    local b=$1 bad=0 i j sym
    shift
    local -a order=("$@")
    for ((i = 0; i < ${#order[@]}; i++)); do
        local -a objs
        mapfile -t objs < <(layer_objects "$b" "${order[i]}")
        [ ${#objs[@]} -gt 0 ] || { echo "$b: no objects of layer ${order[i]}"; bad=1; continue; }
        local undef
        undef=$(nm -u "${objs[@]}" | awk 'NF == 2 {print $2}' | sort -u)
        for ((j = i + 1; j < ${#order[@]}; j++)); do
            local -a up
            mapfile -t up < <(layer_objects "$b" "${order[j]}")
            [ ${#up[@]} -gt 0 ] || continue
            while IFS= read -r sym; do
                [ -n "$sym" ] || continue
                echo "src/${order[i]}: calls up to $sym, defined in src/${order[j]}"
                bad=1
            done < <(comm -12 <(echo "$undef") \
                <(nm -g --defined-only "${up[@]}" | awk 'NF == 3 {print $3}' | sort -u))
        done
    done
    return $bad
}

self_test() {
    local t
    t=$(mktemp -d "${TMPDIR:-/tmp}/check-layers.XXXXXX")
    trap 'rm -rf "$t"' RETURN
    mkdir -p "$t/src/low" "$t/src/high" "$t/tool"
    cat >"$t/src/sources.cmake" <<'EOF'
set(ELECTOR_LAYERS low high)
set(ELECTOR_LOW_SRCS
  a.c)
set(ELECTOR_HIGH_SRCS
  b.c)
EOF
    printf '#include "low_internal.h"\n#include "elector/etcd.h"\n' >"$t/src/low/a.c"
    : >"$t/src/low/low_internal.h"
    : >"$t/src/low/low_private.h"
    printf '#include "low_internal.h"\n#include "high_private.h"\n' >"$t/src/high/b.c"
    : >"$t/src/high/high_private.h"
    printf '#include "elector/election.h"\n#include "own.h"\n' >"$t/tool/main.c"
    : >"$t/tool/own.h"
    local out
    out=$(check "$t") || { echo "self-test: a clean tree was refused:"; echo "$out"; return 1; }
    # Objects: high calls low (fine), then low calls high (an arrow up).
    mkdir -p "$t/build/CMakeFiles/elector_low.dir" "$t/build/CMakeFiles/elector_high.dir"
    echo 'int low_fn(void); int low_fn(void) { return 0; }' >"$t/low.c"
    echo 'int low_fn(void); int high_fn(void); int high_fn(void) { return low_fn(); }' >"$t/high.c"
    cc -c "$t/low.c" -o "$t/build/CMakeFiles/elector_low.dir/a.c.o"
    cc -c "$t/high.c" -o "$t/build/CMakeFiles/elector_high.dir/b.c.o"
    out=$(check "$t" "$t/build") ||
        { echo "self-test: clean objects were refused:"; echo "$out"; return 1; }
    echo 'int high_fn(void); int low_fn(void); int low_fn(void) { return high_fn(); }' >"$t/low.c"
    cc -c "$t/low.c" -o "$t/build/CMakeFiles/elector_low.dir/a.c.o"
    if out=$(check "$t" "$t/build"); then
        echo "self-test: not caught: a call from low up to high"; return 1
    fi
    grep -q "calls up to high_fn" <<<"$out" || { echo "self-test: wrong report: $out"; return 1; }
    rm -rf "$t/build"
    # Each planted flaw must be reported on its own.
    local -a flaws=(
        "src/low/a.c|#include \"high_private.h\"|a layer above"
        "src/high/b.c|#include \"low_private.h\"|private to src/low"
        "src/low/c.c||not in ELECTOR_LOW_SRCS"
        "tool/main.c|#include \"low_internal.h\"|public API only"
        "src/low/a.c|#include \"nowhere.h\"|no header of src/"
    )
    local flaw file line want
    for flaw in "${flaws[@]}"; do
        IFS='|' read -r file line want <<<"$flaw"
        cp -a "$t" "$t.copy"
        printf '%s\n' "$line" >>"$t.copy/$file"
        if out=$(check "$t.copy"); then
            echo "self-test: not caught: $line in $file"; rm -rf "$t.copy"; return 1
        fi
        grep -q "$want" <<<"$out" ||
            { echo "self-test: wrong report for $line in $file: $out"; rm -rf "$t.copy"; return 1; }
        rm -rf "$t.copy"
    done
    echo "check-layers self-test: $((${#flaws[@]} + 1)) planted violations caught"
}

if [ "${1:-}" = --self-test ]; then
    self_test
else
    root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
    if check "$root" "${2:-}"; then echo "check-layers: ok"; else exit 1; fi
fi
