#!/usr/bin/env bash
# greenup's demo, the README's first command. As root on Debian 12 with Rust, it
# installs what is missing, builds greenup, starts the local four-node Slurm
# (tests/cluster/setup.sh: n1-n2 AMD EPYC 7502 and n3-n4 Intel Xeon E5-2680 v3 nodes,
# each with its own stand-in cpufreq and RAPL tree whose speed and power follow the
# applied frequency as published measurements of those nodes say) with greenupd and the
# plugin, learns a real application's profile
# (LAMMPS from Debian over Open MPI) from measured runs, then runs it as an ordinary
# user at f_max (the measured baseline) and under two policies. It prints what each job
# saw, each job's report, the measured saving against the measured baseline, writes the
# plots to demo-out/ and stops the cluster on exit. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
# The stand-in hardware draws real nodes' published watts (tests/physics/cpus.yaml), and
# LAMMPS slows with the clock as tests/physics/programs.yaml assumes (no measurement of it
# is published: the low end of its assumed range, beta 0.70). GC_PHYSICS=law runs the
# demo on greenup.yaml's own law instead.
export GC_PHYSICS=${GC_PHYSICS:-published} GC_BETA=${GC_BETA:-0.70}
source scripts/lib.sh
source tests/cluster/lib.sh
OUT=$REPO/demo-out

[ "$(id -u)" = 0 ] || { echo "demo: run as root (it installs packages and starts Slurm daemons)" >&2; exit 1; }
if ! command -v cargo >/dev/null; then
  [ -x "$HOME/.cargo/bin/cargo" ] && PATH=$HOME/.cargo/bin:$PATH
  command -v cargo >/dev/null || { echo "demo: cargo not found: install Rust (https://rustup.rs)" >&2; exit 1; }
fi

step "Debian packages (Slurm 22.05, MUNGE, libslurm-dev, Open MPI, LAMMPS, NWChem, HPCC)"
need_debs "${GREENUP_DEBS[@]}" "${GREENUP_APP_DEBS[@]}"

step "building greenup (release: CLI, greenupd, SPANK plugin)"
cargo build --release -p greenup-commands -p spank_greenup
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
if [ "$GC_PHYSICS" = published ]; then
  echo "physics: published measurements (tests/physics/cpus.yaml, docs/physics.md): n1-n2 AMD EPYC 7502 nodes"
  echo "  (Schoene et al., IEEE Cluster 2021, data artifact tud-zih-energy/2021-rome-ee), n3-n4 Intel Xeon E5-2680 v3"
  echo "  nodes (FIRESTARTER 2, Schoene et al., IEEE Cluster 2021); LAMMPS's clock sensitivity beta $GC_BETA, assumed"
  echo "  (tests/physics/programs.yaml). greenupd is told only the frequencies and a prior from the vendors' TDP."
else
  echo "physics: greenup.yaml's own law (static + dynamic (f/f_max)^3), not a measurement"
fi

source tests/cluster/apps/lib.sh
apps_install
as_user() { runuser -u "$GC_USER" -- bash -c 'cd "$1" && shift && exec "$@"' as "$GC_WORK" "$@"; }
APP=lammps

# No profile is typed in: greenup profile learn builds LAMMPS's from measured runs (three runs
# under monitor, one planned run it refines the profile from).
step "learning the $APP profile from measured runs (LAMMPS melt, one MPI rank per node)"
app_learn "$APP" | while read -r _ _ run j t e ok; do
  [ "$run" = note ] && { echo "  $j $t $e $ok"; continue; }
  printf '  %-13s job %-3s %6.1f s %7.0f J  answer %s\n' "$run" "$j" "$t" "$e" "$ok"
done
grep -v '^#' "$GC_SHARE/profiles/$APP.yaml" | sed 's/^/  /'

step "running $APP on all four nodes as $GC_USER: measured baseline, then two policies"
declare -a JOBS LABELS MEAS
for policy in monitor max-dist min-energy; do
  # The baseline names the profile too: greenup then keeps it as the application's
  # measured run at f_max, which `greenup app` and the reports measure savings against.
  opts=(-N4 --energy-policy=$policy --energy-report --energy-profile=$APP)
  r=$(app_run "$APP" "${opts[@]}")
  read -r j t e ok <<<"$r"
  JOBS+=("$j"); LABELS+=("$policy"); MEAS+=("$t $e")
  printf '  job %s (%s): %.1f s, %.0f J, answer %s\n' "$j" "$policy" "$t" "$e" "$ok"
  [ "$ok" = ok ] || { echo "demo: $APP's answer in job $j is wrong:" >&2; cat "$GC_WORK/$APP-$j.out" >&2; exit 1; }
done

rm -rf "$OUT"; mkdir -p "$OUT"
summary=()
read -r bt be <<<"${MEAS[0]}"
for i in "${!JOBS[@]}"; do
  j=${JOBS[$i]}
  step "job $j (${LABELS[$i]}): what it printed"
  cat "$GC_WORK/$APP-$j.out"
  cp "$GC_WORK/$APP-$j.out" "$OUT/$j.out"
  [ "${LABELS[$i]}" = monitor ] && continue
  step "greenup report $j"
  as_user "$GREENUP" report "$j"
  "$GREENUP" report "$j" --plot "$OUT/$j.svg" >/dev/null
  "$GREENUP" report "$j" --csv > "$OUT/$j.csv"
  read -r t e <<<"${MEAS[$i]}"
  summary+=("$(awk -v j="$j" -v p="${LABELS[$i]}" -v phys="$GC_PHYSICS" -v t="$t" -v e="$e" -v bt="$bt" -v be="$be" 'BEGIN {
    printf "job %s %s: %.1f s and %.2f kJ against the measured baseline'"'"'s %.1f s and %.2f kJ (saving %.1f%%, slowdown %.1f%%, measured on the Slurm bench: stand-in hardware, %s physics)",
      j, p, t, e / 1000, bt, be / 1000, 100 * (be - e) / be, 100 * (t - bt) / bt, phys }')")
done

step "done"
ls "$OUT"
printf 'demo: %s; plots in demo-out/; %d s in all\n' "$(IFS=';'; echo "${summary[*]}" | sed 's/;/; /g')" "$SECONDS"
