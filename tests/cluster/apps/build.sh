#!/bin/sh
# Compile the bench's C programs into DIR with the MPI's own compiler wrapper: bsp (the
# cross-check loop) and sleepwait.so (the sleeping MPI waits run-app.sh preloads; see
# tests/cluster/README.md). Run by e2e.sh and apps_install after they copy apps/ there.
# Usage: build.sh DIR
set -eu
src=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: build.sh DIR}
command -v mpicc >/dev/null || { echo "apps/build.sh: no mpicc (Debian's libopenmpi-dev)" >&2; exit 1; }
mpicc -O2 -Wall -Werror -o "$dir/bsp" "$src/bsp.c"
mpicc -O2 -Wall -Werror -shared -fPIC -o "$dir/sleepwait.so" "$src/sleepwait.c"
chmod a+rx "$dir/bsp" "$dir/sleepwait.so"
