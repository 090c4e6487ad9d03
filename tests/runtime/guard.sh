#!/usr/bin/env bash
# Tests of the in-job guard (docs/runtime.md, "The in-job guard") under a local mpirun,
# with the cpufreq controls stood in by plain files: tests/runtime/guard.c computes 10 ms
# and meets the other rank in a barrier, about 100 synchronising calls a second. With a
# baseline rate the program cannot meet (1000 a second: it looks ten times too slow),
# each rank raises the control of its own CPU to f_max, and no other, records it and
# puts it back at MPI_Finalize, at an exit without it and at SIGTERM; a rank that waits
# most of each step is left alone (it does not lead); with
# communication-phase lowering on too, a lowered call restores to the raised clock. With a
# rate it meets (20 a second) it never acts. A malformed GREENUP_GUARD is said in one
# line and nothing moves; a program that never synchronises is never acted on, and its
# rank files say why.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${GREENUP_MPI_LIB:-}" ]; then
  source scripts/lib.sh
  need_debs openmpi-bin libopenmpi-dev jq
  cargo build -q -p greenup-mpi
fi
LIB=${GREENUP_MPI_LIB:-${CARGO_TARGET_DIR:-$PWD/target}/debug/libgreenup_mpi.so}
T=$(mktemp -d); [ -n "${KEEP:-}" ] && echo "keeping $T"
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
mpicc -O2 -Wall -o "$T/guard" tests/runtime/guard.c

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
BIND=none; [ "$(nproc)" -ge 2 ] && BIND=core
export OMPI_MCA_hwloc_base_binding_policy=$BIND

PLAN=2000000 FMAX=3000000 LOW=1000000
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

# One policy per CPU, each under the userspace governor at the plan's 2 GHz, plus
# policy900 (CPU 900, outside any mask here).
root=$T/sys
for p in $(seq 0 $(($(nproc --all) - 1))) 900; do
  d=$root/devices/system/cpu/cpufreq/policy$p
  mkdir -p "$d"
  echo "$p" > "$d/affected_cpus"
  echo "$FMAX $PLAN $LOW" > "$d/scaling_available_frequencies"
  echo "$LOW" > "$d/scaling_min_freq"
  echo userspace > "$d/scaling_governor"
  echo $PLAN > "$d/scaling_setspeed"
  echo $FMAX > "$d/scaling_max_freq"
done
cp -r "$root" "$T/sys.orig"

guard() { echo "{\"max_slowdown\":0.1,\"baseline_rate\":$1,\"fmax_khz\":$FMAX,\"plan_khz\":$PLAN}"; }
SLOW=$(guard 1000) MET=$(guard 20)

# run NAME MODE SECONDS GUARD [COMM_DVFS]: the program with the preload, in $T/NAME.
run() {
  local out=$T/$1
  mkdir -p "$out/ranks"
  local env=(LD_PRELOAD="$LIB" GREENUP_SYSFS_ROOT="$root" GREENUP_MPI_DIR="$out/ranks" GREENUP_GUARD="$4")
  [ -n "${5:-}" ] && env+=(GREENUP_COMM_DVFS="$5")
  local x=()
  for e in "${env[@]}"; do x+=(-x "${e%%=*}"); done
  env "${env[@]}" timeout 120 mpirun -np 2 "${x[@]}" "$T/guard" "$2" "$out" "$3" \
    > "$out/stdout" 2> "$out/stderr" || true
}
field() { jq -c ".$3" "$T/$1/ranks/rank-$2.json" 2>/dev/null; }
# changed NAME: the controls rank 0's "during" record shows changed from the tree as set.
changed() { (cd "$T/sys.orig/devices/system/cpu/cpufreq" && for p in policy*; do
  for f in scaling_setspeed scaling_max_freq; do echo "$p $f $(cat $p/$f)"; done; done) | sort > "$T/untouched"
  sort "$T/$1/during" | diff "$T/untouched" - | grep '^>' | sed 's/^> //' || true; }
restored() { diff -r "$T/sys.orig" "$root" > /dev/null; }
# own NAME: the setspeed lines the ranks' own CPUs would show raised.
own() { for r in 0 1; do echo "policy$(cat "$T/$1/cpu-$r") scaling_setspeed $FMAX"; done | sort -u; }

# 1. Too slow for the baseline: each rank raises its own CPU, and only that.
run slow loop 4 "$SLOW"
got=$(changed slow | sort -u)
if [ -n "$got" ] && [ "$got" = "$(own slow)" ]; then ok "slow: raised the ranks' own CPUs to f_max, no other ($(echo $got))"
else fail "slow: changed [$got], expected [$(own slow)]; $(cat "$T/slow/stderr")"; fi
restored && ok "slow: every control put back at MPI_Finalize" || fail "slow: not restored: $(diff -r "$T/sys.orig" "$root")"
for r in 0 1; do
  jq -e --argjson p $PLAN --argjson f $FMAX '.guard.armed and .guard.acted_s >= 2 and .guard.acted_s < 4
    and .guard.from_khz == $p and .guard.to_khz == $f and .guard.raised_s > 0.5 and .guard.off == null
    and .sync_calls >= 300 and .complete' "$T/slow/ranks/rank-$r.json" > /dev/null \
    && ok "slow: rank $r's file records the raise ($(field slow $r guard))" \
    || fail "slow: rank $r: $(cat "$T/slow/ranks/rank-$r.json")"
done
[ ! -s "$T/slow/stderr" ] || fail "slow: stderr: $(cat "$T/slow/stderr")"

# 1b. The lead rule: rank 0 computes a tenth of each step and waits the rest; too slow
# for the baseline as a whole, only rank 1 (which computes) is raised.
run imbalance imbalance 4 "$SLOW"
got=$(changed imbalance | sort -u)
if [ "$(cat "$T/imbalance/cpu-0")" != "$(cat "$T/imbalance/cpu-1")" ] \
  && [ "$got" = "policy$(cat "$T/imbalance/cpu-1") scaling_setspeed $FMAX" ] && restored \
  && jq -e '.guard.armed and .guard.acted_s == null' "$T/imbalance/ranks/rank-0.json" > /dev/null \
  && jq -e '.guard.acted_s >= 2' "$T/imbalance/ranks/rank-1.json" > /dev/null; then
  ok "imbalance: the waiting rank is left alone, the computing one raised ($got)"
elif [ "$(cat "$T/imbalance/cpu-0")" = "$(cat "$T/imbalance/cpu-1")" ]; then
  echo "skipped: imbalance needs the ranks on two CPUs"
else fail "imbalance: changed [$got]; $(cat "$T/imbalance/ranks/rank-0.json" "$T/imbalance/ranks/rank-1.json")"; fi

# 2. A rate the program meets: never acts, nothing moves.
run met loop 4 "$MET"
[ -z "$(changed met)" ] && restored && ok "met: no control touched" || fail "met: changed $(changed met)"
for r in 0 1; do
  jq -e '.guard == {"armed": true, "raised_s": 0}' "$T/met/ranks/rank-$r.json" > /dev/null && ok "met: rank $r armed, never acted" \
    || fail "met: rank $r: $(cat "$T/met/ranks/rank-$r.json")"
done

# 3. With communication-phase lowering on (every call lowered at once, the barriers too):
# after a lowered call the core goes back to the guard's f_max, not the plan's clock.
run lowering loop 4 "$SLOW" '{"timeout_us":0,"threshold_bytes":0}'
# Rank 0 records between calls: its core is at f_max; rank 1 may be lowered in the barrier
# that follows. Nothing but the ranks' own CPUs moved.
got=$(changed lowering | sort -u)
mine="policy$(cat "$T/lowering/cpu-0") scaling_setspeed $FMAX"
others=$(echo "$got" | grep -v -e "^policy$(cat "$T/lowering/cpu-0") " -e "^policy$(cat "$T/lowering/cpu-1") " || true)
grep -qx "$mine" <<< "$got" && [ -z "$others" ] && restored \
  && [ "$(field lowering 0 transitions)" -ge 1 ] && [ "$(field lowering 0 guard.to_khz)" = $FMAX ] \
  && ok "lowering on: back at f_max after lowered calls ($(field lowering 0 transitions) lowerings), restored at the end" \
  || fail "lowering on: changed [$got]; $(cat "$T/lowering/ranks/rank-0.json") $(diff -r "$T/sys.orig" "$root")"

# 4. An exit without MPI_Finalize, and SIGTERM: put back too, the raise recorded.
for m in exit term; do
  run "$m" "$m" 4 "$SLOW"
  restored && [ "$(field "$m" 0 complete)" = false ] && [ "$(field "$m" 0 guard.to_khz)" = $FMAX ] \
    && ok "$m: raised, then put back and recorded ($(field "$m" 0 guard))" \
    || fail "$m: $(cat "$T/$m/ranks/rank-0.json" 2>&1) $(diff -r "$T/sys.orig" "$root")"
done

# 5. A malformed GREENUP_GUARD: one line (rank 0's), no control touched, the reason recorded.
run bad loop 3 '{"max_slowdown":0.1,"baseline_rate":1000'
lines=$(grep -c GREENUP_GUARD "$T/bad/stderr" || true)
[ "$lines" = 1 ] && [ -z "$(changed bad)" ] && restored \
  && jq -e '.guard == {"armed": false, "off": "invalid", "raised_s": 0}' "$T/bad/ranks/rank-0.json" > /dev/null \
  && [ "$(field bad 1 guard.off)" = '"invalid"' ] \
  && ok "malformed: one line ($(head -c 120 "$T/bad/stderr")), nothing moved, reason recorded" \
  || fail "malformed: $lines lines: $(cat "$T/bad/stderr"); $(cat "$T/bad/ranks/rank-0.json")"

# 6. A program that never synchronises: never acted on, and the files say why.
run nosync nosync 3 "$SLOW"
[ -z "$(changed nosync)" ] && restored \
  && jq -e '.guard == {"armed": true, "off": "no_sync", "raised_s": 0}' "$T/nosync/ranks/rank-0.json" > /dev/null \
  && [ "$(field nosync 1 sync_calls)" = 0 ] \
  && ok "never synchronises: no action, reason no_sync" \
  || fail "nosync: $(cat "$T/nosync/ranks/rank-0.json") $(changed nosync)"

echo "$failures failure(s)"
[ "$failures" = 0 ]
