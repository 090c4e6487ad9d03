#!/bin/bash
# greenup's cluster tests on a newer Slurm series (GC_SERIES: 24.11, the default, or
# 26.05; tests/slurm24/lib.sh): make (or reuse) the series' Debian root, build
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
# MPI runtime's work, the same on every series, and about 380 s of this suite. Tests 19
# and 20 run LAMMPS, with and without the runtime, on each series too; the 22.05 suite
# runs 21-23. On 26.05, the series the test command runs in a root, also:
# - 19 and 20, LAMMPS under srun --mpi=pmix: Debian forky's Slurm 26.05 ships no mpi/pmix
#   plugin (forky's PMIx is 7.0), and Open MPI 6's own launcher could not start its
#   daemons in the root's namespaces (mpirun exited 66), so no MPI program starts through
#   Slurm there; the MPI runtime's mechanism tests run under mpirun in the root
#   (tests/slurm24/runtime.sh);
# - 9 (learning from a wrong profile), 13 (failed jobs' stored states), 17 (the meter's
#   wrapping counter), 18 (the bench itself) and B1 (budget levels): greenupd's and the
#   meter's own work, which no Slurm call reaches, about 160 s that keep the test command
#   under an hour.
# GC_SKIP= (empty) runs every test here as well.
case $GC_SERIES in
  26.05)
    GC_SKIP=${GC_SKIP-9 13 17 18 19 20 21 22 23 B1}
    why="on Slurm 22.05's suite: 19-20 need srun --mpi=pmix, which Debian forky's Slurm 26.05 lacks; the rest is greenupd's and the meter's own work, the same on every series (tests/slurm24/run-tests.sh)" ;;
  *)
    GC_SKIP=${GC_SKIP-21 22 23}
    why="learning from LAMMPS runs on Slurm 22.05's suite (tests/slurm24/run-tests.sh says why)" ;;
esac
GC24_BIN=$STAGE "$HERE/enter.sh" env GC_SKIP_BUILD=1 CARGO_TARGET_DIR=/greenup-bin GC_PROFILE="$PROFILE" GC_ONLY="${GC_ONLY:-}" \
  GC_SKIP="$GC_SKIP" GC_SKIP_WHY="$why" \
  bash /greenup/tests/cluster/run-tests.sh
rc=$?
echo "Slurm $GC_SERIES cluster tests took $((SECONDS - START)) s"
exit $rc
