#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks that ELF binaries carry the hardening the build asks for (readelf only,
# like Debian's hardening-check):
#   --pie              position independent executable (ELF type DYN with an interpreter)
#   --relro            GNU_RELRO segment (read-only relocations after start-up)
#   --now              BIND_NOW (with --relro: full RELRO, the GOT read-only too)
#   --stack-protector  calls __stack_chk_fail (-fstack-protector-strong)
#   --fortify          calls checked libc functions __*_chk (-D_FORTIFY_SOURCE=2)
#
#   scripts/check-hardening.sh --pie --relro --now --stack-protector --fortify build/tool/elector
set -euo pipefail

checks=()
files=()
for a in "$@"; do
    case $a in
    --pie | --relro | --now | --stack-protector | --fortify) checks+=("${a#--}") ;;
    -*) echo "usage: $0 [--pie] [--relro] [--now] [--stack-protector] [--fortify] FILE..." >&2; exit 2 ;;
    *) files+=("$a") ;;
    esac
done
[ ${#files[@]} -gt 0 ] || { echo "$0: no file given" >&2; exit 2; }
command -v readelf >/dev/null || { echo "$0: readelf (binutils) is needed" >&2; exit 2; }

fail=0
for f in "${files[@]}"; do
    hdr=$(readelf -hW "$f")
    seg=$(readelf -lW "$f")
    dyn=$(readelf -dW "$f")
    syms=$(readelf --dyn-syms -W "$f")
    ok=()
    for c in "${checks[@]}"; do
        case $c in
        pie) grep -q 'Type: *DYN' <<<"$hdr" && grep -q 'INTERP' <<<"$seg" ;;
        relro) grep -q 'GNU_RELRO' <<<"$seg" ;;
        now) grep -Eq '\(BIND_NOW\)|\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW' <<<"$dyn" ;;
        stack-protector) grep -q '__stack_chk_fail' <<<"$syms" ;;
        fortify) grep -Eq ' __[a-z0-9_]+_chk(@|$)' <<<"$syms" ;;
        esac && ok+=("$c") || { echo "$f: no $c"; fail=1; }
    done
    echo "$f: ${ok[*]:-(nothing checked)}"
done
exit $fail
