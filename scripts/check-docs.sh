#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The C and C++ API reference (docs/REFERENCE.md): runs Doxygen (Debian's
# doxygen; docs/Doxyfile.in) on the public headers, include/elector/*.h and
# elector.hpp (etcd_rpc.h is not installed and not public), and fails on any
# warning: a public function, type, macro, enumerator, struct member or C++
# member without documentation (WARN_IF_UNDOCUMENTED), a malformed comment
# (WARN_IF_DOC_ERROR), a @param naming no parameter (WARN_IF_INCOMPLETE_DOC).
# It also checks that the table of error codes in error.h names every code of
# ELECTOR_ERRNO_MAP (the enumerators come from that X-macro, which Doxygen does
# not expand), and prints how many public names the reference documents.
#
#   scripts/check-docs.sh [ROOT [OUT [LIB]]]  reference of the tree at ROOT
#                                        (default: here) into OUT (default:
#                                        ROOT/build/docs): OUT/html/index.html,
#                                        OUT/man/man3/. Given the shared library
#                                        LIB, also: every symbol it exports is
#                                        documented in the reference.
#   scripts/check-docs.sh --self-test    planted undocumented names must fail it
#
# Exit status 1 on any warning or missing code.
set -euo pipefail

check() {
    local root=$1 out=$2 lib=${3:-} inc=$1/include/elector
    command -v doxygen >/dev/null ||
        { echo "check-docs: doxygen not found (scripts/deps.sh installs it)"; return 1; }
    mkdir -p "$out"
    rm -rf "$out/html" "$out/man" "$out/xml" "$out/warnings.log"
    local version
    version=$(sed -n 's/^#define ELECTOR_VERSION_STRING "\(.*\)"$/\1/p' "$inc/version.h")
    sed -e "s|@ELECTOR_DOC_VERSION@|$version|" -e "s|@ELECTOR_DOC_OUT@|$out|g" \
        -e "s|@ELECTOR_DOC_STRIP@|$root/include|g" \
        -e "s|@ELECTOR_DOC_MAIN@|$root/docs/REFERENCE.md|" \
        -e "s|@ELECTOR_DOC_INPUT@|$root/docs/REFERENCE.md $inc/error.h $inc/version.h $inc/etcd.h $inc/election.h $inc/elector.hpp|" \
        "$root/docs/Doxyfile.in" >"$out/Doxyfile"
    local rc=0
    doxygen "$out/Doxyfile" >"$out/doxygen.log" 2>&1 || rc=$?
    if [ -s "$out/warnings.log" ]; then
        sed "s|$root/||" "$out/warnings.log"
        echo "check-docs: $(wc -l <"$out/warnings.log") doxygen warning(s)"
        return 1
    fi
    [ "$rc" = 0 ] || { cat "$out/doxygen.log"; echo "check-docs: doxygen failed"; return 1; }
    local name bad=0
    for name in $(sed -n 's/^ *X(\(E[A-Z0-9_]*\),.*/\1/p' "$inc/error.h"); do
        grep -q "^ \* | ELECTOR_$name | " "$inc/error.h" ||
            { echo "check-docs: ELECTOR_$name is not in error.h's table of codes"; bad=1; }
    done
    if [ -n "$lib" ]; then
        local sym
        for sym in $(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDRB]$/ {print $3}' |
            sed 's/@.*//' | grep '^elector_' | sort -u); do
            grep -q "<name>$sym</name>" "$out"/xml/*8h.xml ||
                { echo "check-docs: $sym, exported by $(basename "$lib"), is not in the reference"; bad=1; }
        done
    fi
    [ "$bad" = 0 ] || return 1
    # What the reference documents: each name once (the XML lists a member in
    # its file and in its group or class).
    local x=$out/xml kinds
    kinds=$(grep -ho '<memberdef kind="[a-z]*" id="[^"]*"' "$x"/*.xml | sort -u |
        awk -F'"' '$2 != "friend" {n[$2]++; t++} END {
            printf "%d members: %d functions, %d typedefs, %d enums, %d macros, %d variables and fields",
                t, n["function"], n["typedef"], n["enum"], n["define"], n["variable"]}')
    echo "check-docs: 0 warnings; $(grep -ho '<memberdef kind="function"[^>]*>' "$x"/*8h.xml |
        wc -l) C functions; $kinds; $(grep -ho '<enumvalue id="[^"]*"' "$x"/*.xml | sort -u |
        wc -l) enumerators; $(grep -ho '<compounddef [^>]*kind="struct"' "$x"/*.xml | wc -l) structs," \
        "$(grep -ho '<compounddef [^>]*kind="class"' "$x"/*.xml | wc -l) classes;" \
        "$out/html/index.html"
}

self_test() {
    local t
    t=$(mktemp -d)
    trap 'rm -rf "$t"' RETURN
    mkdir -p "$t/src/include" "$t/src/docs"
    cp -r include/elector "$t/src/include/"
    cp docs/Doxyfile.in docs/REFERENCE.md "$t/src/docs/"
    # A library that exports what the headers declare, and no more.
    local out
    sed -n 's/^[a-z].*[ *]\(elector_[a-z0-9_]*\)(.*/void \1(void) {}/p' include/elector/{error,version,etcd,election}.h |
        grep -v elector_guarded_txn | sort -u >"$t/lib.c"
    echo 'const long elector_rtt_bounds_us[1];' >>"$t/lib.c"
    cc -shared -fPIC -w -o "$t/lib.so" "$t/lib.c"
    out=$(check "$t/src" "$t/out" "$t/lib.so") || { echo "self-test: the clean tree was refused:"; echo "$out"; return 1; }
    # plant FILE ANCHOR TEXT WANT: TEXT inserted before the first line ANCHOR of
    # FILE must fail the check with a report that contains WANT.
    plant() {
        local file=$1 anchor=$2 text=$3 want=$4
        rm -rf "$t/copy"
        cp -r "$t/src" "$t/copy"
        ANCHOR=$anchor TEXT=$text /usr/bin/python3 - "$t/copy/include/elector/$file" <<'PY'
import os, sys
p = sys.argv[1]
s = open(p).read()
a = os.environ["ANCHOR"]
assert a in s, a
open(p, "w").write(s.replace(a, os.environ["TEXT"] + "\n" + a, 1))
PY
        if out=$(check "$t/copy" "$t/out2" "$t/lib.so"); then
            echo "self-test: not caught: $want ($file)"; return 1
        fi
        grep -q -- "$want" <<<"$out" || { echo "self-test: wrong report for $want: $out"; return 1; }
        echo "self-test: caught $want"
    }
    plant election.h '#ifdef __cplusplus
}' 'int elector_planted_undocumented(int x);' 'elector_planted_undocumented' || return 1
    plant etcd.h '} elector_kv;' '    int planted_member;' 'planted_member' || return 1
    plant etcd.h '#ifdef __cplusplus
}' '#define ELECTOR_PLANTED_MACRO 1' 'ELECTOR_PLANTED_MACRO' || return 1
    plant elector.hpp '} // namespace elector' 'inline int planted_cpp() { return 0; }' 'planted_cpp' || return 1
    plant elector.hpp '    /// Held now, within' '    void planted_method() {}' 'planted_method' || return 1
    plant election.h '/** Stops following and frees the observer. */' \
        '/** Bad: @param nosuch is no parameter. */
int elector_planted_bad_param(int x);' 'nosuch' || return 1
    plant error.h '    X(EBLOCKED,' '    X(EPLANTED, -99, "planted")                                                          \' \
        'ELECTOR_EPLANTED is not in' || return 1
    # A library symbol that no public header declares.
    { cat "$t/lib.c"; echo 'void elector_planted_export(void) {}'; } >"$t/lib2.c"
    cc -shared -fPIC -w -o "$t/lib2.so" "$t/lib2.c"
    if out=$(check "$t/src" "$t/out2" "$t/lib2.so"); then
        echo "self-test: not caught: an exported symbol without documentation"; return 1
    fi
    grep -q "elector_planted_export, exported by" <<<"$out" ||
        { echo "self-test: wrong report for the exported symbol: $out"; return 1; }
    echo "self-test: caught elector_planted_export (exported, undocumented)"
    echo "self-test: ok (a clean tree passes; 8 planted faults fail it)"
}

cd "$(dirname "$0")/.."
case "${1:-}" in
    --self-test) self_test ;;
    *) root=$(cd "${1:-.}" && pwd); check "$root" "${2:-$root/build/docs}" ;;
esac
