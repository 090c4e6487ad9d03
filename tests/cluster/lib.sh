# Shared settings for greenup's single-host test cluster. Sourced by the other scripts.
# Everything the cluster creates lives under these paths so teardown can remove it.
GC_NAME=greenup-test
GC_STATE=${GC_STATE:-/var/spool/greenup-test}     # slurmctld state, slurmd spools
GC_RUN=${GC_RUN:-/run/greenup-test}               # pid files
GC_LOG=${GC_LOG:-/var/log/greenup-test}           # daemon logs
GC_SYSFS=${GC_SYSFS:-/var/lib/greenup-test/sysfs} # one sysfs tree per node: $GC_SYSFS/n1 ...
GC_ETC=${GC_ETC:-/etc/slurm}
GC_SHARE=${GC_SHARE:-/etc/greenup-test}              # policies, test profiles, binaries for the cli_filter
GC_GREENUP_RUN=${GC_GREENUP_RUN:-/run/greenup}    # the plugin's saved settings (run_dir)
GC_SPOOL=${GC_SPOOL:-/var/spool/greenup-test/spool} # outcomes greenupd did not take yet: $GC_SPOOL/n1 ... (daemon.spool_dir)
GC_WORK=${GC_WORK:-/var/lib/greenup-test/work}    # job scripts and outputs, readable by the test user
GC_USER=${GC_USER:-alice}
GC_USER2=${GC_USER2:-bob}
GC_NODES="n1 n2 n3 n4"
GC_CPUS=4
# The stand-in hardware's physics (powermodel.py, tests/cluster/README.md):
# law        greenup.yaml's own closed form (fast and eco nodes), from which the cluster
#            tests derive the numbers they expect;
# published  real nodes' measured watts (tests/physics/cpus.yaml: n1-n2 AMD EPYC 7502,
#            n3-n4 Intel Xeon E5-2680 v3, tests/cluster/published.yaml), and each job's
#            clock sensitivity from GC_BETA in its environment: the demo and
#            scripts/evaluate.sh.
GC_PHYSICS=${GC_PHYSICS:-law}
GC_PLUGIN_SO=/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_greenup.so
GC_REPO=${GC_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

# Stop the process in pid file $1 and wait for it to exit.
gc_stop_pidfile() {
  [ -f "$1" ] || return 0
  local p; p=$(cat "$1" 2>/dev/null)
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    kill "$p" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null
  fi
  rm -f "$1"
}

# squeue -h with ARGS, asked again while it fails. A slurmctld too busy to answer in
# time is not an empty queue: a wait that read the failure's empty output as "every job
# gone" stopped sampling power while the last job still ran. A job id slurmctld has
# already purged is gone, not a failure. Exit 1, naming squeue's error on stderr, only
# when it failed for 10 s running.
gc_squeue() { # ARGS...
  local out err
  err=$(mktemp)
  for _ in $(seq 1 40); do
    if out=$(squeue -h "$@" 2>"$err"); then rm -f "$err"; [ -z "$out" ] || echo "$out"; return 0; fi
    grep -q 'Invalid job id' "$err" && { rm -f "$err"; return 0; }
    sleep 0.25
  done
  echo "squeue $*: $(head -1 "$err")" >&2; rm -f "$err"; return 1
}
# Whether any of JOBS (comma-separated ids) is still pending, running or completing;
# "yes" too when squeue cannot answer, so a wait never ends on a failure.
gc_queued() { # JOBS
  local out
  out=$(gc_squeue -j "$1") || return 0
  [ -n "$out" ]
}

# Wait until every node is idle (or $1 seconds pass).
gc_wait_idle() {
  local n; n=$(echo $GC_NODES | wc -w)
  for _ in $(seq 1 $(( ${1:-20} * 5 ))); do
    [ "$(sinfo -h -t idle -o %D 2>/dev/null)" = "$n" ] && return 0
    sleep 0.2
  done
  return 1
}
# Print the test site config $1 for GC_PHYSICS: on published physics its node types,
# nodes and caps are tests/cluster/published.yaml's.
gc_site_yaml() {
  if [ "$GC_PHYSICS" = published ]; then
    awk -v snip="$GC_REPO/tests/cluster/published.yaml" '
      /^node_types:/ { skip = 1; while ((getline l < snip) > 0) if (l !~ /^#/) print l }
      /^job_energy_limit:/ { skip = 0 }
      !skip' "$1"
  else
    cat "$1"
  fi
}
GC_BIN_DIR=${GC_BIN_DIR:-${CARGO_TARGET_DIR:-$GC_REPO/target}/release}
