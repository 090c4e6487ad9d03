#!/bin/bash
# TEST-ONLY stand-in for the hardware: it is not one of greenup's models and ships
# nowhere. Every tick it plays the kernel's part for each node's sysfs tree: it sets
# scaling_cur_freq from the governor (userspace -> scaling_setspeed, otherwise
# scaling_max_freq), then advances the RAPL counter by
#   P = static_w + dynamic_w * (f / f_max)^3 * load
# where load is 1 while any job step runs on the node (a step socket exists in the
# node's slurmd spool), else 0. The counter wraps at max_energy_range_uj, like RAPL.
# awk prints the counter with %.0f because mawk's %d stops at 2^31.
set -u
. "$(dirname "$0")/lib.sh"
TICK=${TICK:-0.2}
declare -A STATIC=([n1]=40 [n2]=40 [n3]=20 [n4]=20)
declare -A DYNAMIC=([n1]=120 [n2]=120 [n3]=60 [n4]=60)

rd() { local v; read -r v < "$1" 2>/dev/null; printf '%s' "${v:-0}"; }

last=$(date +%s%N)
while :; do
  sleep "$TICK"
  now=$(date +%s%N); dt_ns=$((now - last)); last=$now
  for n in $GC_NODES; do
    t=$GC_SYSFS/$n
    [ -d "$t" ] || continue
    load=0
    compgen -G "$GC_STATE/d-$n/${n}_*.[0-9]*" >/dev/null && load=1
    compgen -G "$GC_STATE/d-$n/${n}_*.4294967291" >/dev/null && load=1
    sum=0; count=0; fmax=1
    for p in "$t"/devices/system/cpu/cpufreq/policy*; do
      gov=$(rd $p/scaling_governor); hi=$(rd $p/cpuinfo_max_freq); lo=$(rd $p/cpuinfo_min_freq)
      if [ "$gov" = userspace ]; then f=$(rd $p/scaling_setspeed); else f=$(rd $p/scaling_max_freq); fi
      [[ $f =~ ^[0-9]+$ ]] || f=$hi
      ((f > hi)) && f=$hi; ((f < lo)) && f=$lo
      [ "$(rd $p/scaling_cur_freq)" = "$f" ] || echo "$f" > $p/scaling_cur_freq
      sum=$((sum + f)); count=$((count + 1)); fmax=$hi
    done
    ((count > 0)) || continue
    z=$t/class/powercap/intel-rapl:0
    e=$(rd $z/energy_uj); range=$(rd $z/max_energy_range_uj)
    e=$(awk -v e="$e" -v r="$range" -v s="${STATIC[$n]}" -v d="${DYNAMIC[$n]}" \
          -v f="$sum" -v c="$count" -v fm="$fmax" -v l="$load" -v dt="$dt_ns" \
          'BEGIN { x = f / c / fm; p = s + d * x * x * x * l; e = e + p * dt / 1000; while (e >= r) e -= r; printf "%.0f", e }')
    echo "$e" > $z/energy_uj.tmp && mv -f $z/energy_uj.tmp $z/energy_uj
  done
done
