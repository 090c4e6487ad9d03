#!/bin/bash
# Build greenup's binaries, its SPANK plugin and its MPI runtime for the Debian 13 root,
# and copy them to DIR. Usage: build.sh debug|release DIR
# The plugin's Slurm version comes from the root's slurm_version.h through
# GREENUP_SLURM_VERSION_H (plugin/build.rs); the binaries do not depend on Slurm's version.
# The MPI runtime's C shim is compiled against the root's Open MPI 5 mpi.h, whose flags
# the root's own mpicc gives (MPICC=tests/slurm24/mpicc.sh, read by runtime/build.rs).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(cd "$HERE/../.." && pwd)
PROFILE=$1 DIR=$2
flag=""; [ "$PROFILE" = release ] && flag=--release
cd "$REPO"
GREENUP_SLURM_VERSION_H=$GC24_ROOT/usr/include/slurm/slurm_version.h MPICC=$HERE/mpicc.sh \
  cargo build $flag -q -p spank_greenup -p greenup-commands -p greenup-mpi
# Without the root's mpicc the runtime would build without interception, and only warn.
# (grep reads all of nm's output: a `grep -q` that stops early fails nm under pipefail.)
nm -D --defined-only "${CARGO_TARGET_DIR:-target}/$PROFILE/libgreenup_mpi.so" | grep -w MPI_Send >/dev/null \
  || { echo "slurm24 build: libgreenup_mpi.so has no interception (the root's mpicc failed?)" >&2; exit 1; }
mkdir -p "$DIR"
for f in greenup greenupd greenup-prolog-slurmctld libspank_greenup.so libgreenup_mpi.so; do
  install -m 0755 "${CARGO_TARGET_DIR:-target}/$PROFILE/$f" "$DIR/$f"
done
