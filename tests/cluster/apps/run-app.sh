#!/bin/bash
# Job script: run one real application from Debian on every node of the job (one MPI rank
# per node, srun --mpi=pmix with Debian's Open MPI), in a directory of its own under the
# job's working directory, then check its output (check.py). Exits non-zero when the
# application fails or its answer is wrong.
# Usage (inside sbatch): run-app.sh lammps|nwchem|hpcc|bsp DIR   (DIR: where this script,
# the inputs, check.py and the programs apps/build.sh compiled are; sbatch runs a copy of
# the script from its spool)
# Environment: LAMMPS_STEPS (500), HPCC_N (1000), BSP_STEPS (2000) and BSP_WORK (600000):
# the size of the input. GC_SLEEPWAIT=0 runs the MPI's own polling waits instead of the
# bench's sleeping ones (for measuring the bench itself; tests/cluster/README.md).
# GC_GUARD=0 hides the in-job guard's settings from the step, and GC_PIN=1 pins each rank
# to one CPU (apps/pin.sh), as a site's --cpu-bind would (tests/cluster/guard_pairs.sh).
set -u
APP=${1:?usage: run-app.sh lammps|nwchem|hpcc|bsp DIR}
HERE=${2:?usage: run-app.sh lammps|nwchem|hpcc|bsp DIR}
DIR=$PWD/$APP-$SLURM_JOB_ID
mkdir -p "$DIR" && cd "$DIR" || exit 1
# The test nodes share one host: ranks reach each other over TCP on loopback. (Shared
# memory between "nodes" polls so hard that CPU quotas turn it into seconds of latency.)
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo
RUN="srun --mpi=pmix --ntasks-per-node=1"
# GC_GUARD=0: the step runs without the in-job guard's settings the plugin hands it, the
# runtime still measuring: the unguarded half of guard_pairs.sh's pairs. Any user can do
# the same in a job (env -u GREENUP_GUARD before the program).
[ "${GC_GUARD:-1}" = 0 ] && RUN="$RUN env -u GREENUP_GUARD"
# GC_PIN=1: each rank owns one CPU, so the stand-in runs it at that CPU's clock and a
# clock the in-job guard raises speeds up the rank that raised it.
[ "${GC_PIN:-0}" = 1 ] && RUN="$RUN $HERE/pin.sh"
# Every MPI wait on the bench sleeps between tests (apps/sleepwait.c, test-only): under the
# stand-in's CPU quotas a polling rank would spend its quota waiting and then be stopped
# when its message comes. Appended after greenup's runtime when the plugin preloads it.
# GC_SLEEPWAIT=0: the MPI's own polling waits; =greenup: greenup's runtime measuring only,
# in block mode (it sleeps in point-to-point waits, not in collectives); both only for
# measuring the bench itself (tests/cluster/spread.sh).
case ${GC_SLEEPWAIT:-1} in
  0) ;;
  greenup)
    export GREENUP_COMM_DVFS='{"enabled":false,"wait":"block"}'
    RUN="$RUN $HERE/preload.sh ${GC_GREENUP_MPI:-/etc/greenup-test/lib/libgreenup_mpi.so}" ;;
  *)
    [ -f "$HERE/sleepwait.so" ] || { echo "run-app.sh: $HERE/sleepwait.so is missing (tests/cluster/apps/build.sh)" >&2; exit 1; }
    RUN="$RUN $HERE/preload.sh $HERE/sleepwait.so" ;;
esac
case $APP in
  lammps)
    # LAMMPS's 3d Lennard-Jones melt example, on an 8 times larger box and run longer.
    sed -e 's/^region\([[:space:]]*\)box block 0 10 0 10 0 10/region\1box block 0 20 0 20 0 20/' \
        -e "s/^run\\([[:space:]]*\\)250\$/run\\1${LAMMPS_STEPS:-500}/" \
        /usr/share/lammps/examples/melt/in.melt > in.melt
    $RUN lmp -in in.melt -log log.lammps > lammps.out 2>&1 ;;
  nwchem)
    # Global Arrays (ARMCI over MPI one-sided windows): over TCP only the point-to-point
    # one-sided component works; it progresses only when the target enters MPI.
    cp "$HERE/benzene.nw" .
    OMPI_MCA_osc=pt2pt $RUN nwchem benzene.nw > nwchem.out 2>&1 ;;
  hpcc)
    # The example input of Debian's hpcc, one process row, as many columns as ranks.
    sed -e "6s/^1000 /${HPCC_N:-1000} /" -e '11s/^2 /1 /' -e "12s/^2 /${SLURM_NTASKS:-1} /" \
        /usr/share/doc/hpcc/examples/_hpccinf.txt > hpccinf.txt
    $RUN hpcc > hpcc.out 2>&1 ;;
  bsp)
    # The bench's cross-check (bsp.c): equal work per rank, an allreduce after each step.
    $RUN "$HERE/bsp" "${BSP_STEPS:-2000}" "${BSP_WORK:-600000}" > bsp.out 2>&1 ;;
  *) echo "run-app.sh: unknown application '$APP': expected lammps, nwchem, hpcc or bsp" >&2; exit 2 ;;
esac
rc=$?
[ $rc = 0 ] || { echo "run-app.sh: $APP exited $rc; its output is in $DIR" >&2; tail -5 "$DIR"/*.out >&2; exit 1; }
/usr/bin/python3 "$HERE/check.py" "$APP" "$DIR"
