#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Mutation testing of the safety core (docs/COVERAGE.md): scripts/mutate.py does
# the work, in a copy of the tree under $TMPDIR (the checkout is never changed).
# Not in the test command nor in CI: a full run takes hours.
#
#   scripts/mutate.sh [--max N] [--seed N] [--ops rel,logic,...] [--tests P,P:case]
#                     [--timeout S] [--list] [--out FILE] [FILE...]
#
# FILEs default to src/election/*.c, src/etcd/lease.c and the guard of tool/
# (supervise, healthcheck, child). --list prints the mutants without running them.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/mutate.py" "$@"
