# greenup's GPU test on the test cluster (issue 25), sourced by e2e.sh after power.sh:
# Slurm's gres/gpu gives n1 GPUs, and greenup reads and holds them through the NVML
# stand-in (tests/nvml), found by the site config's dvfs.nvml_library as on a real node.

# G1. A job's GPUs measured, held and restored through Slurm's gres/gpu. For this test
#     only, Slurm gives n1 two GPUs (gres.conf names two device files of the test's own,
#     GresTypes=gpu; slurmctld and the slurmds restart to read them), the NVML stand-in
#     has two GPUs of minors 0 and 1, fully busy (70 W static + 630 W dynamic at
#     1980 MHz, the clock falling to 1200 MHz to fit a limit), and greenup.yaml gives
#     the fast type those two GPUs with power held by the queue (P3's, cap 4 kW). A job
#     holds one of n1's GPUs (--gres=gpu:1) and asks 780 W with -L, which greenup's
#     job_submit script raises to the least a node of the type draws, 1445 W (its CPUs at
#     their lowest clock, its GPUs weighed at their top: the site gives them no clock
#     range yet). Checked:
#     - the job's GPU, and only it, is set while the job runs: its limit is its part of
#       the node's share, in closed form share x 700 / (160 + 2 x 700) W clamped into
#       [200, 700] W, with the share the licenses the job holds (the prolog hands the
#       GPU to its worker, which the epilog's log line names);
#     - n1's other GPU is never written to, and after the job the job's GPU is back at
#       700 W (the stand-in's own log of writes);
#     - the job's report measures the GPU (source nvml), at the stand-in's power under
#       that limit: round(70 + 630 x (1200/1980)^3) W, within 2 % (the few milliseconds
#       at 700 W before the limit is set);
#     - an ordinary user's `greenup gpu set` is refused, and changes nothing;
#     - a second job, scancelled while it holds its GPU at its part, leaves it at 700 W;
#     - a planned job's GPU clock (t_gpu_clock, below).
#     Slurm's and greenup's config are put back and the daemons restarted after.
G1_STATE=$GC_STATE/nvml
G1_DEV=$GC_STATE/gpu-dev
G1_LIB=$GC_SHARE/lib/libnvidia-ml.so.1
G1_CAP_W=4000
# One stand-in GPU's power at clock F (MHz) fully busy, watts: the stand-in's closed form.
g1_gpu_w() { awk -v f="$1" 'BEGIN { printf "%.3f", 70 + 630 * (f / 1980) ^ 3 }'; }
g1_put() { printf '%s\n' "$3" > "$G1_STATE/$1/$2"; }
# Whether slurmctld answers, within 3 s (sinfo and scontrol wait far longer for a
# controller that is gone).
g1_ctld_up() { timeout 3 scontrol ping 2>/dev/null | grep -q 'is UP'; }
# Stop every Slurm daemon of the cluster, then start them again from the config in place.
# A reconfigure just before (P5 puts its site back) may still be handing slurmctld over
# to a new process (24.11 re-executes itself), and a stopped slurmctld may hold its port
# a moment longer: so wait for the controller before stopping it, and start the new one
# until it answers.
g1_restart_slurm() {
  for _ in $(seq 1 20); do g1_ctld_up && break; sleep 0.5; done
  scontrol shutdown >/dev/null 2>&1
  for _ in $(seq 1 150); do pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || break; sleep 0.2; done
  local up=0 try
  for try in 1 2 3 4 5; do
    slurmctld
    for _ in $(seq 1 10); do g1_ctld_up && { up=1; break; }; sleep 0.5; done
    [ $up = 1 ] && break
    say "slurmctld did not answer after start $try; starting it again"
    pkill -x slurmctld; sleep 1
  done
  [ $up = 1 ] || return 1
  for n in $GC_NODES; do slurmd -N "$n" || return 1; done
  gc_wait_idle 60
}
g1_cluster() { # on|off
  local cfg=$GC_ETC/greenup.yaml conf=$GC_ETC/slurm.conf
  if [ "$1" = on ]; then
    cp "$conf" "$OUT/slurm.conf.g1-saved"; cp "$cfg" "$OUT/greenup.yaml.g1-saved"
    local built
    built=$(sh "$GC_REPO/tests/nvml/build.sh" "$OUT/nvml-build") || return 1
    mkdir -p "$(dirname "$G1_LIB")" "$G1_DEV"
    install -m 0755 "$built" "$G1_LIB"
    echo "$G1_STATE" > "$G1_LIB.dir"
    rm -rf "$G1_STATE"; mkdir -p "$G1_STATE"
    echo 2 > "$G1_STATE/count"
    local i f v
    for i in 0 1; do
      mkdir -p "$G1_STATE/$i"
      for f in minor:$i uuid:GPU-g1-$i name:Stand-in "sm_clocks:1980 1200" mem_clock:2619 idle_mw:70000 \
        dyn_mw:630000 util:100 limit_mw:700000 limit_min_mw:200000 limit_max_mw:700000 \
        limit_default_mw:700000 locked: energy_mj:0 stamp_ns:0; do
        g1_put $i "${f%%:*}" "${f#*:}"
      done
      : > "$G1_STATE/$i/writes"
      # Slurm only stats the files gres.conf names: device nodes of NVIDIA's major, which
      # nothing opens (the stand-in is NVML here).
      # Where mknod is not allowed (a container), a plain file passes Slurm's stat.
      [ -e "$G1_DEV/nvidia$i" ] || mknod "$G1_DEV/nvidia$i" c 195 "$i" 2>/dev/null || touch "$G1_DEV/nvidia$i" || return 1
    done
    echo "NodeName=n1 Name=gpu File=$G1_DEV/nvidia[0-1]" > "$GC_ETC/gres.conf"
    sed -e 's/^NodeName=n\[1-2\] \(.*\) Port=17101-17102 \(.*\)$/NodeName=n1 \1 Port=17101 \2 Gres=gpu:2\nNodeName=n2 \1 Port=17102 \2/' \
      "$OUT/slurm.conf.g1-saved" > "$conf"
    echo "GresTypes=gpu" >> "$conf"
    grep -q '^NodeName=n1 .*Gres=gpu:2' "$conf" || { say "could not give n1 GPUs in slurm.conf"; return 1; }
    # The fast type gets its two GPUs, NVML is the stand-in, and power is held by the queue.
    sed -e "s/^power_cap: .*/power_cap: ${G1_CAP_W}W/" -e "s/^    power_cap: .*/    power_cap: ${G1_CAP_W}W/" \
      -e 's/^\(    power: {dynamic_w: 120, static_w: 40, gamma: 3}\)$/\1\n    gpus: {count: 2, power: {dynamic_w: 630, static_w: 70}}/' \
      -e "s|^  per_core_shared: false$|  per_core_shared: false\n  nvml_library: $G1_LIB|" \
      "$OUT/greenup.yaml.g1-saved" > "$cfg"
    printf 'power: {enforce: queue, reserve: 0.3}\n' >> "$cfg"
    grep -q '^    gpus: {count: 2' "$cfg" && grep -q "nvml_library: $G1_LIB" "$cfg" \
      || { say "could not give the fast type GPUs in greenup.yaml"; return 1; }
  else
    cp "$OUT/slurm.conf.g1-saved" "$conf"; cp "$OUT/greenup.yaml.g1-saved" "$cfg"
    rm -f "$GC_ETC/gres.conf"
  fi
  local line
  line=$("$GC_GREENUP_BIN" site licenses "$cfg" --lua "$GC_ETC/greenup_power.lua.new") || return 1
  { echo "-- greenup-test"; cat "$GC_ETC/greenup_power.lua.new"; } > "$GC_ETC/greenup_power.lua"
  rm -f "$GC_ETC/greenup_power.lua.new"
  sed -i "s/^Licenses=.*/$line/" "$conf"
  g1_restart_slurm || return 1
  kill -HUP "$(cat "$GC_RUN/greenupd.pid")"
  sleep 2  # greenupd's reload
}
t_gpu_job() {
  GC_GREENUP_BIN=$GC_SHARE/bin/greenup
  [ -x "$GC_GREENUP_BIN" ] || GC_GREENUP_BIN=/usr/bin/greenup
  local rc=0 j gpus lic share part want_mw other
  gc_wait_idle 30 || { say "nodes not idle: $(sinfo -h -o '%N %T')"; return 1; }
  g1_cluster on || { say "could not give n1 GPUs"; g1_cluster off; return 1; }
  say "n1: $(scontrol show node n1 | grep -o 'Gres=[^ ]*')"
  j=$(submit $GC_USER -w n1 -N1 -n1 --gres=gpu:1 -L greenup_w:780 -t 5 -o "$OUT/g1-%j.out" \
    --wrap 'echo "gpus=$SLURM_JOB_GPUS"; sleep 8') || { say "not submitted"; g1_cluster off; return 1; }
  wait_running "$j" || rc=1
  for _ in $(seq 1 50); do grep -q '^gpus=' "$OUT/g1-$j.out" 2>/dev/null && break; sleep 0.2; done
  gpus=$(sed -n 's/^gpus=//p' "$OUT/g1-$j.out")
  lic=$(scontrol show job "$j" | grep -o 'greenup_w:[0-9]*' | head -1 | cut -d: -f2)
  case $gpus in 0) other=1 ;; 1) other=0 ;; *) say "the job holds GPUs '$gpus', want one of n1's two"; other="" ; rc=1 ;; esac
  share=${lic:-0}
  part=$(awk -v s="$share" 'BEGIN { p = s * 700 / (160 + 2 * 700); if (p < 200) p = 200; if (p > 700) p = 700; printf "%.3f", p }')
  want_mw=$(awk -v p="$part" 'BEGIN { printf "%d", p * 1000 + 0.5 }')
  # The worker sets the limit a few milliseconds after the prolog.
  for _ in $(seq 1 50); do [ "$(cat "$G1_STATE/$gpus/limit_mw" 2>/dev/null)" = "$want_mw" ] && break; sleep 0.2; done
  say "job $j: GPU $gpus, licenses $share W; GPU limit $(cat "$G1_STATE/$gpus/limit_mw" 2>/dev/null) mW while it runs (closed form $want_mw: part $part W of the share)"
  [ "$(cat "$G1_STATE/$gpus/limit_mw" 2>/dev/null)" = "$want_mw" ] || { say "the job's GPU is not at its part"; rc=1; }
  # An ordinary user cannot lift it.
  local err
  err=$(as $GC_USER "$GC_SHARE/bin/greenup" gpu set --power-limit 700 --gpus "$gpus" --nvml "$G1_LIB" 2>&1) && { say "a user's gpu set succeeded: $err"; rc=1; }
  grep -q "only root changes GPU settings" <<<"$err" || { say "a user's gpu set: $err"; rc=1; }
  [ "$(cat "$G1_STATE/$gpus/limit_mw")" = "$want_mw" ] || { say "the user's gpu set changed the limit"; rc=1; }
  wait_gone "$j" 60 || rc=1
  # Restored exactly, and the other GPU never written to.
  [ "$(cat "$G1_STATE/$gpus/limit_mw")" = 700000 ] || { say "GPU $gpus not restored: $(cat "$G1_STATE/$gpus/limit_mw") mW"; rc=1; }
  say "GPU $gpus's writes: $(tr '\n' ';' < "$G1_STATE/$gpus/writes")"
  [ "$(tr '\n' ';' < "$G1_STATE/$gpus/writes")" = "power_limit $want_mw;power_limit 700000;" ] || { say "want one set and one restore"; rc=1; }
  if [ -n "$other" ]; then
    [ ! -s "$G1_STATE/$other/writes" ] && [ "$(cat "$G1_STATE/$other/limit_mw")" = 700000 ] \
      || { say "n1's other GPU $other was changed: $(cat "$G1_STATE/$other/writes")"; rc=1; }
  fi
  local line; line=$(grep -h "job $j on n1: GPU start" "$GC_LOG/slurmd-n1.log" | tail -1)
  say "epilog: ${line#*: }"
  [[ "$line" == *"done by its worker"* ]] || { say "the epilog did not find the worker's start"; rc=1; }
  # The report: the GPU measured by NVML at the limit's power.
  local gw avg
  gw=$(g1_gpu_w 1200)
  for _ in $(seq 1 100); do [ "$(jq_job "$j" '.outcomes[0].gpu.source // empty')" = nvml ] && break; sleep 0.2; done
  avg=$(jq_job "$j" '.outcomes[0].gpu.avg_power_w // empty')
  say "job $j's GPU: $(job_json "$j" | jq -c '.outcomes[0].gpu')"
  awk -v a="${avg:-0}" -v w="$gw" 'BEGIN { exit !(a >= w * 0.98 && a <= w * 1.02) }' \
    || { say "GPU average power ${avg:-none} W, want the stand-in's $gw W under the limit (within 2 %)"; rc=1; }
  # A job cancelled while it holds its GPU: the epilog restores it all the same.
  local k kg
  k=$(submit $GC_USER -w n1 -N1 -n1 --gres=gpu:1 -L greenup_w:780 -t 5 -o "$OUT/g1-%j.out" \
    --wrap 'echo "gpus=$SLURM_JOB_GPUS"; sleep 120') || rc=1
  if [ -n "$k" ] && wait_running "$k"; then
    for _ in $(seq 1 50); do grep -q '^gpus=' "$OUT/g1-$k.out" 2>/dev/null && break; sleep 0.2; done
    kg=$(sed -n 's/^gpus=//p' "$OUT/g1-$k.out")
    for _ in $(seq 1 50); do [ "$(cat "$G1_STATE/$kg/limit_mw" 2>/dev/null)" != 700000 ] && break; sleep 0.2; done
    say "job $k (scancelled): GPU $kg at $(cat "$G1_STATE/$kg/limit_mw" 2>/dev/null) mW before scancel"
    scancel "$k"; wait_gone "$k" 60 || rc=1
    [ "$(cat "$G1_STATE/$kg/limit_mw" 2>/dev/null)" = 700000 ] \
      || { say "job $k's GPU $kg not restored after scancel: $(cat "$G1_STATE/$kg/limit_mw" 2>/dev/null) mW"; rc=1; }
  else
    rc=1
  fi
  t_gpu_clock || rc=1
  g1_cluster off || { say "could not put Slurm and greenup back"; rc=1; }
  return $rc
}

# G1, continued: a planned job's GPU clock. The fast type's GPUs get the clock range
#     1200-1980 MHz in one step (gears 1200 and 1980, the stand-in's two clocks), and the
#     application gpuclk's profile says its node's GPUs compute 15 s at the top clock
#     beside 20 s of CPU time. Under min-energy, at 1200 MHz (S = 1.65) the GPUs compute
#     24.75 s at 630 x 1.65^-3 W each instead of 15 s at 630 W, 6.9 kJ instead of
#     18.9 kJ for the two, against 9.75 s more of the node's static 180 W: 1.8 kJ.
#     So the plan locks them at 1200 MHz (greenup::model::gpus, worked here by hand).
#     Checked: the plan says 1200 MHz; the job's GPU, and only it, is locked at
#     1200-1200 while the job runs; the epilog unlocks it, as it was before.
t_gpu_clock() {
  local rc=0 cfg=$GC_ETC/greenup.yaml j gpus other mhz
  sed -i 's/^    gpus: {count: 2, power: /    gpus: {count: 2, clocks_mhz: {min: 1200, max: 1980, step: 780}, power: /' "$cfg"
  grep -q 'clocks_mhz: {min: 1200' "$cfg" || { say "could not give the GPUs a clock range"; return 1; }
  cat > "$GC_SHARE/profiles/gpuclk.yaml" <<'YAML'
name: gpuclk
version: 1
hetero:
  iterations: 1
  nodes: 1
  node_types:
    fast: {t_cp_s: 20, t_cm_s: 0}
gpu:
  nodes: 1
  node_types:
    fast: {busy_s: 15}
YAML
  kill -HUP "$(cat "$GC_RUN/greenupd.pid")"
  sleep 2
  j=$(submit $GC_USER -w n1 -N1 -n1 --gres=gpu:1 -L greenup_w:1560 -t 5 -o "$OUT/g1-%j.out" \
    --energy-policy=min-energy --energy-profile=gpuclk \
    --wrap 'echo "gpus=$SLURM_JOB_GPUS"; sleep 8') || { say "not submitted"; rm -f "$GC_SHARE/profiles/gpuclk.yaml"; return 1; }
  wait_running "$j" || rc=1
  for _ in $(seq 1 50); do grep -q '^gpus=' "$OUT/g1-$j.out" 2>/dev/null && break; sleep 0.2; done
  gpus=$(sed -n 's/^gpus=//p' "$OUT/g1-$j.out")
  case $gpus in 0) other=1 ;; 1) other=0 ;; *) say "the job holds GPUs '$gpus'"; rm -f "$GC_SHARE/profiles/gpuclk.yaml"; return 1 ;; esac
  for _ in $(seq 1 50); do [ "$(cat "$G1_STATE/$gpus/locked" 2>/dev/null)" = "1200 1200" ] && break; sleep 0.2; done
  mhz=$(jq_job "$j" '.decision.plan.nodes[0].gpu_mhz // empty')
  say "job $j: plan $(jq_job "$j" '.decision.verdict') at GPU ${mhz:-top} MHz; GPU $gpus locked '$(cat "$G1_STATE/$gpus/locked")' while it runs, GPU $other '$(cat "$G1_STATE/$other/locked")'"
  [ "$mhz" = 1200 ] || { say "the plan did not lower the GPUs to 1200 MHz"; rc=1; }
  [ "$(cat "$G1_STATE/$gpus/locked")" = "1200 1200" ] || { say "the job's GPU is not locked at 1200 MHz"; rc=1; }
  [ -z "$(cat "$G1_STATE/$other/locked")" ] && [ ! -s "$G1_STATE/$other/writes" ] \
    || { say "n1's other GPU was changed: $(tr '\n' ';' < "$G1_STATE/$other/writes")"; rc=1; }
  wait_gone "$j" 60 || rc=1
  say "GPU $gpus's writes: $(tr '\n' ';' < "$G1_STATE/$gpus/writes")"
  [ -z "$(cat "$G1_STATE/$gpus/locked")" ] || { say "GPU $gpus still locked after the job"; rc=1; }
  grep -qx "lock 1200 1200" "$G1_STATE/$gpus/writes" && grep -qx unlock "$G1_STATE/$gpus/writes" \
    || { say "want a lock and an unlock in GPU $gpus's writes"; rc=1; }
  rm -f "$GC_SHARE/profiles/gpuclk.yaml"
  return $rc
}
run_test "G1 a job's GPUs under Slurm's gres/gpu: only its GPU held at its part of the node's power, restored after, measured by NVML" t_gpu_job
