#!/bin/bash
# The bench's spread (tests/cluster/spread.sh) on Slurm 24.11 and Open MPI 5, inside the
# Debian 13 root, as run-tests.sh runs the cluster tests there. Run as root, holding the
# host cluster's lock:
#   flock -o /tmp/greenup-cluster.lock env GC_PROFILE=release tests/slurm24/spread.sh [RUNS]
# GC_SKIP_BUILD=1 uses the binaries staged by an earlier build (run-tests.sh, build.sh).
# WHAT, GC_SLEEPWAIT, PERIOD_US, GC_WORK_ITER and LAMMPS_STEPS are passed to spread.sh.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
PROFILE=${GC_PROFILE:-debug}
gc24_stage spread "$PROFILE" || { echo "slurm24 spread: could not stage the root's build" >&2; exit 1; }
pass=()
for v in WHAT GC_SLEEPWAIT PERIOD_US GC_WORK_ITER LAMMPS_STEPS; do [ -n "${!v:-}" ] && pass+=("$v=${!v}"); done
GC24_BIN=$GC24_STAGE "$HERE/enter.sh" env GC_BIN_DIR="/greenup-bin/$PROFILE" "${pass[@]}" \
  bash /greenup/tests/cluster/spread.sh "$@"
