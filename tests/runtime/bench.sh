#!/usr/bin/env bash
# The cost of libgreenup_mpi for calls it leaves alone (docs/BENCHMARKS.md), in four
# configurations: without the preload, with it measuring only, with it and
# communication-phase DVFS on (default settings: 16 KiB threshold, 500 µs timeout, block
# waits) against a stand-in cpufreq tree, and with it measuring and the in-job guard
# armed but never acting (a baseline rate every loop beats, against a stand-in tree with
# a control for every CPU, so that the guard watches). Four loops
# (tests/runtime/latency.c): one rank calling MPI_Send and MPI_Recv on MPI_PROC_NULL, then MPI_Isend and MPI_Irecv each with
# its MPI_Wait (the interception alone), and OSU-style ping-pongs of BYTES between two
# ranks of a local mpirun, each bound to a core, blocking and then nonblocking, and
# MPI_Win_fence between them (which block mode precedes with a nonblocking barrier), and
# MPI_Allreduce of BYTES between them (a collective's wrapper).
# Configurations alternate, ROUNDS times each; the median and the minimum are reported,
# and the median of the paired (same round) differences from bare.
# Usage: bench.sh [BYTES] [ITERATIONS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
BYTES=${1:-8} ITERS=${2:-100000} ROUNDS=${3:-7}
cargo build -q --release -p greenup-mpi
LIB=${CARGO_TARGET_DIR:-$PWD/target}/release/libgreenup_mpi.so
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mpicc -O2 -o "$T/latency" tests/runtime/latency.c
mkdir -p "$T/sys/devices/system/cpu/cpufreq" "$T/ranks"
for p in $(seq 0 $(($(nproc --all) - 1))); do
  d=$T/gsys/devices/system/cpu/cpufreq/policy$p
  mkdir -p "$d"
  echo "$p" > "$d/affected_cpus"
  echo "3000000 2000000 1000000" > "$d/scaling_available_frequencies"
  echo 1000000 > "$d/scaling_min_freq"
  echo userspace > "$d/scaling_governor"
  echo 2000000 > "$d/scaling_setspeed"
  echo 3000000 > "$d/scaling_max_freq"
done
GUARD='{"max_slowdown":0.1,"baseline_rate":0.001,"fmax_khz":3000000,"plan_khz":2000000}'
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_hwloc_base_binding_policy=core OMPI_MCA_rmaps_base_oversubscribe=1
one() { # CONFIG RANKS -> "LOOP µs" lines
  local env=() x=()
  case $1 in
    measure) env=(LD_PRELOAD="$LIB" GREENUP_MPI_DIR="$T/ranks") ;;
    dvfs) env=(LD_PRELOAD="$LIB" GREENUP_MPI_DIR="$T/ranks" GREENUP_COMM_DVFS='{}' GREENUP_SYSFS_ROOT="$T/sys") ;;
    guard) env=(LD_PRELOAD="$LIB" GREENUP_MPI_DIR="$T/ranks" GREENUP_GUARD="$GUARD" GREENUP_SYSFS_ROOT="$T/gsys") ;;
  esac
  for e in "${env[@]}"; do x+=(-x "${e%%=*}"); done
  env "${env[@]}" mpirun -np "$2" "${x[@]}" "$T/latency" "$BYTES" "$ITERS"
}
for r in $(seq "$ROUNDS"); do
  for c in bare measure dvfs guard; do
    one $c 1 | sed "s/^/$r $c /"
    one $c 2 | sed "s/^/$r $c /"
  done
done > "$T/all"
# CONFIG LOOP -> median, minimum, and the median of the round-by-round differences from
# bare (each round runs the four configurations back to back, so a difference within a
# round is less exposed to the host's load than a difference of medians).
stat() {
  awk -v c="$1" -v l="$2" '$3 == l && $2 == "bare" {b[$1] = $4} $3 == l && $2 == c {v[$1] = $4}
    END {for (r in v) print v[r], v[r] - b[r]}' "$T/all" > "$T/pairs"
  m=$(sort -n "$T/pairs" | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)], a[1]}')
  d=$(sort -n -k2 "$T/pairs" | awk '{a[NR] = $2} END {print a[int((NR + 1) / 2)]}')
  echo "$m $d"
}
name() { case $1 in self) echo PROC_NULL ;; selfnb) echo "PROC_NULL nb" ;; fence) echo Win_fence ;;
  allreduce) echo "$BYTES B Allreduce" ;;
  nb*) echo "${1#nb} B nb" ;; *) echo "$1 B" ;; esac; }
printf '%-8s %-13s %10s %9s %22s\n' config loop "median µs" "min µs" "paired added, median"
for l in self selfnb "$BYTES" "nb$BYTES" fence allreduce; do
  read -r b _ _ <<< "$(stat bare "$l")"
  for c in bare measure dvfs guard; do
    read -r m n d <<< "$(stat "$c" "$l")"
    awk -v c="$c" -v l="$(name "$l")" -v m="$m" -v n="$n" -v d="$d" -v b="$b" 'BEGIN {
      printf "%-8s %-13s %10.3f %9.3f %13.3f µs %5.1f%%\n", c, l, m, n, d, 100 * d / b }'
  done
done
