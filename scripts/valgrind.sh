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
exit $status
