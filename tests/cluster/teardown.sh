#!/bin/bash
# Stop everything setup.sh started, by pid file only, and put back a slurm.conf that
# was there before. PURGE=1 also removes state, logs and sysfs trees.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
gc_stop_pidfile "$GC_RUN/powermodel.pid"
[ -x "$HERE/greenupd.sh" ] && "$HERE/greenupd.sh" stop
for f in "$GC_RUN"/slurmd-*.pid; do [ -e "$f" ] && gc_stop_pidfile "$f"; done
gc_stop_pidfile "$GC_RUN/slurmctld.pid"
[ -x "$HERE/accounting.sh" ] && "$HERE/accounting.sh" stop
# Job steps outlive a killed slurmd; end only the ones that belong to this cluster's jobs.
for p in $(pgrep -x slurmstepd 2>/dev/null); do
  grep -qs "$GC_STATE" /proc/$p/cmdline /proc/$p/environ && kill "$p" 2>/dev/null
done
# The stand-in removes its cgroups when it stops; this catches a stand-in that was killed.
/usr/bin/python3 "$HERE/powermodel.py" --cleanup 2>/dev/null
if [ -f "$GC_RUN/munge-started" ]; then gc_stop_pidfile /run/munge/munged.pid; rm -f "$GC_RUN/munge-started"; fi
rm -f $GC_ETC/plugstack.conf.d/greenup.conf
[ -f "$GC_RUN/plugstack-greenup.conf.saved" ] && mv -f "$GC_RUN/plugstack-greenup.conf.saved" $GC_ETC/plugstack.conf.d/greenup.conf
for f in greenup.yaml cli_filter.lua job_submit.lua greenup_power.lua; do grep -qs greenup-test $GC_ETC/$f && rm -f $GC_ETC/$f; done
for f in slurm.conf greenup.yaml cli_filter.lua job_submit.lua; do
  [ -f "$GC_RUN/$f.saved" ] && mv -f "$GC_RUN/$f.saved" $GC_ETC/$f
done
if [ -f "$GC_RUN/plugin.installed" ]; then
  rm -f "$GC_PLUGIN_SO" "$GC_RUN/plugin.installed"
  [ -f "$GC_RUN/plugin.saved" ] && mv -f "$GC_RUN/plugin.saved" "$GC_PLUGIN_SO"
fi
if [ "${PURGE:-0}" = 1 ]; then rm -rf "$GC_STATE" "$GC_LOG" "$(dirname "$GC_SYSFS")" "$GC_RUN" "$GC_SHARE"; fi
echo "teardown: stopped"
