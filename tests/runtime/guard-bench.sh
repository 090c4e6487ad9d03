#!/usr/bin/env bash
# The in-job guard's cost on a program it never corrects (docs/BENCHMARKS.md): two ranks
# of tests/runtime/guard.c compute MS ms and meet in a barrier, for SECONDS, preloaded
# measuring only (`measure`) and measuring with the guard armed (`guard`: a baseline rate
# the program always beats, against a stand-in cpufreq tree with a control for every CPU,
# so that it watches and never acts). The two alternate ROUNDS times; each run's time is
# rank 0's wall_s (MPI_Init to MPI_Finalize); the paired (same round) difference's median
# is the guard's cost.
# Usage: guard-bench.sh [SECONDS] [MS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-3} MS=${2:-1} ROUNDS=${3:-7}
cargo build -q --release -p greenup-mpi
LIB=${CARGO_TARGET_DIR:-$PWD/target}/release/libgreenup_mpi.so
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mpicc -O2 -o "$T/guard" tests/runtime/guard.c
for p in $(seq 0 $(($(nproc --all) - 1))); do
  d=$T/sys/devices/system/cpu/cpufreq/policy$p
  mkdir -p "$d"
  echo "$p" > "$d/affected_cpus"
  echo "3000000 2000000 1000000" > "$d/scaling_available_frequencies"
  echo 1000000 > "$d/scaling_min_freq"
  echo userspace > "$d/scaling_governor"
  echo 2000000 > "$d/scaling_setspeed"
  echo 3000000 > "$d/scaling_max_freq"
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_hwloc_base_binding_policy=core OMPI_MCA_rmaps_base_oversubscribe=1
GUARD='{"max_slowdown":0.1,"baseline_rate":1,"fmax_khz":3000000,"plan_khz":2000000}'
one() { # CONFIG -> rank 0's wall seconds
  rm -rf "$T/ranks"; mkdir -p "$T/ranks" "$T/out"
  local env=(LD_PRELOAD="$LIB" GREENUP_MPI_DIR="$T/ranks" GREENUP_SYSFS_ROOT="$T/sys")
  [ "$1" = guard ] && env+=(GREENUP_GUARD="$GUARD")
  local x=()
  for e in "${env[@]}"; do x+=(-x "${e%%=*}"); done
  env "${env[@]}" mpirun -np 2 "${x[@]}" "$T/guard" loop "$T/out" "$SECS" "$MS" > /dev/null
  if [ "$1" = guard ]; then
    jq -e '.guard.armed and .guard.acted_s == null' "$T/ranks/rank-0.json" > /dev/null \
      || { echo "the guard did not watch, or acted: $(cat "$T/ranks/rank-0.json")" >&2; exit 1; }
  fi
  jq -r '"\(.wall_s) \(.sync_calls)"' "$T/ranks/rank-0.json"
}
for r in $(seq "$ROUNDS"); do
  for c in measure guard; do echo "$r $c $(one $c)"; done
done > "$T/all"
awk '$2 == "measure" {m[$1] = $3} $2 == "guard" {g[$1] = $3; n = $4}
  END {for (r in g) print m[r], g[r], g[r] - m[r], 100 * (g[r] - m[r]) / m[r], n}' "$T/all" \
  | sort -n -k4 > "$T/pairs"
awk '{a[NR] = $0} END {split(a[int((NR + 1) / 2)], x, " ");
  printf "rounds %d, %d synchronising calls per rank\n", NR, x[5]
  printf "median paired difference (guard - measure): %.4f s, %+.3f %%\n", x[3], x[4]}' "$T/pairs"
sort -n -k1 "$T/pairs" | awk '{a[NR] = $1} END {printf "measure median %.4f s\n", a[int((NR + 1) / 2)]}'
sort -n -k2 "$T/pairs" | awk '{a[NR] = $2} END {printf "guard median %.4f s\n", a[int((NR + 1) / 2)]}'
