#!/bin/bash
# The Debian 13 root's Open MPI compiler wrapper, as seen from this host: answers
# `--showme:...` (what runtime/build.rs asks: MPICC=tests/slurm24/mpicc.sh) by running the
# root's own mpicc in the root, with each -I/-L path turned into the host's path of the
# root, so that greenup's MPI runtime is compiled here against the root's Open MPI 5
# mpi.h. It compiles nothing itself. Run as root (chroot).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
case "${1:-}" in
  --showme*|-showme*) ;;
  *) echo "slurm24 mpicc.sh: only --showme queries (it gives the root's flags, it does not compile)" >&2; exit 2 ;;
esac
[ -x "$GC24_ROOT/usr/bin/mpicc" ] || { echo "slurm24 mpicc.sh: no mpicc in $GC24_ROOT (tests/slurm24/root.sh installs libopenmpi-dev)" >&2; exit 1; }
out=$(chroot "$GC24_ROOT" /usr/bin/mpicc "$@")
sed -E "s#(^| )-([IL])/#\\1-\\2$GC24_ROOT/#g" <<<"$out"
