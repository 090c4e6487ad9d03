#!/bin/bash
# The job-start overhead benchmark (tests/cluster/bench.sh) on Slurm 24.11: start the test
# cluster in the Debian 13 root with release binaries built for its Slurm, run the same
# bench.sh there, and stop the cluster. Usage: bench.sh [ROUNDS] [RUNS]; PIN=1 as for
# tests/cluster/bench.sh; GC_SKIP_BUILD=1 uses the binaries staged by an earlier run.
# Run as root.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
gc24_stage bench release || exit 1
GC24_BIN=$GC24_STAGE "$HERE/enter.sh" env GC_BIN_DIR=/greenup-bin/release PIN="${PIN:-0}" bash -c '
  cd /greenup || exit 1
  tests/cluster/teardown.sh >/dev/null 2>&1
  tests/cluster/setup.sh >/dev/null || { echo "bench: the cluster did not start" >&2; tests/cluster/teardown.sh >/dev/null 2>&1; exit 1; }
  echo "Slurm $(sinfo --version), $(. /etc/os-release; echo "$PRETTY_NAME")"
  tests/cluster/bench.sh "$@"; rc=$?
  tests/cluster/teardown.sh >/dev/null 2>&1
  exit $rc' bench "$@"
