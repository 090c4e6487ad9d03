#!/usr/bin/env bash
# greenupd crash test: kill -9 greenupd in the middle of a load, restart it, and
# check that every write the load generator saw acknowledged is in the store and
# that the restarted ledger holds exactly the open jobs' reservations. Then run
# the whole load again (every request is idempotent) and check the final counts.
#   JOBS=1000 NODES=64 CLIENTS=64 bash tests/daemon/crash.sh
source "$(dirname "$0")/common.bash"
JOBS=${JOBS:-1000} NODES=${NODES:-64} CLIENTS=${CLIENTS:-64} PROFILE=${PROFILE:-lammps}
bash "$ROOT/tests/munge/start.sh" >/dev/null
build_release
DIR=$(mktemp -d /tmp/greenup-crash.XXXXXX)
trap 'kill "$GPID" 2>/dev/null || true; kill "$LPID" 2>/dev/null || true; rm -rf "$DIR"' EXIT
write_config "$DIR" "$NODES"
start_greenupd "$DIR"
DB=$DIR/greenup.db ACKS=$DIR/acks.csv
: > "$ACKS"
"$LOADGEN" --connect "$ADDR" --clients "$CLIENTS" --jobs "$JOBS" --nodes "$NODES" --profile "$PROFILE" \
  --partition debug --ack-log "$ACKS" --stop-on-error > "$DIR/load1.log" 2>&1 &
LPID=$!
# Kill once the opens are done and outcomes are streaming in.
WANT=$((JOBS + JOBS * NODES / 3))
while kill -0 "$LPID" 2>/dev/null && [ "$(wc -l < "$ACKS")" -lt "$WANT" ]; do sleep 0.05; done
kill -9 "$GPID"
wait "$GPID" 2>/dev/null || true
wait "$LPID" || true
echo "killed greenupd with kill -9 after $(wc -l < "$ACKS") acknowledged writes"
cat "$DIR/load1.log"

start_greenupd "$DIR"
sqlite3 "$DIR/acks.db" ".mode csv" ".import $ACKS acks_raw" >/dev/null 2>&1 || true
sqlite3 "$DIR/acks.db" "CREATE TABLE IF NOT EXISTS acks_raw(kind, job, node);" >/dev/null
LOST_OPEN=$(sqlite3 "$DIR/acks.db" "ATTACH '$DB' AS g; SELECT count(*) FROM acks_raw a WHERE a.kind = 'open' AND NOT EXISTS (SELECT 1 FROM g.jobs j WHERE j.job_id = CAST(a.job AS INTEGER))")
LOST_REC=$(sqlite3 "$DIR/acks.db" "ATTACH '$DB' AS g; SELECT count(*) FROM acks_raw a WHERE a.kind = 'record' AND NOT EXISTS (SELECT 1 FROM g.outcomes o WHERE o.job_id = CAST(a.job AS INTEGER) AND o.node = a.node)")
LOST_CLOSE=$(sqlite3 "$DIR/acks.db" "ATTACH '$DB' AS g; SELECT count(*) FROM acks_raw a WHERE a.kind = 'close' AND NOT EXISTS (SELECT 1 FROM g.jobs j WHERE j.job_id = CAST(a.job AS INTEGER) AND j.state = 'closed')")
check "acknowledged opens lost" "$LOST_OPEN" 0
check "acknowledged outcomes lost" "$LOST_REC" 0
check "acknowledged closes lost" "$LOST_CLOSE" 0
check "acknowledged writes counted" "$([ "$(wc -l < "$ACKS")" -ge "$WANT" ] && echo yes)" yes

# The rebuilt ledger against the store, computed by sqlite3 from the decisions.
"$LOADGEN" --connect "unix:$DIR/greenupd.sock" --status > "$DIR/status.json"
LEDGER=$(sqlite3 :memory: "SELECT json_extract(readfile('$DIR/status.json'), '\$.ledger[0].jobs') || ' ' || printf('%.3f', json_extract(readfile('$DIR/status.json'), '\$.ledger[0].reserved_w'))")
STORE=$(q "$DB" "SELECT count(*) || ' ' || printf('%.3f', total(d.reserved_w)) FROM jobs j JOIN decisions d USING (job_id) WHERE j.state = 'open'")
check "ledger after restart (jobs, watts) equals the store's open jobs" "$LEDGER" "$STORE"
check "reservations equal open jobs" "$(q "$DB" 'SELECT count(*) FROM reservations')" "$(q "$DB" "SELECT count(*) FROM jobs WHERE state = 'open'")"

# Finish the work: the same load again; repeats are acknowledged without duplicates.
"$LOADGEN" --connect "$ADDR" --clients "$CLIENTS" --jobs "$JOBS" --nodes "$NODES" --profile "$PROFILE" \
  --partition debug > "$DIR/load2.log" 2>&1 || { cat "$DIR/load2.log"; FAILED=1; }
kill -TERM "$GPID"; wait "$GPID" || true
check "jobs stored" "$(q "$DB" 'SELECT count(*) FROM jobs')" "$JOBS"
check "decisions stored" "$(q "$DB" 'SELECT count(*) FROM decisions')" "$JOBS"
check "outcomes stored" "$(q "$DB" 'SELECT count(*) FROM outcomes')" "$((JOBS * NODES))"
check "jobs closed" "$(q "$DB" "SELECT count(*) FROM jobs WHERE state = 'closed'")" "$JOBS"
check "reservations left" "$(q "$DB" 'SELECT count(*) FROM reservations')" 0
[ "$FAILED" = 0 ]
