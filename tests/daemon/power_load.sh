#!/usr/bin/env bash
# What the nodes' power reports cost greenupd: POWER_NODES simulated nodes sample their
# power every EVERY seconds and send power_reports over TCP with a MUNGE credential, as
# greenup meter does (BATCH samples a report, default a minute's worth; a connection per
# report, or KEEP=1 to keep each node's connection open), while other requests
# (open_job, close_job) run at PROBE_RATE a second.
# The same other requests run first alone, so their latency is compared with and
# without the reports; greenupd's CPU time and RSS are read from /proc for each phase.
#   POWER_NODES=10000 EVERY=5 PHASE_S=60 PROBE_RATE=100 bash tests/daemon/power_load.sh
# (the benchmark, docs/BENCHMARKS.md; TRANSPORT=unix NO_BUILD=1 on a machine without
# MUNGE). The defaults are the test command's check: 2,000
# nodes for 10 s, every report answered and counted, no figure asserted.
source "$(dirname "$0")/common.bash"
POWER_NODES=${POWER_NODES:-2000} EVERY=${EVERY:-5} PHASE_S=${PHASE_S:-10} PROBE_RATE=${PROBE_RATE:-20}
# TRANSPORT=unix needs no MUNGE, and NO_BUILD=1 runs the binaries already under
# CARGO_TARGET_DIR: the figure on a quiet machine without cargo or munged.
[ "${TRANSPORT:-tcp}" = unix ] || bash "$ROOT/tests/munge/start.sh" >/dev/null
[ -n "${NO_BUILD:-}" ] || build_release
DIR=$(mktemp -d /tmp/greenup-power-load.XXXXXX)
trap 'kill "$GPID" 2>/dev/null || true; rm -rf "$DIR"' EXIT
write_config "$DIR" "$POWER_NODES"
# A connection per node, on both sides.
ulimit -n 65536 2>/dev/null || true
start_greenupd "$DIR"
machine_line
echo "command: TRANSPORT=${TRANSPORT:-tcp} POWER_NODES=$POWER_NODES${BATCH:+ BATCH=$BATCH}${KEEP:+ KEEP=1} EVERY=$EVERY PHASE_S=$PHASE_S PROBE_RATE=$PROBE_RATE bash tests/daemon/power_load.sh"
CONNECT=$ADDR; [ "${TRANSPORT:-tcp}" = unix ] && CONNECT=unix:$DIR/greenupd.sock
run_then_stop "$LOADGEN" --connect "$CONNECT" --power-nodes "$POWER_NODES" --power-every "$EVERY" \
  --power-seconds "$PHASE_S" --probe-rate "$PROBE_RATE" --pid "$GPID" ${BATCH:+--power-batch "$BATCH"} ${KEEP:+--power-keep}
check "loadgen exit status" "$RC" 0
[ "$FAILED" = 0 ]
