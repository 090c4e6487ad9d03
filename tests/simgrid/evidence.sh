#!/usr/bin/env bash
# The SimGrid evidence of docs/evaluation.md (not part of the test command): paper 004's
# tables where the programs exist, Algorithm 1 against the exact sweep on simulated
# energy, and every shipped policy on every program with its prediction error after 1
# and 5 runs. Needs root. Writes $OUT/results.jsonl and prints the tables.
#   BIN_DIR=target/debug   use a debug build      OUT=DIR   where results go (sim-evidence)
#   PARTS="scale scenarios policies iso dt hpl"   which tables on greenup's own law
#   PARTS="phys-scale phys-policies phys-dt phys-hpl phys-iso phys-count"   the same on published
#     physics (sites epyc and real, tests/physics/), each program at both ends of its beta
#   PARTS=phys-sample   phys-policies' EP and IS on site epyc again, with clock samples
#     (SAMPLE_SLOWDOWN=X: their power.sample_clocks.max_slowdown, 0.15 unless given)
#   PARTS=phys-spread   EP in two-node jobs on EPYC nodes whose chips differ, three
#     placements in turn (SPREAD_ROUNDS=N rounds of them, 4 unless given; NODE_SPREAD=
#     set and empty: identical chips, the control)
#   PHYS_SITES="epyc real"   the sites phys-policies runs on
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$ROOT/scripts/lib.sh"
need_debs libsimgrid-dev dpkg-dev python3 >/dev/null
bash "$ROOT/tests/munge/start.sh" >/dev/null
NAS=$(bash "$HERE/build.sh" | tail -1)
build_bins
OUT=${OUT:-$ROOT/sim-evidence}
PARTS=${PARTS:-phys-scale phys-policies phys-sample phys-dt phys-hpl phys-iso phys-count scale scenarios policies iso dt hpl}
PHYS_SITES=${PHYS_SITES:-epyc real}
case " $PARTS " in *" hpl "* | *" phys-hpl "*) HPL=$(bash "$HERE/build.sh" hpl | tail -1) ;; esac
mkdir -p "$OUT"
RESULTS=$OUT/results.jsonl
: > "$RESULTS"
trap 'site_stop' EXIT

# record TAG=VALUE...: append greenup-sim's JSON line (stdin) to the results with the
# tags, and on published physics the program's $BETA.
record() {
  python3 -c '
import json, sys
tags = dict(a.split("=", 1) for a in sys.argv[1:])
if not tags.get("beta"):
    tags.pop("beta", None)
for line in sys.stdin:
    if line.startswith("{"):
        d = json.loads(line); d.update(tags); print(json.dumps(d))
' "$@" beta="${BETA:-}" >> "$RESULTS"
}

prog_of() {
  case $1 in
    ep) echo "$NAS/ep $2 C" ;;
    is) echo "$NAS/is $2 W" ;;
    # The black-hole graph of class W has 11 nodes, one rank each; ranks past them idle.
    dt) echo "$NAS/dt $2 W BH" ;;
    hpl) echo "$HPL $(hpl_input "$2")" ;;
  esac
}

# hpl_input P: HPL's input for P ranks (a square grid, 4 x 4 for 16), written under $OUT;
# prints its path. N = 3000 is about 17 s of this machine's time per live run, which
# paper 004's site counts as t1 computing at f_max. Rows are swapped by binary exchange
# (SWAP 0): the long and mixed swaps send MPI derived datatypes whatever HPL was built
# with (build.sh says why SMPI's replay cannot). Every other value is hpcc's default.
hpl_input() {
  local p=$1 q f
  q=$(python3 -c "import math; print(math.isqrt($p))")
  [ $((q * q)) = "$p" ] || { echo "hpl_input: $p ranks make no square grid" >&2; return 1; }
  f=$OUT/w/hpl-$p.dat
  mkdir -p "$OUT/w"
  cat > "$f" <<DAT
HPLinpack benchmark input file
greenup's SimGrid evidence (tests/simgrid/evidence.sh)
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
${HPL_N:-3000}         Ns
1            # of NBs
80           NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
$q            Ps
$q            Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
0            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
DAT
  echo "$f"
}

# baseline SITE APP N PROFILE: two live runs at f_max on n[1-N] (the first records the
# trace every later job replays; the pair is this machine's noise; with KEEP_TRACE set, a
# trace an earlier part recorded is replayed instead), two monitor jobs replaying it, and
# the learned profile.
baseline() {
  local site=$1 app=$2 n=$3 prof=$4 i
  TRACE=$OUT/w/$site-$prof.trace
  mkdir -p "$OUT/w"
  if [ -z "${KEEP_TRACE:-}" ] || [ ! -s "$TRACE" ]; then
    # shellcheck disable=SC2046
    fixed "$site" "n[1-$n]" "$OUT/w/$site-$prof-live" - --record-trace "$TRACE" -- $(prog_of "$app" "$n") |
      record part="$PART" site="$site" app="$app" nodes="$n" kind=live
    # shellcheck disable=SC2046
    fixed "$site" "n[1-$n]" "$OUT/w/$site-$prof-live" - -- $(prog_of "$app" "$n") |
      record part="$PART" site="$site" app="$app" nodes="$n" kind=live
  fi
  for i in 1 2; do
    JOB=$((JOB + 1))
    job "$site" "n[1-$n]" "$OUT/w/$site-$prof" monitor "$prof" --replay "$TRACE" |
      record part="$PART" site="$site" app="$app" nodes="$n" kind=monitor
  done
  learn "$prof" "$n" > "$OUT/learn-$site-$prof.txt" 2>&1
}

# t1_nodes P: the first P nodes of paper 004's type t1 (n1, n5, n9, ...), a hostlist.
t1_nodes() { echo "n[$(seq -s, 1 4 $((4 * $1 - 3)))]"; }
T1_GEARS="1.2 1.3 1.4 1.5 1.6 1.7 1.8 1.9 2.0 2.1 2.2 2.3 2.4 2.5"

# iso APP "COUNTS" [SITE]: paper 000 on a learned profile. On one node type (paper 004's
# t1 nodes, or the EPYC 7502 nodes of site epyc at the program's $BETA): a trace and a
# monitor job at each count, the iso_energy profile learned from them, the EE curve the
# simulator measures (every gear at every count), greenup's predicted curve, and
# iso-ee's choice at each count. Counts divide the work evenly: SMPI's sampling of EP
# stops a run whose ranks sample one block with different iteration counts.
iso() {
  local app=$1 counts=$2 site=${3:-paper004} p f prog gears ty nodes_of prof part=iso
  if [ "$site" = paper004 ]; then
    gears=$T1_GEARS ty=t1 nodes_of=t1_nodes prof=iso-$app
  else
    gears="1.5 2.2 2.5" ty=rome nodes_of=first_nodes prof=iso-$app-$BETA part=phys-iso
  fi
  site_start "$site" "$OUT/$prof"
  for p in $counts; do
    case $app in ep) prog="$NAS/ep $p A" ;; is) prog="$NAS/is $p W" ;; esac
    # shellcheck disable=SC2086
    fixed "$site" "$($nodes_of "$p")" "$OUT/w/$prof-$p-live" - --record-trace "$OUT/w/$prof-$p.trace" -- $prog |
      record part=$part site="$site" app="$app" nodes="$p" kind=live
    JOB=$((JOB + 1))
    job "$site" "$($nodes_of "$p")" "$OUT/w/$prof-$p" monitor "$prof" --replay "$OUT/w/$prof-$p.trace" |
      record part=$part site="$site" app="$app" nodes="$p" kind=monitor
  done
  "$GREENUP" profile learn "$prof" --model iso_energy --site "$CONF" --force > "$OUT/learn-$prof.txt" 2>&1
  for p in $counts; do
    for f in $gears; do
      fixed "$site" "$($nodes_of "$p")" "$OUT/w/$prof-$p" "$ty=$f" --replay "$OUT/w/$prof-$p.trace" |
        record part=$part site="$site" app="$app" nodes="$p" kind=grid freq="$f"
    done
  done
  "$GREENUP" model ee --profile "$OUT/$prof/profiles/$prof.yaml" --site "$CONF" --n 1 --p "${counts// /,}" \
    --f "${gears// /,}" --json | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    r.update(part=sys.argv[2], site=sys.argv[3], app=sys.argv[1], kind="predicted")
    if sys.argv[4]:
        r.update(beta=float(sys.argv[4]))
    print(json.dumps(r))
' "$app" "$part" "$site" "${BETA:-}" >> "$RESULTS"
  for p in $counts; do
    JOB=$((JOB + 1))
    job "$site" "$($nodes_of "$p")" "$OUT/w/$prof-$p" iso-ee "$prof" --replay "$OUT/w/$prof-$p.trace" |
      record part=$part site="$site" app="$app" nodes="$p" kind=iso-ee
  done
  site_stop
}

# count APP: paper 003's question on published physics (EPYC 7502 nodes, the program's
# $BETA): which node count and clocks, under an energy cap and under a power cap. A
# trace and a monitor job at each of COUNTS, an iso_energy profile learned from them,
# every count at every gear replayed (the oracle), each cap halfway between the least
# and the most the oracle measured, and a min-time job on n[1-MAX] that may shrink to
# MIN under each cap; a count greenupd picks that has no trace yet is recorded first.
count() {
  local app=$1 prof=count-$1-$BETA counts=${COUNTS:-8 16 32 64} p f dir caps ecap pcap
  local min=${counts%% *} max=${counts##* }
  dir=$OUT/w/$prof
  mkdir -p "$dir"
  site_start epyc "$OUT/$prof"
  for p in $counts; do
    # shellcheck disable=SC2046
    fixed epyc "n[1-$p]" "$dir/live-$p" - --record-trace "$dir/$p.trace" -- $(prog_of "$app" "$p") |
      record part=phys-count site=epyc app="$app" nodes="$p" kind=live
    JOB=$((JOB + 1))
    job epyc "n[1-$p]" "$dir/mon-$p" monitor "$prof" --replay "$dir/$p.trace" |
      record part=phys-count site=epyc app="$app" nodes="$p" kind=monitor
  done
  "$GREENUP" profile learn "$prof" --model iso_energy --site "$CONF" --force > "$OUT/learn-$prof.txt" 2>&1
  # The counts the programs start on, as an admin says in the profile: NAS IS needs a
  # power of two ranks, and EP's blocks, which SMPI samples once for all ranks, must
  # divide evenly (a 34-rank run stops in SMPI's sampling).
  echo "node_counts: powers_of_two" >> "$OUT/$prof/profiles/$prof.yaml"
  for p in $counts; do
    for f in 1.5 2.2 2.5; do
      fixed epyc "n[1-$p]" "$dir/grid" "rome=$f" --replay "$dir/$p.trace" |
        record part=phys-count site=epyc app="$app" nodes="$p" kind=grid freq="$f"
    done
  done
  caps=$(python3 - "$RESULTS" "$app" "$BETA" <<'PY'
import json, sys
path, app, beta = sys.argv[1], sys.argv[2], float(sys.argv[3])
grid = [r["measured"] for r in map(json.loads, open(path))
        if r["part"] == "phys-count" and r["app"] == app and float(r.get("beta", "nan")) == beta
        and r["kind"] == "grid"]
e = [m["energy_j"] for m in grid]
w = [m["energy_j"] / m["time_s"] for m in grid]
print(f"{(min(e) + max(e)) / 2:.1f} {(min(w) + max(w)) / 2:.1f}")
PY
)
  read -r ecap pcap <<<"$caps"
  JOB=$((JOB + 1))
  # shellcheck disable=SC2046
  job epyc "n[1-$max]" "$dir/ecap" min-time "$prof" --replay-dir "$dir" --min-nodes "$min" --energy-cap-j "$ecap" \
    -- $(prog_of "$app" "{nodes}") | record part=phys-count site=epyc app="$app" nodes="$max" kind=energy-cap cap="$ecap" ||
    echo "$prof: the job under the energy cap failed (its count's program may not run: $dir/ecap)"
  JOB=$((JOB + 1))
  # shellcheck disable=SC2046
  job epyc "n[1-$max]" "$dir/pcap" min-time "$prof" --replay-dir "$dir" --min-nodes "$min" --power-cap-w "$pcap" \
    -- $(prog_of "$app" "{nodes}") | record part=phys-count site=epyc app="$app" nodes="$max" kind=power-cap cap="$pcap" ||
    echo "$prof: the job under the power cap failed (its count's program may not run: $dir/pcap)"
  site_stop
}

# first_nodes P: n[1-P], a hostlist.
first_nodes() { echo "n[1-$1]"; }

# policy_run SITE APP N PROFILE POLICY [ALGORITHM] [ROUND]
policy_run() {
  local site=$1 app=$2 n=$3 prof=$4 policy=$5 alg=${6:-exact} round=${7:-1}
  JOB=$((JOB + 1))
  ALGORITHM=$alg job "$site" "n[1-$n]" "$OUT/w/$site-$prof" "$policy" "$prof" --replay "$TRACE" |
    record part="$PART" site="$site" app="$app" nodes="$n" kind="$policy" algorithm="$alg" round="$round"
}

# five_rounds SITE APP N [PROFILE]: five rounds of one job under each shipped policy on
# n[1-N], each refining the profile (APP's name unless given; the baseline first).
five_rounds() {
  local round policy
  for round in 1 2 3 4 5; do
    for policy in min-energy max-dist max-dist-comm edp min-time iso-ee; do
      policy_run "$1" "$2" "$3" "${4:-$2}" "$policy" exact "$round"
    done
  done
}

# every_policy SITE APP N [PROFILE]: on a greenupd of its own, the baseline on n[1-N]
# and five rounds of every shipped policy; then greenup's own verdict on each policy
# against the measured baselines (`greenup app`, which says MISSED for a policy over its
# max_slowdown), in $OUT/app-SITE-PROFILE.txt.
every_policy() {
  local prof=${4:-$2}
  site_start "$1" "$OUT/$1-$prof"
  baseline "$1" "$2" "$3" "$prof"
  five_rounds "$1" "$2" "$3" "$prof"
  "$GREENUP" app "$prof" --site "$CONF" > "$OUT/app-$1-$prof.txt"
  site_stop
  sed -n '/Against measured baselines/,/^$/p' "$OUT/app-$1-$prof.txt"
}

# each_beta CMD SITE APP N: CMD SITE APP N PROFILE at both ends of APP's beta
# (tests/physics/programs.yaml), one profile for each.
each_beta() {
  local cmd=$1 site=$2 app=$3 n=$4 end
  for end in low high; do
    BETA=$(beta_of "$app" "$end")
    "$cmd" "$site" "$app" "$n" "$app-$end"
  done
  BETA=
}

# hold SITE APP N [PROFILE]: after every_policy, greenupd again on APP's store, now with
# `baseline.on_miss: monitor` (fraction 0: the monitor jobs already count as measured
# baselines, so no job is sampled), and two more edp jobs. The first is planned; when it
# closes greenupd judges edp against the measured baselines, and a miss holds it, so the
# second runs as under monitor with the hold's reason in its decision.
hold() {
  local prof=${4:-$2} round
  SITE_EXTRA=$'baseline:\n  fraction: 0\n  min_runs: 2\n  on_miss: monitor' site_start "$1" "$OUT/$1-$prof"
  TRACE=$OUT/w/$1-$prof.trace
  for round in 6 7; do
    JOB=$((JOB + 1))
    job "$1" "n[1-$3]" "$OUT/w/$1-$prof" edp "$prof" --replay "$TRACE" |
      record part="$PART" site="$1" app="$2" nodes="$3" kind=hold asked=edp round="$round"
  done
  site_stop
}

# sampled SITE APP N PROFILE: phys-policies' group again on a greenupd whose site samples
# clocks (`power.sample_clocks`): the baseline, then monitor jobs until three of them ran
# as clock samples (three runs make a clock's watts measured, profile::node_power's
# MIN_RUNS) or six ran, then five rounds of every policy. Every monitor job the baseline
# share leaves is picked (fraction 0.95 above `baseline.fraction`'s default 0.05, so the
# policy rounds sample baselines as phys-policies' do). max_slowdown is 0.15, not the
# default 0.1: before any run at a second clock greenup takes a program for compute-bound
# (model::hetero), so the EPYC's 2.2 GHz is predicted 13.6 % longer than 2.5 GHz, and a
# site that wants it measured allows that much (SAMPLE_SLOWDOWN=0.1 runs the default's).
# phys-policies' trace, where it ran first, is replayed, so the two groups differ by the
# samples alone.
sampled() {
  local site=$1 app=$2 n=$3 prof=$4 i
  SITE_EXTRA=$'power:\n  sample_clocks: {fraction: 0.95, max_slowdown: '"${SAMPLE_SLOWDOWN:-0.15}"'}' site_start "$site" "$OUT/$site-$prof-sample"
  KEEP_TRACE=1 baseline "$site" "$app" "$n" "$prof"
  for i in 1 2 3 4 5 6; do
    [ "$(samples_run "$site" "$app" "$prof")" -lt 3 ] || break
    JOB=$((JOB + 1))
    job "$site" "n[1-$n]" "$OUT/w/$site-$prof" monitor "$prof" --replay "$TRACE" |
      record part="$PART" site="$site" app="$app" nodes="$n" kind=probe round="$i"
  done
  five_rounds "$site" "$app" "$n" "$prof"
  site_stop
}

# spread: EP (its beta's high end, 1) in two-node jobs on EPYC nodes whose chips differ
# (greenup-sim --node-spread, tests/physics/cpus.yaml's node_spread: n1..n6 draw 0.943 to
# 1.057 of the published figures), placed in turn on n[1-2], n[3-4] and n[5-6] as a
# scheduler might: the baseline on n[1-2], then SPREAD_ROUNDS (4) rounds of edp on each
# placement. A node's factor needs three runs (profile::node_power::MIN_RUNS), so the
# first rounds plan with the type's curve alone and the later ones with each node's
# factor; `greenup site power` at the end shows what greenupd learned. NODE_SPREAD= (set
# and empty) runs the same on identical chips, the control.
spread() {
  local site=epyc app=ep n=2 prof=ep-spread round nodes
  NODE_SPREAD=${NODE_SPREAD-1} BETA=$(beta_of ep high)
  site_start "$site" "$OUT/$site-$prof"
  baseline "$site" "$app" "$n" "$prof"
  for round in $(seq 1 "${SPREAD_ROUNDS:-4}"); do
    for nodes in "n[1-2]" "n[3-4]" "n[5-6]"; do
      JOB=$((JOB + 1))
      job "$site" "$nodes" "$OUT/w/$site-$prof" edp "$prof" --replay "$TRACE" |
        record part="$PART" site="$site" app="$app" nodes="$n" placement="$nodes" kind=edp round="$round"
    done
  done
  "$GREENUP" site power --site "$CONF" > "$OUT/site-power-$prof.txt" 2>&1 || true
  site_stop
  unset NODE_SPREAD
  BETA=
}

# samples_run SITE APP PROFILE: how many of this part's probes for APP on SITE, at this
# $BETA, greenupd planned (a clock sample) rather than left to monitor.
samples_run() {
  python3 -c '
import json, sys
site, app, beta = sys.argv[2:5]
n = 0
for line in open(sys.argv[1]):
    d = json.loads(line)
    if (d.get("part"), d.get("site"), d.get("app"), d.get("kind"), d.get("beta", "")) == ("phys-sample", site, app, "probe", beta) \
       and d.get("verdict") == "planned":
        n += 1
print(n)' "$RESULTS" "$1" "$2" "${BETA:-}"
}

for PART in $PARTS; do
  case $PART in
    scale)
      step "EP on paper 004's platform, 8 to 128 nodes, max-dist: exact sweep and Algorithm 1"
      site_start paper004 "$OUT/paper004-scale"
      for n in 8 16 32 64 128; do
        baseline paper004 ep "$n" "ep$n"
        policy_run paper004 ep "$n" "ep$n" max-dist exact
        policy_run paper004 ep "$n" "ep$n" max-dist paper
      done
      site_stop ;;
    scenarios)
      for site in paper004 paper004-70-30 paper004-90-10; do
        step "power scenario $site, 8 nodes, EP and IS, max-dist: exact sweep and Algorithm 1"
        site_start "$site" "$OUT/$site-scen"
        for app in ep is; do
          baseline "$site" "$app" 8 "$app"
          policy_run "$site" "$app" 8 "$app" max-dist exact
          policy_run "$site" "$app" 8 "$app" max-dist paper
        done
        site_stop
      done ;;
    policies)
      for site in bench paper004; do
        step "every shipped policy, five rounds, on $site"
        site_start "$site" "$OUT/$site-pol"
        for app in ep is; do
          baseline "$site" "$app" 8 "$app"
          five_rounds "$site" "$app" 8
        done
        site_stop
      done ;;
    dt)
      step "NAS DT (class W, black-hole graph) on 16 nodes: every shipped policy, five rounds"
      every_policy paper004 dt 16 ;;
    hpl)
      step "HPL (from hpcc's source, N = ${HPL_N:-3000}) on 16 nodes, a 4 x 4 grid: every shipped policy, five rounds"
      every_policy paper004 hpl 16
      hold paper004 hpl 16 ;;
    phys-scale)
      step "published physics: EP on site real, 8 to 128 nodes, max-dist: exact sweep and Algorithm 1"
      BETA=$(beta_of ep high)
      site_start real "$OUT/real-scale"
      for n in 8 16 32 64 128; do
        baseline real ep "$n" "ep$n-high"
        policy_run real ep "$n" "ep$n-high" max-dist exact
        policy_run real ep "$n" "ep$n-high" max-dist paper
      done
      site_stop
      BETA= ;;
    phys-policies)
      for site in $PHYS_SITES; do
        step "published physics: every shipped policy, five rounds, on $site, EP and IS at both ends of their beta"
        site_start "$site" "$OUT/$site-pol"
        for app in ep is; do
          for end in low high; do
            BETA=$(beta_of "$app" "$end")
            baseline "$site" "$app" 8 "$app-$end"
            five_rounds "$site" "$app" 8 "$app-$end"
          done
        done
        site_stop
      done
      BETA= ;;
    phys-sample)
      step "published physics: EP and IS on 8 EPYC nodes with clock samples, then every shipped policy, five rounds"
      for app in ep is; do
        for end in low high; do
          BETA=$(beta_of "$app" "$end")
          sampled epyc "$app" 8 "$app-$end"
        done
      done
      BETA= ;;
    phys-spread)
      step "published physics: EP in two-node jobs on EPYC nodes whose chips differ, placed in turn on three pairs, edp"
      spread ;;
    phys-dt)
      for site in epyc real; do
        step "published physics: NAS DT (class W) on 16 nodes of $site, every shipped policy, both ends of its beta"
        each_beta every_policy "$site" dt 16
      done ;;
    phys-hpl)
      for site in epyc real; do
        step "published physics: HPL on 16 nodes of $site, every shipped policy, both ends of its beta"
        each_beta every_policy "$site" hpl 16
      done ;;
    phys-count)
      step "published physics: the node count and clocks under an energy cap and a power cap, EP and IS on EPYC 7502 nodes"
      for app in ep is; do
        for end in low high; do
          BETA=$(beta_of "$app" "$end")
          count "$app"
        done
      done
      BETA= ;;
    phys-iso)
      step "published physics: paper 000 on learned profiles, EPYC 7502 nodes, EP and IS at both ends of their beta"
      for app in ep is; do
        for end in low high; do
          BETA=$(beta_of "$app" "$end")
          if [ "$app" = ep ]; then counts=${ISO_EP_COUNTS:-1 2 4 8 16}; else counts=${ISO_IS_COUNTS:-1 2 4 8 16}; fi
          iso "$app" "$counts" epyc
        done
      done
      BETA= ;;
    iso)
      step "paper 000 on learned profiles: iso-ee against the simulated EE curve, EP and IS"
      iso ep "${ISO_EP_COUNTS:-1 2 4 8 16}"
      iso is "${ISO_IS_COUNTS:-1 2 4 8 16}" ;;
  esac
done
python3 "$HERE/tables.py" "$RESULTS"
