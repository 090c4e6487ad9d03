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
  num_eq "$limit" 660 || { say "greenupd decided under time limit '$limit', expected 660"; rc=1; }
  num_eq "$ghz" 3 || { say "planned at $ghz GHz, expected 3.0"; rc=1; }
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
  num_eq "$limit" 660 || { say "expected the partition's 660 s"; rc=1; }
  num_eq "$ghz" 3 || { say "planned at $ghz GHz, expected 3.0"; rc=1; }
  return $rc
}

# Whether two numbers as jq prints them are equal (jq 1.6 prints 660, jq 1.7 660.0).
num_eq() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "null" && a + 0 == b + 0) }'; }

# A root-only file shaped like a line of /etc/shadow, with a marker no output may show.
adv_secret() {
  local f=$GC_RUN/adv-secret
  printf 'root:$y$j9T$PROBESECRET$PROBEHASH:20228:0:99999:7:::\n' > "$f"
  chmod 0600 "$f"; echo "$f"
}

# Submit a held min-energy job with profile NAME (valid when sbatch checks it), let
# CHANGE turn the site's file into something else, release the job, and check that it
# ran, that its stderr has greenup's warning naming WANT, and nothing of the secret.
adv_swapped_profile() { # NAME CHANGE WANT
  local name=$1 change=$2 want=$3 j rc=0 out
  cp "$GC_SHARE/profiles/md.yaml" "$GC_SHARE/profiles/$name.yaml"
  sed -i "s/^name: md/name: $name/" "$GC_SHARE/profiles/$name.yaml"
  j=$(submit $GC_USER --hold -N1 -w n1 --exclusive -t 5 --energy-policy=min-energy --energy-profile=$name \
      -o "$OUT/adv-$name-%j.out" --wrap 'echo job-ran')
  [ -n "$j" ] || { rm -f "$GC_SHARE/profiles/$name.yaml"; return 1; }
  # On record, refused: its node still measures it and closes it (test 7 checks the outcome).
  JOBS_WITH_DAEMON+=("$j")
  eval "$change"
  scontrol release "$j"
  wait_gone "$j" || rc=1
  rm -f "$GC_SHARE/profiles/$name.yaml"
  out=$OUT/adv-$name-$j.out
  [ "$(state "$j")" = COMPLETED ] || { say "job $j ended $(state "$j")"; rc=1; }
  grep -q job-ran "$out" || { say "the job did not run"; rc=1; }
  grep -q "greenup: job $j on n1: .*$want" "$out" || { say "no warning naming '$want':"; cat "$out"; rc=1; }
  if grep -q PROBESECRET "$out" "$GC_WORK"/*.out 2>/dev/null; then say "the secret reached a job's output:"; grep PROBESECRET "$out"; rc=1; fi
  [ "$(jq_job "$j" .decision.verdict)" = refused ] || { say "job $j not on record as refused: $(jq_job "$j" .decision.verdict)"; rc=1; }
  if job_json "$j" | grep -q PROBESECRET; then say "the secret reached greenupd's record of job $j"; rc=1; fi
  say "$(grep -m1 'greenup:' "$out")"
  restored || rc=1
  return $rc
}

# A10.3 The site's profile directory holds a link to a root-only file (an admin's slip,
#   or a file swapped while the job waited): greenupd refuses it, and nothing of the file
#   reaches the job's stderr.
t_adv_profile_link() {
  local secret; secret=$(adv_secret)
  adv_swapped_profile advlink "ln -sf '$secret' '$GC_SHARE/profiles/advlink.yaml'" "resolves outside"
}

# A10.4 A root-only profile in the site's directory that does not parse: the error the
#   job sees names the file and line, and quotes none of it.
t_adv_profile_private() {
  local secret; secret=$(adv_secret)
  adv_swapped_profile advprivate "cp '$secret' '$GC_SHARE/profiles/advprivate.yaml'; chmod 0600 '$GC_SHARE/profiles/advprivate.yaml'" "details withheld"
}

# A10.5 A profile name that is a path is refused at sbatch with one line, and nothing is queued.
t_adv_profile_path() {
  local out rc=0 before after
  before=$(squeue -h -u $GC_USER | wc -l)
  if out=$(as $GC_USER sbatch --parsable --energy-profile=../../etc/shadow -o /dev/null --wrap true 2>&1); then
    say "queued: $out"; rc=1
  fi
  after=$(squeue -h -u $GC_USER | wc -l)
  [ "$before" = "$after" ] || { say "a job was queued"; rc=1; }
  [ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] || { say "expected one line: $out"; rc=1; }
  grep -q "option --energy-profile: invalid name '../../etc/shadow'" <<<"$out" || { say "got: $out"; rc=1; }
  say "$out"
  return $rc
}

run_test "A10.1 a min-energy job with -t 11 is planned within its 660 s" t_adv_time_limit
run_test "A10.2 a job without -t is decided under its partition's default limit" t_adv_partition_limit
run_test "A10.3 a profile linked out of the site's directory is refused and never quoted" t_adv_profile_link
run_test "A10.4 a root-only profile that does not parse is never quoted to the job" t_adv_profile_private
run_test "A10.5 --energy-profile=../../etc/shadow is refused at sbatch" t_adv_profile_path
