# Helpers to run the real applications on the running test cluster and to learn their
# profiles from measured runs. Sourced after tests/cluster/lib.sh by scripts/demo.sh and
# scripts/evaluate.sh; the cluster must be up (tests/cluster/setup.sh).
APPS_DIR=$GC_WORK/apps
APPS_GREENUP=$GC_SHARE/bin/greenup

# Copy the job script, inputs and checks where the test user's jobs can read them, and
# compile the bench's MPI programs there (apps/build.sh).
apps_install() {
  rm -rf "$APPS_DIR"; cp -r "$GC_REPO/tests/cluster/apps" "$APPS_DIR"; chmod -R a+rX "$APPS_DIR"
  "$GC_REPO/tests/cluster/apps/build.sh" "$APPS_DIR"
}
# Submit APP as the test user with the given sbatch options; prints the job id. Output:
# $GC_WORK/APP-JOBID.out, the run's files in $GC_WORK/APP-JOBID/.
app_submit() {
  local app=$1; shift
  runuser -u "$GC_USER" -- bash -c 'cd "$1" && shift && exec "$@"' as "$GC_WORK" \
    sbatch --parsable --exclusive -t 10 -J "$app" -o "$GC_WORK/%x-%j.out" "$@" "$APPS_DIR/run-app.sh" "$app" "$APPS_DIR"
}
# Wait until JOB and its epilogs are done, and greenupd has closed it.
app_wait() {
  while gc_queued "$1"; do sleep 0.5; done
  for _ in $(seq 1 600); do
    [ "$(app_record "$1" | jq -r .state)" = closed ] && return 0; sleep 0.1
  done
}
app_record() { /usr/bin/python3 "$GC_REPO/tests/cluster/gq.py" "$GC_RUN/greenupd.sock" "$1"; }
# "SECONDS JOULES CHECK": JOB's wall time (the longest node's, prolog to epilog) and its
# nodes' energy summed, as each node's RAPL counter (the stand-in's) counted them, and
# whether the application's answer passed its check (ok or FAILED).
app_measured() { # JOB APP
  local ok=FAILED
  grep -q "^check $2: ok" "$GC_WORK/$2-$1.out" 2>/dev/null && ok=ok
  app_record "$1" | jq -r --arg ok $ok '"\([.outcomes[].elapsed_s] | max) \([.outcomes[].energy_j] | add) \($ok)"'
}
# Run APP once with the given sbatch options; prints "JOB SECONDS JOULES CHECK".
app_run() {
  local app=$1 j; shift
  j=$(app_submit "$app" "$@") || return 1
  app_wait "$j"
  echo "$j $(app_measured "$j" "$app")"
}

# Learn APP's profile on this cluster: greenup writes $GC_SHARE/profiles/APP.yaml (version
# 1) from measured runs and greenupd refines it once. Nothing in it is typed in:
#  1. APP runs under monitor as itself (--energy-profile=APP: nothing changed, every node
#     at f_max, recorded under APP) on the two fast nodes, on the two eco nodes and on the
#     job's nodes (NODELIST, default all four);
#  2. `greenup profile learn APP --model hetero --nodes COUNT` builds the hetero section
#     from those runs (docs/profiles.md: each type's time on COUNT nodes; a run on both
#     types is split by the types' times alone); power is the node types' site figures
#     until greenupd fits it;
#  3. one run under min-time (no cap: every node at f_max, but planned from the profile)
#     gives greenupd a planned outcome to refine the profile from (version 2).
# Prints one line per run: "learn APP RUN JOB SECONDS JOULES CHECK", then greenup's notes.
# Usage: app_learn APP [NODELIST COUNT]   (the nodes later runs use; default n[1-4] 4)
app_learn() {
  local app=$1 nodes=${2:-n[1-4]} count=${3:-4} r
  local jobs=()
  r=$(app_run "$app" -N2 -w 'n[1-2]' --energy-policy=monitor --energy-profile="$app") || return 1; echo "learn $app monitor-fast $r"; jobs+=("${r%% *}")
  r=$(app_run "$app" -N2 -w 'n[3-4]' --energy-policy=monitor --energy-profile="$app") || return 1; echo "learn $app monitor-eco $r"; jobs+=("${r%% *}")
  r=$(app_run "$app" -N"$count" -w "$nodes" --energy-policy=monitor --energy-profile="$app") || return 1; echo "learn $app monitor-all $r"; jobs+=("${r%% *}")
  app_learn_profile "$app" "${jobs[@]}" -- --model hetero --nodes "$count" || return 1
  r=$(app_run "$app" -N"$count" -w "$nodes" --energy-policy=min-time --energy-profile="$app"); echo "learn $app min-time $r"
  for _ in $(seq 1 600); do [ -e "/var/lib/greenup-test/profiles/$app/v2.yaml" ] && return 0; sleep 0.1; done
  echo "learn $app: greenupd did not refine the profile" >&2; return 1
}

# Learn APP's amdahl profile on this cluster: APP runs under monitor on 1, 2 and 4 nodes
# (n1, n[1-2], n[1-4]), and `greenup profile learn APP --model amdahl` fits F_p, T_C(0,1)
# and the communication law to them. Prints "learn APP RUN JOB SECONDS JOULES CHECK" per
# run, then greenup's notes. Usage: app_learn_amdahl APP
app_learn_amdahl() {
  local app=$1 r n jobs=()
  for n in 1 2 4; do
    r=$(app_run "$app" -N"$n" -w "$(case $n in 1) echo n1;; 2) echo 'n[1-2]';; *) echo 'n[1-4]';; esac)" \
      --energy-policy=monitor --energy-profile="$app") || return 1
    echo "learn $app monitor-$n $r"; jobs+=("${r%% *}")
  done
  app_learn_profile "$app" "${jobs[@]}" -- --model amdahl
}
# Wait until greenupd has settled how JOB ended against Slurm's final record (a node's
# "completed" is stored as unknown until then, and learning uses completed runs only).
app_settled() {
  for _ in $(seq 1 600); do [ "$(app_record "$1" | jq -r .end)" != unknown ] && return 0; sleep 0.1; done
}
# Once JOBs are settled, greenup profile learn APP OPTIONS... as root into the site's
# profile directory; prints its notes as "learn APP note TEXT".
# Usage: app_learn_profile APP JOB... -- OPTION...
app_learn_profile() {
  local app=$1 out; shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do app_settled "$1"; shift; done; shift
  out=$("$APPS_GREENUP" profile learn "$app" "$@" --force --site "$GC_ETC/greenup.yaml") || return 1
  sed "s/^/learn $app note /" <<<"$out"
}
