#!/bin/bash
# The MPI runtime's mechanism tests (tests/runtime/run.sh) against Debian 13's Open MPI 5:
# build libgreenup_mpi.so against the root's mpi.h (tests/slurm24/build.sh), then run the
# same tests inside the Debian 13 root with that library, the root's mpirun, and probes
# compiled there by the root's mpicc and mpif90. No Slurm runs. Run as root.
# GC_SKIP_BUILD=1 uses the library staged by an earlier build.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
gc24_stage runtime debug || exit 1
echo "==> the MPI runtime's mechanism tests inside the $GC24_DISTRO root ($(chroot "$GC24_ROOT" /usr/bin/mpirun --version | head -n 1))"
GC24_BIN=$GC24_STAGE "$HERE/enter.sh" env GREENUP_MPI_LIB=/greenup-bin/debug/libgreenup_mpi.so bash /greenup/tests/runtime/run.sh
