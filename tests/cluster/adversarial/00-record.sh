# Probes of what greenup records and learns from (sourced by e2e.sh).

# A1. A site policy under another name with `monitor: true` records only: its jobs run at
#     the node's own settings, never pinned at the maximum frequency.
a_monitor_flag() {
  local dirs dir j rc=0 pid
  dirs=$(sed -n 's/^policy_dirs: *\[\(.*\)\]/\1/p' $GC_ETC/greenup.yaml)
  dir=${dirs%%,*}
  cat > "$dir/watch.yaml" <<'EOF'
name: watch
description: A site's own monitoring policy, named otherwise.
objective: min_energy
monitor: true
EOF
  pid=$(cat "$GC_RUN/greenupd.pid"); kill -HUP "$pid"; sleep 1
  j=$(submit $GC_USER -N1 -w n1 --exclusive -t 5 --energy-policy=watch --energy-profile=md \
      -o "$OUT/a1-%j.out" "$OUT/read-freqs.sh" "$GC_SYSFS") || { rm -f "$dir/watch.yaml"; kill -HUP "$pid"; return 1; }
  JOBS_WITH_DAEMON+=("$j")
  wait_gone "$j" || rc=1
  rm -f "$dir/watch.yaml"; kill -HUP "$pid"
  say "job $j: $(jq_job "$j" '"\(.decision.verdict) monitor=\(.decision.monitor) \(.decision.reason)"')"
  [ "$(jq_job "$j" '"\(.decision.verdict) \(.decision.monitor)"')" = "unchanged true" ] || rc=1
  # Inside the job every policy of n1 runs as the kernel booted it: no userspace pin.
  local seen=0 _x node pol gov khz
  while read -r _x node pol gov khz; do
    seen=$((seen + 1))
    local want; want=$(grep "^n1/$pol " "$BASE" | awk '{ if ($2 == "userspace") print $2, $5; else print $2, $4 }')
    [ "$gov $khz" = "$want" ] || { say "n1/$pol ran $gov $khz, booted as $want"; rc=1; }
  done < <(grep '^freq n1 ' "$OUT/a1-$j.out")
  [ "$seen" -gt 0 ] || { say "no readings from the job: $(cat "$OUT/a1-$j.out")"; rc=1; }
  "$GC_SHARE/bin/greenup" report "$j" --site $GC_ETC/greenup.yaml | grep -q "not applied: monitor policy" \
    || { say "report of $j: $("$GC_SHARE/bin/greenup" report "$j" --site $GC_ETC/greenup.yaml)"; rc=1; }
  restored || rc=1
  return $rc
}

# A2. A job whose batch step is killed and which is then cancelled looks completed from its
#     epilog (exit 0:0 everywhere, COMPLETING). greenupd settles the end against Slurm's
#     final record: the job is stored cancelled and nothing learns from it.
a_killed_then_cancelled() {
  local j rc=0 vdir=/var/lib/greenup-test/profiles/endstate before after stepd
  before=$(ls $vdir 2>/dev/null | wc -l)
  j=$(submit $GC_USER -N1 -w n3 --exclusive -t 5 --energy-policy=min-time --energy-profile=endstate -o /dev/null \
      --wrap 'sleep 67') || return 1
  JOBS_WITH_DAEMON+=("$j")
  wait_running "$j" || return 1
  sleep 9   # long enough that the run would not be dropped as far too short
  stepd=$(pgrep -f "slurmstepd: \[$j.batch\]")
  [ -n "$stepd" ] || { say "no batch slurmstepd for job $j"; scancel "$j"; return 1; }
  kill -9 $stepd
  sleep 1
  scancel "$j"
  wait_gone "$j" 90 || rc=1
  pkill -f '^sleep 67$' 2>/dev/null
  local got; got=$(jq_settled "$j" '"\(.state) \(.end)"')
  say "job $j: greenupd $got; Slurm $(state "$j")"
  [ "$got" = "closed cancelled" ] || rc=1
  sleep 2   # a refinement, had one been started, runs within a second of the settling
  after=$(ls $vdir 2>/dev/null | wc -l)
  [ "$before" = "$after" ] || { say "the killed run refined the profile: $(ls $vdir)"; rc=1; }
  "$GC_SHARE/bin/greenup" report "$j" --site $GC_ETC/greenup.yaml | grep -q "job ended CANCELLED" \
    || { say "report of $j: $("$GC_SHARE/bin/greenup" report "$j" --site $GC_ETC/greenup.yaml)"; rc=1; }
  restored || rc=1
  return $rc
}

run_test "A1 a site policy with monitor: true under another name changes no frequency" a_monitor_flag
run_test "A2 a job killed then cancelled is stored cancelled and teaches nothing" a_killed_then_cancelled
