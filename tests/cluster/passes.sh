#!/bin/bash
# Both cluster suites back to back, N passes, each from a fresh clone of the repository
# (issue 21's check that the suites pass every time): for each pass, `git clone` the
# repository's HEAD, then run tests/cluster/run-tests.sh (Slurm 22.05) and
# tests/slurm24/run-tests.sh (24.11) under the host's cluster lock, debug builds as CI
# makes them. One line per suite run goes to OUT/summary.txt (the commit, the wall time,
# the load, the last count, and every FAIL line), each suite's output to OUT/.
#   sudo bash tests/cluster/passes.sh [N] [OUT]
set -u
N=${1:-5}
OUT=$(readlink -f "${2:-/var/tmp/greenup-passes}")
REPO=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "passes.sh: run as root (the suites start Slurm daemons)"; exit 1; }
mkdir -p "$OUT"
: >> "$OUT/summary.txt"
CLONE=$OUT/clone
# One target directory for every pass: each clone is fresh, its build incremental.
export CARGO_TARGET_DIR=$OUT/target
for i in $(seq 1 "$N"); do
  rm -rf "$CLONE"
  git clone -q "$REPO" "$CLONE" || exit 1
  c=$(git -C "$CLONE" rev-parse --short HEAD)
  for s in cluster slurm24; do
    t0=$(date +%s) st=$(date -u +%H:%M:%S)
    (cd "$CLONE" && flock -o /tmp/greenup-cluster.lock bash "tests/$s/run-tests.sh") > "$OUT/pass-$i-$s.log" 2>&1
    rc=$?
    echo "pass $i commit $c suite $s start $st wall $(( $(date +%s) - t0 )) s rc $rc load $(cut -d' ' -f1-3 /proc/loadavg): $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$OUT/pass-$i-$s.log" | tail -1)" >> "$OUT/summary.txt"
    grep -E '^FAIL' "$OUT/pass-$i-$s.log" >> "$OUT/summary.txt"
  done
done
cat "$OUT/summary.txt"
