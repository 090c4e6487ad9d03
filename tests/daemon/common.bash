# Helpers for greenupd's load and crash scripts: build, write a site config,
# start and stop greenupd, count rows. Sourced, not run.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$ROOT/scripts/lib.sh"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
# GREENUPD=PATH runs another build (a paired run: the same load against two builds).
GREENUPD=${GREENUPD:-$TARGET/release/greenupd}
LOADGEN=$TARGET/release/examples/loadgen

# The daemon scripts' release binaries: scripts/lib.sh builds them with the package's.
build_release() {
  (cd "$ROOT" && release_build)
}

# write_config DIR NODES: a site with NODES nodes n1..nNODES in partition "debug", no caps.
write_config() {
  local dir=$1 nodes=$2
  PORT=$(free_port)
  cat > "$dir/greenup.yaml" <<CONF
node_types:
  std:
    frequencies: {min: 1.2, max: 2.4, step: 0.2}
    power: {dynamic_w: 200, static_w: 100, gamma: 3}
nodes:
  std: "n[1-$nodes]"
partitions:
  debug:
    nodes: "n[1-$nodes]"
default_policy: min-energy
policy_dirs: [$ROOT/policies]
profile_dir: $ROOT/etc/profiles
daemon:
  listen: 127.0.0.1:$PORT
  socket: $dir/greenupd.sock
  store: $dir/greenup.db
  slurm_user: root
  over_budget: lowest
CONF
  ADDR=127.0.0.1:$PORT
}

# start_greenupd DIR: start greenupd on DIR's config; sets GPID.
start_greenupd() {
  local dir=$1
  "$GREENUPD" --config "$dir/greenup.yaml" --no-slurm-check >>"$dir/greenupd.log" 2>&1 &
  GPID=$!
  for _ in $(seq 1 200); do
    [ -S "$dir/greenupd.sock" ] && "$LOADGEN" --connect "unix:$dir/greenupd.sock" --status >/dev/null 2>&1 && return 0
    kill -0 "$GPID" 2>/dev/null || { cat "$dir/greenupd.log"; return 1; }
    sleep 0.05
  done
  echo "greenupd did not start"; cat "$dir/greenupd.log"; return 1
}

# machine_line: the machine and the date, for a figure's record.
machine_line() {
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r); date: $(date -u +%FT%TZ)"
}

# run_then_stop CMD...: run CMD (its exit status in RC), print greenupd's peak RSS,
# stop greenupd; DB is then its store.
run_then_stop() {
  set +e
  "$@"
  RC=$?
  set -e
  echo "greenupd peak RSS (VmHWM): $(grep VmHWM /proc/$GPID/status | awk '{print $2, $3}')"
  kill -TERM "$GPID"; wait "$GPID" || true
  DB=$DIR/greenup.db
}

# q DB SQL: one value from the store, read by the sqlite3 shell (not by greenup).
q() { sqlite3 -readonly "$1" "$2"; }

# check NAME GOT WANT
check() {
  if [ "$2" = "$3" ]; then echo "ok   $1: $2"; else echo "FAIL $1: got $2, want $3"; FAILED=1; fi
}
FAILED=0
