#!/usr/bin/env bash
# Runs every greenup test on a Debian 12 machine with Rust: installs what is
# missing, checks formatting and lints, runs the unit and integration tests,
# the daemon's MUNGE, crash and load tests, the four-node Slurm cluster tests
# and the .deb and .rpm package tests, on Debian 12's Slurm 22.05 and (in a Debian forky
# root made with debootstrap) on Slurm 26.05; Slurm 24.11 with GREENUP_ALL_SERIES=1. The
# last line says how many suites passed.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

# The run builds everything once: incremental caches would only add about 2.4 GB to
# target/ (docs/BENCHMARKS.md, "Disk").
export CARGO_INCREMENTAL=0
# A fresh run writes about 7 GB: target/ and the Debian 13 root. Say so before a full
# disk stops a build half way with "No space left on device".
avail=$(df -P -BG . | awk 'NR == 2 { sub("G", "", $4); print $4 }')
if [ "${avail:-0}" -lt 8 ]; then
  echo "warning: ${avail:-?} GB free here; a fresh run writes about 7 GB (docs/BENCHMARKS.md, \"Disk\")" >&2
fi

passed=0 failed=0 failures=()
suite() { # NAME COMMAND...
  local name=$1; shift
  step "$name"
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
}

step "Debian packages"
need_debs "${GREENUP_DEBS[@]}" || { echo "cannot install Debian packages"; exit 1; }

suite "cargo fmt --check" cargo fmt --all -- --check
suite "cargo clippy -D warnings" cargo clippy --workspace --all-targets -- -D warnings
suite "cargo test (unit, integration, doc)" bash -c 'bash tests/munge/start.sh && cargo test --workspace --no-fail-fast'
for s in tests/daemon/*.sh; do
  [ "$(basename "$s")" = herd.sh ] && continue
  [ -e "$s" ] && suite "daemon: $(basename "$s" .sh)" bash "$s"
done
# The herd here checks what a job's start and end leave behind (one decision, every
# node's settings and outcome, the close), not how fast: its timeout is generous, and
# the timings are benchmarks (docs/BENCHMARKS.md, with NODES=10000 TIMEOUT_MS=2000).
suite "daemon: herd (2,000 nodes at once)" env NODES=2000 TIMEOUT_MS=30000 bash tests/daemon/herd.sh
suite "MPI runtime: lowering, restoring and rank files" bash tests/runtime/run.sh
suite "MPI runtime: the in-job guard raises, records and restores" bash tests/runtime/guard.sh
suite "daemon: herd decided by PrologSlurmctld (2,000 nodes at once)" env CONTROLLER=1 NODES=2000 TIMEOUT_MS=30000 bash tests/daemon/herd.sh
# The debug binaries cargo test built: the simulation, not greenup, takes the time.
suite "SimGrid: NAS EP and IS on published physics (EPYC and Xeon nodes) and on greenup's own law, EP on 128, greenupd deciding" env BIN_DIR="$PWD/target/debug" bash tests/simgrid/run.sh
suite "stand-in hardware: published and closed-form node watts, clock law" /usr/bin/python3 tests/cluster/test_powermodel.py
[ -e tests/cluster/run-tests.sh ] && suite "Slurm cluster end to end" bash tests/cluster/run-tests.sh
[ -e packaging/test-deb.sh ] && suite ".deb build, install and job" bash packaging/test-deb.sh
[ -e packaging/test-rpm.sh ] && suite ".rpm build, contents, scratch install and series guard" bash packaging/test-rpm.sh
# The newer Slurm series, each in a Debian root of its own (tests/slurm24/), after the
# 22.05 package test so that its package is there to be refused in the root. The newest,
# 26.05 (Debian forky), runs here. 24.11 (Debian 13) runs the same suites with
# GC_SERIES=24.11, or here with GREENUP_ALL_SERIES=1: its root and suites take about
# 13 minutes, which would carry the test command past an hour on 2 cores.
for series in 26.05 24.11; do
  case $series in 26.05) distro="Debian forky" ;; 24.11) distro="Debian 13" ;; esac
  if [ "$series" = 24.11 ] && [ "${GREENUP_ALL_SERIES:-0}" != 1 ]; then
    step "Slurm 24.11 ($distro root): skipped"
    echo "    skipped: 22.05 and 26.05, the oldest and newest series greenup supports, run here; 24.11 adds about"
    echo "    13 minutes, past the hour. Run it: GC_SERIES=24.11 bash tests/slurm24/run-tests.sh (and runtime.sh,"
    echo "    test-deb.sh), or GREENUP_ALL_SERIES=1 bash scripts/test.sh (README, Slurm series)"
    continue
  fi
  [ -e tests/slurm24/run-tests.sh ] && suite "Slurm $series cluster end to end ($distro root)" env GC_SERIES=$series bash tests/slurm24/run-tests.sh
  [ -e tests/slurm24/runtime.sh ] && suite "MPI runtime on $distro's Open MPI ($distro root)" env GC_SERIES=$series bash tests/slurm24/runtime.sh
  [ -e tests/slurm24/test-deb.sh ] && suite ".deb for Slurm $series: build, install and job in the $distro root" env GC_SERIES=$series bash tests/slurm24/test-deb.sh
done

echo
[ ${#failures[@]} -gt 0 ] && printf 'failed suite: %s\n' "${failures[@]}"
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
