# Probes of the plugin's side of a job's start: the job's time limit, and the site's
# profile and policy directories. Sourced by ../e2e.sh (see README.md).

# A10.1 A min-energy job with `-t 11` is planned to finish within its 660 s. By hand
#   from md.yaml on n1 (fast, 1.0-3.0 GHz): T(f) = 600 s * 3.0/f; without a limit
#   min-energy picks 1.8 GHz (1,000 s, past the limit); within 660 s only 3.0 GHz fits.
t_adv_time_limit() {
  local j rc=0
  j=$(submit $GC_USER -N1 -w n1 --exclusive -t 11 --energy-policy=min-energy --energy-profile=md \
      -o /dev/null --wrap 'sleep 1') || return 1
  JOBS_WITH_DAEMON+=("$j")
  wait_gone "$j" || return 1
  local ghz t limit
  ghz=$(jq_job "$j" '.decision.plan.nodes[0].freq_ghz')
  t=$(jq_job "$j" '.decision.plan.predicted.time_s')
  limit=$(jq_job "$j" '.request.time_limit_s')
  say "job $j: limit $limit s, planned $ghz GHz for $t s"
  [ "$limit" = 660 ] || { say "greenupd decided under time limit '$limit', expected 660"; rc=1; }
  [ "$ghz" = 3 ] || { say "planned at $ghz GHz, expected 3.0"; rc=1; }
  awk -v t="$t" 'BEGIN { exit !(t != "null" && t <= 660) }' || { say "predicted $t s is past the 660 s limit"; rc=1; }
  return $rc
}

# A10.2 A job without -t is decided under its partition's DefaultTime (slurmctld's
#   effective limit), here 11 minutes: the same 3.0 GHz as A10.1. The partition then goes
#   back to no default, which for MaxTime=INFINITE means no limit, as before.
t_adv_partition_limit() {
  local j rc=0
  scontrol update PartitionName=debug DefaultTime=11 || return 1
  j=$(submit $GC_USER -N1 -w n1 --exclusive --energy-policy=min-energy --energy-profile=md \
      -o /dev/null --wrap 'sleep 1')
  scontrol update PartitionName=debug DefaultTime=UNLIMITED
  [ -n "$j" ] || return 1
  JOBS_WITH_DAEMON+=("$j")
  wait_gone "$j" || return 1
  local limit ghz; limit=$(jq_job "$j" '.request.time_limit_s'); ghz=$(jq_job "$j" '.decision.plan.nodes[0].freq_ghz')
  say "job $j without -t: decided under '$limit' s at $ghz GHz"
  [ "$limit" = 660 ] || { say "expected the partition's 660 s"; rc=1; }
  [ "$ghz" = 3 ] || { say "planned at $ghz GHz, expected 3.0"; rc=1; }
  return $rc
}

run_test "A10.1 a min-energy job with -t 11 is planned within its 660 s" t_adv_time_limit
run_test "A10.2 a job without -t is decided under its partition's default limit" t_adv_partition_limit
