#!/usr/bin/env bash
# The SimGrid test (tests/simgrid/README.md), with a real greenupd (real MUNGE, real
# SQLite) deciding every job through its protocol:
# - on `epyc` and `real`, hosts that obey published measurements of real CPUs and
#   programs (tests/physics/, docs/physics.md) while greenupd decides with its own prior:
#   on `epyc` (EPYC 7502 nodes, RAPL package watts) NAS EP and IS on 8 nodes, each at
#   both ends of its assumed beta; on `real` (EPYC 7502 and Xeon E5-2680 v3 nodes, node
#   AC watts) IS on 8 nodes and EP on 128;
# - on `bench`, hosts that obey greenup's own law (the site config's watts, speed
#   proportional to the clock): EP and IS on 8 nodes, which checks the optimizer against
#   a brute-force oracle where the model is exact.
# For each site and program: two live runs at f_max (the first records a
# time-independent trace; the pair measures this machine's noise), then, each replaying
# that trace, two monitor jobs (the measured f_max baseline), `greenup profile learn`
# and one job under each checked policy; on 8 nodes also a brute-force simulation of
# every pair of per-type frequencies. Checks come from SimGrid's own measurements and
# the physics files only (the baseline, the spread of identical runs, the brute force,
# the published watts and betas), never from greenup's prediction. Needs root. Last
# line: 'N passed, M failed'.
#   BIN_DIR=target/debug   use a debug build instead of building release binaries
#   KEEP=DIR               keep the work directories there
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

step "packages, munged, NAS programs"
need_debs libsimgrid-dev dpkg-dev python3 python3-yaml >/dev/null
bash "$ROOT/tests/munge/start.sh" >/dev/null
NAS=$(bash "$HERE/build.sh" | tail -1)
step "greenup binaries ($BIN_DIR)"
build_bins

WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
trap 'site_stop; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
RESULTS=$WORK/results.jsonl
: > "$RESULTS"

# record SITE APP KIND: append greenup-sim's JSON line (stdin) tagged to the results,
# on a real-physics site with the program's $BETA and the site's CPUs and scope.
record() {
  python3 -c '
import json, sys
site, app, kind, beta, cpus = sys.argv[1:6]
for line in sys.stdin:
    if line.startswith("{"):
        d = json.loads(line); d.update(site=site, app=app, kind=kind)
        if beta:
            d.update(beta=float(beta), physics=cpus)
        print(json.dumps(d))
' "$@" "${CPUS[$1]:+$BETA}" "${CPUS[$1]:-}" >> "$RESULTS"
}

# grid SITE: every pair of per-type frequencies of SITE's two node types, as
# TYPE=GHZ,TYPE=GHZ, one a line: the brute-force oracle's settings.
grid() {
  /usr/bin/python3 - "$HERE/sites/$1.yaml" <<'PY'
import itertools, sys, yaml
types = yaml.safe_load(open(sys.argv[1]))["node_types"]
names = sorted(types)
for fs in itertools.product(*(types[t]["frequencies"] for t in names)):
    print(",".join(f"{t}={f:g}" for t, f in zip(names, fs)))
PY
}

# A run that fails is counted, and the test goes on to its summary line.
RUN_FAILS=0
failed() { echo "FAIL $*"; RUN_FAILS=$((RUN_FAILS + 1)); }

# CASES per site: PROGRAM:NODES[:BETA END] (the real site's programs at that end of their
# assumed beta, tests/physics/programs.yaml).
declare -A CASES=([epyc]="ep:8:low ep:8:high is:8:low is:8:high" [real]="is:8:low ep:128:high" [bench]="ep:8 is:8")
for site in epyc real bench; do
  step "site $site"
  site_start "$site" "$WORK/$site" || { failed "greenupd did not start on $site"; continue; }
  for c in ${CASES[$site]}; do
    IFS=: read -r prog_name n end <<<"$c"
    NODES="n[1-$n]"
    case $site-$prog_name in
      bench-ep) prog=("$NAS/ep" "$n" B) ;;
      *-ep) prog=("$NAS/ep" "$n" C) ;;
      *-is) prog=("$NAS/is" "$n" W) ;;
    esac
    # The profile is learned for one node count and one program: one name for each.
    app=$prog_name
    [ "$n" = 8 ] || app=$app$n
    BETA=
    if [ -n "${CPUS[$site]:-}" ]; then
      BETA=$(beta_of "$prog_name" "$end") || { failed "$site $app: no beta"; continue; }
      app=$app-$end
    fi
    w=$WORK/$site/runs
    mkdir -p "$w"
    # Two live runs at f_max, told to nobody: the first records the trace every job
    # below replays; the pair measures this machine's noise (reported, not a bound). At
    # f_max a program runs alike whatever its beta, so one recording serves both ends.
    trace=$w/$prog_name$n.trace
    if [ ! -e "$trace" ]; then
      { fixed "$site" "$NODES" "$w/$app-live1" - --record-trace "$trace" -- "${prog[@]}" | record "$site" "$app" live; } ||
        { failed "$site $app: the recorded live run"; continue; }
      { fixed "$site" "$NODES" "$w/$app-live2" - -- "${prog[@]}" | record "$site" "$app" live; } || failed "$site $app: the second live run"
    fi
    run=(--replay "$trace")
    for i in 1 2; do
      JOB=$((JOB + 1))
      { job "$site" "$NODES" "$w/$app-monitor$i" monitor "$app" "${run[@]}" | record "$site" "$app" monitor; } ||
        failed "$site $app: monitor job $JOB"
    done
    if ! learn "$app" "$n" >"$WORK/$site/learn-$app.txt" 2>&1; then
      failed "$site $app: greenup profile learn: $(tail -1 "$WORK/$site/learn-$app.txt")"
      continue
    fi
    policies="max-dist min-energy"
    [ -n "$BETA" ] && policies="$policies edp"
    for policy in $policies; do
      JOB=$((JOB + 1))
      { job "$site" "$NODES" "$w/$app-$policy" "$policy" "$app" "${run[@]}" | record "$site" "$app" "$policy"; } ||
        failed "$site $app: $policy job $JOB"
    done
    if [ "$n" = 8 ]; then
      for setting in $(grid "$site"); do
        { fixed "$site" "$NODES" "$w/$app-brute" "$setting" "${run[@]}" | record "$site" "$app" brute; } ||
          failed "$site $app: the run at $setting"
      done
    fi
  done
  site_stop
done

step "checks"
/usr/bin/python3 "$HERE/check.py" "$RESULTS" "$RUN_FAILS" "$PHYSICS_FILE" "$ROOT/policies"
