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
# Inside each folder of src/ and tool/ (shape()):
#   - no import circle: file A uses file B when A names a function that B
#     defines and does not keep static (found with universal-ctags on the
#     sources, comments stripped); the uses must form no loop;
#   - no file (.c or .h) over 500 lines, no function over 60 lines.
# scripts/layers-exceptions.txt lists what still breaks these rules; a listed
# entry that no longer breaks them is an error too, so the list only shrinks.
#
#   scripts/check-layers.sh [ROOT [BUILD]]  check the tree at ROOT (default: here)
#                                           and the objects of the layers in BUILD
#   scripts/check-layers.sh --shape [ROOT]  print every circle and size breach
#                                           of ROOT, exceptions ignored
#   scripts/check-layers.sh --keys [ROOT]   the same as entries of the exceptions
#                                           list (to shrink it after a change)
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
    check_shape "$root" || bad=1
    if [ -d "$root/tool" ]; then
        # Its folders too: a header of tool/ is found from the file's folder
        # or from tool/ itself.
        while IFS= read -r f; do
            while IFS= read -r inc; do
                [[ $inc == elector/* ]] && continue
                [ -e "$(dirname "$f")/$inc" ] || [ -e "$root/tool/$inc" ] && continue
                echo "${f#"$root"/}: includes \"$inc\": the tool uses the public API only"
                bad=1
            done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
        done < <(find "$root/tool" -name '*.[ch]' | sort)
    fi
    return $bad
}

MAX_FILE_LINES=500
MAX_FUNC_LINES=60

# The identifiers of C file $1, its comments left out.
idents() {
    cc -fpreprocessed -dD -E -P -x c "$1" 2>/dev/null |
        grep -oE '\b[A-Za-z_][A-Za-z0-9_]*\b' | sort -u
}

# The import circles among the .c files of folder $2 of tree $1: A uses B when
# A names a function or variable that B defines and does not keep static.
# Prints "circle:DIR<TAB>message" for a folder that has any.
circles() {
    local root=$1 dir=$2 f
    local -a files
    mapfile -t files < <(cd "$root" && find "$dir" -maxdepth 1 -name '*.c' | sort)
    [ ${#files[@]} -gt 1 ] || return 0
    {
        printf 'F\t%s\n' "${files[@]}"
        (cd "$root" && ctags -x --_xformat='D	%N	%F	%{file}' --kinds-C=fv \
            --language-force=C "${files[@]}") | awk -F'\t' '$4 == "-"'
        for f in "${files[@]}"; do idents "$root/$f" | sed "s|^|U	$f	|"; done
    } | awk -F'\t' -v dir="$dir" '
        $1 == "F" { name[n++] = $2; next }
        $1 == "D" { def[$2] = $3; next }
        $1 == "U" && ($3 in def) && def[$3] != $2 {
            a = $2; b = def[$3]
            if (!((a, b) in via)) via[a, b] = $3
        }
        END {
            for (i = 0; i < n; i++) for (j = 0; j < n; j++)
                r[i, j] = ((name[i], name[j]) in via)
            for (k = 0; k < n; k++) for (i = 0; i < n; i++) if (r[i, k])
                for (j = 0; j < n; j++) if (r[k, j]) r[i, j] = 1
            msg = ""
            for (i = 0; i < n; i++) {
                if (done[i] || !r[i, i]) continue
                grp = ""; edges = ""
                for (j = 0; j < n; j++) if (r[i, j] && r[j, i]) {
                    done[j] = 1; grp = grp " " base(name[j])
                    for (k = 0; k < n; k++) if (r[i, k] && r[k, i] && ((name[j], name[k]) in via))
                        edges = edges sprintf("%s%s -> %s (%s)", edges == "" ? "" : ", ",
                                              base(name[j]), base(name[k]), via[name[j], name[k]])
                }
                msg = msg sprintf("%s{%s }: %s", msg == "" ? "" : "; ", grp, edges)
            }
            if (msg != "") printf "circle:%s\t%s: import circle %s\n", dir, dir, msg
        }
        function base(p) { sub(".*/", "", p); return p }'
}

# Every breach of the shape rules in tree $1 (src/ and tool/), one line each:
# "KEY<TAB>message", KEY as scripts/layers-exceptions.txt spells it.
shape() {
    local root=$1 f n dir
    local -a srcs dirs cxx
    mapfile -t srcs < <(cd "$root" && find src tool python include -name '*.[ch]' 2>/dev/null | sort)
    mapfile -t cxx < <(cd "$root" && find include -name '*.hpp' 2>/dev/null | sort)
    [ ${#srcs[@]} -gt 0 ] || return 0
    for f in "${srcs[@]}" "${cxx[@]}"; do
        n=$(wc -l <"$root/$f")
        ((n <= MAX_FILE_LINES)) ||
            printf '%s\t%s: %d lines (at most %d)\n' "$f" "$f" "$n" $MAX_FILE_LINES
    done
    {
        (cd "$root" && ctags -x --_xformat='%N	%F	%n	%{end}' --kinds-C=f --language-force=C \
            "${srcs[@]}")
        [ ${#cxx[@]} -eq 0 ] || (cd "$root" && ctags -x --_xformat='%N	%F	%n	%{end}' \
            --kinds-C++=f --language-force=C++ "${cxx[@]}")
    } | awk -F'\t' -v max=$MAX_FUNC_LINES '
        $4 ~ /^[0-9]+$/ && $4 - $3 + 1 > max {
            printf "%s:%s\t%s: function %s is %d lines (at most %d)\n", $2, $1, $2, $1,
                   $4 - $3 + 1, max }'
    mapfile -t dirs < <(printf '%s\n' "${srcs[@]}" | grep '\.c$' | sed 's|/[^/]*$||' | sort -u)
    for dir in "${dirs[@]}"; do circles "$root" "$dir"; done
    for f in "${srcs[@]}" "${cxx[@]}"; do
        printf '%s\0' "$f"
        cc -fpreprocessed -dD -E -P -x c "$root/$f" 2>/dev/null
        printf '\0'
    done | perl -e "$TABLES_PL"
}

# The function-pointer tables of the sources given as "FILE\0TEXT\0" records
# (comments stripped): a struct type whose members are all function pointers,
# with one implementation (one initialized instance in the tree), called through
# from another file of the same tree (src/, tool/, python/, include/). Such a
# table only hides a call (often one that points up, to break a circle): call
# the one implementation by name, or let the lower file record what happened
# and the upper one read it. Prints "table:TYPE<TAB>message" for each.
read -r -d '' TABLES_PL <<'PERL' || true
use strict; use warnings;
local $/; my $in = <STDIN>; my @r = split /\0/, $in, -1;
my (%text, %types, %inst, %fnty);
for (my $i = 0; $i + 1 < @r; $i += 2) { $text{$r[$i]} = $r[$i + 1]; }
for my $f (sort keys %text) {
    $fnty{$1} = 1 while $text{$f} =~ /\btypedef\s[^;{}()]*\(\s*\*\s*(\w+)\s*\)\s*\(/g;
}
for my $f (sort keys %text) {
    my $t = $text{$f};
    while ($t =~ /\b(typedef\s+)?struct\s+(\w+)?\s*\{([^{}]*)\}\s*(\w+)?\s*;/g) {
        my ($tag, $body, $name) = ($2, $3, $4);
        my @m = grep { /\S/ } split /;/, $body;
        next unless @m;
        my @fn;
        for (@m) { /\(\s*\*\s*(\w+)\s*\)\s*\(/ ? push @fn, $1 : /^\s*(?:const\s+)?(\w+)\s+(\w+)\s*$/ && $fnty{$1} ? push @fn, $2 : (@fn = (), last); }
        next unless @fn == @m;
        my $key = $name // $tag;
        $types{$key} = {file => $f, members => [@fn], names => [grep { defined } $tag, $name]};
    }
}
for my $ty (keys %types) {
    my @n = map { $_ eq $types{$ty}{names}[0] && defined $types{$ty}{names}[1]
                  ? ($_, "struct $_") : ($_, "struct $_") } @{$types{$ty}{names}};
    my $alt = join '|', map { (my $x = $_) =~ s/\s+/\\s+/g; $x } @n;
    for my $f (sort keys %text) {
        my $t = $text{$f};
        while ($t =~ /\bconst\s+(?:$alt)\s+(\w+)\s*=\s*\{/g) { push @{$inst{$ty}}, "$1 in $f"; }
        while ($t =~ /^(?:static\s+)?(?:$alt)\s+(\w+)\s*=\s*\{/mg) { push @{$inst{$ty}}, "$1 in $f"; }
    }
}
for my $ty (sort keys %types) {
    my @i = @{$inst{$ty} // []};
    next unless @i == 1;
    my ($var, $home) = $i[0] =~ /^(\w+) in (.*)$/;
    my $mem = join '|', @{$types{$ty}{members}};
    my @callers = grep { $_ ne $home && top($_) eq top($types{$ty}{file}) && $text{$_} =~ /(?:->|\.)\s*(?:$mem)\s*\(/ } sort keys %text;
    next unless @callers;
    printf "table:%s\t%s: function-pointer table %s has one implementation (%s) and is called through from %s: call it directly, or hand the data over\n",
        $ty, $types{$ty}{file}, $ty, $i[0], join(', ', @callers);
}
sub top { (split m{/}, $_[0])[0] }
PERL

# The breaches of tree $1 that scripts/layers-exceptions.txt does not list, and
# the listed exceptions that are no longer breaches.
check_shape() {
    local root=$1 list=$1/scripts/layers-exceptions.txt bad=0 key msg
    command -v ctags >/dev/null && ctags --version 2>/dev/null | grep Universal >/dev/null ||
        { echo "check-layers: needs universal-ctags (scripts/deps.sh installs it)"; return 1; }
    echo 'int x;' | cc -fpreprocessed -dD -E -P -x c - 2>/dev/null | grep 'int x' >/dev/null ||
        { echo "check-layers: needs cc (GCC's -fpreprocessed) to read the sources"; return 1; }
    local -A listed=() seen=()
    if [ -e "$list" ]; then
        while IFS= read -r key; do
            key=${key%%#*}; key=${key//[[:space:]]/}
            [ -n "$key" ] && listed[$key]=1
        done <"$list"
    fi
    while IFS=$'\t' read -r key msg; do
        seen[$key]=1
        [ -n "${listed[$key]:-}" ] && continue
        echo "$msg"; bad=1
    done < <(shape "$root")
    for key in "${!listed[@]}"; do
        [ -n "${seen[$key]:-}" ] && continue
        echo "scripts/layers-exceptions.txt: $key keeps the rules now: take it off the list"
        bad=1
    done
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
    # The shape: a circle, a long file, a long function; and an exception kept
    # after its breach is gone.
    # d.c uses a.c; a.c names b_fn (d.c's) in a comment only, which is no use.
    printf 'int a_fn(void);\nint a_fn(void) { return 0; } /* not b_fn() */\n' >>"$t/src/low/a.c"
    printf 'int a_fn(void);\nint b_fn(void);\nint b_fn(void) { return a_fn(); }\n' \
        >"$t/src/low/d.c"
    # d.c calls through a table that nothing defines yet (planted below).
    printf 'struct tab;\nvoid use(const struct tab *t);\nvoid use(const struct tab *t) { t->go(); }\n' \
        >>"$t/src/low/d.c"
    mkdir -p "$t/python/elector" "$t/include/elector"
    sed -i 's/^  a.c)/  a.c d.c)/' "$t/src/sources.cmake"
    out=$(check "$t") || { echo "self-test: a clean shape was refused:"; echo "$out"; return 1; }
    local -a shapes=(
        "src/low/a.c|int b_fn(void); int f(void) { return b_fn(); }|import circle { a.c d.c }"
        "src/low/a.c|$(printf '/**/\\n%.0s' $(seq 500))|src/low/a.c: 50"
        "src/low/a.c|int g(void)\\n{\\n$(printf 'g();\\n%.0s' $(seq 60))}| function g is 63 lines"
        "scripts/layers-exceptions.txt|src/low/d.c:b_fn # planted|src/low/d.c:b_fn keeps the rules now"
        "src/low/a.c|struct tab { void (*go)(void); };\\nstatic const struct tab one = {0};|table tab has one implementation (one in src/low/a.c) and is called through from src/low/d.c"
        "python/elector/_x.c|$(printf '/**/\\n%.0s' $(seq 500))|python/elector/_x.c: 501 lines"
        "include/elector/x.hpp|inline int h()\\n{\\n$(printf 'h();\\n%.0s' $(seq 60))}| function h is 63 lines"
    )
    for flaw in "${shapes[@]}"; do
        IFS='|' read -r file line want <<<"$flaw"
        cp -a "$t" "$t.copy"
        mkdir -p "$t.copy/scripts"
        printf "$line\n" >>"$t.copy/$file"
        if out=$(check "$t.copy"); then
            echo "self-test: not caught: $want"; rm -rf "$t.copy"; return 1
        fi
        grep -q "$want" <<<"$out" ||
            { echo "self-test: wrong report for $want: $out"; rm -rf "$t.copy"; return 1; }
        rm -rf "$t.copy"
    done
    echo "check-layers self-test: $((${#flaws[@]} + ${#shapes[@]} + 1)) planted violations caught"
}

if [ "${1:-}" = --self-test ]; then
    self_test
elif [ "${1:-}" = --shape ]; then
    shape "${2:-$(cd "$(dirname "$0")/.." && pwd)}" | cut -f2-
elif [ "${1:-}" = --keys ]; then
    shape "${2:-$(cd "$(dirname "$0")/.." && pwd)}" | cut -f1 | sort
else
    root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
    if check "$root" "${2:-}"; then echo "check-layers: ok"; else exit 1; fi
fi
