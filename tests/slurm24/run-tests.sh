#!/bin/bash
# greenup's cluster tests on Slurm 24.11: make (or reuse) the Debian 13 root, build
# greenup here with the plugin built against the root's Slurm headers, and run the same
# tests/cluster/run-tests.sh inside the root (tests/slurm24/enter.sh: its own network,
# mount and PID namespaces, so it shares no port, path or daemon with a 22.05 cluster on
# this host). The last line is "N passed, M failed". Run as root. GC_PROFILE=release
# builds release; GC_SKIP_BUILD=1 uses the binaries staged by an earlier run.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(cd "$HERE/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "slurm24: run as root"; echo "0 passed, 1 failed"; exit 1; }
START=$SECONDS
fail() { echo "slurm24: $*"; echo "0 passed, 1 failed"; exit 1; }

"$HERE/root.sh" >/dev/null || fail "could not make the $GC24_DISTRO root"
PROFILE=${GC_PROFILE:-debug}
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
STAGE=$TARGET/$GC24_STAGE_NAME
if [ "${GC_SKIP_BUILD:-0}" != 1 ]; then
  echo "==> building greenup ($PROFILE) with the plugin for Slurm $(gc24_slurm_version)"
  "$HERE/build.sh" "$PROFILE" "$STAGE/$PROFILE" || fail "build failed"
fi
for f in greenup greenupd greenup-prolog-slurmctld libspank_greenup.so libgreenup_mpi.so; do
  [ -x "$STAGE/$PROFILE/$f" ] || fail "$STAGE/$PROFILE/$f is missing (build first)"
done
echo "==> the cluster tests inside the $GC24_DISTRO root (Slurm $(gc24_slurm_version))"
# Tests 21-23 learn and refine LAMMPS's profiles from its measured runs: greenupd's and the
# MPI runtime's work, the same on either series, and about 380 s of this suite. Tests 19
# and 20 run LAMMPS, with and without the runtime, on this series too; the 22.05 suite
# runs 21-23. GC_SKIP= (empty) runs them here as well.
GC_SKIP=${GC_SKIP-21 22 23}
GC24_BIN=$STAGE "$HERE/enter.sh" env GC_SKIP_BUILD=1 CARGO_TARGET_DIR=/greenup-bin GC_PROFILE="$PROFILE" GC_ONLY="${GC_ONLY:-}" \
  GC_SKIP="$GC_SKIP" GC_SKIP_WHY="learning from LAMMPS runs on Slurm 22.05's suite (tests/slurm24/run-tests.sh says why)" \
  bash /greenup/tests/cluster/run-tests.sh
rc=$?
echo "Slurm $GC_SERIES cluster tests took $((SECONDS - START)) s"
exit $rc
