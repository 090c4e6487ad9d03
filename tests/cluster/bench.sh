#!/bin/bash
# Overhead of greenup per job start on the running test cluster: paired rounds of
# `srun -N4 true` and a short 4-node sbatch job with no SPANK plugin, with an empty one
# that hooks the same callbacks (baseline/spank_empty.c: what Slurm itself pays for
# any such plugin) and with greenup's (slurmd restarted between rounds so that prolog
# and epilog follow). Prints medians, the added milliseconds and the ratio, as a
# Markdown table. Usage: bench.sh [ROUNDS] [RUNS]
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
ROUNDS=${1:-3} RUNS=${2:-10}
CONF=$GC_ETC/plugstack.conf.d/greenup.conf
LINE=$(cat "$CONF")
OUT=$(mktemp -d)
EMPTY=$GC_RUN/spank_empty.so
gcc -shared -fPIC -Wall -Werror -o "$EMPTY" "$HERE/baseline/spank_empty.c" || { echo "bench: cannot build the empty plugin" >&2; exit 1; }

restart_slurmd() {
  for n in $GC_NODES; do gc_stop_pidfile "$GC_RUN/slurmd-$n.pid"; done
  for n in $GC_NODES; do slurmd -N $n; done
  gc_wait_idle 30
}
now_ms() { date +%s%3N; }
one_srun() { local t0; gc_wait_idle 30; t0=$(now_ms); runuser -u $GC_USER -- bash -c "cd $GC_WORK && srun -N4 true" 2>/dev/null; echo $(( $(now_ms) - t0 )); }
one_sbatch() { # submit to completion, epilogs included
  local t0 j; gc_wait_idle 30; t0=$(now_ms)
  j=$(runuser -u $GC_USER -- bash -c "cd $GC_WORK && sbatch --parsable -N4 -o /dev/null --wrap true")
  while [ -n "$(squeue -h -j "$j" 2>/dev/null)" ]; do sleep 0.01; done
  echo $(( $(now_ms) - t0 ))
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

declare -A LOGSTART
for n in $GC_NODES; do LOGSTART[$n]=$(wc -l < "$GC_LOG/slurmd-$n.log"); done
for r in $(seq 1 "$ROUNDS"); do
  for mode in off empty on; do
    case $mode in
      on) echo "$LINE" > "$CONF" ;;
      empty) echo "optional $EMPTY" > "$CONF" ;;
      off) rm -f "$CONF" ;;
    esac
    restart_slurmd
    one_srun >/dev/null   # warm-up
    for _ in $(seq 1 "$RUNS"); do one_srun >> "$OUT/srun-$mode"; done
    for _ in $(seq 1 "$RUNS"); do one_sbatch >> "$OUT/sbatch-$mode"; done
  done
done
echo "$LINE" > "$CONF"; restart_slurmd

printf '| command | runs | no plugin (median ms) | empty plugin (median ms) | greenup (median ms) | greenup added, ms | of which any plugin, ms | of which greenup'"'"'s own work, ms | ratio |\n|---|---|---|---|---|---|---|---|---|\n'
for k in srun sbatch; do
  off=$(median < "$OUT/$k-off"); empty=$(median < "$OUT/$k-empty"); on=$(median < "$OUT/$k-on")
  label=$([ $k = srun ] && echo '`srun -N4 true`' || echo '`sbatch -N4 --wrap true`, submit to end')
  awk -v l="$label" -v n="$(wc -l < "$OUT/$k-on")" -v a="$off" -v e="$empty" -v b="$on" \
    'BEGIN { printf "| %s | %d+%d+%d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f |\n", l, n, n, n, a, e, b, b - a, e - a, b - e, b / a }'
done
rm -f "$EMPTY"
# greenup's own time inside each job prolog and epilog, as the plugin logs it.
for n in $GC_NODES; do tail -n +$(( LOGSTART[$n] + 1 )) "$GC_LOG/slurmd-$n.log"; done > "$OUT/log"
for k in greenupd prolog epilog; do
  sed -n "s/.*greenup: job .*($k \([0-9.]*\) ms).*/\1/p" "$OUT/log" > "$OUT/$k"
  [ -s "$OUT/$k" ] || continue
  awk -v k="$([ $k = greenupd ] && echo 'job_prolog: waiting for greenupd' || echo job_$k)" '{a[NR]=$1} END {n=NR; printf "| greenup in %s, per node | %d | | %.2f (median) / %.2f (p90) | | |\n", k, n, a[int((n+1)/2)], a[int(n*0.9+0.5)]}' \
    < <(sort -n "$OUT/$k")
done
rm -rf "$OUT"
