#!/bin/sh
# Run a task with one more library preloaded, after any the task already has (greenup's
# MPI runtime, which the plugin preloads for some policies, must come first: it calls the
# PMPI_ names that tests/cluster/apps/sleepwait.so defines). Test-only.
# Usage (inside srun): preload.sh LIBRARY PROGRAM [ARG...]
lib=$1
shift
export LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$lib"
exec "$@"
