#!/bin/bash
# Paired runs of two builds of the plugin on the running test cluster: the job prolog's and
# epilog's steps per node, as the plugin logs them, for each build. Rounds alternate
# between the builds so that the host's drift falls on both alike. Each prolog and epilog
# is a new process that loads the plugin afresh, so a build is swapped by replacing the
# installed file between jobs; greenupd, slurmd and slurmctld stay as they are.
# PIN=1 runs srun on CPU 0 and every daemon of the cluster on CPU 1, as bench.sh does.
# NODES sets the job's size: with 1, a prolog shares its CPU with no other node's.
# Usage: bench_builds.sh OLD.so NEW.so [ROUNDS] [RUNS]
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
OLD=${1:?usage: bench_builds.sh OLD.so NEW.so [ROUNDS] [RUNS]} NEW=${2:?usage: bench_builds.sh OLD.so NEW.so [ROUNDS] [RUNS]}
ROUNDS=${3:-6} RUNS=${4:-5} PIN=${PIN:-0} NODES=${NODES:-4}
for so in "$OLD" "$NEW"; do [ -f "$so" ] || { echo "bench_builds: $so: no such file" >&2; exit 2; }; done
CLIENT_CPU=
if [ "$PIN" = 1 ]; then
  CLIENT_CPU="taskset -c 0"
  for p in $(pgrep -x 'slurmctld|slurmdbd|slurmd|munged|mariadbd|greenupd') $(pgrep -f powermodel.py); do
    taskset -a -p -c 1 "$p" >/dev/null 2>&1
  done
fi
OUT=$(mktemp -d)
SAVED=$OUT/installed.so
cp "$GC_PLUGIN_SO" "$SAVED"
install_so() { install -m 0755 "$1" "$GC_PLUGIN_SO.new" && mv -f "$GC_PLUGIN_SO.new" "$GC_PLUGIN_SO"; }
log_lines() { for n in $GC_NODES; do wc -l < "$GC_LOG/slurmd-$n.log"; done; }
for r in $(seq 1 "$ROUNDS"); do
  for build in old new; do
    install_so "$([ $build = old ] && echo "$OLD" || echo "$NEW")"
    mapfile -t before < <(log_lines)
    for _ in $(seq 1 "$RUNS"); do
      gc_wait_idle 30; sleep 0.3
      $CLIENT_CPU runuser -u "$GC_USER" -- bash -c "cd $GC_WORK && srun -N$NODES true" 2>/dev/null
    done
    gc_wait_idle 30; sleep 0.5
    i=0
    for n in $GC_NODES; do
      tail -n +$(( before[i] + 1 )) "$GC_LOG/slurmd-$n.log" >> "$OUT/log-$build"
      i=$(( i + 1 ))
    done
  done
done
install_so "$SAVED"
[ "$PIN" = 1 ] && for p in $(pgrep -x 'slurmctld|slurmdbd|slurmd|munged|mariadbd|greenupd') $(pgrep -f powermodel.py); do
  taskset -a -p -c 0-1 "$p" >/dev/null 2>&1
done
/usr/bin/python3 - "$OUT" "$NODES" <<'PY'
import re, statistics, sys
out, nodes = sys.argv[1], sys.argv[2]
def p90(v):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * 0.9 + 0.5) - 1)]
rows = {}
for build in ("old", "new"):
    for line in open(f"{out}/log-{build}"):
        m = re.search(r"\((prolog|epilog) ([0-9.]+) ms\) \(phases ([^)]*)\)", line)
        if not m:
            continue
        rows.setdefault((m.group(1), "total"), {}).setdefault(build, []).append(float(m.group(2)))
        words = m.group(3).split()
        for name, ms in zip(words[0::2], words[1::2]):
            rows.setdefault((m.group(1), name), {}).setdefault(build, []).append(float(ms))
print(f"| `srun -N{nodes} true`, per node | runs (old/new) | old median ms | new median ms | old p90 ms | new p90 ms |")
print("|---|---|---|---|---|---|")
for (hook, name), b in rows.items():
    o, n = b.get("old", [0.0]), b.get("new", [0.0])
    label = f"**job {hook}**" if name == "total" else f"{hook}: {name}"
    print(f"| {label} | {len(o)}/{len(n)} | {statistics.median(o):.2f} | {statistics.median(n):.2f} | {p90(o):.2f} | {p90(n):.2f} |")
PY
rm -rf "$OUT"
