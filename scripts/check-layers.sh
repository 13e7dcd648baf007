#!/usr/bin/env bash
# The layer rule of docs/DESIGN.md, checked on the includes: src/ has one folder
# per layer, bottom to top as ELECTOR_LAYERS in src/sources.cmake lists them
# (transport, etcd, election). A file of a layer may include
#   - the headers of its own folder,
#   - LAYER_internal.h of any layer below it (what that layer offers upward),
#   - the public headers "elector/...", and system headers <...>;
# never a header of a layer above (an upward arrow), nor the private headers
# of a layer below. tool/ uses the public headers and its own only. Every .c
# file of a layer folder must be in that layer's list in src/sources.cmake.
#
#   scripts/check-layers.sh [ROOT]       check the tree at ROOT (default: here)
#   scripts/check-layers.sh --self-test  check that planted violations are found
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
    echo "check-layers self-test: ${#flaws[@]} planted violations caught"
}

if [ "${1:-}" = --self-test ]; then
    self_test
else
    root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
    if check "$root"; then echo "check-layers: ok"; else exit 1; fi
fi
