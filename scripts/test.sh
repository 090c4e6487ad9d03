#!/usr/bin/env bash
# Runs every greenup test on a Debian 12 machine with Rust: installs what is
# missing, checks formatting and lints, runs the unit and integration tests,
# the daemon's MUNGE, crash and load tests, the four-node Slurm cluster tests
# and the .deb and .rpm package tests. The last line says how many suites passed.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

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
  [ -e "$s" ] && suite "daemon: $(basename "$s" .sh)" bash "$s"
done
[ -e tests/cluster/run-tests.sh ] && suite "Slurm cluster end to end" bash tests/cluster/run-tests.sh
[ -e packaging/test-deb.sh ] && suite ".deb build, install and job" bash packaging/test-deb.sh
[ -e packaging/test-rpm.sh ] && suite ".rpm build, contents, scratch install and series guard" bash packaging/test-rpm.sh

echo
[ ${#failures[@]} -gt 0 ] && printf 'failed suite: %s\n' "${failures[@]}"
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
