#!/usr/bin/env bash
# LAMMPS's melt example (2 ranks, local mpirun, each rank bound to a core) under the MPI
# runtime's configurations, against a stand-in cpufreq tree that changes no real
# frequency: what the runtime's own work costs a real application, and the MPI time it
# measures. Not an energy measurement (docs/BENCHMARKS.md). Checks each run's answer.
# Usage: lammps-modes.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-2}
cargo build -q --release -p greenup-mpi
LIB=$PWD/target/release/libgreenup_mpi.so
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for p in $(seq 0 $(($(nproc --all) - 1))); do
  d=$T/sys/devices/system/cpu/cpufreq/policy$p
  mkdir -p "$d"
  echo "$p" > "$d/affected_cpus"; echo userspace > "$d/scaling_governor"
  echo "3000000 2000000 1000000" > "$d/scaling_available_frequencies"
  echo 1000000 > "$d/scaling_min_freq"; echo 3000000 > "$d/scaling_setspeed"
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_hwloc_base_binding_policy=core
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
printf '%-9s %8s %8s %8s %12s\n' config "loop s" "MPI s" "low s" transitions
for _ in $(seq "$ROUNDS"); do
  for cfg in bare measure poll block; do
    out=$T/$cfg; rm -rf "$out"; mkdir -p "$out/ranks"
    case $cfg in
      bare) dvfs= ;; measure) dvfs= ;; poll) dvfs='{"wait":"poll"}' ;; block) dvfs='{}' ;;
    esac
    env=(GREENUP_MPI_DIR="$out/ranks" GREENUP_SYSFS_ROOT="$T/sys")
    [ -n "$dvfs" ] && env+=(GREENUP_COMM_DVFS="$dvfs")
    x=(); [ $cfg != bare ] && x=(-x LD_PRELOAD="$LIB" -x GREENUP_MPI_DIR -x GREENUP_SYSFS_ROOT)
    [ -n "$dvfs" ] && x+=(-x GREENUP_COMM_DVFS)
    (cd "$out" && env "${env[@]}" mpirun -np 2 "${x[@]}" lmp -in /usr/share/lammps/examples/melt/in.melt \
      -log log.lammps > lammps.out 2>&1)
    python3 tests/cluster/apps/check.py lammps "$out" > /dev/null
    loop=$(awk '/^Loop time/ {print $4}' "$out/log.lammps")
    stats=$(jq -r '"\(.mpi_s) \(.low_s) \(.transitions)"' "$out/ranks/rank-0.json" 2>/dev/null || echo "- - -")
    read -r mpi low tr <<< "$stats"
    printf '%-9s %8.3f %8s %8s %12s\n' "$cfg" "$loop" "$mpi" "$low" "$tr"
  done
done
