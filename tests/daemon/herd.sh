#!/usr/bin/env bash
# One job of NODES nodes starting and ending at once against greenupd on loopback:
# NODES prologs, each on its own connection with its own MUNGE credential, then NODES
# ends (end_node, or outcomes and the close) (plugin/examples/herd.rs). Prints what the herd saw, then
# checks the store holds one job, one decision and NODES outcomes.
#   NODES=10000 PROFILE=lammps bash tests/daemon/herd.sh
#   OLD=1 GREENUPD=/path/to/older/greenupd NODES=4000 bash tests/daemon/herd.sh
#   CONTROLLER=1 NODES=10000 bash tests/daemon/herd.sh   # decided first by PrologSlurmctld's code
#   APART=1 NODES=10000 bash tests/daemon/herd.sh   # ends by record_outcome and close_job, not end_node
#   SOMAXCONN=32768 NODES=20000 bash tests/daemon/herd.sh  # in a network namespace of its own
#     whose accept queues hold the whole job (net.core.somaxconn is per namespace); the
#     host's setting is left alone.
if [ -n "${SOMAXCONN:-}" ] && [ -z "${HERD_NETNS:-}" ]; then
  exec unshare -n env HERD_NETNS=1 bash "$0" "$@"
fi
if [ -n "${HERD_NETNS:-}" ]; then
  ip link set lo up
  sysctl -qw net.core.somaxconn="$SOMAXCONN" net.ipv4.tcp_max_syn_backlog="$SOMAXCONN"
fi
source "$(dirname "$0")/common.bash"
NODES=${NODES:-10000} PROFILE=${PROFILE:-lammps} TIMEOUT_MS=${TIMEOUT_MS:-2000} OLD=${OLD:-} CONTROLLER=${CONTROLLER:-} APART=${APART:-}
bash "$ROOT/tests/munge/start.sh" >/dev/null
build_release
DIR=$(mktemp -d /tmp/greenup-herd.XXXXXX)
trap 'kill "$GPID" 2>/dev/null || true; rm -rf "$DIR"' EXIT
write_config "$DIR" "$NODES"
# The daemon block is the config's last: room for this job.
echo "  max_job_nodes: $(( NODES > 16384 ? NODES : 16384 ))" >> "$DIR/greenup.yaml"
start_greenupd "$DIR"
machine_line
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: NODES=$NODES PROFILE=$PROFILE${OLD:+ OLD=1}${CONTROLLER:+ CONTROLLER=1}${APART:+ APART=1}${SOMAXCONN:+ SOMAXCONN=$SOMAXCONN} bash tests/daemon/herd.sh"
# The job, then what people read about it: its report and the listings, however large.
herd_then_read() {
  "$TARGET/release/examples/herd" --connect "$ADDR" --nodes "$NODES" --timeout-ms "$TIMEOUT_MS" \
    --greenupd-pid "$GPID" --partition debug ${PROFILE:+--profile "$PROFILE"} ${OLD:+--old} ${APART:+--outcomes-apart} \
    ${CONTROLLER:+--controller "$DIR/greenup.yaml"} || return
  local t0=$SECONDS
  "$TARGET/release/greenup" report 7000000 --site "$DIR/greenup.yaml" > "$DIR/report.txt" || return
  "$TARGET/release/greenup" jobs --site "$DIR/greenup.yaml" > "$DIR/jobs.txt" || return
  echo "read back in $((SECONDS - t0)) s: report of $(wc -l < "$DIR/report.txt") lines, listing of $(wc -l < "$DIR/jobs.txt")"
  grep -m1 -i "nodes" "$DIR/report.txt"
}
run_then_stop herd_then_read
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
check "herd exit status" "$RC" 0
check "jobs stored" "$(q "$DB" 'SELECT count(*) FROM jobs')" 1
check "decisions stored" "$(q "$DB" 'SELECT count(*) FROM decisions')" 1
check "outcomes stored" "$(q "$DB" 'SELECT count(*) FROM outcomes')" "$NODES"
check "jobs closed" "$(q "$DB" "SELECT count(*) FROM jobs WHERE state = 'closed'")" 1
[ "$FAILED" = 0 ]
