# Hostile-user probes against greenupd itself (sourced by ../e2e.sh): a user floods its
# listeners with idle connections while a job starts; jobs use up the partition's power
# budget before another starts. Each job must still be decided, capped and recorded.

# An ordinary user holds N idle connections to greenupd's Unix socket and N to its TCP
# port (never sending a line) until killed; prints "held UNIX TCP PID" once they are open.
flood() { # USER N
  as "$1" /usr/bin/python3 -c '
import os, socket, sys, time
path, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held, u, t = [], 0, 0
for _ in range(n):
    for fam, addr in ((socket.AF_UNIX, path), (socket.AF_INET, ("127.0.0.1", port))):
        s = socket.socket(fam)
        try:
            s.connect(addr)
            held.append(s)
            if fam == socket.AF_UNIX: u += 1
            else: t += 1
        except OSError:
            s.close()
print("held", u, t, os.getpid(), flush=True)
time.sleep(600)
' "$SOCK" 17470 "$2"
}

# A20. A user holding 600 idle connections on each listener (from two processes: more
# than the 1,024 all callers once shared, and more than every user limit: 16 per user,
# 128 for all users, 128 unauthenticated) does not keep a job from being planned and
# recorded.
t_daemon_flood() {
  local rc=0 j k fifo line holders=() pids=()
  for k in 1 2; do
    fifo=$(mktemp -u); mkfifo "$fifo"
    flood $GC_USER2 300 > "$fifo" &
    pids+=($!)
    read -r -t 60 line < "$fifo" || { say "flood $k did not start"; rm -f "$fifo"; rc=1; break; }
    rm -f "$fifo"
    holders+=("${line##* }")
    say "flooding user $GC_USER2, process $k: ${line% *}"
  done
  if [ $rc = 0 ]; then
    j=$(submit $GC_USER -N1 -w n3 --exclusive -t 5 --energy-policy=max-dist --energy-profile=solver \
        -o "$OUT/a20-%j.out" --wrap 'sleep 1') || rc=1
  fi
  if [ $rc = 0 ]; then
    JOBS_WITH_DAEMON+=("$j")
    wait_gone "$j" || rc=1
  fi
  [ ${#holders[@]} = 0 ] || kill "${holders[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  [ $rc = 0 ] || return 1
  local v; v=$(jq_job "$j" .decision.verdict)
  [ "$v" = planned ] || { say "job $j under the flood: verdict '$v': $(job_json "$j")"; rc=1; }
  [ "$(jq_job "$j" '.outcomes | length')" = 1 ] || { say "job $j has no outcome: $(job_json "$j")"; rc=1; }
  grep -q "no decision from greenupd" "$OUT/a20-$j.out" && { say "job $j ran without a decision"; rc=1; }
  # Refusals are logged, and at most about one line a second for each limit.
  local refusals; refusals=$(grep -c "connection refused" "$GC_LOG/greenupd.log")
  [ "$refusals" -ge 1 ] || { say "no refused connection in greenupd.log"; rc=1; }
  [ "$refusals" -le 60 ] || { say "$refusals refusal lines: the log is not rate-limited"; rc=1; }
  say "job $j: $v; greenupd logged $refusals refusal line(s)"
  restored || rc=1
  return $rc
}

# A21. Jobs that hold the whole partition budget (debug: 1 kW) leave 0 W or less for the
# next job; it is still capped (budget_limited, at its nodes' lowest frequency) and on
# record, not run at full power unrecorded.
t_daemon_used_up_budget() {
  local rc=0 i j held=() cap
  # Seven one-CPU monitor jobs on the fast nodes each hold a fast node's full power,
  # 120 + 40 W: 7 x 160 W = 1120 W, more than the partition's 1000 W.
  for i in 1 2 3 4 5 6 7; do
    j=$(submit $GC_USER -w n$((i % 2 + 1)) -n1 -t 5 --energy-policy=monitor -o /dev/null --wrap 'sleep 120') || rc=1
    held+=("$j")
  done
  for j in "${held[@]}"; do wait_running "$j" || rc=1; done
  if [ $rc = 0 ]; then
    for _ in $(seq 1 50); do
      [ "$(jq_job "${held[6]}" .state 2>/dev/null)" = open ] && break; sleep 0.2
    done
    j=$(submit $GC_USER -N1 -w n3 --exclusive -t 5 --energy-policy=min-energy --energy-profile=solver \
        -o "$OUT/a21-%j.out" --wrap 'sleep 1') || rc=1
    [ $rc = 0 ] && { JOBS_WITH_DAEMON+=("$j"); wait_gone "$j" || rc=1; }
  fi
  scancel "${held[@]}"; for i in "${held[@]}"; do wait_gone "$i" >/dev/null; done
  [ $rc = 0 ] || return 1
  local v reason
  v=$(jq_job "$j" .decision.verdict); reason=$(jq_job "$j" .decision.reason)
  cap=$(jq_job "$j" .decision.power_cap_w)
  [ "$v" = budget_limited ] || { say "job $j: verdict '$v' ($reason)"; rc=1; }
  case $reason in *"no power budget is left"*) ;; *) say "job $j: reason '$reason'"; rc=1 ;; esac
  [ "$cap" = 0 ] || [ "$cap" = 0.0 ] || { say "job $j planned under $cap W"; rc=1; }
  # eco nodes' lowest frequency is 1.2 GHz.
  [ "$(jq_job "$j" '.decision.plan.nodes[0].freq_ghz')" = 1.2 ] || { say "job $j: $(jq_job "$j" .decision.plan.nodes)"; rc=1; }
  say "job $j: $v at $(jq_job "$j" '.decision.plan.nodes[0].freq_ghz') GHz: $reason"
  restored || rc=1
  return $rc
}

run_test "A20 a user's idle-connection flood on both listeners does not keep a job from its decision" t_daemon_flood
run_test "A21 a used-up partition power budget still caps and records the next job" t_daemon_used_up_budget
