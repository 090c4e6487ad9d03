#!/bin/bash
# Start greenup's test cluster on this host: munge, slurmctld and four slurmd (n1..n4,
# multiple-slurmd mode on 127.0.0.1:17101-17104), per-node sysfs trees, the test-only
# stand-in hardware (CPU speed and power follow the applied frequency), and (when built)
# greenupd with the spank_greenup plugin and cli_filter.
# Installs Slurm and munge first if they are missing. Run as root.
# Environment: PLUGIN=0 starts the cluster without greenup (for the overhead benchmark).
# ACCOUNTING=0 starts it without Slurm accounting (no MariaDB, no slurmdbd).
# INSTALLED=1 uses the files the greenup package installed (/usr/bin/greenup,
# /usr/sbin/greenupd, the plugin in Slurm's plugin directory, /usr/share/greenup)
# instead of the build tree; only the test site config and profiles come from here.
# GC_PHYSICS=published runs the stand-in on real nodes' measured watts (lib.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
case $GC_PHYSICS in
  law | published) ;;
  *) echo "setup: GC_PHYSICS=$GC_PHYSICS: expected law (greenup.yaml's closed form) or published (tests/physics/cpus.yaml)" >&2; exit 2 ;;
esac
PLUGIN=${PLUGIN:-1}
INSTALLED=${INSTALLED:-0}
ACCOUNTING=${ACCOUNTING:-1}
if [ "$INSTALLED" = 1 ]; then
  for f in /usr/bin/greenup /usr/sbin/greenupd "$GC_PLUGIN_SO" /usr/share/greenup/cli_filter.lua; do
    [ -e "$f" ] || { echo "setup: INSTALLED=1 but $f is missing: install the greenup package" >&2; exit 1; }
  done
fi

"$HERE/install.sh"

# munge: a key, its directories, and the daemon unless one is running already.
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
# A new cluster may reuse job ids: saved per-job settings, stored jobs and refined
# profiles of an earlier (perhaps interrupted) run would be taken for this run's.
rm -rf "$GC_GREENUP_RUN" /var/lib/greenup-test/greenup.db* /var/lib/greenup-test/profiles
# Spooled outcomes of an earlier run name jobs this run's greenupd never saw.
rm -rf "$GC_SPOOL"
# accounting.sh makes a new accounting database each run, so slurmdbd gives the cluster
# a new ClusterID; Slurm 23.11 and later refuse to start on state saved under another.
rm -f "$GC_STATE/ctld/clustername"
mkdir -p "$GC_RUN" "$GC_LOG" "$GC_STATE/ctld" "$GC_WORK" "$GC_GREENUP_RUN"
# slurmd puts its step sockets in its spool directory but does not create it.
# Slurm's PMIx plugin puts each step's client directory under TmpFS, named by job and
# step only: the nodes sharing this host each need their own.
for n in $GC_NODES; do mkdir -p "$GC_STATE/d-$n" "$GC_STATE/tmp-$n"; chmod 1777 "$GC_STATE/tmp-$n"; done
chmod 0777 "$GC_WORK"; chmod +t "$GC_WORK"
if ! { [ -f /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
  runuser -u munge -- /usr/sbin/munged
  touch "$GC_RUN/munge-started"
fi
munge -n | unmunge >/dev/null

for u in $GC_USER $GC_USER2; do id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"; done

"$HERE/sysfs.sh"

# Keep any Slurm and greenup files we did not write, so teardown can put them back.
for f in slurm.conf greenup.yaml cli_filter.lua job_submit.lua; do
  if [ -f $GC_ETC/$f ] && [ ! -f "$GC_RUN/$f.saved" ] && ! grep -qs "greenup-test" $GC_ETC/$f; then
    cp -p $GC_ETC/$f "$GC_RUN/$f.saved"
  fi
done
# The package's plugstack line, put back by teardown.
if [ -f $GC_ETC/plugstack.conf.d/greenup.conf ] && [ ! -f "$GC_RUN/plugstack-greenup.conf.saved" ] \
   && ! grep -qs "$GC_SYSFS" $GC_ETC/plugstack.conf.d/greenup.conf; then
  cp -p $GC_ETC/plugstack.conf.d/greenup.conf "$GC_RUN/plugstack-greenup.conf.saved"
fi
rm -f $GC_ETC/cli_filter.lua
GREENUPD_BIN=$GC_SHARE/bin/greenupd
if [ "$PLUGIN" = 1 ] && [ "$INSTALLED" = 1 ]; then
  # The package's binaries, plugin, policies and cli_filter; the test site config and profiles.
  mkdir -p $GC_SHARE/profiles
  cp "$HERE"/profiles/*.yaml $GC_SHARE/profiles/
  chmod -R a+rX $GC_SHARE
  # The package's own MPI runtime, at its default path.
  gc_site_yaml "$HERE/greenup.yaml" |
    sed -e "s|^policy_dirs: .*|policy_dirs: [/usr/share/greenup/policies]|" -e "/^  mpi_runtime: /d" > $GC_ETC/greenup.yaml
  chmod 0644 $GC_ETC/greenup.yaml
  GREENUPD_BIN=/usr/sbin/greenupd
  PROLOG_SLURMCTLD_BIN=/usr/sbin/greenup-prolog-slurmctld
  sed -e "s|^local GREENUP = .*|local GREENUP = \"/usr/bin/greenup\"  -- greenup-test|" \
      -e "s|^local SITE = .*|local SITE = \"$GC_ETC/greenup.yaml\"|" \
      /usr/share/greenup/cli_filter.lua > $GC_ETC/cli_filter.lua
elif [ "$PLUGIN" = 1 ]; then
  # greenup's files: site config, policies, test profiles, plugin, CLI for the cli_filter.
  # A policy or profile another checkout installed here must not be loaded with this one's.
  rm -rf $GC_SHARE/policies $GC_SHARE/profiles
  mkdir -p $GC_SHARE/policies $GC_SHARE/profiles $GC_SHARE/bin
  cp "$GC_REPO"/policies/*.yaml $GC_SHARE/policies/
  cp "$HERE"/profiles/*.yaml $GC_SHARE/profiles/
  install -m 0755 "$GC_BIN_DIR/greenup" $GC_SHARE/bin/greenup
  install -m 0755 "$GC_BIN_DIR/greenupd" $GC_SHARE/bin/greenupd
  install -m 0755 "$GC_BIN_DIR/greenup-prolog-slurmctld" $GC_SHARE/bin/greenup-prolog-slurmctld
  PROLOG_SLURMCTLD_BIN=$GC_SHARE/bin/greenup-prolog-slurmctld
  # The MPI runtime, where the test site config's dvfs.mpi_runtime points.
  if [ -f "$GC_BIN_DIR/libgreenup_mpi.so" ]; then
    install -D -m 0644 "$GC_BIN_DIR/libgreenup_mpi.so" $GC_SHARE/lib/libgreenup_mpi.so
  fi
  chmod -R a+rX $GC_SHARE
  gc_site_yaml "$HERE/greenup.yaml" > $GC_ETC/greenup.yaml
  chmod 0644 $GC_ETC/greenup.yaml
  [ -f "$GC_PLUGIN_SO" ] && ! [ -f "$GC_RUN/plugin.installed" ] && cp -p "$GC_PLUGIN_SO" "$GC_RUN/plugin.saved"
  install -m 0755 "$GC_BIN_DIR/libspank_greenup.so" "$GC_PLUGIN_SO"
  touch "$GC_RUN/plugin.installed"
  sed -e "s|^local GREENUP = .*|local GREENUP = \"$GC_SHARE/bin/greenup\"  -- greenup-test|" \
      -e "s|^local SITE = .*|local SITE = \"$GC_ETC/greenup.yaml\"|" \
      "$GC_REPO/etc/cli_filter.lua" > $GC_ETC/cli_filter.lua
fi
CLI_FILTER=""
# Power held in Slurm's queue (power.enforce: queue): greenup's job_submit script and one
# license per watt of each cap, both from the test site config. The site config starts
# under the ledger, where the script changes no job; the power tests (power.sh) turn the
# queue on by rewriting the site config and the script's table.
JOB_SUBMIT=""
if [ "$PLUGIN" = 1 ]; then
  GC_GREENUP=$GC_SHARE/bin/greenup
  [ "$INSTALLED" = 1 ] && GC_GREENUP=/usr/bin/greenup
  JS_SRC="$GC_REPO/etc/job_submit.lua"
  [ "$INSTALLED" = 1 ] && JS_SRC=/usr/share/greenup/job_submit.lua
  { echo "-- greenup-test"; sed -e "s|^local TABLE = .*|local TABLE = \"$GC_ETC/greenup_power.lua\"|" "$JS_SRC"; } > $GC_ETC/job_submit.lua
  "$GC_GREENUP" site licenses $GC_ETC/greenup.yaml --lua $GC_ETC/greenup_power.lua > "$GC_RUN/licenses.conf"
  sed -i '1s/^/-- greenup-test\n/' $GC_ETC/greenup_power.lua
  JOB_SUBMIT="JobSubmitPlugins=lua
$(cat "$GC_RUN/licenses.conf")"
fi
# Jobs are decided once on the controller (PrologSlurmctld), before their nodes start. A
# job submitted with --comment=greenup-node-path starts as on a site without it: its
# nodes' prologs decide. The wrapper keeps what greenup-prolog-slurmctld says, which
# slurmctld itself discards.
PROLOG_SLURMCTLD=""
if [ "$PLUGIN" = 1 ]; then
  mkdir -p $GC_SHARE/bin
  cat > $GC_SHARE/bin/prolog-slurmctld <<SH
#!/bin/sh
[ "\${SLURM_JOB_COMMENT:-}" = greenup-node-path ] && exit 0
exec $PROLOG_SLURMCTLD_BIN config=$GC_ETC/greenup.yaml 2>>$GC_LOG/prolog-slurmctld.log
SH
  chmod 0755 $GC_SHARE/bin/prolog-slurmctld
  # Job ids start again with a new cluster: an earlier run's lines would name this run's jobs.
  : > $GC_LOG/prolog-slurmctld.log
  PROLOG_SLURMCTLD="PrologSlurmctld=$GC_SHARE/bin/prolog-slurmctld"
fi
ACCT_CONF="AccountingStorageType=accounting_storage/none"
if [ "$ACCOUNTING" = 1 ]; then
  ACCT_CONF="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=17119"
fi
if [ "$PLUGIN" = 1 ] && [ -f $GC_ETC/cli_filter.lua ]; then CLI_FILTER="CliFilterPlugins=cli_filter/lua"; fi
# Each node pair's feature is its node type in the site config.
FEATURE12=fast FEATURE34=eco
[ "$GC_PHYSICS" = published ] && FEATURE12=rome FEATURE34=hsw
cat > $GC_ETC/slurm.conf <<CONF
ClusterName=$GC_NAME
SlurmctldHost=localhost
SlurmctldPort=17100
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$GC_STATE/ctld
SlurmdSpoolDir=$GC_STATE/d-%n
TmpFS=$GC_STATE/tmp-%n
SlurmctldPidFile=$GC_RUN/slurmctld.pid
SlurmdPidFile=$GC_RUN/slurmd-%n.pid
SlurmctldLogFile=$GC_LOG/slurmctld.log
SlurmdLogFile=$GC_LOG/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups in containers.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Run the job prolog (and greenup's job_prolog) on every node at allocation time,
# so every node runs at its decided frequency before the batch script starts.
PrologFlags=Alloc
${PROLOG_SLURMCTLD}
${CLI_FILTER}
${JOB_SUBMIT}
# The host has fewer cores than the virtual nodes advertise; trust slurm.conf.
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
${ACCT_CONF}
JobCompType=jobcomp/none
SlurmdTimeout=60
InactiveLimit=0
KillWait=3
MinJobAge=600
${EXTRA_CONF:-}
NodeName=n[1-2] NodeHostname=localhost NodeAddr=127.0.0.1 Port=17101-17102 CPUs=$GC_CPUS RealMemory=2000 Feature=$FEATURE12 State=UNKNOWN
NodeName=n[3-4] NodeHostname=localhost NodeAddr=127.0.0.1 Port=17103-17104 CPUs=$GC_CPUS RealMemory=2000 Feature=$FEATURE34 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

mkdir -p $GC_ETC/plugstack.conf.d
[ -f $GC_ETC/plugstack.conf ] || echo "include $GC_ETC/plugstack.conf.d/*.conf" > $GC_ETC/plugstack.conf
rm -f $GC_ETC/plugstack.conf.d/greenup.conf
if [ "$PLUGIN" = 1 ] && [ -f "$GC_PLUGIN_SO" ]; then
  echo "optional $GC_PLUGIN_SO config=$GC_ETC/greenup.yaml sysfs_root=$GC_SYSFS/%n meter=$GC_SHARE/bin/greenup" > $GC_ETC/plugstack.conf.d/greenup.conf
fi

if [ "$PLUGIN" = 1 ]; then GREENUPD_BIN=$GREENUPD_BIN "$HERE/greenupd.sh" start; fi

# The stand-in hardware (powermodel.py), started before slurmd so that each node's slurmd
# and everything it starts run in that node's cgroup from the first job on.
# law: static and dynamic watts of each node type as in greenup.yaml (fast: n1-n2, eco:
# n3-n4); an eco node's core at its 2.4 GHz does 0.8 of what a fast node's core does at
# 3.0 GHz.
# published: the CPUs' measured node watts (tests/physics/cpus.yaml); a Xeon node does 0.3
# of an EPYC node's work (tests/cluster/published.yaml), and 90 % of the host's cores are
# shared in proportion, so the EPYC nodes are not slowed to the law bench's share.
if [ "$GC_PHYSICS" = published ]; then
  SPECS="n1:epyc-7502 n2:epyc-7502 n3:xeon-e5-2680v3:0.3 n4:xeon-e5-2680v3:0.3"
  export PHYSICS=$GC_REPO/tests/physics/cpus.yaml
  SHARE=$(awk -v c="$(nproc)" 'BEGIN { printf "%.4f", 0.9 * c / 2.6 }'); export SHARE
else
  SPECS="n1:40:120 n2:40:120 n3:20:60:0.8 n4:20:60:0.8"
fi
# shellcheck disable=SC2086  # SPECS is a list of node specs
nohup /usr/bin/python3 "$HERE/powermodel.py" "$GC_SYSFS" "$GC_RUN" $SPECS \
  > "$GC_LOG/powermodel.log" 2>&1 &
echo $! > "$GC_RUN/powermodel.pid"
sleep 0.5
kill -0 "$(cat "$GC_RUN/powermodel.pid")" 2>/dev/null \
  || { echo "setup: the stand-in hardware did not start:" >&2; cat "$GC_LOG/powermodel.log" >&2; exit 1; }
if [ "$ACCOUNTING" = 1 ]; then "$HERE/accounting.sh" start; fi
slurmctld
for n in $GC_NODES; do slurmd -N $n; done
gc_wait_idle 30 || { sinfo; echo "setup: nodes did not become idle" >&2; exit 1; }

echo "setup: cluster $GC_NAME up: $(sinfo -h -o '%D nodes %t' | tr '\n' ' ')"
