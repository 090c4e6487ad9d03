#!/bin/bash
# greenup's end-to-end tests on the running test cluster (setup.sh first; run-tests.sh
# does everything). Every test runs real sbatch/srun jobs as an ordinary user.
# Results go to stdout as PASS/FAIL lines; the last line is "N passed, M failed".
# GC_ONLY (below) picks tests by number; GC_SKIP leaves some out, saying why.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
SOCK=$GC_RUN/greenupd.sock
OUT=$GC_WORK
PASSED=0 FAILED=0
JOBS_WITH_DAEMON=()

say() { echo "    $*"; }
# GC_ONLY="9 18 A1" runs only the tests with those numbers (for work on one test).
# GC_SKIP="21 22 23" with GC_SKIP_WHY="..." leaves those out, printing why; a skipped
# test counts as neither passed nor failed.
run_test() { # NAME FUNCTION
  [ -z "${GC_ONLY:-}" ] || [[ " $GC_ONLY " == *" ${1%% *} "* ]] || return 0
  echo "--- $1"
  if [[ " ${GC_SKIP:-} " == *" ${1%% *} "* ]]; then
    say "skipped: ${GC_SKIP_WHY:-GC_SKIP names it}"
    return 0
  fi
  local t0=$SECONDS
  "$2"; local rc=$?
  say "took $((SECONDS - t0)) s"
  if [ $rc = 0 ]; then PASSED=$((PASSED + 1)); echo "PASS $1"; else FAILED=$((FAILED + 1)); echo "FAIL $1"; fi
}
as() { local u=$1; shift; runuser -u "$u" -- bash -c 'cd "$1" && shift && exec "$@"' as "$OUT" "$@"; }
submit() { local u=$1; shift; as "$u" sbatch --parsable "$@"; }
state() { scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
wait_gone() { # JOB [seconds]: until the job and its epilogs are finished
  for _ in $(seq 1 $(( ${2:-60} * 5 ))); do
    gc_queued "$1" || return 0
    sleep 0.2
  done
  say "job $1 still in the queue: $(squeue -h -j "$1")"; return 1
}
wait_running() {
  for _ in $(seq 1 150); do [ "$(state "$1")" = RUNNING ] && return 0; sleep 0.2; done
  say "job $1 not running: $(state "$1")"; return 1
}
# One line per policy: governor, min, max, and the set speed under userspace.
snap() {
  local n=$1 p gov
  for p in "$GC_SYSFS/$n"/devices/system/cpu/cpufreq/policy*; do
    gov=$(cat $p/scaling_governor)
    printf '%s %s %s %s %s\n' "$n/$(basename $p)" "$gov" "$(cat $p/scaling_min_freq)" "$(cat $p/scaling_max_freq)" \
      "$([ "$gov" = userspace ] && cat $p/scaling_setspeed)"
  done
}
snap_all() { for n in $GC_NODES; do snap $n; done; }
# The frequency a node runs at, as the kernel would choose it: set speed under userspace, else the max.
effective_khz() { # NODE POLICY
  local p=$GC_SYSFS/$1/devices/system/cpu/cpufreq/policy$2
  if [ "$(cat $p/scaling_governor)" = userspace ]; then cat $p/scaling_setspeed; else cat $p/scaling_max_freq; fi
}
job_json() { /usr/bin/python3 "$HERE/gq.py" "$SOCK" "$1"; }
jq_job() { job_json "$1" | jq -r "$2"; }
# jq_job once greenupd has settled how the job ended against Slurm's final record (a
# node's "completed" is stored as "unknown" until then, for a second or so).
jq_settled() {
  for _ in $(seq 1 300); do [ "$(jq_job "$1" .end)" != unknown ] && break; sleep 0.2; done
  jq_job "$1" "$2"
}
no_leftovers() { # nothing of greenup's saved state is left for JOB
  [ ! -e "$GC_GREENUP_RUN/$1" ] || { say "saved state left: $(ls $GC_GREENUP_RUN/$1)"; return 1; }
}

for f in read-freqs busy work; do install -m 0755 "$HERE/jobs/$f.sh" "$OUT/$f.sh"; done
rm -rf "$OUT/apps"; cp -r "$HERE/apps" "$OUT/apps"; chmod -R a+rX "$OUT/apps"
"$HERE/apps/build.sh" "$OUT/apps" || { echo "e2e: cannot build the bench's MPI programs"; echo "0 passed, 1 failed"; exit 1; }
BASE=$(mktemp); snap_all > "$BASE"
restored() {
  if ! snap_all | diff "$BASE" - >/dev/null; then say "not restored:"; snap_all | diff "$BASE" - | sed 's/^/      /'; return 1; fi
}

# What greenup-prolog-slurmctld (the cluster's PrologSlurmctld, see setup.sh) said of JOB.
controller_said() { grep "greenup: job $1[ :]" "$GC_LOG/prolog-slurmctld.log" 2>/dev/null; }

# 1. max-dist on mixed node types: frequencies seen inside the job equal the decision.
#    The job is decided once by PrologSlurmctld before its nodes start; with NODE_PATH=1
#    (test 1n) it is submitted so that PrologSlurmctld leaves it alone and its nodes'
#    prologs decide, as on a site without PrologSlurmctld.
t_maxdist() {
  local j ok=0 path=()
  [ "${NODE_PATH:-0}" = 1 ] && path=(--comment=greenup-node-path)
  # Put n4's RAPL counter 2 J below its range, so that it wraps during this job.
  local z=$GC_SYSFS/n4/class/powercap/intel-rapl:0 pm; pm=$(cat "$GC_RUN/powermodel.pid")
  kill -STOP "$pm"; echo $(( $(cat $z/max_energy_range_uj) - 2000000 )) > $z/energy_uj; kill -CONT "$pm"
  j=$(submit $GC_USER -N4 --exclusive -t 5 --energy-policy=max-dist --energy-profile=solver --energy-report \
      "${path[@]}" -o "$OUT/t1-%j.out" "$OUT/read-freqs.sh" "$GC_SYSFS") || return 1
  JOBS_WITH_DAEMON+=("$j")
  wait_gone "$j" || return 1
  [ "$(state "$j")" = COMPLETED ] || { say "job $j ended $(state "$j")"; cat "$OUT/t1-$j.out"; return 1; }
  [ "$(jq_job "$j" .decision.verdict)" = planned ] || { say "verdict: $(job_json "$j")"; return 1; }
  local lines; lines=$(grep -c '^freq ' "$OUT/t1-$j.out")
  [ "$lines" = $((4 * GC_CPUS)) ] || { say "expected $((4 * GC_CPUS)) readings, got $lines"; cat "$OUT/t1-$j.out"; return 1; }
  local distinct=0
  for n in $GC_NODES; do
    local ghz want
    ghz=$(jq_job "$j" ".decision.plan.nodes[] | select(.name == \"$n\") | .freq_ghz")
    want=$(awk -v g="$ghz" 'BEGIN { printf "%d", g * 1000000 + 0.5 }')
    while read -r _ node pol gov khz; do
      [ "$node" = "$n" ] || continue
      if [ $(( khz > want ? khz - want : want - khz )) -gt 1000 ]; then
        say "$n $pol runs at $khz kHz inside the job; decision says $ghz GHz"; ok=1
      fi
      case $n in n1|n2) [ "$gov" = userspace ] || { say "$n $pol: governor $gov, expected userspace"; ok=1; } ;;
                 *)     [ "$gov" != userspace ] || { say "$n $pol: eco nodes have no userspace"; ok=1; } ;; esac
    done < <(grep '^freq ' "$OUT/t1-$j.out")
    distinct=$((distinct + 1))
  done
  grep -q "^greenup: job $j (solver v1, policy max-dist) ran on 4 of 4 allocated nodes.*Details: greenup report $j" "$OUT/t1-$j.out" \
    || { say "no --energy-report line:"; cat "$OUT/t1-$j.out"; ok=1; }
  say "$(grep "^greenup: job $j" "$OUT/t1-$j.out")"
  say "decision: $(jq_job "$j" '[.decision.plan.nodes[] | "\(.name)=\(.freq_ghz)"] | join(" ")')"
  [ "$(jq_settled "$j" .state)" = closed ] || { say "job $j is $(jq_job "$j" .state) in greenupd, not closed"; ok=1; }
  if [ "${NODE_PATH:-0}" = 1 ]; then
    [ -z "$(controller_said "$j")" ] || { say "PrologSlurmctld decided a node-path job: $(controller_said "$j")"; ok=1; }
  else
    controller_said "$j" | grep -q "decided before its 4 nodes start: planned" \
      || { say "PrologSlurmctld did not decide job $j: $(controller_said "$j")"; ok=1; }
    say "$(controller_said "$j")"
  fi
  restored && no_leftovers "$j" && return $ok
}
t_maxdist_node_path() { NODE_PATH=1 t_maxdist; }

# 2. min-time under an energy cap with -N 1-4 runs on the planned node count.
t_mintime_nodes() {
  local plan_args="--json --site $GC_ETC/greenup.yaml --policy min-time --profile md --node-count 1-4 --time-limit 10:00"
  local cap count="" c
  for c in 80kJ 70kJ 60kJ 50kJ 40kJ 30kJ; do
    count=$("$GC_SHARE/bin/greenup" plan $plan_args --energy-cap $c 2>/dev/null | jq -r .node_count)
    cap=$c
    [ -n "$count" ] && [ "$count" != null ] && [ "$count" -ge 1 ] && [ "$count" -lt 4 ] && break
  done
  [ -n "$count" ] && [ "$count" != null ] || { say "greenup plan gave no node count"; return 1; }
  say "greenup plan: $count node(s) under $cap"
  local j
  j=$(submit $GC_USER -N 1-4 --exclusive -t 10:00 --energy-policy=min-time --energy-profile=md --energy-cap=$cap \
      -o "$OUT/t2-%j.out" --wrap 'echo nnodes=$SLURM_JOB_NUM_NODES; echo used=$(srun printenv SLURMD_NODENAME | sort -u | wc -l)') || return 1
  JOBS_WITH_DAEMON+=("$j")
  wait_gone "$j" || return 1
  local got used
  got=$(sed -n 's/^nnodes=//p' "$OUT/t2-$j.out"); used=$(sed -n 's/^used=//p' "$OUT/t2-$j.out")
  say "job $j: $got node(s) allocated, $used used"
  [ "$got" = "$count" ] && [ "$used" = "$count" ] || { cat "$OUT/t2-$j.out"; return 1; }
  [ "$(jq_job "$j" .decision.plan.node_count)" = "$count" ] || { say "stored decision: $(jq_job "$j" .decision.plan.node_count)"; return 1; }
  restored
}

# 3. scancel in the middle of a job restores every node.
t_scancel() {
  local j
  j=$(submit $GC_USER -N4 --exclusive -t 5 --energy-policy=max-dist --energy-profile=solver -o /dev/null --wrap 'sleep 120') || return 1
  JOBS_WITH_DAEMON+=("$j")
  wait_running "$j" || return 1
  for _ in $(seq 1 50); do snap_all | diff -q "$BASE" - >/dev/null || break; sleep 0.2; done
  snap_all | diff -q "$BASE" - >/dev/null && { say "nothing was applied, so nothing to restore"; return 1; }
  scancel "$j"
  wait_gone "$j" || return 1
  [ "$(state "$j")" = CANCELLED ] || say "state $(state "$j")"
  restored && no_leftovers "$j"
}

# 4. Bad options are rejected by sbatch with one clear line, and nothing is queued.
t_bad_options() {
  local ok=0 before after
  before=$(squeue -h | wc -l)
  while IFS='|' read -r opt expect; do
    local err rc
    err=$(as $GC_USER sbatch -N1 -t 1 $opt --wrap true 2>&1 >/dev/null); rc=$?
    if [ $rc = 0 ]; then say "accepted: $opt"; ok=1; continue; fi
    if ! grep -q -- "$expect" <<<"$err"; then say "$opt: expected '$expect' in: $err"; ok=1; continue; fi
    say "$opt -> $(grep -m1 'greenup\|option --' <<<"$err")"
  done <<'LIST'
--energy-cap=20XJ|option --energy-cap: invalid energy '20XJ'
--power-cap=-3kW|option --power-cap: invalid power '-3kW'
--energy-policy=fastest|option --energy-policy: unknown policy 'fastest'
--energy-profile=nope|option --energy-profile: profile 'nope' cannot be used
--energy-cap=30MJ|option --energy-cap: 30
--power-cap=5kW|option --power-cap: 5
--energy-policy=../../etc/x|option --energy-policy: invalid name
--energy-min-nodes=0|option --energy-min-nodes: invalid node count '0': expected a whole number from 1
LIST
  after=$(squeue -h | wc -l)
  [ "$after" -le "$before" ] || { say "queue grew from $before to $after"; ok=1; }
  return $ok
}

# 5. With greenupd stopped the job still runs, and the warning reaches its stderr and the slurmd log.
t_daemon_down() {
  "$HERE/greenupd.sh" stop
  local j rc=0
  j=$(submit $GC_USER -N2 --exclusive -t 5 --energy-policy=max-dist --energy-profile=solver -o "$OUT/t5-%j.out" --wrap 'echo job-ran') || rc=1
  [ $rc = 0 ] && { wait_gone "$j" || rc=1; }
  GREENUPD_BIN=$GC_SHARE/bin/greenupd "$HERE/greenupd.sh" start || rc=1
  [ $rc = 0 ] || return 1
  [ "$(state "$j")" = COMPLETED ] || { say "job ended $(state "$j")"; rc=1; }
  grep -q job-ran "$OUT/t5-$j.out" || { say "job output lacks its own line"; rc=1; }
  local warnings; warnings=$(grep -c "greenup: job $j on .*no decision from greenupd" "$OUT/t5-$j.out")
  [ "$warnings" = 1 ] || { say "expected one warning in the job's output, found $warnings:"; cat "$OUT/t5-$j.out"; rc=1; }
  grep -q "greenup: job $j on n1: no decision from greenupd" "$GC_LOG/slurmd-n1.log" || { say "no warning in slurmd-n1.log"; rc=1; }
  # PrologSlurmctld failed open: it said so and exited 0, so Slurm neither requeued nor killed the job.
  controller_said "$j" | grep -q "no decision from greenupd at the controller, its nodes will ask" \
    || { say "PrologSlurmctld said: $(controller_said "$j")"; rc=1; }
  scontrol show job "$j" | grep -q 'Restarts=0' || { say "job $j restarted: $(scontrol show job "$j" | grep -o 'Restarts=[0-9]*')"; rc=1; }
  [ -z "$(sinfo -h -t drain,down -o %N)" ] || { say "drained: $(sinfo -h -t drain,down -o '%N %E')"; rc=1; }
  say "$(grep -m1 'greenup:' "$OUT/t5-$j.out")"
  restored || rc=1
  return $rc
}

# 6. A second job cannot change a running job's frequencies.
t_isolation() {
  local a b c e rc=0 held
  a=$(submit $GC_USER -N2 -w n[1-2] --exclusive -t 5 --energy-policy=max-dist --energy-profile=solver -o /dev/null --wrap 'sleep 120') || return 1
  JOBS_WITH_DAEMON+=("$a")
  wait_running "$a" || return 1
  # Both nodes' prologs run at once (in 24.11 each in a process of its own): wait for both.
  for _ in $(seq 1 50); do
    [ "$(snap n1)" != "$(grep '^n1/' "$BASE")" ] && [ "$(snap n2)" != "$(grep '^n2/' "$BASE")" ] && break; sleep 0.2
  done
  held=$(snap n1; snap n2)
  # Another user's job asking for a different policy on the same node only waits.
  b=$(submit $GC_USER2 -w n1 -n1 -t 5 --energy-policy=min-energy --energy-profile=solver -o /dev/null --wrap true) || rc=1
  # Another user's exclusive job on other nodes changes only those nodes.
  c=$(submit $GC_USER2 -N2 -w n[3-4] --exclusive -t 5 --energy-policy=min-energy --energy-profile=solver -o /dev/null --wrap 'sleep 1') || rc=1
  JOBS_WITH_DAEMON+=("$c")
  wait_gone "$c" || rc=1
  # A job that shares a node gets no frequency of its own ("not applied: shared node").
  e=$(submit $GC_USER2 -w n3 -n1 -t 5 --energy-policy=max-dist --energy-profile=solver -o /dev/null --wrap 'sleep 1') || rc=1
  JOBS_WITH_DAEMON+=("$e")
  # A user cannot write the frequency files directly.
  if as $GC_USER2 bash -c "echo 1000000 > $GC_SYSFS/n1/devices/system/cpu/cpufreq/policy0/scaling_setspeed" 2>/dev/null; then
    say "bob wrote n1's scaling_setspeed"; rc=1
  fi
  wait_gone "$e" || rc=1
  [ "$(state "$b")" = PENDING ] || { say "job $b is $(state "$b") while $a holds n1"; rc=1; }
  [ "$held" = "$(snap n1; snap n2)" ] || { say "job $a's frequencies changed:"; diff <(echo "$held") <(snap n1; snap n2) | sed 's/^/      /'; rc=1; }
  local note; note=$(jq_job "$e" '.outcomes[0].note // ""')
  case $note in "not applied: shared node"*) ;; *) say "shared-node job $e note: '$note'"; rc=1 ;; esac
  scancel "$b" "$a"; wait_gone "$a"; wait_gone "$b"
  restored || rc=1
  return $rc
}

# 7. Every job's measured outcome is in greenupd's store, plausible under the test power model.
t_outcomes() {
  local rc=0 j
  for j in "${JOBS_WITH_DAEMON[@]}"; do
    local nodes want got
    # slurmctld forgets a job MinJobAge after it ends; the accounting keeps its nodes.
    nodes=$(scontrol show job "$j" 2>/dev/null | grep -o ' NodeList=[^ ]*' | head -1 | cut -d= -f2)
    [ -n "$nodes" ] || nodes=$(sacct -n -X -P -j "$j" -o NodeList 2>/dev/null | head -1)
    want=$(scontrol show hostnames "$nodes" | sort | tr '\n' ' ')
    got=$(jq_job "$j" '[.outcomes[].node] | sort | join(" ")')
    [ "$got " = "$want" ] || { say "job $j: outcomes for '$got', expected '$want'"; rc=1; continue; }
    # Bounds from the power model (tests/cluster/powermodel.py): at most static + dynamic watts.
    local bad
    bad=$(job_json "$j" | jq -r '.outcomes[] | select(.source != "rapl" or .energy_j == null or .energy_j < 0
            or (.elapsed_s >= 0.5 and .energy_j <= 0) or .elapsed_s == null or .energy_j > 160 * (.elapsed_s + 1)) | "\(.node): \(.)"')
    [ -z "$bad" ] || { say "job $j: implausible outcome $bad"; rc=1; }
    say "job $j: $(job_json "$j" | jq -r '[.outcomes[] | "\(.node) \(.energy_j|floor)J/\(.elapsed_s|.*10|floor/10)s"] | join(", ")')"
  done
  return $rc
}

# 8. With per-core DVFS allowed, a job sharing a node sets only its own cores, and restores them.
t_per_core() {
  local rc=0 j
  sed -i 's/^  per_core_shared: false/  per_core_shared: true/' $GC_ETC/greenup.yaml
  j=$(submit $GC_USER -w n1 -n2 -t 5 --energy-policy=max-dist --energy-profile=solver -o "$OUT/t8-%j.out" \
      --wrap "for p in $GC_SYSFS/n1/devices/system/cpu/cpufreq/policy*; do echo \"freq \$(basename \$p) \$(cat \$p/scaling_governor)\"; done; sleep 1") || rc=1
  [ $rc = 0 ] && { JOBS_WITH_DAEMON+=("$j"); wait_gone "$j" || rc=1; }
  sed -i 's/^  per_core_shared: true/  per_core_shared: false/' $GC_ETC/greenup.yaml
  [ $rc = 0 ] || return 1
  local set; set=$(grep -c '^freq .* userspace$' "$OUT/t8-$j.out")
  [ "$set" = 2 ] || { say "expected 2 policies set (the job's 2 cores), found $set:"; cat "$OUT/t8-$j.out"; rc=1; }
  restored || rc=1
  return $rc
}

# 9. Five runs of one application, starting from a deliberately wrong profile: greenupd
#    refines it after each run, and the energy error of run 5 is at most half that of run 1.
t_refine() {
  local i j rc=0 err errs=() vers=()
  for i in 1 2 3 4 5; do
    j=$(submit $GC_USER -N1 -w n3 --exclusive -t 5 --energy-policy=min-time --energy-profile=wrong \
        -o /dev/null "$OUT/busy.sh" 8) || return 1
    JOBS_WITH_DAEMON+=("$j")
    wait_gone "$j" || return 1
    # The close is answered before the refinement runs: wait for this run's version to appear.
    for _ in $(seq 1 600); do [ -e /var/lib/greenup-test/profiles/wrong/v$((i + 1)).yaml ] && break; sleep 0.1; done
    local rep; rep=$("$GC_SHARE/bin/greenup" report "$j" --json --site $GC_ETC/greenup.yaml) \
      || { say "greenup report $j failed"; return 1; }
    err=$(jq -r '.derived.energy_error_pct // "null"' <<<"$rep")
    [ "$err" != null ] || { say "run $i (job $j): no energy error: $rep"; return 1; }
    errs+=("$err"); vers+=("$(jq -r .profile_version <<<"$rep")")
    say "run $i: job $j, profile v${vers[-1]}, energy error $(printf '%+.1f' "$err")%"
  done
  [ "${vers[*]}" = "1 2 3 4 5" ] || { say "profile versions used: ${vers[*]}, expected 1 2 3 4 5"; rc=1; }
  awk -v a="${errs[0]}" -v b="${errs[4]}" 'BEGIN { a = a < 0 ? -a : a; b = b < 0 ? -b : b; exit !(b <= a / 2) }' \
    || { say "error after run 5 (${errs[4]}%) is not at most half the error after run 1 (${errs[0]}%)"; rc=1; }
  cmp -s "$GC_SHARE/profiles/wrong.yaml" "$HERE/profiles/wrong.yaml" \
    || { say "the admin's profile file was changed"; rc=1; }
  return $rc
}

# 10. Slurm accounting (slurmdbd) that measured 0 J: greenup says "not available" and why,
#     never "0 J", in the job's --energy-report paragraph and in greenup report's three formats.
t_accounting() {
  local j rc=0 line txt
  j=$(submit $GC_USER -N1 -w n2 --exclusive -t 5 --energy-policy=max-dist --energy-profile=solver --energy-report \
      -o "$OUT/t10-%j.out" --wrap 'sleep 1') || return 1
  JOBS_WITH_DAEMON+=("$j")
  wait_gone "$j" || return 1
  # The job epilog writes the paragraph before Slurm's accounting of the job is final.
  grep -q "Slurm ConsumedEnergy: not available (Slurm accounting is final only after the job ends)" "$OUT/t10-$j.out" \
    || { say "paragraph of job $j:"; cat "$OUT/t10-$j.out"; rc=1; }
  # slurmdbd has the job, and no energy plugin counted it (22.05 prints an empty ConsumedEnergyRaw).
  for _ in $(seq 1 50); do
    line=$(sacct -n -P -X -j "$j" -o State,ConsumedEnergyRaw 2>&1)
    case $line in "COMPLETED|" | "COMPLETED|0") break ;; esac; sleep 0.2
  done
  case $line in "COMPLETED|" | "COMPLETED|0") ;; *) say "sacct for job $j: '$line', expected no energy"; return 1 ;; esac
  local g=$GC_SHARE/bin/greenup site=$GC_ETC/greenup.yaml
  txt=$(as $GC_USER "$g" report "$j" --site $site) || { say "greenup report $j failed: $txt"; return 1; }
  grep -qx "Slurm       ConsumedEnergy not available (Slurm accounting measured 0 J: no energy plugin counted this job)" <<<"$txt" \
    || { say "text report:"; echo "$txt"; rc=1; }
  line=$(as $GC_USER "$g" report "$j" --json --site $site | jq -c '[.slurm_energy, .derived.slurm_energy_text]')
  [ "$line" = '[{"status":"zero"},"not available (Slurm accounting measured 0 J: no energy plugin counted this job)"]' ] \
    || { say "json report: $line"; rc=1; }
  line=$(as $GC_USER "$g" report "$j" --csv --site $site | awk -F, 'NR == 1 { print $(NF-1) "," $NF } NR > 1 { print "," $NF }' | sort -u | tr '\n' ' ')
  [ "$line" = ",zero slurm_energy_j,slurm_energy_status " ] || { say "csv report: '$line'"; rc=1; }
  return $rc
}

# 10s. With daemon.slurm_energy on, greenupd writes a finished job's measured energy into
#      Slurm's accounting where sacctmgr can set a finished job's TRES (Slurm 25.11 and
#      later): sacct's ConsumedEnergyRaw then equals the sum of the job's nodes' measured
#      joules, rounded (taken here from greenupd's record, independently of the sum
#      greenupd made), and `greenup report` says greenupd wrote it. Where sacctmgr cannot
#      (22.05, 24.11), greenupd says so once in its log and the job's accounting keeps no
#      energy. The site config is put back after.
t_slurm_energy() {
  local cfg=$GC_ETC/greenup.yaml rc=0 j want line mark version can
  cp "$cfg" "$OUT/greenup.yaml.t10s-saved"
  sed -i 's/^daemon:$/daemon:\n  slurm_energy: true/' "$cfg"
  grep -q '^  slurm_energy: true' "$cfg" || { say "could not turn daemon.slurm_energy on"; cp "$OUT/greenup.yaml.t10s-saved" "$cfg"; return 1; }
  mark=$(wc -l < "$GC_LOG/greenupd.log")
  kill -HUP "$(cat "$GC_RUN/greenupd.pid")"; sleep 2
  version=$(sinfo -V | awk '{ print $2 }')
  can=$(awk -v v="$version" 'BEGIN { split(v, a, "."); print (a[1] > 25 || (a[1] == 25 && a[2] >= 11)) ? 1 : 0 }')
  j=$(submit $GC_USER -N2 -w n[1-2] --exclusive -t 5 --energy-policy=max-dist --energy-profile=solver -o /dev/null --wrap 'sleep 2') \
    || { cp "$OUT/greenup.yaml.t10s-saved" "$cfg"; kill -HUP "$(cat "$GC_RUN/greenupd.pid")"; return 1; }
  JOBS_WITH_DAEMON+=("$j")
  wait_gone "$j" || rc=1
  want=$(jq_settled "$j" '[.outcomes[] | select(.source == "rapl") | .energy_j] | if length == 2 then add | round else "unmeasured" end')
  for _ in $(seq 1 100); do
    line=$(sacct -n -P -X -j "$j" -o ConsumedEnergyRaw 2>/dev/null | head -1)
    [ "$can" = 1 ] && [ "$line" = "$want" ] && break
    [ "$can" = 0 ] && tail -n +"$((mark + 1))" "$GC_LOG/greenupd.log" | grep -q "cannot set a finished job's TRES" && break
    sleep 0.3
  done
  if [ "$can" = 1 ]; then
    say "Slurm $version: sacct's ConsumedEnergyRaw for job $j is '$line', greenupd measured $want J"
    [ "$line" = "$want" ] || rc=1
    local txt; txt=$(as $GC_USER "$GC_SHARE/bin/greenup" report "$j" --site "$cfg")
    grep -q "written there by greenupd" <<<"$txt" || { say "the report does not say greenupd wrote Slurm's figure:"; grep -i slurm <<<"$txt"; rc=1; }
  else
    local said; said=$(tail -n +"$((mark + 1))" "$GC_LOG/greenupd.log" | grep -c "cannot set a finished job's TRES")
    say "Slurm $version: greenupd said $said time(s) that sacctmgr cannot set a finished job's TRES; sacct's ConsumedEnergyRaw '$line'"
    [ "$said" = 1 ] || rc=1
    case $line in ''|0) ;; *) say "job $j's accounting holds $line J"; rc=1 ;; esac
  fi
  cp "$OUT/greenup.yaml.t10s-saved" "$cfg"
  kill -HUP "$(cat "$GC_RUN/greenupd.pid")"; sleep 1
  return $rc
}

# 11. greenup jobs and greenup app (one list_records request each) show a user only their own jobs.
t_listing() {
  local rc=0 u users g=$GC_SHARE/bin/greenup site=$GC_ETC/greenup.yaml
  for u in $GC_USER $GC_USER2; do
    users=$(as $u "$g" jobs --json --limit 1000 --site $site | jq -r '[.[].user] | unique | join(" ")')
    [ "$users" = "$u" ] || { say "greenup jobs as $u lists jobs of: '$users'"; rc=1; }
    users=$(as $u "$g" app solver --json --site $site | jq -r '[.runs[].user] | unique | join(" ")')
    [ "$users" = "$u" ] || { say "greenup app solver as $u lists runs of: '$users'"; rc=1; }
  done
  users=$("$g" jobs --json --limit 1000 --site $site | jq -r '[.[].user] | unique | join(" ")')
  [ "$users" = "$GC_USER $GC_USER2" ] || { say "greenup jobs as root lists jobs of: '$users'"; rc=1; }
  return $rc
}

# 16. greenupd asks Slurm (squeue) and releases the reservation of a job Slurm does not
# run; a running job's reservation is kept through the same passes.
t_reclaim() {
  local rc=0 j fake=990001 st=""
  j=$(submit $GC_USER -N1 -t 5 --energy-policy=max-dist --energy-profile=solver -o /dev/null --wrap 'sleep 60') || return 1
  wait_running "$j" || rc=1
  /usr/bin/python3 "$HERE/gq.py" "$SOCK" open "$fake" n4 >/dev/null || { say "could not open job $fake"; return 1; }
  [ "$(jq_job "$fake" .state)" = open ] || { say "job $fake was not opened"; rc=1; }
  # greenupd here checks every 2 s and reclaims jobs open for 3 s or more.
  for _ in $(seq 1 100); do
    st=$(jq_job "$fake" .state); [ "$st" = reclaimed ] && break; sleep 0.2
  done
  [ "$st" = reclaimed ] || { say "job $fake, unknown to Slurm, is still '$st' after 20 s"; rc=1; }
  [ "$(jq_job "$j" .state)" = open ] || { say "running job $j was reclaimed: $(jq_job "$j" .state)"; rc=1; }
  say "job $fake: $(jq_job "$fake" '"\(.state) (\(.end))"'); running job $j: $(jq_job "$j" .state)"
  scancel "$j"; wait_gone "$j" || rc=1
  restored || rc=1
  return $rc
}

# 12. greenupd down when a job ends: each node spools its outcome (root-only files, named
#     by job, run and node: JOB-rRUN.NODE.json, the run being Slurm's restart count, 0 for
#     a first run), and the next job on those nodes delivers it, with the first node's
#     close. An entry under the name the previous plugin wrote (JOB.NODE.json) is still
#     delivered.
t_spool() {
  local j k rc=0 n
  j=$(submit $GC_USER -N2 -w n[1-2] --exclusive -t 5 --energy-policy=max-dist --energy-profile=solver \
      -o /dev/null --wrap 'sleep 4') || return 1
  JOBS_WITH_DAEMON+=("$j")
  wait_running "$j" || return 1
  for _ in $(seq 1 50); do
    [ -e "$GC_GREENUP_RUN/$j/n1.decision.json" ] && [ -e "$GC_GREENUP_RUN/$j/n2.decision.json" ] && break; sleep 0.1
  done
  [ "$(jq_job "$j" .state)" = open ] || { say "job $j not open in greenupd"; return 1; }
  "$HERE/greenupd.sh" stop
  wait_gone "$j" || rc=1
  for n in n1 n2; do
    local f=$GC_SPOOL/$n/$j-r0.$n.json
    [ -f "$f" ] || { say "no spool entry $f: $(ls -la $GC_SPOOL/$n 2>&1)"; rc=1; continue; }
    [ "$(stat -c '%a %U' "$f")" = "600 root" ] || { say "$f is $(stat -c '%a %U' "$f")"; rc=1; }
    [ "$(stat -c '%a %U' "$GC_SPOOL/$n")" = "700 root" ] || { say "$GC_SPOOL/$n is $(stat -c '%a %U' "$GC_SPOOL/$n")"; rc=1; }
    say "$n spooled: $(jq -c '{close: .close, end: .end, outcomes: [.outcomes[] | .node]}' "$f")"
  done
  # Only the first node closes, with how the job ended.
  [ "$(jq -r '"\(.close) \(.end)"' "$GC_SPOOL/n1/$j-r0.n1.json" 2>/dev/null)" = "true completed" ] || { say "n1 entry does not close the job as completed"; rc=1; }
  [ "$(jq -r .close "$GC_SPOOL/n2/$j-r0.n2.json" 2>/dev/null)" = false ] || { say "n2 entry closes the job"; rc=1; }
  grep -q "greenup: job $j on n1: outcome and close kept in $GC_SPOOL/n1/$j-r0.n1.json" "$GC_LOG/slurmd-n1.log" \
    || { say "no spool line in slurmd-n1.log"; rc=1; }
  local copy; copy=$(mktemp); cp -p "$GC_SPOOL/n1/$j-r0.n1.json" "$copy" 2>/dev/null
  GREENUPD_BIN=$GC_SHARE/bin/greenupd "$HERE/greenupd.sh" start || return 1
  [ "$(jq_job "$j" '"\(.state) \(.outcomes | length)"')" = "open 0" ] || { say "before delivery: $(jq_job "$j" '"\(.state) \(.outcomes | length)"')"; rc=1; }
  k=$(submit $GC_USER -N2 -w n[1-2] --exclusive -t 5 --energy-policy=max-dist --energy-profile=solver -o /dev/null --wrap true) || return 1
  JOBS_WITH_DAEMON+=("$k")
  wait_gone "$k" || rc=1
  local got; got=$(jq_settled "$j" '"\(.state) \(.end) \([.outcomes[] | select(.source == "rapl" and .energy_j > 0) | .node] | join(","))"')
  say "job $j after job $k: $got"
  [ "$got" = "closed completed n1,n2" ] || rc=1
  for n in n1 n2; do
    [ -z "$(ls -A "$GC_SPOOL/$n")" ] || { say "$GC_SPOOL/$n not empty: $(ls -A "$GC_SPOOL/$n")"; rc=1; }
  done
  grep -q "greenup: job $k on n1: delivered spooled outcomes of job(s) $j" "$GC_LOG/slurmd-n1.log" || { say "no delivery line for job $k on n1"; rc=1; }
  # Delivered twice (as when a removal is lost), under the name the previous plugin wrote:
  # it is read, greenupd keeps what it has, and the entry goes.
  cp -p "$copy" "$GC_SPOOL/n1/$j.n1.json"; rm -f "$copy"
  k=$(submit $GC_USER -N1 -w n1 --exclusive -t 5 --energy-policy=max-dist --energy-profile=solver -o /dev/null --wrap true) || return 1
  JOBS_WITH_DAEMON+=("$k")
  wait_gone "$k" || rc=1
  [ -z "$(ls -A "$GC_SPOOL/n1")" ] || { say "after a repeat: $GC_SPOOL/n1 holds $(ls -A "$GC_SPOOL/n1")"; rc=1; }
  [ "$(jq_settled "$j" '"\(.state) \(.end) \(.outcomes | length)"')" = "closed completed 2" ] || { say "after a repeat: $(jq_job "$j" '"\(.state) \(.end) \(.outcomes | length)"')"; rc=1; }
  restored || rc=1
  return $rc
}

# 13. A job that exits 1 is stored as failed and a scancel'ed one as cancelled; neither
#     refines its profile, while a completed run of the same profile does.
t_end_states() {
  local a b c rc=0 vdir=/var/lib/greenup-test/profiles/endstate
  a=$(submit $GC_USER -N1 -w n3 --exclusive -t 5 --energy-policy=min-time --energy-profile=endstate -o /dev/null \
      --wrap 'sleep 8; exit 1') || return 1
  b=$(submit $GC_USER -N1 -w n4 --exclusive -t 5 --energy-policy=min-time --energy-profile=endstate -o /dev/null \
      --wrap 'sleep 120') || return 1
  JOBS_WITH_DAEMON+=("$a" "$b")
  wait_running "$b" || return 1
  sleep 9   # as long as the completed run below: only the way it ended sets it apart
  scancel "$b"
  wait_gone "$a" || rc=1; wait_gone "$b" || rc=1
  # The cancelled job's first node claims "completed" from its environment (0:0) and
  # greenupd settles it from Slurm's final state: read it once settled.
  local ea eb; ea=$(jq_job "$a" '"\(.state) \(.end)"'); eb=$(jq_settled "$b" '"\(.state) \(.end)"')
  say "job $a (exit 1): $ea; job $b (scancel): $eb; Slurm: $(state "$a") $(state "$b")"
  [ "$ea" = "closed failed" ] || rc=1
  [ "$eb" = "closed cancelled" ] || rc=1
  sleep 1   # refinement runs after the close is answered
  [ ! -e $vdir/v2.yaml ] || { say "a failed or cancelled run refined the profile: $(ls $vdir)"; rc=1; }
  "$GC_SHARE/bin/greenup" report "$a" --site $GC_ETC/greenup.yaml | grep -q "outlier, not used to refine the profile: job ended FAILED" \
    || { say "report of $a: $("$GC_SHARE/bin/greenup" report "$a" --site $GC_ETC/greenup.yaml)"; rc=1; }
  "$GC_SHARE/bin/greenup" report "$b" --site $GC_ETC/greenup.yaml | grep -q "outlier, not used to refine the profile: job ended CANCELLED" \
    || { say "report of $b: $("$GC_SHARE/bin/greenup" report "$b" --site $GC_ETC/greenup.yaml)"; rc=1; }
  # The control: the same run, completed, does refine the profile.
  c=$(submit $GC_USER -N1 -w n3 --exclusive -t 5 --energy-policy=min-time --energy-profile=endstate -o /dev/null \
      --wrap 'sleep 8') || return 1
  JOBS_WITH_DAEMON+=("$c")
  wait_gone "$c" || rc=1
  for _ in $(seq 1 600); do [ -e $vdir/v2.yaml ] && break; sleep 0.1; done
  say "job $c: $(jq_job "$c" '"\(.state) \(.end)"'); versions: $(ls $vdir 2>/dev/null | tr '\n' ' ')"
  [ "$(jq_job "$c" '"\(.state) \(.end)"')" = "closed completed" ] || rc=1
  [ -e $vdir/v2.yaml ] || { say "the completed run did not refine the profile"; rc=1; }
  restored || rc=1
  return $rc
}

# 14. A job holding more nodes than its decision uses is shrunk at start: Slurm, the batch
#     environment and srun all see the decided nodes, and the released nodes are restored
#     while the job still runs (and the job stays open in greenupd until it ends).
t_shrink() {
  local plan_args="--json --site $GC_ETC/greenup.yaml --policy min-time --profile md --node-count 1-4 --time-limit 10:00"
  local cap count="" c j rc=0
  for c in 80kJ 70kJ 60kJ 50kJ 40kJ 30kJ; do
    count=$("$GC_SHARE/bin/greenup" plan $plan_args --energy-cap $c 2>/dev/null | jq -r .node_count)
    cap=$c
    [ -n "$count" ] && [ "$count" != null ] && [ "$count" -ge 1 ] && [ "$count" -lt 4 ] && break
  done
  # -N4 exactly: the cli_filter leaves it, so the job starts on four nodes; the user lets
  # greenup give back all but one.
  j=$(submit $GC_USER -N4 --exclusive -t 10:00 --energy-policy=min-time --energy-profile=md --energy-cap=$cap --energy-min-nodes=1 \
      -o "$OUT/t14-%j.out" --wrap 'echo "env $SLURM_JOB_NUM_NODES $SLURM_NNODES $SLURM_JOB_NODELIST $SLURM_NODELIST"
        echo "ctld $(scontrol show job $SLURM_JOB_ID | grep -o " NumNodes=[0-9]*" | cut -d= -f2) $(scontrol show job $SLURM_JOB_ID | grep -o " NodeList=[^ ]*" | head -1 | cut -d= -f2)"
        echo "srun $(srun printenv SLURMD_NODENAME | sort | tr "\n" " ")"
        sleep 6') || return 1
  wait_running "$j" || return 1
  for _ in $(seq 1 50); do [ -n "$(jq_job "$j" '.decision.plan.node_count // empty' 2>/dev/null)" ] && break; sleep 0.1; done
  local decided keep released
  decided=$(jq_job "$j" .decision.plan.node_count)
  keep=$(jq_job "$j" '[.decision.plan.nodes[].name] | sort | join(" ")')
  say "greenup plan: $count node(s) under $cap; decision for job $j: $decided ($keep)"
  [ "$decided" -lt 4 ] 2>/dev/null || { say "the decision uses all 4 nodes: nothing to shrink"; scancel "$j"; wait_gone "$j"; return 1; }
  released=$(for n in $GC_NODES; do grep -qw $n <<<"$keep" || echo $n; done | tr '\n' ' ')
  # The released nodes' epilogs restore them while the job runs on.
  local n ok
  for n in $released; do
    ok=1
    for _ in $(seq 1 50); do [ "$(snap $n)" = "$(grep "^$n/" "$BASE")" ] && { ok=0; break; }; sleep 0.1; done
    [ $ok = 0 ] || { say "released node $n not restored while job $j runs"; rc=1; }
  done
  [ "$(state "$j")" = RUNNING ] && [ "$(jq_job "$j" .state)" = open ] || { say "job $j: Slurm $(state "$j"), greenupd $(jq_job "$j" .state) while running"; rc=1; }
  wait_gone "$j" || return 1
  local list; list=$(scontrol show hostnames "$(jq_job "$j" '[.decision.plan.nodes[].name] | join(",")')" | sort | tr '\n' ' ')
  local compact; compact=$(scontrol show hostlist "$(tr ' ' ',' <<<"${list% }")")
  sed 's/^/      /' "$OUT/t14-$j.out"
  grep -Fqx "env $decided $decided $compact $compact" "$OUT/t14-$j.out" || { say "batch environment does not match the decision ($decided, $compact)"; rc=1; }
  grep -Fqx "ctld $decided $compact" "$OUT/t14-$j.out" || { say "Slurm does not hold the decided nodes"; rc=1; }
  grep -Fqx "srun $list" "$OUT/t14-$j.out" || { say "srun did not run on exactly the decided nodes"; rc=1; }
  [ "$(jq_settled "$j" '"\(.state) \(.end)"')" = "closed completed" ] || { say "job $j: $(jq_job "$j" '"\(.state) \(.end)"')"; rc=1; }
  # Every node measured its share, the released ones up to their release.
  [ "$(jq_job "$j" '[.outcomes[] | select(.source == "rapl") | .node] | sort | join(" ")')" = "n1 n2 n3 n4" ] \
    || { say "outcomes: $(job_json "$j" | jq -c .outcomes)"; rc=1; }
  restored && no_leftovers "$j" || rc=1
  return $rc
}

# The kernel's boot defaults for NODE's cpufreq policies again, as taken before any test.
reboot_sysfs() {
  local np gov min max p
  while read -r np gov min max _; do
    case $np in "$1"/*) ;; *) continue ;; esac
    p=$GC_SYSFS/$1/devices/system/cpu/cpufreq/${np#*/}
    echo "$gov" > $p/scaling_governor; echo "$min" > $p/scaling_min_freq
    echo "$max" > $p/scaling_max_freq; echo '<unsupported>' > $p/scaling_setspeed
  done < "$BASE"
}

# 15. A node reboots mid-job (simulated: slurmd stops, /run loses greenup's records, the
#     kernel starts at its defaults, slurmd comes back): nothing saved before the reboot
#     is put back, the node stays at its boot defaults, and no node is drained.
t_reboot() {
  local j p pre now rc=0
  # Before the job n2 runs the performance governor, not its boot default: that is what
  # its prolog saves, and what a stale restore would bring back.
  for p in "$GC_SYSFS"/n2/devices/system/cpu/cpufreq/policy*; do echo performance > $p/scaling_governor; done
  pre=$(snap n2)
  j=$(submit $GC_USER -N2 -w n[1-2] --exclusive -t 5 --energy-policy=max-dist --energy-profile=solver -o /dev/null --wrap 'sleep 8') || return 1
  wait_running "$j" || return 1
  for _ in $(seq 1 50); do [ -e "$GC_GREENUP_RUN/$j/n2.json" ] && [ "$(snap n2)" != "$pre" ] && break; sleep 0.1; done
  [ -e "$GC_GREENUP_RUN/$j/n2.json" ] && [ "$(snap n2)" != "$pre" ] || { say "job $j changed nothing on n2"; return 1; }
  gc_stop_pidfile "$GC_RUN/slurmd-n2.pid"
  rm -f "$GC_GREENUP_RUN/$j"/n2.*
  reboot_sysfs n2
  slurmd -N n2
  wait_gone "$j" || rc=1
  now=$(snap n2)
  if [ "$now" != "$(grep '^n2/' "$BASE")" ]; then
    say "n2 after the job is not at its boot defaults:"; sed 's/^/      /' <<<"$now"
    [ "$now" = "$pre" ] && say "(it is at the settings saved before the reboot)"
    rc=1
  fi
  [ "$(jq_job "$j" '[.outcomes[].node] | join(" ")')" = n1 ] || { say "outcomes of job $j: $(jq_job "$j" '[.outcomes[].node] | join(" ")'); n2 has no measurement across a reboot"; rc=1; }
  [ -z "$(ls -A "$GC_SPOOL/n2" 2>/dev/null)" ] || { say "n2 spooled $(ls -A "$GC_SPOOL/n2")"; rc=1; }
  [ -z "$(sinfo -h -t drain,down -o %N)" ] || { say "drained: $(sinfo -h -t drain,down -o '%N %E')"; rc=1; }
  say "job $j ended $(state "$j"); n2 at boot defaults, n1 restored"
  restored && no_leftovers "$j" || rc=1
  return $rc
}

# 17. A RAPL counter that wraps many times in one job is counted in full: for one job on
#     n3 and n4 (same node type, both at the decided maximum), n4's counter range is cut
#     to 200 J, a wrap every 2.5 s at its 80 W (the job keeps both nodes busy). The job's greenup meter reads it between
#     wraps, so n4 must measure what n3 does; read at start and end alone it would show
#     n3's energy modulo 200 J. The meter stops once the job has ended.
t_wraps() {
  local z=$GC_SYSFS/n4/class/powercap/intel-rapl:0 pm range j rc=0 e3 e4
  pm=$(cat "$GC_RUN/powermodel.pid"); range=$(cat $z/max_energy_range_uj)
  # A 100 J range: the job sleeps, so each node draws about its static 20 W whatever the
  # stand-in measures of its use, and n4 wraps every 5 s, four times in the job.
  kill -STOP "$pm"; echo 100000000 > $z/max_energy_range_uj; echo 0 > $z/energy_uj; kill -CONT "$pm"
  j=$(submit $GC_USER -N2 -w n3,n4 --exclusive -t 5 --energy-policy=min-time --energy-profile=md -o /dev/null \
      --wrap "srun sleep 20")
  if [ -n "$j" ]; then
    JOBS_WITH_DAEMON+=("$j")
    wait_running "$j" || rc=1
    sleep 3
    say "meters while job $j runs: $(pgrep -fc "greenup meter $j ") ($(pgrep -fa "greenup meter $j " | head -1 | cut -d' ' -f2-))"
    [ "$(pgrep -fc "greenup meter $j ")" = 2 ] || rc=1
    wait_gone "$j" 90 || rc=1
  else
    rc=1
  fi
  kill -STOP "$pm"; echo "$range" > $z/max_energy_range_uj; echo 0 > $z/energy_uj; kill -CONT "$pm"
  [ -n "$j" ] || return 1
  e3=$(jq_job "$j" '.outcomes[] | select(.node == "n3") | .energy_j')
  e4=$(jq_job "$j" '.outcomes[] | select(.node == "n4") | .energy_j')
  say "job $j: n3 $e3 J, n4 $e4 J over a 100 J range"
  # At least three wraps, or the test shows nothing; then within 10% of each other.
  awk -v a="$e3" -v b="$e4" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 300 && d < 0.1 * a) }' \
    || { say "n4 did not count its wraps"; rc=1; }
  for _ in $(seq 1 50); do [ -z "$(pgrep -f "greenup meter $j ")" ] && break; sleep 0.1; done
  [ -z "$(pgrep -f "greenup meter $j ")" ] || { say "a meter of job $j still runs"; rc=1; }
  restored && no_leftovers "$j" || rc=1
  return $rc
}

# The stand-in's static and dynamic watts for NODE, as setup.sh started it ("STATIC DYNAMIC").
standin_watts() {
  tr '\0' '\n' < /proc/"$(cat "$GC_RUN/powermodel.pid")"/cmdline | awk -F: -v n="$1" '$1 == n { print $2, $3 }'
}

# 18. The bench responds to the applied frequency: a compute-bound job (awk loop
#     iterations) runs on all four nodes at once, n1 and n3 at f_max, n2 at 1.4 of 3.0 GHz
#     (userspace set speed) and n4 at 1.2 of 2.4 GHz (capped scaling_max_freq). By the
#     stand-in's closed form (powermodel.py) a node at f does f/f_max of the work per
#     second of one at f_max, and draws static + dynamic * (f/f_max)^3 watts while it
#     computes. Running the pairs side by side gives both halves the same host.
#     The slow node's speed is asserted as the share of a host core its loop got against
#     its pair's (the stand-in's quota, which is what the frequency sets), not as wall-clock
#     speed: what one awk iteration costs differs between the host's CPUs and from moment
#     to moment (CI saw a pair 23% apart at equal quotas per iteration), while the CPU
#     time a quota grants does not. Wall-clock speed is printed beside it.
#     The bounds come from the bench's spread, measured by tests/cluster/spread.sh
#     (tests/cluster/README.md, "Spread"): T18_CORE_TOL and T18_POWER_TOL below, and
#     T18_SPREAD says what they came from (printed when the test fails).
T18_POWER_TOL=0.10
T18_CORE_TOL=0.05
# A loop that got less than this share of its quota ran on a host loaded by other work
# (without it: 0.978-0.998); P1 then does not assert its speed (its clock and quota
# bound still are). On a loaded host the loop under the lower quota lost more of it
# (0.907 and 0.941 against its pair's 0.958 and 0.992), which moved the ratio 5% down.
T18_ATTAIN=0.97
T18_SPREAD="each loop's share of a host core measured 0.978-0.998 of its quota (20 loops, this host and CI's), so a pair's ratio within 2% of the closed form; bound 5%; wall-clock speed -12% to +23% (not asserted); power within 6% (tests/cluster/README.md, Spread)"
t_bench_responds() {
  local rc=0 n p j iter=${GC_WORK_ITER:-60000000}
  local -A jobs
  for p in "$GC_SYSFS"/n2/devices/system/cpu/cpufreq/policy*; do echo userspace > $p/scaling_governor; echo 1400000 > $p/scaling_setspeed; done
  for p in "$GC_SYSFS"/n4/devices/system/cpu/cpufreq/policy*; do echo 1200000 > $p/scaling_max_freq; done
  # Each slow node gets f/f_max of the work, so that by the closed form all four loops
  # take the same time: they then run through the same stretch of the host's load, and
  # load on the host cannot fall on one side of a pair only.
  local -A frac=([n1]=1 [n2]=$(awk 'BEGIN { print 1400000 / 3000000 }') [n3]=1 [n4]=$(awk 'BEGIN { print 1200000 / 2400000 }'))
  for n in $GC_NODES; do
    jobs[$n]=$(submit $GC_USER -w $n --exclusive -t 5 -o "$OUT/t18-%j.out" "$OUT/work.sh" \
      "$(awk -v i="$iter" -v f="${frac[$n]}" 'BEGIN { printf "%d", i * f }')" "$GC_SYSFS") || rc=1
  done
  for j in "${jobs[@]}"; do wait_gone "$j" 120 || rc=1; done
  for n in n2 n4; do reboot_sysfs $n; done
  [ $rc = 0 ] || return 1
  local -A secs watts cores
  for n in $GC_NODES; do
    read -r _ _ secs[$n] j < <(grep "^work $n " "$OUT/t18-${jobs[$n]}.out") || { say "no result from $n"; return 1; }
    watts[$n]=$(awk -v e="$j" -v t="${secs[$n]}" 'BEGIN { printf "%.1f", e / t }')
    read -r _ _ j < <(grep "^cpu $n " "$OUT/t18-${jobs[$n]}.out") || { say "no CPU time from $n"; return 1; }
    cores[$n]=$(awk -v c="$j" -v t="${secs[$n]}" 'BEGIN { printf "%.3f", c / t }')
  done
  # What each loop got of a host core against its quota (the stand-in's share of the
  # host's cores per node at f_max, times speed and f/f_max): a loop that got much less
  # than its quota ran on a loaded host; one that got more means the quota did not hold.
  local share n x q
  share=$(tr '\0' '\n' < /proc/"$(cat "$GC_RUN/powermodel.pid")"/environ | awk -F= '$1 == "SHARE" && $2 > 0 { print $2 }')
  [ -n "$share" ] || share=$(awk -v c="$(nproc)" 'BEGIN { print 0.9 * c / 4 }')
  while read -r n x; do
    q=$(awk -v s="$share" -v p="$(tr '\0' '\n' < /proc/"$(cat "$GC_RUN/powermodel.pid")"/cmdline | awk -F: -v n=$n '$1 == n { print ($4 == "" ? 1 : $4) }')" -v x="$x" 'BEGIN { printf "%.3f", s * p * x }')
    say "$n: its loop got ${cores[$n]} of a host core, $(awk -v c="${cores[$n]}" -v q="$q" 'BEGIN { printf "%.3f", c / q }') of its quota $q (a host without other work gives 0.978-0.998; less: the host was loaded)"
    awk -v c="${cores[$n]}" -v q="$q" -v t="$T18_CORE_TOL" 'BEGIN { exit !(c <= q * (1 + t)) }' \
      || { say "$n got more than its quota ($q) allows, +$(awk -v t="$T18_CORE_TOL" 'BEGIN { print 100 * t }')%: the stand-in's quota did not hold"; rc=1; }
  done <<QUOTAS
n1 1
n2 $(awk 'BEGIN { print 1400000 / 3000000 }')
n3 1
n4 $(awk 'BEGIN { print 1200000 / 2400000 }')
QUOTAS
  # pair: fast node, slow node, f/f_max on the slow one
  local fast slow x sw dw
  while read -r fast slow x; do
    read -r sw dw < <(standin_watts $slow)
    say "$fast at f_max: ${secs[$fast]} s, ${watts[$fast]} W; $slow at f/f_max = $x, with $x of the work: ${secs[$slow]} s, ${watts[$slow]} W"
    awk -v tf="${secs[$fast]}" -v ts="${secs[$slow]}" -v pf="${watts[$fast]}" -v ps="${watts[$slow]}" \
        -v cf="${cores[$fast]}" -v cs="${cores[$slow]}" \
        -v x="$x" -v s="$sw" -v d="$dw" -v name="$slow" -v tt="$T18_CORE_TOL" -v pt="$T18_POWER_TOL" -v spread="$T18_SPREAD" 'BEGIN {
      want_pf = s + d; want_ps = s + d * x^3; got = cs / cf; wall = x * tf / ts; bad = 0
      printf "    %s: speed %.3f of its pair'"'"'s by host core (closed form %.3f; by wall clock %.3f, not asserted), power %.1f W and %.1f W (closed form %.1f W and %.1f W)\n",
             name, got, x, wall, pf, ps, want_pf, want_ps
      if (got < (1 - tt) * x || got > (1 + tt) * x) {
        printf "    speed by host core %.3f is outside %.3f-%.3f (closed form %.3f +- %.0f%%; %s)\n", got, (1 - tt) * x, (1 + tt) * x, x, 100 * tt, spread; bad = 1 }
      if (pf < (1 - pt) * want_pf || pf > (1 + pt) * want_pf || ps < (1 - pt) * want_ps || ps > (1 + pt) * want_ps) {
        printf "    power %.1f W / %.1f W is outside %.1f-%.1f W / %.1f-%.1f W (closed form +- %.0f%%; %s)\n", pf, ps,
               (1 - pt) * want_pf, (1 + pt) * want_pf, (1 - pt) * want_ps, (1 + pt) * want_ps, 100 * pt, spread; bad = 1 }
      exit bad }' || rc=1
  done <<PAIRS
n1 n2 $(awk 'BEGIN { print 1400000 / 3000000 }')
n3 n4 $(awk 'BEGIN { print 1200000 / 2400000 }')
PAIRS
  restored || rc=1
  return $rc
}

# 19. A real application: LAMMPS from Debian, one Open MPI rank on each of the four nodes
#     (srun --mpi=pmix), through the plugin under monitor. Its answer is checked against
#     an independent value (apps/check.py: the lattice energy of its starting crystal,
#     energy conservation), and greenupd holds its measured energy from every node.
t_real_app() {
  local j rc=0
  j=$(submit $GC_USER -N4 --exclusive -t 5 --energy-policy=monitor -o "$OUT/t19-%j.out" "$OUT/apps/run-app.sh" lammps "$OUT/apps") || return 1
  JOBS_WITH_DAEMON+=("$j")
  wait_gone "$j" 180 || return 1
  sed 's/^/      /' "$OUT/t19-$j.out"
  [ "$(state "$j")" = COMPLETED ] || { say "job $j ended $(state "$j")"; rc=1; }
  grep -q "^check lammps: ok" "$OUT/t19-$j.out" || rc=1
  grep -q "Loop time of .* on 4 procs" "$OUT/lammps-$j/log.lammps" || { say "LAMMPS did not run on 4 ranks"; rc=1; }
  [ "$(jq_job "$j" '[.outcomes[] | select(.source == "rapl" and .energy_j > 0) | .node] | sort | join(" ")')" = "n1 n2 n3 n4" ] \
    || { say "outcomes: $(job_json "$j" | jq -c .outcomes)"; rc=1; }
  say "job $j: $(jq_job "$j" '[.outcomes[] | "\(.node) \(.energy_j|floor) J/\(.elapsed_s|.*10|floor/10) s"] | join(", ")')"
  restored || rc=1
  return $rc
}

# 20. Communication-phase DVFS with greenup's MPI runtime (policy max-dist-comm): LAMMPS
#     on n1-n2 (userspace governor, so their cores are lent) gives the right answer with
#     the runtime preloaded into its srun step only; inside the job the user may write the
#     speed control of its own nodes' cores and of no other node's; after it, no file of
#     the stand-in tree belongs to the user, everything is restored, and every node's
#     outcome holds its ranks' MPI time. A job whose policy does not ask, and one that
#     turns it off with --energy-comm=off, get no preload.
t_comm() {
  local j k m rc=0 pol=devices/system/cpu/cpufreq/policy0/scaling_setspeed
  local lib=$GC_SHARE/lib/libgreenup_mpi.so
  [ -f "$lib" ] || { say "$lib is not installed (build -p greenup-mpi)"; return 1; }
  cat > "$OUT/t20.sh" <<EOS
#!/bin/bash
echo "batch LD_PRELOAD=\${LD_PRELOAD:-none}"
srun --mpi=pmix --ntasks-per-node=1 bash -c 'echo "step \$SLURMD_NODENAME LD_PRELOAD=\${LD_PRELOAD:-none}"; \
  test -w "\$GREENUP_SYSFS_ROOT/$pol" && echo "step \$SLURMD_NODENAME own-writable"; \
  for n in n3 n4; do test -w "$GC_SYSFS/\$n/$pol" && echo "step \$SLURMD_NODENAME other-writable \$n"; done; true'
exec "$OUT/apps/run-app.sh" lammps "$OUT/apps"
EOS
  chmod 0755 "$OUT/t20.sh"
  j=$(submit $GC_USER -N2 -w n1,n2 --exclusive -t 5 --energy-policy=max-dist-comm -o "$OUT/t20-%j.out" "$OUT/t20.sh") || return 1
  JOBS_WITH_DAEMON+=("$j")
  wait_gone "$j" 180 || return 1
  sed 's/^/      /' "$OUT/t20-$j.out"
  [ "$(state "$j")" = COMPLETED ] || { say "job $j ended $(state "$j")"; rc=1; }
  grep -q "^check lammps: ok" "$OUT/t20-$j.out" || { say "LAMMPS's answer is wrong with the runtime"; rc=1; }
  grep -q "^batch LD_PRELOAD=none" "$OUT/t20-$j.out" || { say "the batch step was given the preload"; rc=1; }
  for n in n1 n2; do
    grep -q "^step $n LD_PRELOAD=.*libgreenup_mpi.so" "$OUT/t20-$j.out" || { say "$n: the MPI step has no preload"; rc=1; }
    grep -q "^step $n own-writable" "$OUT/t20-$j.out" || { say "$n: the job's own core was not lent"; rc=1; }
  done
  ! grep -q "other-writable" "$OUT/t20-$j.out" || { say "another node's core was writable"; rc=1; }
  m=$(find "$GC_SYSFS" -user "$GC_USER" | head -3)
  [ -z "$m" ] || { say "still the user's after the job: $m"; rc=1; }
  ! ls -d "$GC_GREENUP_RUN/$j".* 2>/dev/null || { say "measurement directory left"; rc=1; }
  restored || rc=1
  no_leftovers "$j" || rc=1
  [ "$(jq_job "$j" '[.outcomes[] | select(.comm.ranks >= 1 and .comm.comm_s > 0 and .comm.compute_s > 0) | .node] | sort | join(" ")')" = "n1 n2" ] \
    || { say "outcomes: $(job_json "$j" | jq -c '[.outcomes[] | {node, comm}]')"; rc=1; }
  say "job $j: $(jq_job "$j" '[.outcomes[] | select(.comm) | "\(.node) MPI \(.comm.comm_s*10|floor/10) s of \((.comm.comm_s + .comm.compute_s)*10|floor/10) s, low \(.comm.low_s*100|floor/100) s, \(.comm.transitions) lowerings"] | join(", ")')"
  "$GC_SHARE/bin/greenup" report "$j" --site $GC_ETC/greenup.yaml | grep -q "MPI%" \
    || { say "greenup report $j shows no MPI%"; rc=1; }
  # Not asked for: the policy does not, or the option turns it off.
  for opts in "--energy-policy=max-dist" "--energy-policy=max-dist-comm --energy-comm=off"; do
    k=$(submit $GC_USER -N1 -w n1 --exclusive -t 5 $opts -o "$OUT/t20-%j.out" \
        --wrap "srun --mpi=pmix bash -c 'echo step LD_PRELOAD=\${LD_PRELOAD:-none} DIR=\${GREENUP_MPI_DIR:-none}'") || return 1
    JOBS_WITH_DAEMON+=("$k")
    wait_gone "$k" 60 || return 1
    grep -q "^step LD_PRELOAD=none DIR=none" "$OUT/t20-$k.out" \
      || { say "$opts: $(cat "$OUT/t20-$k.out")"; rc=1; }
    [ "$(jq_job "$k" '[.outcomes[] | select(.comm)] | length')" = 0 ] || { say "$opts: MPI measurements stored"; rc=1; }
    [ -z "$(find "$GC_SYSFS" -user "$GC_USER" | head -1)" ] || { say "$opts: a file was lent"; rc=1; }
  done
  return $rc
}

# 21. A hetero profile with its node types' compute times swapped (lammps-swapped: fast
#     said slower than eco; the stand-in makes eco the slower) is corrected from what the
#     MPI runtime measured within 3 runs of LAMMPS on n1 (fast) and n3 (eco), and the
#     decision after the correction differs from the first.
t_comm_refine() {
  local i j rc=0 v dec=() fixed=0
  # t_cp_s of TYPE in stored version V of the profile.
  tcp_of() { /usr/bin/python3 -c 'import re, sys; t = open(sys.argv[1]).read(); print(re.search(r"\b" + sys.argv[2] + r":[^\n]*?(?:\n[^\n]*?)*?t_cp_s:\s*([0-9.eE+-]+)", t).group(1))' \
      /var/lib/greenup-test/profiles/lammps-swapped/v$1.yaml "$2"; }
  for i in 1 2 3; do
    j=$(submit $GC_USER -N2 -w n1,n3 --exclusive -t 5 --energy-policy=max-dist-comm \
        --energy-profile=lammps-swapped -o "$OUT/t21-%j.out" "$OUT/apps/run-app.sh" lammps "$OUT/apps") || return 1
    JOBS_WITH_DAEMON+=("$j")
    wait_gone "$j" 180 || return 1
    grep -q "^check lammps: ok" "$OUT/t21-$j.out" || { say "run $i: LAMMPS failed"; sed 's/^/      /' "$OUT/t21-$j.out"; rc=1; }
    dec+=("$(jq_job "$j" '[.decision.plan.nodes[] | "\(.name)@\(.freq_ghz)"] | join(",")')")
    [ "$(jq_job "$j" '[.outcomes[] | select(.comm.compute_s > 0) | .node] | sort | join(" ")')" = "n1 n3" ] \
      || { say "run $i: not both nodes measured: $(job_json "$j" | jq -c '[.outcomes[] | {node, comm}]')"; rc=1; }
    for _ in $(seq 1 600); do [ -e /var/lib/greenup-test/profiles/lammps-swapped/v$((i + 1)).yaml ] && break; sleep 0.1; done
    v=$((i + 1))
    [ -e /var/lib/greenup-test/profiles/lammps-swapped/v$v.yaml ] || { say "run $i (job $j): no version $v stored"; rc=1; continue; }
    say "run $i: job $j decided ${dec[-1]}; v$v: fast t_cp $(tcp_of $v fast) s, eco t_cp $(tcp_of $v eco) s;" \
      "$(jq_job "$j" '[.outcomes[] | select(.comm) | "\(.node) compute \(.comm.compute_s*100|floor/100) s MPI \(.comm.comm_s*100|floor/100) s"] | join(", ")')"
    if [ "$fixed" = 0 ] && awk -v f="$(tcp_of $v fast)" -v e="$(tcp_of $v eco)" 'BEGIN { exit !(e > f) }'; then fixed=$i; fi
  done
  [ "$fixed" != 0 ] || { say "eco never became the slower type in 3 runs"; return 1; }
  say "corrected after run $fixed"
  if [ "$fixed" -lt 3 ]; then
    [ "${dec[$fixed]}" != "${dec[0]}" ] || { say "the decision after the correction (${dec[$fixed]}) is the first one"; rc=1; }
  else
    j=$(submit $GC_USER -N2 -w n1,n3 --exclusive -t 5 --energy-policy=max-dist-comm \
        --energy-profile=lammps-swapped -o /dev/null --wrap true) || return 1
    JOBS_WITH_DAEMON+=("$j"); wait_gone "$j" 60 || return 1
    local d; d=$(jq_job "$j" '[.decision.plan.nodes[] | "\(.name)@\(.freq_ghz)"] | join(",")')
    [ "$d" != "${dec[0]}" ] || { say "the decision after the correction ($d) is the first one"; rc=1; }
  fi
  restored || rc=1
  return $rc
}

# 22. An iso_energy profile whose overhead terms are wrong (lammps-iso: no parallel
#     computation overhead, one message and one byte per node) is refitted from what the
#     MPI runtime measured in LAMMPS on 2, 4 and 3 nodes: one node count refits alpha only
#     and says so; two refit each term's coefficient; three choose its law. The refitted
#     M and B match the calls and bytes counted, and the refitted computation time, over
#     the three runs, the time measured outside MPI. Each run's own figure is printed,
#     not asserted: an overhead cannot be negative, so the refit is a non-negative fit of
#     laws that grow with p (crates/greenup/src/profile/iso_overheads.rs), and the bench's run-to-run
#     noise can make the measured times fall with p, which no such law follows. Seen over
#     five runs of this test: a node count's compute time 17.6-21.9 s (p = 2), 18.1-22.4 s
#     (p = 4), 18.4-23.8 s (p = 3), and once (CI, 2026-11-26) 20.9, 18.6, 19.6 s for
#     p = 2, 3, 4, fitted 14.3, 18.9, 22.2 s (-32 % at p = 2) while the three together
#     were within 6.2 %. The profile left unrefitted (v1: no overhead) predicts those three
#     runs 54 % short (49-62 % each), so the 30 % bound over all runs still catches it.
t_iso_refine() {
  local i j n nodes rc=0 dir=/var/lib/greenup-test/profiles/lammps-iso jobs=()
  i=1
  for nodes in n1,n2 n1,n2,n3,n4 n1,n2,n3; do
    n=$(( $(tr -cd , <<<"$nodes" | wc -c) + 1 ))
    j=$(submit $GC_USER -N$n -w $nodes --exclusive -t 5 --energy-policy=max-dist-comm \
        --energy-profile=lammps-iso -o "$OUT/t22-%j.out" "$OUT/apps/run-app.sh" lammps "$OUT/apps") || return 1
    JOBS_WITH_DAEMON+=("$j"); jobs+=("$j")
    wait_gone "$j" 180 || return 1
    grep -q "^check lammps: ok" "$OUT/t22-$j.out" || { say "run $i: LAMMPS failed"; sed 's/^/      /' "$OUT/t22-$j.out"; rc=1; }
    for _ in $(seq 1 600); do [ -e "$dir/v$((i + 1)).fit.json" ] && break; sleep 0.1; done
    [ -e "$dir/v$((i + 1)).fit.json" ] || { say "run $i (job $j, $(jq_job "$j" .decision.verdict)): no version $((i + 1)) stored"; return 1; }
    say "run $i: job $j on $nodes; v$((i + 1)): $(jq -r .note "$dir/v$((i + 1)).fit.json")"
    job_json "$j" > "$OUT/t22-$j.json"
    i=$((i + 1))
  done
  jq -r .note "$dir/v2.fit.json" | grep -q "^alpha only: the runtime measured runs on one node count only (p = 2)" || { say "v2 is not alpha only"; rc=1; }
  jq -r .note "$dir/v3.fit.json" | grep -q "^overheads from 2 runtime-measured runs on p = 2, 4: " || { say "v3 did not refit the overheads"; rc=1; }
  jq -r .note "$dir/v4.fit.json" | grep -q "^overheads from 3 runtime-measured runs on p = 2, 3, 4: " || { say "v4 did not refit the overheads"; rc=1; }
  # Each run against the refitted version 4, with paper 000's formulas written out here.
  /usr/bin/python3 - "$dir/v4.yaml" "${jobs[@]/#/$OUT/t22-}" > "$OUT/t22.check" <<'PY' || rc=1
import json, math, re, sys
text = open(sys.argv[1]).read()
def term(key):
    m = re.search(r"^\s+" + key + r":\s*(.+)$", text, re.M)
    return m.group(1).strip().strip("'\"")
env = {"log2": math.log2, "n": 1.0}
value = lambda key, p: eval(term(key), {"__builtins__": {}}, dict(env, p=float(p)))
bad = 0
models, computes = 0.0, 0.0
for path in sys.argv[2:]:
    job = json.load(open(path + ".json"))
    outs = job["outcomes"]
    p = len(outs)
    calls = sum(o["comm"]["calls"] for o in outs)
    moved = sum(o["comm"]["bytes"] for o in outs)
    compute = sum(o["comm"]["compute_s"] for o in outs)
    # (W_c + W_co) spread evenly, each node at its own t_c = 3e-9 / f; W_m + W_mo at t_m.
    model = sum(((8e9 + value("w_co", p)) * 3e-9 / o["freq_ghz"] + (0 + value("w_mo", p)) * 1e-7) / p for o in outs)
    models, computes = models + model, computes + compute
    ok = calls > 100 * p and moved > 100 * p
    for what, got, want, tol in (("M", value("m", p), calls, 0.5), ("B", value("b", p), moved, 0.5)):
        ok = ok and abs(got / want - 1) <= tol
        print(f"p={p}: {what} refitted {got:.4g}, measured {want:.4g}")
    print(f"p={p}: compute refitted {model:.4g}, measured {compute:.4g} ({100 * (model / compute - 1):+.1f} %, not asserted alone)")
    bad += not ok
ok = abs(models / computes - 1) <= 0.3
print(f"all runs: compute refitted {models:.4g}, measured {computes:.4g} ({100 * (models / computes - 1):+.1f} %, bound 30 %)")
sys.exit(bad + (not ok))
PY
  sed 's/^/    /' "$OUT/t22.check"
  restored || rc=1
  return $rc
}

# 23. Profiles are learned, not typed in: LAMMPS, which has no profile, runs under monitor
#     as itself on the fast pair, the eco pair and all four nodes; `greenup profile learn`
#     (root) builds its hetero profile from those runs, greenupd decides the next run from
#     it and refines it. An ordinary user cannot write it, and amdahl from two node counts
#     is one line saying what is missing. The learned eco/fast t_cp ratio is the eco
#     pair's monitor time over the fast pair's (crates/greenup/src/profile/learn.rs); its bound comes
#     from the bench's spread, measured by tests/cluster/spread.sh (tests/cluster/README.md,
#     "Spread"): at least T23_MIN_RATIO, T23_SPREAD saying what it came from.
T23_LAMMPS_STEPS=1500
T23_MIN_RATIO=1.08
T23_SPREAD="measured with 1500 steps, 2 runs on each series: the eco pair over the fast pair 1.31 and 1.39 on 22.05, 1.17 and 1.39 on 24.11; bound = halfway between 1 (no difference) and the lowest measured; a stand-in giving eco the fast speed measured 0.93 (tests/cluster/README.md, Spread)"
t_learn() {
  local rc=0 f=$GC_SHARE/profiles/lammps.yaml err j line
  . "$HERE/apps/lib.sh"
  rm -f "$f"
  # 1500 steps (3 times run-app.sh's default): the eco pair's longer compute then stands
  # out of each job's fixed start and end costs, which do not slow with the node type.
  LAMMPS_STEPS=$T23_LAMMPS_STEPS app_learn lammps 'n[1-4]' 4 > "$OUT/t23.log" 2>&1 || { say "app_learn failed:"; sed 's/^/      /' "$OUT/t23.log"; return 1; }
  sed 's/^/      /' "$OUT/t23.log"
  grep -q "lammps, learned by greenup profile learn from jobs" "$f" || { say "not greenup's: $(cat "$f")"; rc=1; }
  grep -q "^  nodes: 4" "$f" || { say "no node count in $f"; rc=1; }
  # The stand-in gives an eco core 0.8 of a fast core's speed: eco's time is the longer,
  # by more than the bench's spread (T23_MIN_RATIO, from T23_SPREAD).
  local fast eco
  fast=$(awk '/^    fast:/ {t=1} t && /t_cp_s:/ {print $2; exit}' "$f")
  eco=$(awk '/^    eco:/ {t=1} t && /t_cp_s:/ {print $2; exit}' "$f")
  say "learned t_cp: fast $fast s, eco $eco s, eco/fast $(awk -v f="$fast" -v e="$eco" 'BEGIN { if (f > 0) printf "%.3f", e / f }')"
  awk -v f="$fast" -v e="$eco" -v lo="$T23_MIN_RATIO" 'BEGIN { exit !(f > 0 && e / f >= lo) }' \
    || { say "eco/fast t_cp ratio below $T23_MIN_RATIO: eco should be the slower by more than the bench's spread ($T23_SPREAD)"; rc=1; }
  j=$(awk '$3 == "min-time" {print $4}' "$OUT/t23.log")
  [ "$(jq_job "$j" '"\(.decision.verdict) \(.decision.profile_version)"')" = "planned 1" ] \
    || { say "job $j: $(job_json "$j" | jq -c '.decision | {verdict, profile_version, reason}')"; rc=1; }
  line=$(grep " note " "$OUT/t23.log" | head -1); say "${line#learn lammps note }"
  # Only root or the SlurmUser writes what jobs read; the file is untouched.
  local before; before=$(sha256sum < "$f")
  err=$(as $GC_USER "$GC_SHARE/bin/greenup" profile learn lammps --model hetero --force --site $GC_ETC/greenup.yaml 2>&1); local urc=$?
  [ "$urc" = 3 ] && grep -q "only root or the SlurmUser (root) may write" <<<"$err" || { say "user: exit $urc: $err"; rc=1; }
  [ "$(sha256sum < "$f")" = "$before" ] || { say "the user changed $f"; rc=1; }
  err=$("$GC_SHARE/bin/greenup" profile learn lammps --model amdahl --out - --site $GC_ETC/greenup.yaml 2>&1 >/dev/null)
  grep -q "amdahl needs monitor runs of lammps on 3 node counts; have 2 and 4" <<<"$err" || { say "amdahl: $err"; rc=1; }
  restored || rc=1
  return $rc
}

run_test "1 max-dist on mixed node types: frequencies equal the decision, restored after" t_maxdist
run_test "1n the same job on a site without PrologSlurmctld: its nodes decide" t_maxdist_node_path
run_test "2 min-time under an energy cap with -N 1-4 uses the planned node count" t_mintime_nodes
run_test "3 scancel mid-job restores every node" t_scancel
run_test "4 bad options are rejected at sbatch and nothing is queued" t_bad_options
run_test "5 greenupd stopped: the job runs and the warning appears" t_daemon_down
run_test "6 a second job cannot change a running job's frequencies" t_isolation
run_test "8 per-core DVFS on a shared node sets only the job's cores" t_per_core
run_test "9 five runs from a wrong profile halve the energy error" t_refine
run_test "10 Slurm accounting that measured 0 J is reported as not available, with why" t_accounting
run_test "10s with daemon.slurm_energy, Slurm's accounting holds greenup's measured energy where sacctmgr can set it" t_slurm_energy
run_test "11 greenup jobs and greenup app show a user only their own jobs" t_listing
run_test "12 greenupd down at job end: outcomes are spooled and delivered by the next job" t_spool
run_test "13 failed and cancelled jobs are stored as such and do not refine the profile" t_end_states
run_test "15 a node rebooted mid-job stays at its boot defaults" t_reboot
run_test "16 a reservation whose job Slurm does not run is reclaimed" t_reclaim
run_test "17 a counter that wraps many times in one job is counted in full" t_wraps
run_test "18 the bench responds: a node at a lower frequency computes slower, at less power" t_bench_responds
run_test "19 a real application (LAMMPS over Open MPI) runs on four nodes and gives the right answer" t_real_app
run_test "20 the MPI runtime in LAMMPS: right answer, MPI time per node, only the job's cores lent and only while it runs" t_comm
run_test "21 a hetero profile with swapped compute times is corrected from measured MPI time within 3 runs, and the decision changes" t_comm_refine
run_test "22 an iso_energy profile's overhead terms are refitted from the MPI runtime's calls, bytes and compute time in LAMMPS on 2, 4 and 3 nodes" t_iso_refine
run_test "23 a profile learned from monitor runs of LAMMPS decides the next run and is refined" t_learn
# The hostile-user probes: each file defines its tests and runs them with run_test,
# numbered A1, A2, ... by area. They use the helpers above.
for adv in "$HERE"/adversarial/*.sh; do
  [ -e "$adv" ] && . "$adv"
done
. "$HERE/budgets.sh"
. "$HERE/power.sh"
. "$HERE/gpu.sh"
# 14 runs last of the jobs: on Slurm 22.05, once a running job has been shrunk
# (`scontrol update JobId= NodeList=`), later exclusive jobs often wait about 30 s with
# Reason=Resources while their nodes are idle and the power licenses free: after it, 5
# of the 6 LAMMPS jobs of tests 19-23 waited 24-35 s; tests 14, 18 and 19 alone, test
# 19's job waited 34 s; 18 and 19 alone, under 3 s (docs/failure-and-security.md,
# "Slurm series").
# Run earlier, that cost the 22.05 suite about 200 s; 24.11 shows no such wait.
run_test "14 a job holding more nodes than decided is shrunk at start" t_shrink
run_test "7 every job's measured outcome is in greenupd's store" t_outcomes
rm -f "$BASE"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
