#!/bin/bash
# Overhead of greenup per job start on the running test cluster: paired runs of
# `srun -N4 true` and a short 4-node sbatch job in three set-ups, taken in turns:
#   off    no SPANK plugin and no cli_filter: Slurm alone;
#   empty  a SPANK plugin that hooks the same callbacks and a cli_filter script with the
#          same functions, all doing nothing (baseline/: what Slurm itself pays for
#          running any such plugin and script);
#   on     greenup's plugin and its cli_filter.
# slurmd is restarted between set-ups (it reads plugstack.conf when it starts); the
# clients of "off" and "empty" read their own copy of slurm.conf, beside which Slurm
# looks for plugstack.conf and cli_filter.lua.
# Prints medians, the added milliseconds and the ratio as Markdown tables, then where
# the time of `srun -N4 true` goes, from slurmctld's own log, and greenup's time in
# each job prolog and epilog as the plugin logs it, step by step.
# PIN=1 runs the clients (srun, sbatch) on CPU 0 and every daemon of the test cluster on
# CPU 1, as on a real cluster where the client runs on a login node and the prologs and
# epilogs of four nodes do not compete with it for the same two cores.
# Usage: bench.sh [ROUNDS] [RUNS]   (each round runs RUNS jobs of each kind per set-up)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
ROUNDS=${1:-6} RUNS=${2:-5} PIN=${PIN:-0}
CLIENT_CPU= DAEMON_CPU=
if [ "$PIN" = 1 ]; then CLIENT_CPU="taskset -c 0" DAEMON_CPU="taskset -c 1"; fi
# The cluster's long-running daemons, pinned (or unpinned) for the whole run.
pin_daemons() {
  local p
  for p in $(pgrep -x 'slurmctld|slurmdbd|munged|mariadbd|greenupd') $(pgrep -f powermodel.py); do taskset -a -p -c "$1" "$p" >/dev/null 2>&1; done
}
CONF=$GC_ETC/plugstack.conf.d/greenup.conf
LINE=$(cat "$CONF")
OUT=$(mktemp -d)
EMPTY=$GC_RUN/spank_empty.so
# Client configuration directories of the "off" and "empty" set-ups.
OFFDIR=$GC_RUN/bench-off EMPTYDIR=$GC_RUN/bench-empty
gcc -shared -fPIC -Wall -Werror -o "$EMPTY" "$HERE/baseline/spank_empty.c" || { echo "bench: cannot build the empty plugin" >&2; exit 1; }
mkdir -p "$OFFDIR" "$EMPTYDIR"
grep -v '^CliFilterPlugins=' "$GC_ETC/slurm.conf" > "$OFFDIR/slurm.conf"
cp "$GC_ETC/slurm.conf" "$EMPTYDIR/slurm.conf"
cp "$HERE/baseline/cli_filter_empty.lua" "$EMPTYDIR/cli_filter.lua"
echo "optional $EMPTY" > "$EMPTYDIR/plugstack.conf"
chmod -R a+rX "$OFFDIR" "$EMPTYDIR"

restart_slurmd() {
  for n in $GC_NODES; do gc_stop_pidfile "$GC_RUN/slurmd-$n.pid"; done
  for n in $GC_NODES; do $DAEMON_CPU slurmd -N $n; done
  gc_wait_idle 30
}
now() { date +%s.%N; }
# Run a client command as the test user with this set-up's slurm.conf.
as_user() { $CLIENT_CPU runuser -u $GC_USER -- env ${CLIENT_CONF:+SLURM_CONF=$CLIENT_CONF} bash -c "cd $GC_WORK && $1"; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f\n", (b - a) * 1000 }'; }
# One srun; its start and end times go to the set-up's run list for the phase split.
one_srun() {
  local t0 t1; gc_wait_idle 30; sleep 0.3; t0=$(now)
  as_user "srun -N4 true" 2>/dev/null; t1=$(now)
  echo "$t0 $t1" >> "$OUT/times-$mode"; ms "$t0" "$t1"
}
one_sbatch() { # submit to completion, epilogs included
  local t0 j; gc_wait_idle 30; sleep 0.3; t0=$(now)
  j=$(as_user "sbatch --parsable -N4 -o /dev/null --wrap true")
  while gc_queued "$j"; do sleep 0.01; done
  ms "$t0" "$(now)"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

declare -A LOGSTART
for n in $GC_NODES; do LOGSTART[$n]=$(wc -l < "$GC_LOG/slurmd-$n.log"); done
CTLD_START=$(wc -l < "$GC_LOG/slurmctld.log")
# slurmctld's debug level logs when each step is laid out: the end of srun's wait for
# the prologs.
scontrol setdebug debug
[ "$PIN" = 1 ] && pin_daemons 1
for r in $(seq 1 "$ROUNDS"); do
  for mode in off empty on; do
    case $mode in
      on) echo "$LINE" > "$CONF"; CLIENT_CONF= ;;
      empty) echo "optional $EMPTY" > "$CONF"; CLIENT_CONF=$EMPTYDIR/slurm.conf ;;
      off) rm -f "$CONF"; CLIENT_CONF=$OFFDIR/slurm.conf ;;
    esac
    restart_slurmd
    as_user "srun -N4 true" >/dev/null 2>&1   # warm-up
    for _ in $(seq 1 "$RUNS"); do one_srun >> "$OUT/srun-$mode"; done
    for _ in $(seq 1 "$RUNS"); do one_sbatch >> "$OUT/sbatch-$mode"; done
  done
done
scontrol setdebug info
echo "$LINE" > "$CONF"
[ "$PIN" = 1 ] && pin_daemons 0-1
DAEMON_CPU= restart_slurmd

printf '| command | runs | no plugin (median ms) | empty plugin and filter (median ms) | greenup (median ms) | greenup added, ms | of which any plugin and filter, ms | of which greenup'"'"'s own work, ms | ratio |\n|---|---|---|---|---|---|---|---|---|\n'
for k in srun sbatch; do
  off=$(median < "$OUT/$k-off"); empty=$(median < "$OUT/$k-empty"); on=$(median < "$OUT/$k-on")
  label=$([ $k = srun ] && echo '`srun -N4 true`' || echo '`sbatch -N4 --wrap true`, submit to end')
  awk -v l="$label" -v n="$(wc -l < "$OUT/$k-on")" -v a="$off" -v e="$empty" -v b="$on" \
    'BEGIN { printf "| %s | %d+%d+%d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f |\n", l, n, n, n, a, e, b, b - a, e - a, b - e, b / a }'
done
rm -rf "$EMPTY" "$OFFDIR" "$EMPTYDIR"

# Where each srun's time goes, by slurmctld's clock: the client starts and submits,
# waits for its nodes (the prologs run here; srun asks whether they are done at once,
# then again after 100 ms), runs the step, and exits after the job completes.
echo
tail -n +$(( CTLD_START + 1 )) "$GC_LOG/slurmctld.log" > "$OUT/ctld"
/usr/bin/python3 - "$OUT" <<'PY'
import datetime, re, statistics, sys
out = sys.argv[1]
events = []
for line in open(f"{out}/ctld"):
    m = re.match(r"\[(\S+)\] (.*)", line)
    if not m:
        continue
    t = datetime.datetime.fromisoformat(m.group(1)).timestamp()
    text = m.group(2)
    if "_slurm_rpc_allocate_resources" in text:
        events.append((t, "submit"))
        if "NodeList=(null)" not in text:
            events.append((t, "alloc"))
    elif "sched: Allocate JobId" in text:
        events.append((t, "alloc"))
    elif "laying out the" in text:
        events.append((t, "step"))
    elif "_job_complete" in text and text.endswith("done"):
        events.append((t, "done"))
phases = ["start to submit", "submit to allocation", "allocation to step (prologs)",
          "step to job end", "job end to srun exit"]
print("| `srun -N4 true`, median ms | " + " | ".join(phases) + " |")
print("|---|" + "---|" * len(phases))
for mode, name in (("off", "no plugin"), ("empty", "empty plugin and filter"), ("on", "greenup")):
    rows = []
    for line in open(f"{out}/times-{mode}"):
        a, b = map(float, line.split())
        seen = {}
        for t, k in events:
            if a - 0.002 <= t <= b + 0.002:
                seen.setdefault(k, t)
        if len(seen) == 4:
            marks = [a, seen["submit"], seen["alloc"], seen["step"], seen["done"], b]
            rows.append([(y - x) * 1000 for x, y in zip(marks, marks[1:])])
    if rows:
        cols = [statistics.median(c) for c in zip(*rows)]
        print(f"| {name} ({len(rows)} runs) | " + " | ".join(f"{c:.1f}" for c in cols) + " |")
PY

# greenup's own time inside each job prolog and epilog, as the plugin logs it.
echo
for n in $GC_NODES; do tail -n +$(( LOGSTART[$n] + 1 )) "$GC_LOG/slurmd-$n.log"; done > "$OUT/log"
printf '| greenup, per node | runs | median ms | p90 ms |\n|---|---|---|---|\n'
for k in greenupd prolog epilog; do
  sed -n "s/.*greenup: job .*($k \([0-9.]*\) ms).*/\1/p" "$OUT/log" > "$OUT/$k"
  [ -s "$OUT/$k" ] || continue
  awk -v k="$([ $k = greenupd ] && echo 'job_prolog: waiting for greenupd' || echo job_$k)" '{a[NR]=$1} END {n=NR; printf "| %s | %d | %.2f | %.2f |\n", k, n, a[int((n+1)/2)], a[int(n*0.9+0.5)]}' \
    < <(sort -n "$OUT/$k")
done

# Where that time goes: each step the plugin times ("(phases NAME MS ...)"), per node.
echo
/usr/bin/python3 - "$OUT/log" <<'PY'
import re, statistics, sys
steps = {"prolog": {}, "epilog": {}}
for line in open(sys.argv[1]):
    m = re.search(r"\((prolog|epilog) [0-9.]+ ms\) \(phases ([^)]*)\)", line)
    if not m:
        continue
    words = m.group(2).split()
    for name, ms in zip(words[0::2], words[1::2]):
        steps[m.group(1)].setdefault(name, []).append(float(ms))
def p90(v):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * 0.9 + 0.5) - 1)]
print("| step, per node | runs | median ms | p90 ms |")
print("|---|---|---|---|")
for hook, names in steps.items():
    for name, v in names.items():
        print(f"| {hook}: {name} | {len(v)} | {statistics.median(v):.2f} | {p90(v):.2f} |")
PY
rm -rf "$OUT"
