#!/usr/bin/env bash
# Mechanism tests of libgreenup_mpi (docs/runtime.md): two ranks under a local mpirun,
# with the cpufreq controls stood in by a tree of plain files in a temporary directory.
# They check that a long blocking call lowers its core's control during the call and
# restores it exactly after; that a large transfer lowers at once; that short calls are
# left alone; that a wait on a large nonblocking transfer lowers at once and a small one
# does not; that block mode lets a rank waiting in a fence or MPI_Win_wait sleep; that
# `use mpi_f08` calls are counted once; that a policy shared with a CPU outside the
# process's affinity mask is never written; that the rank files are written (also at an exit without MPI_Finalize) and
# count exactly the calls and bytes the program makes; and that the program's results do
# not depend on the preload. Energy is not measured here (tests/cluster does that).
set -euo pipefail
cd "$(dirname "$0")/../.."
# GREENUP_MPI_LIB: test that library, built elsewhere, with the MPI found here
# (tests/slurm24/runtime.sh: Open MPI 5 in the Debian 13 root); else build it.
if [ -z "${GREENUP_MPI_LIB:-}" ]; then
  source scripts/lib.sh
  need_debs openmpi-bin libopenmpi-dev jq gfortran
  cargo build -q -p greenup-mpi
fi
LIB=${GREENUP_MPI_LIB:-$PWD/target/debug/libgreenup_mpi.so}
nm -D --defined-only "$LIB" | grep -w MPI_Send > /dev/null \
  || { echo "FAIL: $LIB was built without interception (no mpicc when it was built?)"; exit 1; }
T=$(mktemp -d); [ -n "${KEEP:-}" ] && echo "keeping $T"
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
mpicc -O2 -Wall -o "$T/probe" tests/runtime/probe.c
mpif90 -O2 -o "$T/fprobe" tests/runtime/probe.f90
mpif90 -O2 -o "$T/f08probe" tests/runtime/probe_f08.f90

# Root in CI; shared memory without single-copy, which containers often forbid.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
# Each rank bound to its own core where there are two: a rank that finds its core already
# lowered by another rank leaves it to that rank, which a shared core would make a race.
export OMPI_MCA_rmaps_base_oversubscribe=1
BIND=none; [ "$(nproc)" -ge 2 ] && BIND=core
export OMPI_MCA_hwloc_base_binding_policy=$BIND

LOW=1000000
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

# tree ROOT [SHARED]: one policy per CPU the machine has; even ones under the userspace
# governor (set speed 2 GHz), odd ones under powersave (ceiling 3 GHz); policy900 covers
# CPU 900, outside any mask here. SHARED=1 makes policy0 cover CPUs 0 and 1.
tree() {
  local root=$1 shared=${2:-0} n
  n=$(nproc --all)
  rm -rf "$root"
  for p in $(seq 0 $((n - 1))) 900; do
    local d=$root/devices/system/cpu/cpufreq/policy$p cpus=$p
    [ "$p" = 0 ] && [ "$shared" = 1 ] && cpus="0 1"
    mkdir -p "$d"
    echo "$cpus" > "$d/affected_cpus"
    echo "3000000 2000000 $LOW" > "$d/scaling_available_frequencies"
    echo "$LOW" > "$d/scaling_min_freq"
    if [ $((p % 2)) = 0 ]; then
      echo userspace > "$d/scaling_governor"
      echo 2000000 > "$d/scaling_setspeed"
    else
      echo powersave > "$d/scaling_governor"
      echo '<unsupported>' > "$d/scaling_setspeed"
    fi
    echo 3000000 > "$d/scaling_max_freq"
  done
}

# run NAME MODE [PRELOAD] [COMM_DVFS JSON] [LAUNCHER...]: run the probe in $T/NAME
# ($PROBE: the program, the C one unless set).
run() {
  local name=$1 mode=$2 preload=${3:-} dvfs=${4:-}
  shift 4 || shift $#
  local out=$T/$name
  mkdir -p "$out/ranks"
  local env=(GREENUP_SYSFS_ROOT="$T/sys" GREENUP_MPI_DIR="$out/ranks")
  [ -n "$dvfs" ] && env+=(GREENUP_COMM_DVFS="$dvfs")
  [ -n "$preload" ] && env+=(LD_PRELOAD="$LIB")
  env "${env[@]}" "$@" mpirun -np 2 -x GREENUP_SYSFS_ROOT -x GREENUP_MPI_DIR \
    -x GREENUP_COMM_DVFS -x LD_PRELOAD "${PROBE:-$T/probe}" "$mode" "$out" > "$out/stdout" 2> "$out/stderr" || true
}
field() { jq -r ".$3" "$T/$1/ranks/rank-$2.json" 2>/dev/null; }
# lowered NAME: the controls the "during" record shows changed from the untouched tree.
lowered() { diff "$T/untouched" "$T/$1/during" | grep -c '^>' || true; }
# restored NAME: rank 0 saw the untouched values after the call, and every file is byte for byte as it was.
restored() { cmp -s "$T/untouched" "$T/$1/after" && diff -r "$T/sys.orig" "$T/sys" > /dev/null; }

LONG='{"timeout_us":60000000}'

# 1. Without the preload: no rank files, no control touched; the reference checksums.
tree "$T/sys"; cp -r "$T/sys" "$T/sys.orig"
run bare-short short "" "{}"
run bare-wait wait "" "{}"
cp "$T/bare-wait/after" "$T/untouched"
if [ -z "$(ls "$T/bare-short/ranks")" ] && diff -r "$T/sys.orig" "$T/sys" > /dev/null \
  && grep -q checksum "$T/bare-short/stdout"; then
  ok "without the preload nothing is written"
else fail "without the preload: $(ls "$T/bare-short/ranks") $(cat "$T/bare-short/stderr")"; fi

# 2. Short calls with the timeout out of reach: left alone, counted exactly.
run short short 1 "$LONG"
if cmp -s "$T/bare-short/stdout" "$T/short/stdout"; then ok "same results with the preload"
else fail "results differ: $(cat "$T/bare-short/stdout" "$T/short/stdout" "$T/short/stderr")"; fi
for r in 0 1; do
  got="$(field short $r calls) $(field short $r bytes) $(field short $r transitions) $(field short $r complete)"
  # 200 sends and 200 receives of 8 bytes, an Allreduce of 8 bytes, two Barriers.
  if [ "$got" = "403 3208 0 true" ]; then ok "rank $r: short calls counted and left alone"
  else fail "rank $r short: calls bytes transitions complete = $got, expected 403 3208 0 true"; fi
done
jq -e '.wall_s >= .mpi_s and .mpi_s > 0 and .low_s == 0' "$T/short/ranks/rank-0.json" > /dev/null \
  && ok "rank 0: MPI time within wall time" || fail "times: $(cat "$T/short/ranks/rank-0.json")"
# The step model's windows: every stretch outside MPI counted once, so they add up to the
# wall time less the MPI time (within 2 ms and 2 %), on a greenup window.
jq -e '.steps.window_s as $ws | ((.steps.compute_s | add) - (.wall_s - .mpi_s)) as $d
       | $ws >= 0.01 and (if $d < 0 then -$d else $d end) <= 0.002 + 0.02 * .wall_s
       and ([.steps.compute_s[] | select(. < 0 or . > $ws + 1e-9)] | length) == 0' \
  "$T/short/ranks/rank-0.json" > /dev/null \
  && ok "rank 0: compute windows add up to its time outside MPI" \
  || fail "windows: $(cat "$T/short/ranks/rank-0.json")"
diff -r "$T/sys.orig" "$T/sys" > /dev/null && ok "short calls touched no control" || fail "short calls wrote a control"

# 2b. Every intercepted C call (tests/runtime/probe.c, mode "all"): the same results with
# the preload measuring only, and with every call lowered (threshold and timeout 0) in
# both wait modes; each rank's file counts exactly the calls the program says it made.
run bare-all all "" "{}"
for cfg in measure block poll; do
  case $cfg in
    measure) dvfs= ;;
    *) dvfs="{\"timeout_us\":0,\"threshold_bytes\":0,\"strided_threshold_bytes\":0,\"wait\":\"$cfg\"}" ;;
  esac
  run "all-$cfg" all 1 "$dvfs"
  cmp -s "$T/bare-all/stdout" "$T/all-$cfg/stdout" && grep -q checksum "$T/all-$cfg/stdout" \
    && ok "every call, $cfg: same results" \
    || fail "every call, $cfg: $(cat "$T/bare-all/stdout" "$T/all-$cfg/stdout" "$T/all-$cfg/stderr")"
  for r in 0 1; do
    [ "$(field "all-$cfg" $r calls)" = "$(cat "$T/all-$cfg/calls-$r")" ] \
      && ok "every call, $cfg: rank $r counted $(cat "$T/all-$cfg/calls-$r") calls" \
      || fail "every call, $cfg, rank $r: program made $(cat "$T/all-$cfg/calls-$r"), file says $(field "all-$cfg" $r calls)"
  done
  if [ "$cfg" != measure ]; then
    [ "$(field "all-$cfg" 0 transitions)" -ge 1 ] && diff -r "$T/sys.orig" "$T/sys" > /dev/null \
      && ok "every call, $cfg: lowered ($(field "all-$cfg" 0 transitions) times) and restored" \
      || fail "every call, $cfg: transitions $(field "all-$cfg" 0 transitions); $(diff -r "$T/sys.orig" "$T/sys")"
  fi
done

# 2c. Windows on the program's own memory (MPI_Win_create, MPI_Win_create_dynamic) need
# one-sided transfers between processes: shared memory with single-copy (CMA), which a
# container may forbid. Checked where the MPI offers it.
export OMPI_MCA_btl_vader_single_copy_mechanism=cma
run bare-win wincreate "" "{}"
if grep -q checksum "$T/bare-win/stdout"; then
  for cfg in measure block; do
    case $cfg in measure) dvfs= ;; block) dvfs='{"enabled":false,"timeout_us":0}' ;; esac
    run "win-$cfg" wincreate 1 "$dvfs"
    cmp -s "$T/bare-win/stdout" "$T/win-$cfg/stdout" \
      && [ "$(field "win-$cfg" 0 calls) $(field "win-$cfg" 1 calls)" = "$(cat "$T/win-$cfg/calls-0") $(cat "$T/win-$cfg/calls-1")" ] \
      && ok "MPI_Win_create and _create_dynamic windows, $cfg: same results, counted exactly" \
      || fail "windows, $cfg: $(cat "$T/bare-win/stdout" "$T/win-$cfg/stdout" "$T/win-$cfg/stderr") calls $(field "win-$cfg" 0 calls)"
  done
else
  echo "skipped: this MPI cannot create windows on a program's memory here: $(head -c 300 "$T/bare-win/stderr")"
fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none

# 2d. MPI_THREAD_MULTIPLE: two threads per rank at once, each exchanging 64 KiB
# nonblocking (their waits lowered by the table, sharing the core's lowering) and
# fencing its own window (each window with its own barrier), in both wait modes.
run bare-threads threads "" "{}"
for w in block poll; do
  run "threads-$w" threads 1 "{\"timeout_us\":60000000,\"wait\":\"$w\"}"
  if cmp -s "$T/bare-threads/stdout" "$T/threads-$w/stdout" && grep -q checksum "$T/threads-$w/stdout" \
    && [ "$(field "threads-$w" 0 calls) $(field "threads-$w" 1 calls)" = "$(cat "$T/threads-$w/calls-0") $(cat "$T/threads-$w/calls-1")" ] \
    && [ "$(field "threads-$w" 0 transitions)" -ge 1 ] && diff -r "$T/sys.orig" "$T/sys" > /dev/null; then
    ok "threads, $w: same results, counted exactly, lowered $(field "threads-$w" 0 transitions) times and restored"
  else fail "threads, $w: $(cat "$T/bare-threads/stdout" "$T/threads-$w/stdout" "$T/threads-$w/stderr") $(cat "$T/threads-$w/ranks/rank-0.json")"; fi
done

# 2e. More windows alive at once than greenup gives barriers to (1,024): the rest keep
# the MPI's own fence, on every rank alike, and every fence still matches.
run bare-manywin manywin "" "{}"
run manywin manywin 1 '{"enabled":false,"wait":"block"}' timeout 300
cmp -s "$T/bare-manywin/stdout" "$T/manywin/stdout" && grep -q checksum "$T/manywin/stdout" \
  && ok "1,100 windows in block mode: same results" \
  || fail "1,100 windows: $(cat "$T/bare-manywin/stdout" "$T/manywin/stdout" "$T/manywin/stderr" | head -20)"

# 3. A small receive that waits 0.4 s: lowered after the 500 µs timeout, in both wait modes.
for wait in block poll; do
  run "wait-$wait" wait 1 "{\"wait\":\"$wait\"}"
  n=$(lowered "wait-$wait")
  changed=$(diff "$T/untouched" "$T/wait-$wait/during" | grep '^>' || true)
  if [ "$n" = 1 ] && [[ "$changed" == *" $LOW" ]] && [[ "$changed" != *policy900* ]]; then
    ok "$wait: the waiting rank's core is at $LOW kHz during the wait ($changed)"
  else fail "$wait: during the wait $n controls changed: $changed"; fi
  restored "wait-$wait" && ok "$wait: restored exactly after the call" \
    || fail "$wait: not restored: $(diff "$T/untouched" "$T/wait-$wait/after")"
  # The wait lasts the peer's 0.4 s sleep: at least 0.3 s of it at the lowered frequency.
  jq -e '.transitions >= 1 and .low_s >= 0.3 and .low_s <= .mpi_s and .calls == 2 and .bytes == 8' \
    "$T/wait-$wait/ranks/rank-0.json" > /dev/null && ok "$wait: rank 0's file counts the lowering" \
    || fail "$wait: rank 0: $(cat "$T/wait-$wait/ranks/rank-0.json")"
  cmp -s "$T/bare-wait/stdout" "$T/wait-$wait/stdout" || fail "$wait: results differ"
done

# 4. A 1 MiB send: lowered at once by the byte threshold (the timeout is out of reach).
# On one core the receiver finds the core already lowered by the sender and leaves it.
ranks=(0); [ "$BIND" = core ] && ranks=(0 1)
run large large 1 "$LONG"
n=$(lowered large)
[ "$n" = 1 ] && ok "large send lowered during the call" || fail "large: $n controls changed"
restored large && ok "large: restored" || fail "large: not restored"
for r in "${ranks[@]}"; do
  jq -e '.transitions >= 1 and .calls == 3 and .bytes == 1048584 and .complete' \
    "$T/large/ranks/rank-$r.json" > /dev/null && ok "rank $r: 1 MiB transfer lowered and counted" \
    || fail "large rank $r: $(cat "$T/large/ranks/rank-$r.json")"
done

# 4b. A collective of a rank alone (MPI_COMM_SELF) is no communication: four of them count
# nothing. The all-to-all over both ranks counts the other rank's 2 ints (8 bytes), not the
# rank's own; with the final Barrier, 2 calls.
run bare-self self "" "{}"
run self self 1 "$LONG"
cmp -s "$T/bare-self/stdout" "$T/self/stdout" && grep -q checksum "$T/self/stdout" \
  || fail "self: results differ: $(cat "$T/bare-self/stdout" "$T/self/stdout" "$T/self/stderr")"
for r in 0 1; do
  got="$(field self $r calls) $(field self $r bytes)"
  [ "$got" = "2 8" ] && ok "rank $r: a rank alone counts nothing; an all-to-all counts the other rank's block" \
    || fail "self rank $r: calls bytes = $got, expected 2 8"
done

# 5. One-sided: a 1 MiB Put lowers the fence that completes it.
run rma rma 1 "$LONG"
[ "$(lowered rma)" = 1 ] && ok "rma: the fence after a 1 MiB Put is lowered" \
  || fail "rma: $(lowered rma) controls changed; $(cat "$T/rma/stderr")"
restored rma && ok "rma: restored" || fail "rma: not restored"
jq -e '.calls == 4 and .bytes == 1048576 and .transitions >= 1' "$T/rma/ranks/rank-0.json" > /dev/null \
  && ok "rma: rank 0's file" || fail "rma: $(cat "$T/rma/ranks/rank-0.json")"

# 5b. Nonblocking: rank 0 waits in MPI_Wait on an MPI_Irecv while rank 1 sleeps 0.4 s.
# 1 MiB: the request's bytes lower the wait at once (the timeout is out of reach), and
# the control is restored byte for byte; 8 bytes: left alone. Each rank made three calls
# (the post, the wait, the closing Barrier).
run nblarge nblarge 1 "$LONG"
changed=$(diff "$T/untouched" "$T/nblarge/during" | grep '^>' || true)
[ "$(lowered nblarge)" = 1 ] && [[ "$changed" == *" $LOW" ]] \
  && ok "1 MiB Irecv: the waiting core is at $LOW kHz during MPI_Wait ($changed)" \
  || fail "nblarge: $(lowered nblarge) controls changed: $changed $(cat "$T/nblarge/stderr")"
restored nblarge && ok "1 MiB Irecv: restored exactly" || fail "nblarge: not restored"
jq -e '.calls == 3 and .bytes == 1048576 and .transitions >= 1 and .complete' \
  "$T/nblarge/ranks/rank-0.json" > /dev/null && ok "1 MiB Irecv: rank 0's file" \
  || fail "nblarge rank 0: $(cat "$T/nblarge/ranks/rank-0.json")"
run nbsmall nbsmall 1 "$LONG"
[ "$(lowered nbsmall)" = 0 ] && [ "$(field nbsmall 0 transitions)" = 0 ] \
  && [ "$(field nbsmall 0 calls) $(field nbsmall 0 bytes)" = "3 8" ] \
  && ok "8 B Irecv: left alone, counted" \
  || fail "nbsmall: $(lowered nbsmall) changed; $(cat "$T/nbsmall/ranks/rank-0.json")"
run bare-nb nblarge "" "{}"
cmp -s "$T/bare-nb/stdout" "$T/nblarge/stdout" && grep -q checksum "$T/nblarge/stdout" \
  && ok "1 MiB Irecv: same results" || fail "nblarge results: $(cat "$T/bare-nb/stdout" "$T/nblarge/stdout")"

# 5c. Block mode in one-sided synchronization: rank 0 waits a second for rank 1 in an
# MPI_Win_fence, then in an MPI_Win_wait. The CPU time rank 0's process spends in that
# call, with block waits against the MPI's own (poll), both without lowering.
for m in fencewait winwait; do
  for w in poll block; do run "$m-$w" "$m" 1 "{\"enabled\":false,\"wait\":\"$w\"}"; done
  read -r pc pw < "$T/$m-poll/cpu-0" || true
  read -r bc bw < "$T/$m-block/cpu-0" || true
  if awk -v pc="${pc:-0}" -v bc="${bc:-1}" -v pw="${pw:-0}" -v bw="${bw:-0}" \
    'BEGIN { exit !(pw >= 0.9 && bw >= 0.9 && pc > 0.05 && bc < 0.5 * pc) }' \
    && cmp -s "$T/$m-poll/stdout" "$T/$m-block/stdout"; then
    ok "$m: waiting a second uses ${bc}s of CPU in block mode, ${pc}s polling"
  else fail "$m: CPU, wall: poll $pc $pw, block $bc $bw; $(cat "$T/$m-block/stderr")"; fi
done

# 6. Both ranks on CPU 0, whose policy also covers CPU 1 outside their mask: never written.
tree "$T/sys" 1; cp -r "$T/sys" "$T/sys.shared"
OMPI_MCA_hwloc_base_binding_policy=none run shared wait 1 "{}" taskset -c 0
if diff -r "$T/sys.shared" "$T/sys" > /dev/null && [ "$(field shared 0 transitions)" = 0 ] \
  && grep -q checksum "$T/shared/stdout"; then
  ok "a policy shared with a CPU outside the mask is never written"
else fail "shared policy: transitions $(field shared 0 transitions); $(diff -r "$T/sys.shared" "$T/sys")"; fi
tree "$T/sys"

# 6b. Fortran: Open MPI's bindings bypass the C wrappers; the mpi_*_ ones count and lower.
PROBE=$T/fprobe run fbare - "" "$LONG"
PROBE=$T/fprobe run fortran - 1 "$LONG"
if cmp -s "$T/fbare/stdout" "$T/fortran/stdout" && grep -q checksum "$T/fortran/stdout"; then
  ok "Fortran: same results with the preload"
else fail "Fortran results: $(cat "$T/fbare/stdout" "$T/fortran/stdout" "$T/fortran/stderr")"; fi
# A 1 MiB send (131072 doubles), an Allreduce of one double and a Barrier.
jq -e '.calls == 3 and .bytes == 1048584 and .transitions >= 1 and .complete' \
  "$T/fortran/ranks/rank-0.json" > /dev/null && ok "Fortran: rank 0's calls counted, the send lowered" \
  || fail "Fortran rank 0: $(cat "$T/fortran/ranks/rank-0.json" 2>&1)"
diff -r "$T/sys.orig" "$T/sys" > /dev/null && ok "Fortran: restored" || fail "Fortran: not restored"

# 6c. `use mpi_f08`: its own entry points, counted once each (the mpif.h ones above and
# the C ones are not passed through again), the 1 MiB MPI_Wait lowered and restored;
# then two 4-byte exchanges (MPI_Testall and MPI_Testsome loops, MPI_Request_free).
PROBE=$T/f08probe run f08bare - "" "$LONG"
PROBE=$T/f08probe run f08 - 1 "$LONG"
if cmp -s "$T/f08bare/stdout" "$T/f08/stdout" && grep -q checksum "$T/f08/stdout"; then
  ok "mpi_f08: same results with the preload"
else fail "mpi_f08 results: $(cat "$T/f08bare/stdout" "$T/f08/stdout" "$T/f08/stderr")"; fi
for r in 0 1; do
  [ "$(field f08 $r calls) $(field f08 $r bytes)" = "$(cat "$T/f08/calls-$r") 1048600" ] \
    && ok "mpi_f08: rank $r counted $(cat "$T/f08/calls-$r") calls and its bytes" \
    || fail "mpi_f08 rank $r: program made $(cat "$T/f08/calls-$r" 2>&1): $(cat "$T/f08/ranks/rank-$r.json" 2>&1)"
done
[ "$(field f08 0 transitions)" -ge 1 ] && diff -r "$T/sys.orig" "$T/sys" > /dev/null \
  && ok "mpi_f08: the 1 MiB wait lowered and restored" \
  || fail "mpi_f08: transitions $(field f08 0 transitions); $(diff -r "$T/sys.orig" "$T/sys")"

# 7. An exit without MPI_Finalize still leaves files, marked incomplete.
run exit exit 1 "{}"
for r in 0 1; do
  [ "$(field exit $r complete) $(field exit $r calls)" = "false 2" ] \
    && ok "rank $r: file written at exit, incomplete" \
    || fail "exit rank $r: $(cat "$T/exit/ranks/rank-$r.json" 2>&1)"
done

# 7b. SIGTERM (Slurm's cancel) during a long wait: controls restored, files incomplete.
mkdir -p "$T/term/ranks"
GREENUP_SYSFS_ROOT="$T/sys" GREENUP_MPI_DIR="$T/term/ranks" GREENUP_COMM_DVFS='{}' LD_PRELOAD="$LIB" \
  mpirun -np 2 -x GREENUP_SYSFS_ROOT -x GREENUP_MPI_DIR -x GREENUP_COMM_DVFS -x LD_PRELOAD \
  "$T/probe" hang "$T/term" > "$T/term/stdout" 2> "$T/term/stderr" &
launcher=$!
lowered_now() { grep -rlx "$LOW" "$T/sys" --include=scaling_setspeed --include=scaling_max_freq | wc -l; }
for _ in $(seq 100); do
  [ -s "$T/term/pid-0" ] && [ -s "$T/term/pid-1" ] && [ "$(lowered_now)" -ge 1 ] && break
  sleep 0.1
done
seen=$(lowered_now)
kill -TERM "$(cat "$T/term/pid-0")" "$(cat "$T/term/pid-1")" 2> /dev/null || true
wait "$launcher" || true
if [ "$seen" -ge 1 ] && diff -r "$T/sys.orig" "$T/sys" > /dev/null; then
  ok "SIGTERM during a lowered wait: every control restored"
else fail "SIGTERM: $seen lowered before, after: $(diff -r "$T/sys.orig" "$T/sys")"; fi
for r in 0 1; do
  [ "$(field term $r complete) $(field term $r calls)" = "false 1" ] \
    && ok "rank $r: file written at SIGTERM, incomplete" \
    || fail "term rank $r: $(cat "$T/term/ranks/rank-$r.json" 2>&1)"
done

# 8. Settings that do not parse: one line, the program unchanged, nothing lowered.
run bad wait 1 '{"timeout_us":"soon"}'
if cmp -s "$T/bare-wait/stdout" "$T/bad/stdout" && [ "$(grep -c GREENUP_COMM_DVFS "$T/bad/stderr")" = 1 ] \
  && [ "$(field bad 0 transitions) $(field bad 0 errors)" = "0 1" ]; then
  ok "unparsable settings: one line, DVFS off, the job unchanged"
else fail "bad settings: $(cat "$T/bad/stderr") $(cat "$T/bad/ranks/rank-0.json")"; fi

# 9. Preloaded into a program without MPI: loads and changes nothing.
[ "$(LD_PRELOAD=$LIB sh -c 'echo fine')" = fine ] && ok "preload into a non-MPI program" \
  || fail "preload into a non-MPI program"

echo "runtime mechanism tests: $failures failed"
[ "$failures" = 0 ]
