#!/usr/bin/env bash
# greenup's evaluation on the test cluster's stand-in hardware (tests/cluster/README.md):
# for each real application, a fresh cluster learns the application's profile from
# measured runs (tests/cluster/apps/lib.sh, app_learn), then runs PAIRS pairs per policy
# on all four nodes (two fast, two eco): the measured baseline (monitor: every node at
# f_max) and the policy's run, same input. Time is each job's wall time, energy the sum
# of its nodes' RAPL counters; greenup's prediction is read from `greenup report` only to
# measure its error. Appends one row per run to OUT/runs.csv and prints, per application
# and policy, slowdown and saving (mean and spread over the pairs) and the prediction
# error of the policy runs in order, and each setting against the runs at f_max
# (scripts/evaluate_summary.py; runs whose answer failed are left out and counted).
# Each application and policy is one batch on a fresh cluster (learn, then PAIRS pairs),
# so the prediction errors of a batch follow one learned profile from its first run.
# Run as root, with greenup built (GC_BIN_DIR, default target/release) and no other test
# cluster running. Usage: scripts/evaluate.sh [APP...]   (default: lammps nwchem hpcc)
# Environment: POLICIES ("max-dist min-energy edp"; the shipped policies and the test-only
# variants max-dist-block and max-dist-dvfs in tests/cluster/apps/policies/), PAIRS (3), OUT (eval-out),
# NODES and COUNT: the nodes every run uses (default n[1-4] and 4; NWChem needs n[2-3] 2,
# one node of each type, see docs/evaluation.md), and
# GC_PHYSICS (published: the stand-in draws real nodes' measured watts, n1-n2 AMD EPYC
# 7502 and n3-n4 Intel Xeon E5-2680 v3, tests/cluster/lib.sh; law: greenup.yaml's own),
# GC_BETA (the share of the application's time that slows with the clock, as the
# stand-in runs it; default 1, compute-bound; tests/physics/programs.yaml's ranges),
# GC_LOCK: a lock file each batch holds (flock) while it has the cluster, for hosts
# where several people take turns on the one test cluster; TOGETHER=1: one batch per
# application running every policy against shared baselines (see batch below).
set -euo pipefail
cd "$(dirname "$0")/.."
export GC_PHYSICS=${GC_PHYSICS:-published} GC_BETA=${GC_BETA:-1}
source scripts/lib.sh
source tests/cluster/lib.sh
source tests/cluster/apps/lib.sh
POLICIES=${POLICIES:-max-dist min-energy edp} PAIRS=${PAIRS:-3} OUT=${OUT:-eval-out}
NODES=${NODES:-n[1-4]} COUNT=${COUNT:-4}
APPS=("$@"); [ ${#APPS[@]} -gt 0 ] || APPS=(lammps nwchem hpcc)
[ "$(id -u)" = 0 ] || { echo "evaluate: run as root (it starts Slurm daemons)" >&2; exit 1; }
mkdir -p "$OUT"
CSV=$OUT/runs.csv
[ -s "$CSV" ] || echo "date,app,policy,pair,kind,job,time_s,energy_j,check,profile_version,pred_time_s,pred_energy_j,freqs_ghz,load1,physics,beta" > "$CSV"

row() { # app policy pair kind "job time energy check"
  local j t e ok pv="" pt="" pe="" fq=""
  read -r j t e ok <<<"$5"
  if [ "$4" = policy ]; then
    read -r pv pt pe fq < <("$APPS_GREENUP" report "$j" --json --site "$GC_ETC/greenup.yaml" |
      jq -r '"\(.profile_version) \(.predicted.time_s) \(.predicted.energy_j) \([.nodes[] | "\(.name)=\(.freq_ghz)"] | join(";"))"')
  fi
  echo "$(date -u +%FT%TZ),$1,$2,$3,$4,$j,$t,$e,$ok,$pv,$pt,$pe,$fq,$(cut -d' ' -f1 /proc/loadavg),$GC_PHYSICS,$GC_BETA" >> "$CSV"
  printf '  %-10s %-7s pair %s job %-4s %7.1f s %9.0f J  %s\n' "$2" "$4" "$3" "$j" "$t" "$e" "$ok"
}

# Runs in a subshell of its own: the cluster is torn down when it ends, however it ends,
# and (with GC_LOCK) before the lock is let go, never outside it.
# With TOGETHER=1 a batch is one application under every policy: each pair is one
# baseline run followed by one run per policy, all from the one learned profile (which
# every policy run refines), and the baseline is each policy's pair partner. Policies then
# compare on the same baselines, and one batch costs one learning instead of one per policy.
batch() { # APP POLICY...
  local app=$1 policy base; shift
  trap 'tests/cluster/teardown.sh >/dev/null 2>&1 || true' EXIT
  step "$app under $*: fresh cluster ($GC_PHYSICS physics, beta $GC_BETA)"
  tests/cluster/teardown.sh >/dev/null 2>&1 || true
  tests/cluster/setup.sh >/dev/null
  apps_install
  # The evaluation's own policy variants (tests/cluster/apps/policies/, never shipped).
  # greenupd learns the policies at its start, so it starts again to know these.
  install -m 0644 "$GC_REPO"/tests/cluster/apps/policies/*.yaml "$GC_SHARE/policies/"
  tests/cluster/greenupd.sh start >/dev/null
  step "$app: learning its profile from measured runs"
  app_learn "$app" "$NODES" "$COUNT"
  step "$app under $*: $PAIRS pairs of baseline (monitor) and policy runs on $NODES"
  for pair in $(seq 1 "$PAIRS"); do
    base=$(app_run "$app" -N"$COUNT" -w "$NODES" --energy-policy=monitor)
    for policy in "$@"; do row "$app" "$policy" "$pair" baseline "$base"; done
    for policy in "$@"; do
      row "$app" "$policy" "$pair" policy "$(app_run "$app" -N"$COUNT" -w "$NODES" --energy-policy="$policy" --energy-profile="$app")"
    done
  done
  tests/cluster/teardown.sh >/dev/null 2>&1 || true
}

locked() { # runs "$@" as one batch, holding GC_LOCK when it is set
  if [ -n "${GC_LOCK:-}" ]; then
    ( flock 9; batch "$@" ) 9>"$GC_LOCK"
  else
    ( batch "$@" )
  fi
}

for app in "${APPS[@]}"; do
  if [ "${TOGETHER:-0}" = 1 ]; then
    # shellcheck disable=SC2086  # POLICIES is a list of words
    locked "$app" $POLICIES
  else
    for policy in $POLICIES; do locked "$app" "$policy"; done
  fi
done

step "summary ($CSV)"
/usr/bin/python3 scripts/evaluate_summary.py "$CSV" "${APPS[@]}"
