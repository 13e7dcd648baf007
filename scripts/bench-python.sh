#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Python side-by-side benchmark (issue 22): elector's Python package vs
# python3-etcd3's Lock and tooz's etcd3gw lock, on a private etcd cluster.
#
#   scripts/bench-python.sh [bench/python_locks.py options]
#   e.g. scripts/bench-python.sh --rounds 8 --members 3
#
# Installs the benchmark's Debian packages when missing (scripts/deps.sh bench),
# builds into build-bench/ (RelWithDebInfo) and runs bench/python_locks.py with
# /usr/bin/python3 on that build; prints a markdown table (see the header of
# bench/python_locks.py for how each figure is taken). bench/RESULTS.md's
# "Python locks" section is written from its output by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh bench
B=${BUILD_DIR:-build-bench}
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$B" -j2 --target elector_python elector_release >/dev/null
# The package's bytecode, as pip or a Debian package installs it (the anchors'
# Debian packages ship theirs): without it each candidate compiles elector's
# sources at import, 1.4 MB of RSS that stays (PYTHONDONTWRITEBYTECODE=1, as
# in some CI shells, keeps Python from caching it). bench/RESULTS.md section 7a.
/usr/bin/python3 -m compileall -q "$B/python/elector"
export PYTHONPATH=$PWD/$B/python
export ELECTOR_RELEASE_HELPER=$PWD/$B/lib/elector/elector-release
exec /usr/bin/python3 bench/python_locks.py "$@"
