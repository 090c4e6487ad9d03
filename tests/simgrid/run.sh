#!/usr/bin/env bash
# The SimGrid test (tests/simgrid/README.md): NAS EP and IS on 8 simulated nodes of the
# test bench's two node types and of paper 004's Table I platform, and EP on 128 nodes of
# the latter, with a real greenupd
# (real MUNGE, real SQLite) deciding every job through its protocol. For each site and
# program: two live runs at f_max (the first records a time-independent trace; the pair
# measures this machine's noise), then, each replaying that trace, two monitor jobs (the
# measured f_max baseline), `greenup profile learn`, a max-dist job and a min-energy job.
# Checks come from SimGrid's own measurements only (the baseline, the spread of identical
# runs, and on the bench a brute-force simulation over every pair of per-type
# frequencies), never from greenup's prediction. Needs root. Last line: 'N passed, M
# failed'.
#   BIN_DIR=target/debug   use a debug build instead of building release binaries
#   KEEP=DIR               keep the work directories there
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

step "packages, munged, NAS programs"
need_debs libsimgrid-dev dpkg-dev python3 >/dev/null
bash "$ROOT/tests/munge/start.sh" >/dev/null
NAS=$(bash "$HERE/build.sh" | tail -1)
step "greenup binaries ($BIN_DIR)"
build_bins

WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
trap 'site_stop; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
RESULTS=$WORK/results.jsonl
: > "$RESULTS"

# record SITE APP KIND: append greenup-sim's JSON line (stdin) tagged to the results.
record() {
  python3 -c '
import json, sys
site, app, kind = sys.argv[1:4]
for line in sys.stdin:
    if line.startswith("{"):
        d = json.loads(line); d.update(site=site, app=app, kind=kind); print(json.dumps(d))
' "$@" >> "$RESULTS"
}

# A run that fails is counted, and the test goes on to its summary line.
RUN_FAILS=0
failed() { echo "FAIL $*"; RUN_FAILS=$((RUN_FAILS + 1)); }

for site in bench paper004; do
  step "site $site"
  site_start "$site" "$WORK/$site" || { failed "greenupd did not start on $site"; continue; }
  cases="ep:8 is:8"
  # Scale: one case at 128 nodes (EP, whose answer does not depend on the count).
  [ "$site" = paper004 ] && cases="$cases ep:128"
  for c in $cases; do
    n=${c#*:}
    NODES="n[1-$n]"
    app=${c%:*}
    case $site-$app in
      bench-ep) prog=("$NAS/ep" "$n" B) ;;
      *-ep) prog=("$NAS/ep" "$n" C) ;;
      *-is) prog=("$NAS/is" "$n" W) ;;
    esac
    # The profile is learned for one node count: one name per count.
    [ "$n" = 8 ] || app=$app$n
    w=$WORK/$site/runs
    mkdir -p "$w"
    # Two live runs at f_max, told to nobody: the first records the trace every job
    # below replays; the pair measures this machine's noise (reported, not a bound).
    { fixed "$site" "$NODES" "$w/$app-live1" - --record-trace "$w/$app.trace" -- "${prog[@]}" | record "$site" "$app" live; } ||
      { failed "$site $app: the recorded live run"; continue; }
    { fixed "$site" "$NODES" "$w/$app-live2" - -- "${prog[@]}" | record "$site" "$app" live; } || failed "$site $app: the second live run"
    run=(--replay "$w/$app.trace")
    for i in 1 2; do
      JOB=$((JOB + 1))
      { job "$site" "$NODES" "$w/$app-monitor$i" monitor "$app" "${run[@]}" | record "$site" "$app" monitor; } ||
        failed "$site $app: monitor job $JOB"
    done
    if ! learn "$app" "$n" >"$WORK/$site/learn-$app.txt" 2>&1; then
      failed "$site $app: greenup profile learn: $(tail -1 "$WORK/$site/learn-$app.txt")"
      continue
    fi
    for policy in max-dist min-energy; do
      JOB=$((JOB + 1))
      { job "$site" "$NODES" "$w/$app-$policy" "$policy" "$app" "${run[@]}" | record "$site" "$app" "$policy"; } ||
        failed "$site $app: $policy job $JOB"
    done
    if [ "$site" = bench ]; then
      for ff in 1.0 1.4 1.8 2.2 2.6 3.0; do
        for fe in 1.2 1.6 2.0 2.4; do
          { fixed "$site" "$NODES" "$w/$app-brute" "fast=$ff,eco=$fe" "${run[@]}" | record "$site" "$app" brute; } ||
            failed "$site $app: the run at fast $ff, eco $fe GHz"
        done
      done
    fi
  done
  site_stop
done

step "checks"
python3 "$HERE/check.py" "$RESULTS" "$RUN_FAILS"
