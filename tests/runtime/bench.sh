#!/usr/bin/env bash
# The cost of libgreenup_mpi for calls it leaves alone (docs/BENCHMARKS.md), in three
# configurations: without the preload, with it measuring only, and with it and
# communication-phase DVFS on (default settings: 16 KiB threshold, 500 µs timeout, block
# waits) against a stand-in cpufreq tree. Four loops (tests/runtime/latency.c): one rank
# calling MPI_Send and MPI_Recv on MPI_PROC_NULL, then MPI_Isend and MPI_Irecv each with
# its MPI_Wait (the interception alone), and OSU-style ping-pongs of BYTES between two
# ranks of a local mpirun, each bound to a core, blocking and then nonblocking, and
# MPI_Win_fence between them (which block mode precedes with a nonblocking barrier).
# Configurations alternate, ROUNDS times each; the median and the minimum are reported.
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
one() { # CONFIG RANKS -> "LOOP µs" lines
  local env=() x=()
  case $1 in
    measure) env=(LD_PRELOAD="$LIB" GREENUP_MPI_DIR="$T/ranks") ;;
    dvfs) env=(LD_PRELOAD="$LIB" GREENUP_MPI_DIR="$T/ranks" GREENUP_COMM_DVFS='{}' GREENUP_SYSFS_ROOT="$T/sys") ;;
  esac
  for e in "${env[@]}"; do x+=(-x "${e%%=*}"); done
  env "${env[@]}" mpirun -np "$2" "${x[@]}" "$T/latency" "$BYTES" "$ITERS"
}
for r in $(seq "$ROUNDS"); do
  for c in bare measure dvfs; do
    one $c 1 | sed "s/^/$c /"
    one $c 2 | sed "s/^/$c /"
  done
done > "$T/all"
stat() { # CONFIG LOOP -> median min
  awk -v c="$1" -v l="$2" '$1 == c && $2 == l {print $3}' "$T/all" | sort -n \
    | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)], a[1]}'
}
printf '%-8s %-10s %12s %12s %14s\n' config loop "median µs" "min µs" "added (median)"
for l in self selfnb "$BYTES" "nb$BYTES" fence; do
  read -r b _ <<< "$(stat bare "$l")"
  for c in bare measure dvfs; do
    read -r m n <<< "$(stat "$c" "$l")"
    awk -v c="$c" -v l="$l" -v m="$m" -v n="$n" -v b="$b" 'BEGIN {
      printf "%-8s %-10s %12.3f %12.3f %8.3f µs %5.1f%%\n", c, (l == "self" ? "PROC_NULL" : l == "selfnb" ? "PROC_NULL nb" : l ~ /^nb/ ? substr(l, 3) " B nb" : l == "fence" ? "Win_fence" : l " B"), m, n, m - b, 100 * (m - b) / b }'
  done
done
