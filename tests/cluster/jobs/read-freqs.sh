#!/bin/bash
# Test job: on every node of the job, print the frequency each CPU policy runs at
# ("freq NODE POLICY GOVERNOR KHZ"): the set speed under userspace, else the max.
SYSFS=$1
srun --ntasks-per-node=1 bash -c '
  for p in '"$SYSFS"'/$SLURMD_NODENAME/devices/system/cpu/cpufreq/policy*; do
    g=$(cat $p/scaling_governor)
    if [ "$g" = userspace ]; then k=$(cat $p/scaling_setspeed); else k=$(cat $p/scaling_max_freq); fi
    echo "freq $SLURMD_NODENAME $(basename $p) $g $k"
  done'
