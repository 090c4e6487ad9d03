#!/usr/bin/env bash
# greenupd load test: CLIENTS concurrent clients open, record and close JOBS jobs
# of NODES nodes each on loopback (TCP with a MUNGE credential per request by
# default; TRANSPORT=unix uses the local socket). Prints throughput, latency per
# request type and greenupd's peak RSS, then checks the store holds exactly
# one job, one decision and NODES outcomes per job. RATE=R sends R requests/s per
# phase instead of as many as greenupd answers (latency at that load).
#   JOBS=20000 NODES=64 CLIENTS=64 PROFILE=lammps TRANSPORT=tcp bash tests/daemon/load.sh
source "$(dirname "$0")/common.bash"
JOBS=${JOBS:-2000} NODES=${NODES:-64} CLIENTS=${CLIENTS:-64} PROFILE=${PROFILE:-lammps} TRANSPORT=${TRANSPORT:-tcp} RATE=${RATE:-}
bash "$ROOT/tests/munge/start.sh" >/dev/null
build_release
DIR=$(mktemp -d /tmp/greenup-load.XXXXXX)
trap 'kill "$GPID" 2>/dev/null || true; rm -rf "$DIR"' EXIT
write_config "$DIR" "$NODES"
start_greenupd "$DIR"
CONNECT=$ADDR; [ "$TRANSPORT" = unix ] && CONNECT=unix:$DIR/greenupd.sock
machine_line
echo "command: JOBS=$JOBS NODES=$NODES CLIENTS=$CLIENTS PROFILE=$PROFILE TRANSPORT=$TRANSPORT${RATE:+ RATE=$RATE} bash tests/daemon/load.sh"
run_then_stop "$LOADGEN" --connect "$CONNECT" --clients "$CLIENTS" --jobs "$JOBS" --nodes "$NODES" \
  ${PROFILE:+--profile "$PROFILE"} ${RATE:+--rate "$RATE"} --partition debug
check "loadgen exit status" "$RC" 0
check "jobs stored" "$(q "$DB" 'SELECT count(*) FROM jobs')" "$JOBS"
check "decisions stored" "$(q "$DB" 'SELECT count(*) FROM decisions')" "$JOBS"
check "outcomes stored" "$(q "$DB" 'SELECT count(*) FROM outcomes')" "$((JOBS * NODES))"
check "jobs without exactly $NODES outcomes" \
  "$(q "$DB" "SELECT count(*) FROM jobs j WHERE (SELECT count(*) FROM outcomes o WHERE o.job_id = j.job_id) != $NODES")" 0
check "jobs closed" "$(q "$DB" "SELECT count(*) FROM jobs WHERE state = 'closed'")" "$JOBS"
check "reservations left" "$(q "$DB" 'SELECT count(*) FROM reservations')" 0
[ "$FAILED" = 0 ]
