#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks that the library's sources and public headers are formatted with the
# repository's .clang-format (clang-format --dry-run --Werror). The scope is
# every C and C++ file of the project (generated protobuf code is not in the tree).
#
#   scripts/check-format.sh          check (exit 1 and clang-format's report if not)
#   scripts/check-format.sh --fix    format them in place
set -euo pipefail
cd "$(dirname "$0")/.."
SCOPE=(src include tool test fault bench fuzz examples helper python)
command -v clang-format >/dev/null ||
    { echo "check-format: clang-format not found (scripts/deps.sh installs it)" >&2; exit 1; }
mapfile -t files < <(find "${SCOPE[@]}" \( -name '*.[ch]' -o -name '*.[ch]pp' \) | sort)
if [ "${1:-}" = --fix ]; then
    clang-format -i "${files[@]}"
else
    clang-format --dry-run --Werror "${files[@]}"
    echo "check-format: ${#files[@]} files formatted ($(clang-format --version))"
fi
