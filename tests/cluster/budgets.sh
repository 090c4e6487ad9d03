# Energy budgets on the cluster (sourced by e2e.sh, which defines the helpers). bob's
# jobs run under a second Slurm account, chem, whose budget greenupd holds; alice's run
# under greenup-test, which has none. Jobs name no profile, so each is charged its node's
# full power for its time limit (fast n1-n2: 120 + 40 W; eco n3-n4: 60 + 20 W), figures
# the site config gives without any model.

# The site config with a budget for account chem, loaded by SIGHUP; put back after.
budget_config() { # on|off|site
  local cfg=$GC_ETC/greenup.yaml
  if [ "$1" = on ]; then
    cp "$cfg" "$OUT/greenup.yaml.saved"
    cat >> "$cfg" <<'YAML'
budgets:
  accounts:
    chem:
      amount: 40 kJ
      period: month
      levels:
        - {at: 30%, policy: min-energy}
        - {at: 60%, power_share: 50%}
        - {at: 100%, refuse: true}
YAML
  elif [ "$1" = ceiling ]; then
    cp "$cfg" "$OUT/greenup.yaml.saved"
    cat >> "$cfg" <<'YAML'
budgets:
  site:
    amount: 100 kJ
    period: month
    levels:
      - {at: 1%, max_freq: 1.8GHz}
YAML
  elif [ "$1" = site ] || [ "$1" = strict ]; then
    # A site budget both accounts share, with room for one 9.6 kJ job and not two.
    cp "$cfg" "$OUT/greenup.yaml.saved"
    [ "$1" = strict ] && sed -i 's/^enforce: open$/enforce: strict/' "$cfg"
    cat >> "$cfg" <<'YAML'
budgets:
  site:
    amount: 15 kJ
    period: day
    levels:
      - {at: 100%, refuse: true}
YAML
  else
    cp "$OUT/greenup.yaml.saved" "$cfg"
  fi
  kill -HUP "$(cat "$GC_RUN/greenupd.pid")"
  sleep 1
}

charge_of() { # JOB -> "settled_j measured" from greenupd's store
  /usr/bin/python3 - "$1" <<'PY'
import sqlite3, sys
c = sqlite3.connect("file:/var/lib/greenup-test/greenup.db?mode=ro", uri=True)
r = c.execute("SELECT settled_j, measured FROM budget_charges WHERE job_id = ?", (int(sys.argv[1]),)).fetchone()
m = c.execute("SELECT total(energy_j) FROM outcomes WHERE job_id = ?", (int(sys.argv[1]),)).fetchone()
print(r[0], r[1], m[0])
PY
}

# B1. Each warning level takes its action, the refusal carries the quote, another
# account is untouched, and a closed job settles from what its node measured.
t_budget_levels() {
  local rc=0 j1 j2 j3 j4 j5 v
  sacctmgr -i add account chem >/dev/null 2>&1
  sacctmgr -i add user "$GC_USER2" account=chem >/dev/null 2>&1
  budget_config on
  # 9.6 kJ of 40 kJ (24%): no level.
  j1=$(submit $GC_USER2 -A chem -N1 -w n1 -t 1 -o /dev/null --wrap 'sleep 40') && wait_running "$j1" || rc=1
  # 19.2 kJ (48%): past 30%, min-energy is forced on a job that asked for the default.
  j2=$(submit $GC_USER2 -A chem -N1 -w n2 -t 1 -o /dev/null --wrap 'sleep 40') && wait_running "$j2" || rc=1
  # + 80 W x 120 s = 28.8 kJ (72%): past 60%, planned under half of its node's 80 W.
  j3=$(submit $GC_USER2 -A chem -N1 -w n3 -t 2 -o /dev/null --wrap 'sleep 40') && wait_running "$j3" || rc=1
  # alice's account has no budget.
  j4=$(submit $GC_USER -N1 -w n4 -t 1 -o /dev/null --wrap 'sleep 1') && wait_gone "$j4" || rc=1
  # + 80 W x 180 s = 43.2 kJ > 40 kJ: refused, with the quote (11.2 kJ were left).
  j5=$(submit $GC_USER2 -A chem -N1 -w n4 -t 3 -o /dev/null --wrap 'sleep 1') && wait_gone "$j5" || rc=1
  v=$(jq_job "$j1" '[.decision.policy, (.decision.budgets[0].level_pct // "none")] | @tsv')
  [ "$v" = "monitor	none" ] || { say "job $j1: $v"; rc=1; }
  # floor: jq 1.7 (Debian 13) prints a stored 30.0 as written; a computed number as 30.
  v=$(jq_job "$j2" '[.decision.policy, (.decision.budgets[0].level_pct | floor)] | @tsv')
  [ "$v" = "min-energy	30" ] || { say "job $j2: $v"; rc=1; }
  v=$(jq_job "$j3" '[(.decision.power_cap_w | floor), (.decision.budgets[0].level_pct | floor)] | @tsv')
  [ "$v" = "40	60" ] || { say "job $j3: $v"; rc=1; }
  v=$(jq_job "$j4" '.decision.budgets | length')
  [ "$v" = 0 ] || { say "job $j4 (account greenup-test) charged to $v budgets"; rc=1; }
  v=$(jq_job "$j5" '[.decision.verdict, .decision.reason] | @tsv')
  case $v in
    "refused	"*"predicted 14.4 kJ, 00:03:00 on 1 node; account chem: 11.2 kJ of 40.0 kJ left this month"*) ;;
    *) say "job $j5: $v"; rc=1 ;;
  esac
  # The quote at submission: sbatch --energy-quote prints it (from greenup's cli_filter)
  # and submits nothing.
  local before out
  before=$(squeue -h -u "$GC_USER2" | wc -l)
  if out=$(as "$GC_USER2" sbatch --energy-quote -A chem -N1 -w n4 -t 3 -o /dev/null --wrap 'sleep 1' 2>&1); then
    say "sbatch --energy-quote submitted: $out"; rc=1
  fi
  case $out in
    *"greenup: predicted 14.4 kJ, 00:03:00 on 1 node; account chem: "*" left this month"*"nothing submitted"*) ;;
    *) say "sbatch --energy-quote said: $out"; rc=1 ;;
  esac
  [ "$(squeue -h -u "$GC_USER2" | wc -l)" = "$before" ] || { say "sbatch --energy-quote queued a job"; rc=1; }
  wait_gone "$j1" 60 && wait_gone "$j2" 60 && wait_gone "$j3" 60 || rc=1
  # Settled from the energy its node measured: the store's outcomes, summed.
  for _ in $(seq 1 50); do v=$(charge_of "$j1"); [ "${v%% *}" != None ] && break; sleep 0.2; done
  read -r settled measured outcomes <<<"$v"
  [ "$measured" = 1 ] && python3 -c "import sys; sys.exit(abs($settled - $outcomes) > 1e-6 or $outcomes <= 0)" \
    || { say "job $j1 settled '$v' (settled_j measured outcomes_j)"; rc=1; }
  budget_config off
  return $rc
}

run_test "B1 account budget: each level acts, a refusal carries the quote, --energy-quote submits nothing, settlement uses measured energy" t_budget_levels

# B2. Two users of two accounts start at once against a site budget with room for one of
# them: greenupd admits exactly one, whichever decides first, and refuses the other.
t_budget_race() {
  local rc=0 a b va vb admitted
  budget_config site
  # Each: a fast node (120 + 40 W) for its 60 s limit, 9.6 kJ; 15 kJ holds one.
  a=$(submit $GC_USER -N1 -w n1 -t 1 -o /dev/null --wrap 'sleep 3') &&
  b=$(submit $GC_USER2 -A chem -N1 -w n2 -t 1 -o /dev/null --wrap 'sleep 3') || rc=1
  wait_gone "$a" 60 && wait_gone "$b" 60 || rc=1
  va=$(jq_job "$a" '.decision.verdict'); vb=$(jq_job "$b" '.decision.verdict')
  admitted=0
  for v in "$va" "$vb"; do [ "$v" = refused ] || admitted=$((admitted + 1)); done
  [ "$admitted" = 1 ] || { say "jobs $a ($GC_USER) and $b ($GC_USER2 -A chem): $va and $vb; want one admitted"; rc=1; }
  for j in "$a" "$b"; do
    v=$(jq_job "$j" '[.decision.verdict, .decision.reason] | @tsv')
    case $v in
      refused*) case $v in *"predicted 9.60 kJ"*) ;; *) say "job $j refused without its quote: $v"; rc=1 ;; esac ;;
    esac
  done
  budget_config off
  return $rc
}

run_test "B2 two accounts' jobs at once against the last of a site budget: exactly one is admitted" t_budget_race

# B3. Under enforce: strict, a job a budget would refuse is stopped at submission by
# greenup's cli_filter, with the quote in the message, and nothing is queued.
t_budget_strict_submit() {
  local rc=0 a out before
  budget_config strict
  grep -q '^enforce: strict$' "$GC_ETC/greenup.yaml" || { say "the test config has no enforce line to turn strict"; rc=1; }
  # 9.6 kJ of 15 kJ held by a running job; a second would pass 100%.
  a=$(submit $GC_USER -N1 -w n1 -t 1 -o /dev/null --wrap 'sleep 20') && wait_running "$a" || rc=1
  before=$(squeue -h | wc -l)
  if out=$(as "$GC_USER2" sbatch --parsable -A chem -N1 -w n2 -t 1 -o /dev/null --energy-policy=min-energy --wrap 'sleep 1' 2>&1); then
    say "submitted under a refusing budget: $out"; rc=1
  fi
  case $out in
    *"greenup: refused by an energy budget: predicted 9.60 kJ, 00:01:00 on 1 node; "*" left this day"*) ;;
    *) say "sbatch said: $out"; rc=1 ;;
  esac
  [ "$(squeue -h | wc -l)" = "$before" ] || { say "a refused submission was queued"; rc=1; }
  scancel "$a" 2>/dev/null; wait_gone "$a" 60 || rc=1
  budget_config off
  return $rc
}

run_test "B3 enforce: strict: a job a budget would refuse is stopped at sbatch with its quote" t_budget_strict_submit

# B4. A level's frequency ceiling: min-time, which runs n1 (1.0-3.0 GHz) at 3.0 GHz
# unchecked, is planned and applied at 1.8 GHz once the site budget's level acts.
t_budget_ceiling() {
  local rc=0 j v
  budget_config ceiling
  j=$(submit $GC_USER -N1 -w n1 --exclusive -t 5 --energy-policy=min-time --energy-profile=md \
      -o /dev/null --wrap 'sleep 2') && wait_gone "$j" 60 || rc=1
  v=$(jq_job "$j" '[.decision.plan.nodes[0].freq_ghz, .outcomes[0].freq_ghz, .decision.budgets[0].action] | @tsv')
  [ "$v" = "1.8	1.8	frequency ceiling 1.8 GHz" ] || { say "job $j (planned, applied, action): $v"; rc=1; }
  budget_config off
  return $rc
}

run_test "B4 a budget level's frequency ceiling: min-time is planned and applied at 1.8 GHz, not 3.0" t_budget_ceiling

# B5. Without greenup's cli_filter, `--energy-quote` cannot be answered: the plugin stops
# the submission and says where quotes come from, rather than queue a job the user meant
# only to price. The site's own slurm.conf is copied without its CliFilterPlugins line.
t_quote_without_cli_filter() {
  local rc=0 d out before
  d=$(mktemp -d)
  grep -v '^CliFilterPlugins' "$GC_ETC/slurm.conf" > "$d/slurm.conf"
  echo "PlugStackConfig=$GC_ETC/plugstack.conf" >> "$d/slurm.conf"
  chmod 0755 "$d"; chmod 0644 "$d/slurm.conf"
  before=$(squeue -h | wc -l)
  if out=$(as "$GC_USER" env SLURM_CONF="$d/slurm.conf" sbatch --parsable -N1 -w n1 -t 1 -o /dev/null \
      --energy-quote --energy-policy=min-energy --wrap 'sleep 1' 2>&1); then
    say "submitted a quote request with no cli_filter: $out"; rc=1
  fi
  case $out in
    *"greenup: --energy-quote: nothing submitted, and no quote: quotes come from greenup's cli_filter"*) ;;
    *) say "sbatch said: $out"; rc=1 ;;
  esac
  [ "$(squeue -h | wc -l)" = "$before" ] || { say "a quote request was queued"; rc=1; }
  rm -rf "$d"
  return $rc
}

run_test "B5 --energy-quote without greenup's cli_filter stops the submission and says why" t_quote_without_cli_filter
