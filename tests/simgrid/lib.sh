# Helpers for the SimGrid testbed (tests/simgrid/README.md): a greenupd on a simulated
# site, and jobs of SMPI programs that it decides and learns from. Sourced, not run.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/tests/simgrid
source "$ROOT/scripts/lib.sh"
BIN_DIR=${BIN_DIR:-$ROOT/target/release}
SIM=$BIN_DIR/greenup-sim
GREENUP=$BIN_DIR/greenup
GREENUPD=$BIN_DIR/greenupd

# Each site's node-type speeds at f_max, GFLOPS (a site config has no flop rate). The
# real site's stand in the ratio of its CPUs' peak double-precision rates at the highest
# P-state measured (cores x GHz x 16 flops a cycle, AVX2 FMA on Zen 2 and Haswell
# alike), the slower scaled to paper 004's t1.
declare -A SPEEDS=(
  [real]="--speed hsw=40 --speed rome=133.3"
  [epyc]="--speed rome=133.3"
  [bench]="--speed fast=1 --speed eco=0.8"
  [paper004]="--speed t1=40 --speed t2=50 --speed t3=60 --speed t4=70"
  [paper004-70-30]="--speed t1=40 --speed t2=50 --speed t3=60 --speed t4=70"
  [paper004-90-10]="--speed t1=40 --speed t2=50 --speed t3=60 --speed t4=70"
)

# The published physics of the real-physics sites (tests/physics/, docs/physics.md):
# each site's node types and the CPU each one is. The hosts obey these figures; greenupd
# is told only the site config, whose watts are its own prior.
PHYSICS_FILE=$ROOT/tests/physics/cpus.yaml
PROGRAMS_FILE=$ROOT/tests/physics/programs.yaml
declare -A CPUS=(
  [epyc]="--cpu rome=epyc-7502 --scope package"
  [real]="--cpu rome=epyc-7502 --cpu hsw=xeon-e5-2680v3 --scope node-ac"
)

# beta_of PROGRAM [low|high]: the program's share of time that scales with 1/f, from
# tests/physics/programs.yaml: its measured beta, or the low or high end of its assumed
# range. Fails with one line for a program the file does not hold.
beta_of() {
  /usr/bin/python3 - "$PROGRAMS_FILE" "$1" "${2:-high}" <<'PY'
import sys, yaml
path, prog, end = sys.argv[1:4]
p = (yaml.safe_load(open(path)).get("programs") or {}).get(prog)
if p is None:
    sys.exit(f"beta_of: {path} has no program {prog}")
if "beta" in p:
    print(p["beta"])
elif end in ("low", "high"):
    print(p["beta_range"][0 if end == "low" else 1])
else:
    sys.exit(f"beta_of: '{end}': expected low or high")
PY
}

# physics SITE: greenup-sim's options that make SITE's hosts obey the published physics,
# with the program's $BETA and $WAIT (polling, MPI's default, or blocking), and with
# NODE_SPREAD set chips that differ (cpus.yaml's node_spread); nothing on a site that
# obeys greenup's own law.
physics() {
  [ -n "${CPUS[$1]:-}" ] || return 0
  echo "--physics $PHYSICS_FILE ${CPUS[$1]} --beta ${BETA:?give BETA, the beta of the program (beta_of)} --wait ${WAIT:-polling}${NODE_SPREAD:+ --node-spread}"
}

build_bins() {
  if [ "$BIN_DIR" = "$ROOT/target/release" ]; then
    (cd "$ROOT" && cargo build --release --quiet -p greenup-commands -p greenup-sim --bins)
  elif [ "$BIN_DIR" = "$ROOT/target/debug" ]; then
    (cd "$ROOT" && cargo build --quiet -p greenup-commands -p greenup-sim --bins)
  fi
}

# site_start SITE DIR: write DIR/greenup.yaml (the site's node types and nodes, a daemon
# of its own in DIR, and $SITE_EXTRA's YAML, if any) and start greenupd on it. Sets
# CONF, ADDR, GPID.
site_start() {
  local site=$1 dir=$2
  mkdir -p "$dir/profiles"
  local port; port=$(free_port)
  CONF=$dir/greenup.yaml
  {
    cat "$HERE/sites/$site.yaml"
    cat <<CONF
default_policy: monitor
policy_dirs: [$ROOT/policies]
profile_dir: $dir/profiles
enforce: open
daemon:
  listen: 127.0.0.1:$port
  socket: $dir/greenupd.sock
  store: $dir/greenup.db
  slurm_user: root
  admins: [root]
CONF
    [ -z "${SITE_EXTRA:-}" ] || echo "$SITE_EXTRA"
  } > "$CONF"
  ADDR=127.0.0.1:$port
  "$GREENUPD" --config "$CONF" --no-slurm-check >>"$dir/greenupd.log" 2>&1 &
  GPID=$!
  for _ in $(seq 1 200); do
    [ -S "$dir/greenupd.sock" ] && "$GREENUP" status --config "$CONF" >/dev/null 2>&1 && return 0
    kill -0 "$GPID" 2>/dev/null || { cat "$dir/greenupd.log"; return 1; }
    sleep 0.05
  done
  echo "greenupd did not start"; cat "$dir/greenupd.log"; return 1
}

site_stop() {
  [ -n "${GPID:-}" ] || return 0
  kill -TERM "$GPID" 2>/dev/null || true
  wait "$GPID" 2>/dev/null || true
  GPID=
}

# smpi/host-speed per site: the flops one second of this machine's CPU stands for, so
# that a site's compute is as large against its network as the paper's (see README).
declare -A HOST_SPEED=([epyc]=40Gf [real]=40Gf [bench]=1Gf [paper004]=40Gf [paper004-70-30]=40Gf [paper004-90-10]=40Gf)

JOB=${JOB:-1000}
# job SITE NODES WORK POLICY APP RUN...: one job decided by greenupd over MUNGE TCP, run
# under SMPI, its outcome sent back; prints greenup-sim's JSON line. RUN is what
# greenup-sim runs: `--replay TRACE` or `-- PROGRAM ARGS`. greenupd refines a profile at
# most once a second, so each job waits for the last one's refit. The job id is $JOB:
# the caller counts (a job in a pipeline runs in a subshell).
job() {
  local site=$1 nodes=$2 work=$3 policy=$4 app=$5; shift 5
  # shellcheck disable=SC2086
  "$SIM" run --site "$CONF" ${SPEEDS[$site]} $(physics "$site") --host-speed "${HOST_SPEED[$site]}" --nodes "$nodes" --work "$work" \
    --connect "$ADDR" --job-id "$JOB" --policy "$policy" --profile "$app" ${ALGORITHM:+--algorithm $ALGORITHM} "$@"
  sleep 1.1
}

# fixed SITE NODES WORK FREQS RUN...: a run at fixed frequencies (FREQS: TYPE=GHZ,... or
# `-` for f_max), told to nobody: the oracle's runs and the trace recordings.
fixed() {
  local site=$1 nodes=$2 work=$3 freqs=$4 f=() x; shift 4
  if [ "$freqs" != - ]; then
    for x in ${freqs//,/ }; do f+=(--freq "$x"); done
  fi
  # shellcheck disable=SC2086
  "$SIM" run --site "$CONF" ${SPEEDS[$site]} $(physics "$site") --host-speed "${HOST_SPEED[$site]}" --nodes "$nodes" --work "$work" "${f[@]}" "$@"
}

# learn APP NODES: greenup's first version of APP's profile from the monitor runs.
learn() {
  "$GREENUP" profile learn "$1" --model hetero --nodes "$2" --site "$CONF" --force
}
