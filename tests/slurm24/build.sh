#!/bin/bash
# Build greenup's binaries and its SPANK plugin for the Slurm in the Debian 13 root, and
# copy them to DIR. Usage: build.sh debug|release DIR
# The plugin's Slurm version comes from the root's slurm_version.h through
# GREENUP_SLURM_VERSION_H (plugin/build.rs); the binaries do not depend on Slurm's version.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
REPO=$(cd "$HERE/../.." && pwd)
PROFILE=$1 DIR=$2
flag=""; [ "$PROFILE" = release ] && flag=--release
cd "$REPO"
GREENUP_SLURM_VERSION_H=$GC24_ROOT/usr/include/slurm/slurm_version.h cargo build $flag -q -p spank_greenup -p greenup
mkdir -p "$DIR"
for f in greenup greenupd greenup-prolog-slurmctld libspank_greenup.so; do
  install -m 0755 "${CARGO_TARGET_DIR:-target}/$PROFILE/$f" "$DIR/$f"
done
