#!/usr/bin/env bash
# Paper 002's (PASCoL) experiment on the test cluster's stand-in hardware
# (docs/pascol.md): the displaced-ring one-sided benchmark (ring_rma.c) on all four
# nodes, one rank per node, under libgreenup_mpi in four modes, then the plots.
#   poll   no DVFS, the MPI's own polling waits       {"enabled":false,"wait":"poll"}
#   block  no DVFS, the runtime's blocking waits      {"enabled":false,"wait":"block"}
#   dvfs   DVFS, polling waits                        {"enabled":true,"wait":"poll"}
#   both   DVFS and blocking waits                    {"enabled":true,"wait":"block"}
# It starts its own cluster (without greenup's plugin: the job sets LD_PRELOAD and the
# runtime's settings itself) and tears it down. Run as root, holding the cluster lock:
#   flock -o /tmp/greenup-cluster.lock tests/cluster/apps/pascol.sh
# Environment: ROUNDS (2; each round runs every mode, in a rotated order), SECONDS_PER_POINT
# (1.5), SIZES ("1024 4194304 4": smallest, largest, factor), OUT (pascol-out): raw results
# in OUT/runs.csv, per-mode rank files in OUT/ranks; PLOT=0 skips the plots.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source tests/cluster/lib.sh
ROUNDS=${ROUNDS:-2} SPP=${SECONDS_PER_POINT:-1.5} OUT=${OUT:-pascol-out}
read -r LO HI FACTOR <<<"${SIZES:-1024 4194304 4}"
[ "$(id -u)" = 0 ] || { echo "pascol: run as root (it starts Slurm daemons)" >&2; exit 1; }
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)

cargo build -q --release -p greenup-mpi
LIB=${CARGO_TARGET_DIR:-$PWD/target}/release/libgreenup_mpi.so
DIR=$GC_WORK/pascol
GRANTED=()
cleanup() {
  # Take back the stand-in grant (what the epilog does on a real site).
  for f in "${GRANTED[@]}"; do chown root:root "$f" 2>/dev/null || true; done
  tests/cluster/teardown.sh >/dev/null 2>&1 || true
}
trap cleanup EXIT
tests/cluster/teardown.sh >/dev/null 2>&1 || true
PLUGIN=0 ACCOUNTING=0 tests/cluster/setup.sh >/dev/null
rm -rf "$DIR"; mkdir -p "$DIR"
mpicc -O2 -Wall -Werror -o "$DIR/ring_rma" tests/cluster/apps/ring_rma.c -lm
install -m 0755 "$LIB" "$DIR/libgreenup_mpi.so"

# The stand-in for the prolog's grant: the test user may write the cpufreq controls of
# CPUs 0-1 of each node, the CPUs its job holds (--cpus-per-task=2 on an idle node).
for n in $GC_NODES; do
  for c in 0 1; do
    for k in scaling_max_freq scaling_setspeed; do
      f=$GC_SYSFS/$n/devices/system/cpu/cpufreq/policy$c/$k
      chown "$GC_USER" "$f"; GRANTED+=("$f")
    done
  done
done

# Each task: its node's stand-in tree and energy counter, the runtime preloaded.
cat > "$DIR/task.sh" <<EOF
#!/bin/bash
root=$GC_SYSFS/\$SLURMD_NODENAME
export GREENUP_SYSFS_ROOT=\$root
export ENERGY_FILE=\$root/class/powercap/intel-rapl:0/energy_uj
export ENERGY_RANGE_UJ=\$(cat \$root/class/powercap/intel-rapl:0/max_energy_range_uj)
export GREENUP_MPI_DIR=\$RANKS
export LD_PRELOAD=$DIR/libgreenup_mpi.so
exec $DIR/ring_rma "\$@"
EOF
cat > "$DIR/job.sh" <<EOF
#!/bin/bash
# One job, every mode in turn: the nodes and their CPUs stay the same across modes.
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_osc=pt2pt
scontrol show job -d \$SLURM_JOB_ID | grep -E 'Nodes=.*CPU_IDs'
modes=(poll block dvfs both)
for round in \$(seq 1 $ROUNDS); do
  for i in 0 1 2 3; do
    mode=\${modes[\$(( (i + round - 1) % 4 ))]}
    case \$mode in
      poll) s='{"enabled":false,"wait":"poll"}' ;; block) s='{"enabled":false,"wait":"block"}' ;;
      dvfs) s='{"enabled":true,"wait":"poll"}' ;; both) s='{"enabled":true,"wait":"block"}' ;;
    esac
    export RANKS=$DIR/ranks/\$mode-\$round; mkdir -p \$RANKS
    GREENUP_COMM_DVFS=\$s srun --mpi=pmix --ntasks-per-node=1 $DIR/task.sh $SPP $LO $HI $FACTOR \
      > $DIR/\$mode-\$round.csv || echo "mode \$mode round \$round failed" >&2
  done
done
EOF
chmod -R a+rX "$DIR"; chmod a+x "$DIR"/*.sh; chmod 0777 "$DIR"
load=$(cut -d' ' -f1 /proc/loadavg)
t0=$(date +%s)
job=$(runuser -u "$GC_USER" -- bash -c "cd $DIR && sbatch --parsable -N4 --ntasks-per-node=1 --cpus-per-task=2 -t 60 -o $DIR/job.out $DIR/job.sh")
while gc_queued "$job"; do sleep 1; done
echo "pascol: job $job took $(( $(date +%s) - t0 )) s (load $load at the start, $(cut -d' ' -f1 /proc/loadavg) at the end)"
cat "$DIR/job.out"

CSV=$OUT/runs.csv
[ -s "$CSV" ] || echo "date,mode,round,op,bytes,reps,ops,time_s,latency_us,energy_j,mib,energy_j_per_mib" > "$CSV"
for f in "$DIR"/*-*.csv; do
  b=$(basename "$f" .csv)
  tail -n +2 "$f" | sed "s/^/$(date -u +%F),${b%-*},${b##*-},/" >> "$CSV"
done
rm -rf "$OUT/ranks"; cp -r "$DIR/ranks" "$OUT/ranks"
# What the runtime did in each mode: time at the lowered frequency and lowerings, summed
# over the ranks (the runtime's own rank files).
for d in "$OUT"/ranks/*; do
  jq -s --arg m "$(basename "$d")" -r \
    '"\($m): mpi_s \(map(.mpi_s) | add | . * 10 | round / 10) low_s \(map(.low_s) | add | . * 10 | round / 10) transitions \(map(.transitions) | add) errors \(map(.errors) | add)"' "$d"/rank-*.json || true
done
if [ "${PLOT:-1}" = 1 ]; then
  command -v rsvg-convert >/dev/null || { apt-get update -qq && apt-get install -y -qq librsvg2-bin >/dev/null; }
  /usr/bin/python3 tests/cluster/apps/pascol_plot.py "$CSV" docs/images/pascol.svg
  rsvg-convert -b white -o docs/images/pascol.png docs/images/pascol.svg
  echo "pascol: docs/images/pascol.svg and .png"
fi
