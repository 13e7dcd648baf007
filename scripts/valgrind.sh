#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# valgrind memcheck over a subset of the suite: the unit tests, the C++ API, the KV,
# election (with the issue-9 safety tests) and tool-parsing programs. Every
# forked test child is traced (the runner forks one per test); etcd, etcdctl
# and helper programs are not.
# Fails on any error or leak. Usage: scripts/valgrind.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
VG=(valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
    --show-leak-kinds=definite,indirect --trace-children=yes
    "--trace-children-skip=*/etcd,*/etcdctl,*/openssl,*/sh,*/curl,*/promtool,*/elector,/usr/*,/bin/*")
status=0
for t in test_unit_grpc test_unit_endpoint test_unit_misc test_unit_tool test_unit_http test_unit_tool_ops \
         test_etcd_kv test_etcd_election test_etcd_election_safety test_cpp; do
    echo "== valgrind $t"
    # Timeouts stretched: valgrind runs code 10-30x slower.
    if ! TEST_TIMEOUT=300 "${VG[@]}" "$B/test/$t" >"$B/valgrind-$t.log" 2>&1; then
        status=1
        tail -40 "$B/valgrind-$t.log"
    else
        tail -1 "$B/valgrind-$t.log"
    fi
done
# The release helper (elector-release) under memcheck, through a wrapper that
# test_etcd_release spawns instead of it (the test and the owners run
# natively): its crash tests reap the helper and want exit 0, not 99; every
# helper's log must be empty (also those the owners reaped after a close).
echo "== valgrind elector-release (test_etcd_release)"
VGH=$(mktemp -d "${TMPDIR:-/tmp}/elector-vg-helper.XXXXXX")
cat >"$VGH/elector-release" <<EOW
#!/bin/sh
exec $(command -v valgrind) --quiet --error-exitcode=99 --leak-check=full \
    --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
    --log-file=$VGH/helper.%p.log $(cd "$B" && pwd)/lib/elector/elector-release "\$@"
EOW
chmod +x "$VGH/elector-release"
if ! RELEASE_HELPER_WRAPPER=$VGH/elector-release "$B/test/test_etcd_release" sigsegv close fork \
        auth >"$B/valgrind-elector-release.log" 2>&1; then
    status=1
    tail -40 "$B/valgrind-elector-release.log"
else
    tail -1 "$B/valgrind-elector-release.log"
fi
for l in "$VGH"/helper.*.log; do
    [ -e "$l" ] || { echo "no valgrind log of elector-release"; status=1; break; }
    if [ -s "$l" ]; then
        status=1
        cat "$l"
    fi
done
echo "$(find "$VGH" -name 'helper.*.log' | wc -l) elector-release runs under valgrind"
rm -rf "$VGH"
exit $status
