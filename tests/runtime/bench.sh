#!/usr/bin/env bash
# The cost of libgreenup_mpi for calls it leaves alone (docs/BENCHMARKS.md): an OSU-style
# ping-pong of small messages between two ranks of a local mpirun, without the preload,
# with it measuring only, and with it and communication-phase DVFS on (default settings:
# 16 KiB threshold, 500 µs timeout, block waits), against a stand-in cpufreq tree.
# Configurations alternate, ROUNDS times each; the median is reported.
# Usage: bench.sh [BYTES] [ITERATIONS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
BYTES=${1:-8} ITERS=${2:-100000} ROUNDS=${3:-7}
cargo build -q --release -p greenup-mpi
LIB=$PWD/target/release/libgreenup_mpi.so
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mpicc -O2 -o "$T/latency" tests/runtime/latency.c
mkdir -p "$T/sys/devices/system/cpu/cpufreq" "$T/ranks"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_hwloc_base_binding_policy=core OMPI_MCA_rmaps_base_oversubscribe=1
one() { # CONFIG -> one-way µs
  local env=()
  case $1 in
    bare) ;;
    measure) env=(LD_PRELOAD="$LIB" GREENUP_MPI_DIR="$T/ranks") ;;
    dvfs) env=(LD_PRELOAD="$LIB" GREENUP_MPI_DIR="$T/ranks" GREENUP_COMM_DVFS='{}' GREENUP_SYSFS_ROOT="$T/sys") ;;
  esac
  env "${env[@]}" mpirun -np 2 -x LD_PRELOAD -x GREENUP_MPI_DIR -x GREENUP_COMM_DVFS \
    -x GREENUP_SYSFS_ROOT "$T/latency" "$BYTES" "$ITERS" | awk '{print $2}'
}
for r in $(seq "$ROUNDS"); do
  for c in bare measure dvfs; do echo "$c $(one $c)"; done
done > "$T/all"
median() { grep "^$1 " "$T/all" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
b=$(median bare)
printf '%-8s %10s %10s %8s\n' config "one-way µs" "added µs" "added %"
for c in bare measure dvfs; do
  m=$(median $c)
  awk -v c=$c -v m="$m" -v b="$b" 'BEGIN {printf "%-8s %10.3f %10.3f %7.1f%%\n", c, m, m - b, 100 * (m - b) / b}'
done
