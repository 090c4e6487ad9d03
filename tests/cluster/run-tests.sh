#!/bin/bash
# The one entry point for greenup's Slurm cluster tests (CI calls this): install Slurm
# and munge if missing, build the plugin and the binaries, start the four-node cluster
# and greenupd, run the end-to-end tests, and tear everything down even on failure.
# The last line is "N passed, M failed". Run as root. GC_PROFILE=release builds release;
# GC_SKIP_BUILD=1 uses binaries already built in $CARGO_TARGET_DIR (or target/).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
[ "$(id -u)" = 0 ] || { echo "run-tests.sh: run as root (it starts Slurm daemons)"; echo "0 passed, 1 failed"; exit 1; }
START=$SECONDS
summary="0 passed, 1 failed"
finish() {
  "$HERE/teardown.sh" >/dev/null 2>&1
  echo "cluster tests took $((SECONDS - START)) s"
  echo "$summary"
}
trap finish EXIT

"$HERE/install.sh" || exit 1
PROFILE=${GC_PROFILE:-debug}
flag=""; [ "$PROFILE" = release ] && flag=--release
if [ "${GC_SKIP_BUILD:-0}" != 1 ]; then
  # What the build needs (libopenmpi-dev's mpi.h for the runtime among them), which the
  # test command installs before its first build but a run of this script alone may not
  # find. Not inside the Debian 13 root: it builds nothing, and its own list is
  # tests/slurm24/root.sh's.
  (. "$GC_REPO/scripts/lib.sh" && need_debs "${GREENUP_DEBS[@]}") || { echo "cannot install what the build needs"; exit 1; }
  echo "==> building greenup ($PROFILE)"
  (cd "$GC_REPO" && cargo build $flag -q -p spank_greenup -p greenup-commands -p greenup-mpi) || { echo "build failed"; exit 1; }
fi
export GC_BIN_DIR=${CARGO_TARGET_DIR:-$GC_REPO/target}/$PROFILE

"$HERE/teardown.sh" >/dev/null 2>&1   # leftovers of an interrupted run
echo "==> starting the cluster"
"$HERE/setup.sh" || exit 1
echo "==> end-to-end tests"
out=$(mktemp)
bash "$HERE/e2e.sh" | tee "$out"
summary=$(tail -n 1 "$out")
rm -f "$out"
case $summary in *" passed, 0 failed") exit 0 ;; *) exit 1 ;; esac
