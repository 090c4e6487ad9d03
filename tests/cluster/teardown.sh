#!/bin/bash
# Stop everything setup.sh started, by pid file only, and put back a slurm.conf that
# was there before. PURGE=1 also removes state, logs and sysfs trees.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
gc_stop_pidfile "$GC_RUN/powermodel.pid"
[ -x "$HERE/greenupd.sh" ] && "$HERE/greenupd.sh" stop
for f in "$GC_RUN"/slurmd-*.pid; do [ -e "$f" ] && gc_stop_pidfile "$f"; done
gc_stop_pidfile "$GC_RUN/slurmctld.pid"
# Job steps outlive a killed slurmd; end only the ones that belong to this cluster's jobs.
for p in $(pgrep -x slurmstepd 2>/dev/null); do
  grep -qs "$GC_STATE" /proc/$p/cmdline /proc/$p/environ && kill "$p" 2>/dev/null
done
if [ -f "$GC_RUN/munge-started" ]; then gc_stop_pidfile /run/munge/munged.pid; rm -f "$GC_RUN/munge-started"; fi
rm -f $GC_ETC/plugstack.conf.d/greenup.conf
if [ -f "$GC_RUN/slurm.conf.saved" ]; then mv -f "$GC_RUN/slurm.conf.saved" $GC_ETC/slurm.conf; fi
if [ "${PURGE:-0}" = 1 ]; then rm -rf "$GC_STATE" "$GC_LOG" "$(dirname "$GC_SYSFS")" "$GC_RUN"; fi
echo "teardown: stopped"
