#!/usr/bin/env bash
# greenup's demo, the README's first command. As root on Debian 12 with Rust, it
# installs what is missing, builds greenup, starts the local four-node Slurm
# (tests/cluster/setup.sh: n1-n2 "fast" and n3-n4 "eco" nodes, each with its own
# simulated cpufreq and RAPL tree) with greenupd and the plugin, and submits three
# jobs as an ordinary user under three policies. It prints what each job saw,
# each job's report, writes the plots to demo-out/ and stops the cluster on exit.
# Safe to run again. Environment: DEMO_MAX_S caps each job's run time (default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
source scripts/lib.sh
source tests/cluster/lib.sh
OUT=$REPO/demo-out
MAX_S=${DEMO_MAX_S:-60}

[ "$(id -u)" = 0 ] || { echo "demo: run as root (it installs packages and starts Slurm daemons)" >&2; exit 1; }
if ! command -v cargo >/dev/null; then
  [ -x "$HOME/.cargo/bin/cargo" ] && PATH=$HOME/.cargo/bin:$PATH
  command -v cargo >/dev/null || { echo "demo: cargo not found: install Rust (https://rustup.rs)" >&2; exit 1; }
fi

step "Debian packages (Slurm 22.05, MUNGE, libslurm-dev)"
need_debs "${GREENUP_DEBS[@]}"

step "building greenup (release: CLI, greenupd, SPANK plugin)"
cargo build --release -p greenup -p spank_greenup
export GC_BIN_DIR=${CARGO_TARGET_DIR:-$REPO/target}/release

cluster_up=0
finish() {
  local rc=$?
  if [ "$cluster_up" = 1 ]; then
    step "stopping the cluster"
    tests/cluster/teardown.sh >/dev/null 2>&1 || true
  fi
  [ "$rc" = 0 ] || echo "demo: failed (exit $rc); the cluster's logs are in $GC_LOG" >&2
}
trap finish EXIT
trap 'exit 130' INT TERM

step "starting the four-node Slurm cluster with greenupd and spank_greenup"
# One Slurm test cluster per machine: wait for another run (tests/cluster/run-tests.sh) to end.
for _ in $(seq 1 60); do pgrep -x slurmctld >/dev/null || break; sleep 5; done
if pgrep -x slurmctld >/dev/null; then
  echo "demo: a slurmctld is still running after 5 minutes; stop it first (tests/cluster/teardown.sh)" >&2; exit 1
fi
# A fresh cluster every run: no jobs left in slurmctld's state, an empty greenupd store.
PURGE=1 tests/cluster/teardown.sh >/dev/null 2>&1 || true
cluster_up=1
tests/cluster/setup.sh
GREENUP=$GC_SHARE/bin/greenup
sinfo -N -o '%N %f %t' | column -t

# The test cluster's profiles (tests/cluster/profiles), scaled to a tenth so that
# each job runs for tens of seconds rather than minutes.
sed -e 's/^name: solver/name: demo-solver/' -e 's/^  iterations: 200$/  iterations: 20/' \
  tests/cluster/profiles/solver.yaml > "$GC_SHARE/profiles/demo-solver.yaml"
sed -e 's/^name: md/name: demo-md/' -e 's/^  t_c1_s: 600$/  t_c1_s: 60/' -e 's/^    coeff_s: 5$/    coeff_s: 0.5/' \
  tests/cluster/profiles/md.yaml > "$GC_SHARE/profiles/demo-md.yaml"
for p in demo-solver demo-md; do
  grep -q "^name: $p" "$GC_SHARE/profiles/$p.yaml" || { echo "demo: could not derive $p from tests/cluster/profiles" >&2; exit 1; }
  chmod 0644 "$GC_SHARE/profiles/$p.yaml"
done

# The workload: print the frequency every CPU of every node runs at (the set speed
# under the userspace governor, else the max), then keep every node busy for the
# time greenup predicted, at most MAX seconds, so measured can meet predicted.
cat > "$GC_WORK/demo-job.sh" <<'JOB'
#!/bin/bash
GREENUP=$1 SYSFS=$2 MAX=$3
srun --ntasks-per-node=1 bash -c '
  for p in '"$SYSFS"'/$SLURMD_NODENAME/devices/system/cpu/cpufreq/policy*; do
    g=$(cat $p/scaling_governor)
    if [ "$g" = userspace ]; then k=$(cat $p/scaling_setspeed); else k=$(cat $p/scaling_max_freq); fi
    echo "  $SLURMD_NODENAME $(basename $p) $g $k kHz"
  done' | sort
pred=$("$GREENUP" report "$SLURM_JOB_ID" --csv 2>/dev/null |
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "pred_time_s") c = i } NR == 2 && c { print $c; exit }')
secs=$(awk -v p="${pred:-0}" -v m="$MAX" 'BEGIN { s = (p > 0 && p < m) ? p : m; printf "%d", s + 0.5 }')
shown=$(awk -v p="$pred" 'BEGIN { if (p == "") print "?"; else printf "%.1f", p }')
echo "workload: $SLURM_JOB_NUM_NODES node(s) busy for $secs s (greenup predicted $shown s)"
srun --ntasks-per-node=1 sleep "$secs"
JOB
chmod 0755 "$GC_WORK/demo-job.sh"

as_user() { runuser -u "$GC_USER" -- bash -c 'cd "$1" && shift && exec "$@"' as "$GC_WORK" "$@"; }
submit() { # POLICY-LABEL sbatch-options...
  local label=$1; shift
  as_user sbatch --parsable --exclusive -t 10:00 -o "$GC_WORK/demo-%j.out" -J "demo-$label" "$@" \
    "$GC_WORK/demo-job.sh" "$GREENUP" "$GC_SYSFS" "$MAX_S"
}

step "submitting three jobs as $GC_USER"
declare -a JOBS LABELS
# 1. max-dist: all four nodes of both types; the fast nodes slow down to finish with the eco ones.
JOBS+=("$(submit max-dist -N 4 --energy-policy=max-dist --energy-profile=demo-solver --energy-report)")
LABELS+=("max-dist, demo-solver, -N 4")
# 2. min-energy: the cli_filter picks the node count in 1-4 with the least predicted energy.
JOBS+=("$(submit min-energy -N 1-4 --energy-policy=min-energy --energy-profile=demo-solver --energy-report)")
LABELS+=("min-energy, demo-solver, -N 1-4")
# 3. min-time under a 7 kJ energy cap: the fastest node count in 1-4 that stays under the cap.
JOBS+=("$(submit min-time -N 1-4 --energy-policy=min-time --energy-profile=demo-md --energy-cap=7kJ --energy-report)")
LABELS+=("min-time, demo-md, energy cap 7kJ, -N 1-4")
for i in "${!JOBS[@]}"; do echo "job ${JOBS[$i]}: ${LABELS[$i]}"; done

step "waiting for the jobs (each runs at most ${MAX_S} s)"
deadline=$((SECONDS + 3 * MAX_S + 180))
while [ -n "$(squeue -h -j "$(IFS=,; echo "${JOBS[*]}")" 2>/dev/null)" ]; do
  [ $SECONDS -lt $deadline ] || { echo "demo: jobs still queued after $((3 * MAX_S + 180)) s:" >&2; squeue >&2; exit 1; }
  sleep 1
done

rm -rf "$OUT"; mkdir -p "$OUT"
summary=()
for i in "${!JOBS[@]}"; do
  j=${JOBS[$i]}
  step "job $j (${LABELS[$i]}): what it saw"
  cat "$GC_WORK/demo-$j.out"
  cp "$GC_WORK/demo-$j.out" "$OUT/$j.out"
  step "greenup report $j"
  as_user "$GREENUP" report "$j"
  "$GREENUP" report "$j" --plot "$OUT/$j.svg" >/dev/null
  "$GREENUP" report "$j" --csv > "$OUT/$j.csv"
  summary+=("$(awk -F, -v j="$j" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { n++; if (n == 1) { pol = $c["policy"]; e = $c["energy_j"]; pe = $c["pred_energy_j"]; sv = $c["saving_pct"] } }
    END { printf "job %s %s on %d node(s): %s kJ measured, %.1f kJ predicted, saving %s%%", j, pol, n,
            (e == "" ? "?" : sprintf("%.1f", e / 1000)), pe / 1000, (sv == "" ? "?" : sprintf("%.1f", sv)) }' "$OUT/$j.csv")")
done

step "done"
ls "$OUT"
printf 'demo: %s; plots in demo-out/; %d s in all\n' "$(IFS=';'; echo "${summary[*]}" | sed 's/;/; /g')" "$SECONDS"
