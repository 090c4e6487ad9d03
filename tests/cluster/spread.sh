#!/bin/bash
# The bench's run-to-run spread for every timing a cluster test asserts on
# (tests/cluster/README.md, "Spread"). RUNS times (default 10), as root:
#   t18     e2e test 18's jobs: an awk loop on all four nodes at once, n1 and n3 at f_max,
#           n2 at 1.4 of 3.0 GHz and n4 at 1.2 of 2.4 GHz with that fraction of the work;
#           each slow node's speed over its pair's f_max node's (work over time; closed
#           form 1.4/3.0 = 0.467 and 1.2/2.4 = 0.5), each
#           node's watts (closed form static + dynamic (f/f_max)^3: n1 160, n2 52.2, n3
#           80, n4 27.5) and the share of a host core its loop got
#   lammps  e2e test 23's runs: LAMMPS under monitor on the fast pair n[1-2], the eco pair
#           n[3-4] and all four, recorded under an application name of this run's own,
#           then `greenup profile learn --model hetero --nodes 4` on those three runs
#           alone: the eco pair's time over the fast pair's, and the learned types'
#           t_cp order (eco must be the slower)
#   bsp     the cross-check (apps/bsp.c, equal work per rank, an allreduce every step) on
#           all four nodes at f_max, then with only the fast nodes slowed to 2.4 GHz, where
#           their speed equals the eco nodes' at f_max: the loop's slowdown should be 0;
#           with steps of about 3 ms and of about 33 ms at an eco node's speed. On published
#           physics (GC_PHYSICS=published, WHAT=bsp only) the EPYC nodes n1-n2 are slowed
#           to 1.5 GHz instead, where they still compute twice as fast as the Xeon nodes
#           (0.6 of f_max against 0.3) and only wait less
# Prints one line per run and measurement, then per measurement: runs, mean, standard
# deviation, coefficient of variation, min and max. Every line also goes to
# $OUT/spread.tsv (run, measurement, value).
# Usage: flock -o /tmp/greenup-cluster.lock tests/cluster/spread.sh [RUNS]
# Environment: WHAT ("t18 lammps bsp"), UP=1 (the cluster is up already: neither start
# nor stop it), OUT (default $GC_WORK/spread), GC_SLEEPWAIT and LAMMPS_STEPS (run-app.sh), GC_WORK_ITER
# (t18's loop, as e2e.sh), GC_BIN_DIR (setup.sh). The Slurm 24.11 root runs it as
# tests/slurm24/spread.sh does.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
RUNS=${1:-10}
WHAT=${WHAT:-t18 lammps bsp}
[ "$(id -u)" = 0 ] || { echo "spread.sh: run as root (it starts Slurm daemons)" >&2; exit 1; }
case $RUNS in '' | *[!0-9]*) echo "spread.sh: RUNS must be a positive integer, got '$RUNS'" >&2; exit 2 ;; esac
case "$GC_PHYSICS $WHAT" in
  "published bsp" | law*) ;;
  *) echo "spread.sh: on published physics only WHAT=bsp runs (t18 and lammps check greenup.yaml's law)" >&2; exit 2 ;;
esac

if [ "${UP:-0}" != 1 ]; then
  trap '"$HERE/teardown.sh" >/dev/null 2>&1' EXIT
  "$HERE/teardown.sh" >/dev/null 2>&1
  "$HERE/setup.sh" >/dev/null || { echo "spread.sh: the cluster did not start" >&2; exit 1; }
fi
. "$HERE/apps/lib.sh"
apps_install >/dev/null || { echo "spread.sh: cannot install the applications" >&2; exit 1; }
install -m 0755 "$HERE/jobs/work.sh" "$GC_WORK/work.sh"
OUT=${OUT:-$GC_WORK/spread}
mkdir -p "$OUT"; : > "$OUT/spread.tsv"
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$OUT/spread.tsv"; }
pol() { echo "$GC_SYSFS/$1/devices/system/cpu/cpufreq"; }
# Each node's cpufreq policies as sysfs.sh left them.
BOOT=$(mktemp)
for n in $GC_NODES; do
  for p in $(pol $n)/policy*; do
    echo "$p $(cat $p/scaling_governor) $(cat $p/scaling_min_freq) $(cat $p/scaling_max_freq)"
  done
done > "$BOOT"
boot_freqs() {
  local p g lo hi
  while read -r p g lo hi; do
    echo "$g" > $p/scaling_governor; echo "$lo" > $p/scaling_min_freq
    echo "$hi" > $p/scaling_max_freq; echo '<unsupported>' > $p/scaling_setspeed
  done < "$BOOT"
}
setspeed() { local p; for p in $(pol $1)/policy*; do echo userspace > $p/scaling_governor; echo "$2" > $p/scaling_setspeed; done; }
maxfreq() { local p; for p in $(pol $1)/policy*; do echo "$2" > $p/scaling_max_freq; done; }
submit() { runuser -u "$GC_USER" -- bash -c 'cd "$1" && shift && exec "$@"' as "$GC_WORK" sbatch --parsable "$@"; }
gone() { while gc_queued "$1"; do sleep 0.2; done; }

t18() { # RUN
  local n j c e iter=${GC_WORK_ITER:-60000000}
  local -A jobs secs
  setspeed n2 1400000; maxfreq n4 1200000
  local -A frac=([n1]=1 [n2]=$(awk 'BEGIN { print 1400000 / 3000000 }') [n3]=1 [n4]=0.5)
  for n in $GC_NODES; do
    jobs[$n]=$(submit -w $n --exclusive -t 5 -o "$GC_WORK/spread-t18-%j.out" "$GC_WORK/work.sh" \
      "$(awk -v i="$iter" -v f="${frac[$n]}" 'BEGIN { printf "%d", i * f }')" "$GC_SYSFS")
  done
  for j in "${jobs[@]}"; do gone "$j"; done
  boot_freqs
  for n in $GC_NODES; do
    read -r _ _ secs[$n] e < <(grep "^work $n " "$GC_WORK/spread-t18-${jobs[$n]}.out") || { echo "spread.sh: t18: no result from $n" >&2; return 1; }
    record "$1" "t18 $n s" "${secs[$n]}"
    record "$1" "t18 $n W" "$(awk -v e="$e" -v t="${secs[$n]}" 'BEGIN { printf "%.2f", e / t }')"
    read -r _ _ c < <(grep "^cpu $n " "$GC_WORK/spread-t18-${jobs[$n]}.out") \
      && record "$1" "t18 $n cores (cpu s / wall s)" "$(awk -v c="$c" -v t="${secs[$n]}" 'BEGIN { printf "%.4f", c / t }')"
  done
  local rf re
  rf=$(awk -v a="${secs[n2]}" -v b="${secs[n1]}" -v x="${frac[n2]}" 'BEGIN { printf "%.4f", x * b / a }')
  re=$(awk -v a="${secs[n4]}" -v b="${secs[n3]}" -v x="${frac[n4]}" 'BEGIN { printf "%.4f", x * b / a }')
  record "$1" "t18 n2/n1 speed (closed form 0.4667)" "$rf"; record "$1" "t18 n4/n3 speed (closed form 0.5)" "$re"
  echo "run $1 t18: n1 ${secs[n1]} s, n2 ${secs[n2]} s (speed $rf of n1's), n3 ${secs[n3]} s, n4 ${secs[n4]} s (speed $re of n3's)"
}

lammps() { # RUN
  local app="spread-lammps-$1-$$" f e a j jf je ja learned tf te
  read -r jf f _ _ < <(app_run lammps -N2 -w 'n[1-2]' --energy-policy=monitor --energy-profile="$app")
  read -r je e _ _ < <(app_run lammps -N2 -w 'n[3-4]' --energy-policy=monitor --energy-profile="$app")
  read -r ja a _ _ < <(app_run lammps -N4 -w 'n[1-4]' --energy-policy=monitor --energy-profile="$app")
  record "$1" "lammps fast pair s" "$f"; record "$1" "lammps eco pair s" "$e"; record "$1" "lammps all four s" "$a"
  record "$1" "lammps eco/fast pair" "$(awk -v e="$e" -v f="$f" 'BEGIN { printf "%.4f", e / f }')"
  for j in "$jf" "$je" "$ja"; do app_settled "$j"; done
  learned=$("$APPS_GREENUP" profile learn "$app" --model hetero --nodes 4 --out - --site "$GC_ETC/greenup.yaml" 2>&1)
  tf=$(awk '/^    fast:/ {t=1} t && /t_cp_s:/ {print $2; exit}' <<<"$learned")
  te=$(awk '/^    eco:/ {t=1} t && /t_cp_s:/ {print $2; exit}' <<<"$learned")
  if [ -n "$tf" ] && [ -n "$te" ]; then
    record "$1" "learned eco/fast t_cp" "$(awk -v e="$te" -v f="$tf" 'BEGIN { printf "%.4f", e / f }')"
  else
    echo "spread.sh: run $1: greenup profile learn gave no t_cp: $learned" >&2
  fi
  echo "run $1 lammps: fast pair $f s, eco pair $e s, all four $a s; learned t_cp fast ${tf:-?} s, eco ${te:-?} s"
}

# The loop's own wall time, as bsp printed it for job $1.
bsp_loop() { awk '/^bsp: / { print $(NF - 1) }' "$GC_WORK/bsp-$1/bsp.out" 2>/dev/null; }
# Where bsp slows n1-n2: the clock at which they compute as fast as n3-n4 (law) or still
# faster (published: no EPYC P-state matches the Xeon node's 0.3).
BSP_SLOW_KHZ=2400000
[ "$GC_PHYSICS" = published ] && BSP_SLOW_KHZ=1500000
bsp() { # RUN
  local b s jb js lb ls size steps work
  # Two step lengths: about 3 ms at an eco node's speed (shorter than the stand-in's 10 ms
  # period) and about 33 ms (longer).
  for size in "fine 2000 600000" "coarse 200 6000000"; do
    read -r size steps work <<<"$size"
    read -r jb b _ ok < <(BSP_STEPS=$steps BSP_WORK=$work app_run bsp -N4 -w 'n[1-4]' --energy-policy=monitor)
    setspeed n1 "$BSP_SLOW_KHZ"; setspeed n2 "$BSP_SLOW_KHZ"
    read -r js s _ ok2 < <(BSP_STEPS=$steps BSP_WORK=$work app_run bsp -N4 -w 'n[1-4]' --energy-policy=monitor)
    boot_freqs
    [ "$ok $ok2" = "ok ok" ] || echo "spread.sh: run $1: bsp's answer: $ok $ok2" >&2
    lb=$(bsp_loop "$jb"); ls=$(bsp_loop "$js")
    record "$1" "bsp $size f_max loop s" "$lb"; record "$1" "bsp $size n1-n2 slowed loop s" "$ls"
    record "$1" "bsp $size loop slowdown %" "$(awk -v s="$ls" -v b="$lb" 'BEGIN { printf "%.2f", 100 * (s - b) / b }')"
    echo "run $1 bsp $size ($steps steps of $work): f_max $b s (loop $lb s), n1-n2 at $BSP_SLOW_KHZ kHz $s s (loop $ls s)"
  done
}

echo "spread: $RUNS runs of: $WHAT (GC_SLEEPWAIT=${GC_SLEEPWAIT:-1}, $GC_PHYSICS physics); host $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$RUNS"); do
  for w in $WHAT; do "$w" "$r"; done
done
echo "spread: load $(cut -d' ' -f1-3 /proc/loadavg) at the end"
printf '%-40s %4s %9s %8s %7s %9s %9s\n' measurement runs mean sd "cv %" min max
awk -F'\t' '{ n[$2]++; s[$2] += $3; q[$2] += $3 * $3
              if (!($2 in lo) || $3 < lo[$2]) lo[$2] = $3; if (!($2 in hi) || $3 > hi[$2]) hi[$2] = $3 }
  END { for (k in n) { m = s[k] / n[k]; v = n[k] > 1 ? (q[k] - n[k] * m * m) / (n[k] - 1) : 0; if (v < 0) v = 0
          printf "%-40s %4d %9.4f %8.4f %7.2f %9.4f %9.4f\n", k, n[k], m, sqrt(v), m ? 100 * sqrt(v) / m : 0, lo[k], hi[k] } }' \
  "$OUT/spread.tsv" | sort
rm -f "$BOOT"
