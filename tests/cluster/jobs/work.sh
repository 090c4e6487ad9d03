#!/bin/bash
# Test job: a fixed amount of computation ($1 iterations of an awk loop, no I/O, no
# sleeping). Prints "work NODE SECONDS JOULES": the loop's wall time and what the node's
# RAPL counter (under sysfs root $2) counted meanwhile, unwrapped once; then "cpu NODE
# SECONDS": the CPU time the loop got (user and system), which over its wall time is the
# share of a host core the stand-in let it have.
z=$2/$SLURMD_NODENAME/class/powercap/intel-rapl:0
e0=$(cat $z/energy_uj); t0=$(date +%s%N)
TIMEFORMAT='%U %S'
cpu=$( { time awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) s += i; exit (s < 0) }' ; } 2>&1 )
t1=$(date +%s%N); e1=$(cat $z/energy_uj)
[ "$e1" -ge "$e0" ] || e1=$((e1 + $(cat $z/max_energy_range_uj)))
awk -v n="$SLURMD_NODENAME" -v t=$((t1 - t0)) -v e=$((e1 - e0)) 'BEGIN { printf "work %s %.3f %.3f\n", n, t / 1e9, e / 1e6 }'
awk -v n="$SLURMD_NODENAME" -v c="$cpu" 'BEGIN { split(c, a, " "); printf "cpu %s %.3f\n", n, a[1] + a[2] }'
