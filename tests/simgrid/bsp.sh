#!/usr/bin/env bash
# The bench's cross-check under SimGrid (docs/evaluation.md, "Where the bench and SimGrid
# meet"): tests/cluster/apps/bsp.c, built with smpicc, on four nodes of the bench's
# simulated site (two fast, two eco, as n1-n4 on the Slurm bench), once at f_max and once
# with the fast nodes at 2.4 GHz, where they compute at an eco node's speed and only wait
# less. The same two step lengths as tests/cluster/spread.sh: about 3 ms and 33 ms.
# Each size records one live run at f_max and replays it twice, so both figures come from
# the same flops and messages. Needs root (Debian packages). Prints the slowdown per size.
#   BIN_DIR=DIR   greenup-sim's directory (default target/release, built if missing)
#   KEEP=DIR      keep the traces and SimGrid's output in DIR
#   SITE=real     the bench on published physics instead (GC_PHYSICS=published): two EPYC
#                 7502 and two Xeon E5-2680 v3 nodes of the real site, the EPYC nodes at
#                 1.5 GHz, where they still compute twice as fast as the Xeon nodes; bsp is
#                 compute-bound (beta 1) and its ranks block in waits, as the bench's sleep
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$ROOT/scripts/lib.sh"
need_debs libsimgrid-dev >/dev/null
build_bins
if [ -n "${KEEP:-}" ]; then
  W=$KEEP; mkdir -p "$W"
else
  W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
fi
smpicc -O2 -o "$W/bsp" "$ROOT/tests/cluster/apps/bsp.c"
# A site config for the platform only: no greenupd, the frequencies are given. The bench's
# stand-in runs a fast node at any clock; SimGrid needs a pstate, so the fast type gets a
# 2.4 GHz gear here (greenup-sim takes the nearest gear, and 2.4 is none of fast's).
CONF=$W/greenup.yaml
SITE=${SITE:-bench}
if [ "$SITE" = real ]; then
  cp "$HERE/sites/real.yaml" "$CONF"
  NODES='n[1-4]' SLOW=rome=1.5 # n1, n3 EPYC; n2, n4 Xeon
  export BETA=1 WAIT=blocking
else
  sed 's/frequencies: \[1.0, 1.4, 1.8, 2.2, 2.6, 3.0\]/frequencies: [1.0, 1.4, 1.8, 2.2, 2.4, 2.6, 3.0]/' "$HERE/sites/bench.yaml" > "$CONF"
  grep -q '2.4, 2.6, 3.0' "$CONF" || { echo "bsp.sh: could not add a 2.4 GHz gear to the fast type of $HERE/sites/bench.yaml" >&2; exit 1; }
  NODES='n[3-6]' SLOW=fast=2.4 # n3-n4 fast, n5-n6 eco
fi
time_of() { python3 -c 'import json, sys; print([json.loads(l) for l in sys.stdin if l.startswith("{")][-1]["measured"]["time_s"])'; }
for size in "fine 2000 600000" "coarse 200 6000000"; do
  read -r name steps work <<<"$size"
  fixed "$SITE" "$NODES" "$W/$name-live" - --record-trace "$W/$name.trace" -- "$W/bsp" "$steps" "$work" >/dev/null
  base=$(fixed "$SITE" "$NODES" "$W/$name-base" - --replay "$W/$name.trace" | time_of)
  slow=$(fixed "$SITE" "$NODES" "$W/$name-slow" "$SLOW" --replay "$W/$name.trace" | time_of)
  awk -v n="$name" -v slow="$SLOW" -v s="$steps" -v b="$base" -v t="$slow" 'BEGIN {
    printf "bsp %s (%d steps): f_max %.3f s, %s %.3f s, slowdown %+.2f %%\n", n, s, b, slow, t, 100 * (t - b) / b }'
done
