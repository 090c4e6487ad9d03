#!/bin/bash
# Issue 36's bench check of the in-job guard (docs/runtime.md, "The in-job guard"): does it
# keep a policy's max_slowdown when the profile behind the plan is wrong? Opt-in, as root:
#  1. bsp (apps/bsp.c, equal work per rank, an allreduce per step) runs under monitor
#     naming its profile: a measured baseline, which runs greenup's runtime measuring
#     only (dvfs.measure_baselines), with the MPI's own waits as the edp runs have them
#     (--energy-comm=on would make the baselines' waits greenup's), twice on the fast
#     pair n[1-2] and once on the eco pair n[3-4]; `greenup profile learn --model hetero
#     --nodes 2` learns the profile from those runs;
#  2. the learned profile is made wrong on purpose: each type's compute time becomes 2%
#     clock-bound and 98% memory-bound (t_mem_s), so edp (max_slowdown 10%) expects
#     almost no slowdown from the lowest clock, where on the stand-in (every code
#     compute-bound) bsp runs 3 times slower. It replaces version 1 in the site's
#     profile directory and is pinned, so greenupd's refinements after each run do not
#     correct it before the next pair;
#  3. PAIRS pairs (default 3) of the same edp job on n[1-2]: guarded as the plugin sets
#     it up, and unguarded (GC_GUARD=0: run-app.sh starts the program with the plugin's
#     GREENUP_GUARD removed, the runtime still measuring); the order alternates between
#     pairs so that a drift in the host's load does not fall on one side only;
#  Every run pins its rank to one CPU (GC_PIN=1, apps/pin.sh), as a site's --cpu-bind
#  would: the stand-in then runs each rank at its own CPU's clock, so the CPU the guard
#  raises speeds up the rank that raised it (without it the job's clock is the mean of
#  the four CPUs it holds, and a raised one brings it from 1/3 only to 1/2 of f_max);
#  4. prints a Markdown table: each run's planned clocks, slowdown and saving against
#     the mean of the two fast monitor runs (wall time prolog to epilog, RAPL energy of
#     both nodes), whether the 10% was kept, and greenup report's Guard line.
# Usage: flock -o /tmp/greenup-cluster.lock tests/cluster/guard_pairs.sh [PAIRS]
# Environment: UP=1 (the cluster is up already: neither start nor stop it), BSP_STEPS
# (500) and BSP_WORK (6000000): about 40 s of loop at f_max on the fast pair, pinned
# (one CPU's share of the node), SHARE (0.9: below),
# GC_BIN_DIR (setup.sh). Takes about 3.5 minutes a pair and 3 to learn (with setup: 14 for 3).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
PAIRS=${1:-3}
[ "$(id -u)" = 0 ] || { echo "guard_pairs.sh: run as root (it starts Slurm daemons)" >&2; exit 1; }
case $PAIRS in '' | *[!0-9]* | 0) echo "guard_pairs.sh: PAIRS must be a positive integer, got '$PAIRS'" >&2; exit 2 ;; esac

# Each node's CPU time: 0.9 of a host core (the stand-in's default splits 90 % of the
# host over the four nodes, 0.45 each). Only two nodes run at a time here, one pinned
# rank each, so they do not contend; the larger share keeps a pinned rank's CFS period
# short (13 ms at 1/3 of f_max against 27), and a rank stopped for the rest of a period
# inside an MPI call would count that wait as time in MPI, and no longer lead.
export SHARE=${SHARE:-0.9}
if [ "${UP:-0}" != 1 ]; then
  trap '"$HERE/teardown.sh" >/dev/null 2>&1' EXIT
  "$HERE/teardown.sh" >/dev/null 2>&1
  "$HERE/setup.sh" >/dev/null || { echo "guard_pairs.sh: the cluster did not start" >&2; exit 1; }
fi
. "$HERE/apps/lib.sh"
apps_install >/dev/null || { echo "guard_pairs.sh: cannot install the applications" >&2; exit 1; }
# Steps of about 80 ms at f_max: several synchronising calls in each of the guard's 1 s
# windows even at the lowest clock, and a loop long enough that the 2 s before the guard
# may judge are a small part of it.
export BSP_STEPS=${BSP_STEPS:-500} BSP_WORK=${BSP_WORK:-6000000} GC_PIN=1
# A pinned rank has a quarter of its node's CPU time (0.22 core at f_max, 0.075 at 1/3): waits that wake every 64 us to test (sleepwait's default) would spend all of it,
# and a rank out of quota answers its peer only at its next period. Waking at most every
# millisecond keeps a waiting rank's use to a few percent of its share.
export GC_SLEEPWAIT_MAX_US=${GC_SLEEPWAIT_MAX_US:-1000}
# A profile name of this run's own: the guard's rate is the median over the profile's
# newest baselines, which an earlier run of this script on a cluster left up would join.
PROF=bspguard$(date +%s)
SITE=$GC_ETC/greenup.yaml
FILE=$GC_SHARE/profiles/$PROF.yaml
MAX_SLOWDOWN=0.10   # policies/edp.yaml's
say() { echo "$*" >&2; }
# Whether the stand-in ran JOB's rank pinned on each NODE (it logs each job and CPU it
# pinned): a run it did not pin ran at its job's pooled clock and measures nothing here.
pinned() { # JOB NODE...
  local j=$1 n; shift
  for n; do grep -q "^$j " "$GC_SYSFS/$n/standin-pinned" 2>/dev/null || return 1; done
}

# 1. Baselines with synchronising calls, and the learned profile.
fast=() jobs_learn=()
for w in 'n[1-2]' 'n[3-4]' 'n[1-2]'; do
  r=$(app_run bsp -N2 -w "$w" --energy-policy=monitor --energy-profile="$PROF" 2>/dev/null) ||
    { say "guard_pairs.sh: the monitor run on $w did not run"; exit 1; }
  say "monitor $w: $r"
  case $r in *" ok") ;; *) say "guard_pairs.sh: bsp's answer was wrong in the monitor run: $r"; exit 1 ;; esac
  case $w in 'n[1-2]') nodes=(n1 n2) ;; *) nodes=(n3 n4) ;; esac
  pinned "${r%% *}" "${nodes[@]}" || { say "guard_pairs.sh: the stand-in did not pin the monitor run's ranks on $w"; exit 1; }
  [ "$w" = 'n[1-2]' ] && fast+=("$r")
  jobs_learn+=("${r%% *}")
done
calls=$(app_record "${jobs_learn[0]}" | jq '[.outcomes[].comm.sync_calls // 0] | add')
[ "${calls:-0}" -gt 0 ] || { say "guard_pairs.sh: the monitor runs counted no synchronising calls"; exit 1; }
app_learn_profile "$PROF" "${jobs_learn[@]}" -- --model hetero --nodes 2 >&2 ||
  { say "guard_pairs.sh: greenup profile learn failed"; exit 1; }
read -r BASE_S BASE_J < <(printf '%s\n' "${fast[@]}" | awk '{ s += $2; j += $3 } END { print s / NR, j / NR }')
say "baseline (fast pair at f_max, mean of 2): $BASE_S s, $BASE_J J"

# 2. The wrong profile, from the learned one.
/usr/bin/python3 - "$FILE" <<'EOF' || { say "guard_pairs.sh: cannot write the wrong profile"; exit 1; }
import sys, yaml
path = sys.argv[1]
p = yaml.safe_load(open(path))
h = p["hetero"]
for t in h["node_types"].values():
    total = t["t_cp_s"] + t.get("t_mem_s", 0.0)
    t["t_cp_s"], t["t_mem_s"] = 0.02 * total, 0.98 * total
    t.pop("t_mem_fit", None)
# The step model would predict from the measured windows, which are right; drop it so
# the plan comes from the wrong times alone.
h.pop("steps", None)
p.pop("model_choice", None)
h.pop("model_choice", None)
p["description"] = "bsp, wrong on purpose: 98% memory-bound (tests/cluster/guard_pairs.sh)"
yaml.safe_dump(p, open(path, "w"), sort_keys=False)
EOF
"$APPS_GREENUP" profile check "$FILE" --site "$SITE" >&2 || { say "guard_pairs.sh: the wrong profile does not check"; exit 1; }
"$APPS_GREENUP" profile pin "$PROF" 1 --site "$SITE" >&2 || { say "guard_pairs.sh: cannot pin the wrong profile"; exit 1; }

# 3. The pairs.
rows=()
run() { # PAIR on|off
  local g=1 r j s e ok clocks line slow save kept
  [ "$2" = off ] && g=0
  r=$(GC_GUARD=$g app_run bsp -N2 -w 'n[1-2]' --energy-policy=edp --energy-profile="$PROF" 2>/dev/null) || { say "pair $1 $2: did not run"; return 1; }
  read -r j s e ok <<<"$r"
  say "pair $1 guard $2: $r"
  local rep; rep=$("$APPS_GREENUP" report "$j" --site "$SITE" 2>&1)
  clocks=$(awk '$1 ~ /^n[0-9]+$/ && $3 ~ /^[0-9.]+$/ { printf "%s%s %s", sep, $1, $3; sep = ", " }' <<<"$rep")
  line=$(awk '/^Guard / { sub(/^Guard +/, ""); print; exit }' <<<"$rep")
  slow=$(awk -v s="$s" -v b="$BASE_S" 'BEGIN { printf "%.1f", 100 * (s / b - 1) }')
  save=$(awk -v e="$e" -v b="$BASE_J" 'BEGIN { printf "%.1f", 100 * (1 - e / b) }')
  kept=$(awk -v s="$s" -v b="$BASE_S" -v m="$MAX_SLOWDOWN" 'BEGIN { print (s / b - 1 <= m) ? "yes" : "no" }')
  [ "$ok" = ok ] || kept="$kept (answer $ok)"
  # The stand-in logs each job and CPU it ran a pinned rank on: a run whose ranks it did
  # not pin ran at its job's pooled clock and measures nothing of the guard.
  pinned "$j" n1 n2 || kept="$kept (ranks not pinned)"
  rows+=("| $1 | $2 | $j | $clocks | $(printf '%.1f' "$s") | $slow | $save | $kept | ${line:-(none)} |")
}
for p in $(seq 1 "$PAIRS"); do
  if [ $((p % 2)) = 1 ]; then run "$p" on; run "$p" off; else run "$p" off; run "$p" on; fi
done

# 4. The table.
echo "bsp on n[1-2] under edp (max_slowdown 10%), profile $PROF wrong on purpose; baseline $(printf '%.1f' "$BASE_S") s, $(printf '%.0f' "$BASE_J") J (fast pair under monitor, mean of 2)"
echo
echo "| pair | guard | job | clocks planned (GHz) | wall s | slowdown % | saving % | 10% kept | report's Guard line |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
