#!/bin/sh
# Pin this task to one CPU, as `srun --cpu-bind=cores` pins a rank to a core of its own
# on a real node (the test cluster runs task/none: its nodes share the host's CPUs, which
# Slurm's binding would hand out twice). Node k of the job takes the host's CPU k mod
# nproc, so the two ranks of a two-node job run on two host CPUs. The stand-in
# (powermodel.py) then gives the task its one CPU's speed, not its job's. Test-only.
# Usage (inside srun): pin.sh PROGRAM [ARG...]
n=$(nproc)
exec taskset -c $(( (${SLURM_NODEID:-0} + ${SLURM_LOCALID:-0}) % n )) "$@"
