#!/bin/bash
# The job prolog's GPU cost on this machine's real GPU (GPU 0) and on the NVML stand-in
# with 4 GPUs: the GPU part done in the prolog itself (inline) against handed to its
# worker (`greenup gpu start-job`, docs/gpu.md "The prolog's cost"), in 5 alternating
# rounds of 20 starts and ends each, by the plugin's gpu_prolog example. Root, a machine
# with an NVIDIA GPU, nvidia-smi and python3; under a minute. Writes JSON and a summary
# under OUT_DIR; every limit it sets is put back, checked by nvidia-smi.
#   bash scripts/gpu-prolog-cost.sh GREENUP GPU_PROLOG STANDIN_SO OUT_DIR
# GREENUP: target/release/greenup; GPU_PROLOG: `cargo build --release -p spank_greenup
# --example gpu_prolog`; STANDIN_SO: `sh tests/nvml/build.sh DIR` (built anywhere: it
# needs only libc and libm).
set -u
[ $# = 4 ] || { echo "usage: gpu-prolog-cost.sh GREENUP GPU_PROLOG STANDIN_SO OUT_DIR" >&2; exit 2; }
GREENUP=$(readlink -f "$1") GPU_PROLOG=$(readlink -f "$2") STANDIN=$(readlink -f "$3") OUT=$4
mkdir -p "$OUT"
date -u +%FT%TZ > "$OUT/date.txt"
nvidia-smi -L > "$OUT/smi-L.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,power.limit,power.min_limit,power.max_limit,power.default_limit --format=csv > "$OUT/smi-before.csv" 2>&1
minor=$(nvidia-smi -q | awk -F: '/Minor Number/ {gsub(/ /,"",$2); print $2; exit}')
lim=$(nvidia-smi --query-gpu=power.limit --format=csv,noheader,nounits -i 0 | tr -d ' ')
part=$(python3 -c "print(round(float('$lim') * 0.6, 1))")
count=$(nvidia-smi -L | grep -c '^GPU')
echo "minor $minor limit $lim part $part count $count" | tee "$OUT/setup.txt"
W=/dev/shm/gp; rm -rf $W; mkdir -p $W
printf 'node_types:\n  g:\n    frequencies: [1.0, 2.0]\n    power: {dynamic_w: 100, static_w: 50}\n    gpus: {count: %s, power: {dynamic_w: 630, static_w: 70}}\nnodes:\n  g: g1\n' "$count" > $W/real.yaml
cp "$STANDIN" $W/libnvidia-ml.so.1; echo $W/gpus > $W/libnvidia-ml.so.1.dir
python3 - <<'PY'
import os
b='/dev/shm/gp/gpus'; os.makedirs(b)
open(b+'/count','w').write('4\n')
for i in range(4):
    d=f'{b}/{i}'; os.makedirs(d)
    for f,v in [('minor',i),('uuid',f'GPU-x-{i}'),('name','Stand-in'),('sm_clocks','1980 1200'),('mem_clock',2619),('idle_mw',70000),('dyn_mw',630000),('util',100),('limit_mw',700000),('limit_min_mw',200000),('limit_max_mw',700000),('limit_default_mw',700000),('locked',''),('energy_mj',0),('stamp_ns',0)]:
        open(f'{d}/{f}','w').write(f'{v}\n')
PY
printf 'node_types:\n  g:\n    frequencies: [1.0, 2.0]\n    power: {dynamic_w: 100, static_w: 50}\n    gpus: {count: 4, power: {dynamic_w: 630, static_w: 70}}\nnodes:\n  g: g1\ndvfs:\n  nvml_library: /dev/shm/gp/libnvidia-ml.so.1\n' > $W/standin.yaml
for r in 1 2 3 4 5; do
  for mode in inline worker; do
    w=""; [ $mode = worker ] && w="--worker $GREENUP"
    timeout 60 "$GPU_PROLOG" --site $W/real.yaml --node g1 --gpus "$minor" --gpu-part-w "$part" --iterations 20 --run-dir $W/run-real $w > "$OUT/real-$mode-$r.json" 2> "$OUT/real-$mode-$r.err"
    timeout 60 "$GPU_PROLOG" --site $W/standin.yaml --node g1 --gpus 0-3 --gpu-part-w 350 --iterations 20 --run-dir $W/run-standin $w > "$OUT/standin-$mode-$r.json" 2> "$OUT/standin-$mode-$r.err"
  done
done
nvidia-smi --query-gpu=power.limit --format=csv > "$OUT/smi-after.csv" 2>&1
python3 - "$OUT" <<'PY'
import json, sys, glob, statistics as st
out = sys.argv[1]
for where in ("real", "standin"):
    for mode in ("inline", "worker"):
        rs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{where}-{mode}-*.json")) if open(f).read().strip()]
        if not rs:
            print(where, mode, "no result"); continue
        med = lambda k: st.median(r[k]["median_ms"] for r in rs)
        line = f"{where:8} {mode:7} prolog GPU median of medians {med('prolog_gpu'):.3f} ms, epilog {med('epilog_gpu'):.3f} ms"
        if mode == "worker":
            w = [r["handed_to_worker"] for r in rs]
            line += f", worker {st.median(x['worker_gpu']['median_ms'] for x in w):.3f} ms, limits in force after {st.median(x['until_in_force']['median_ms'] for x in w):.3f} ms"
        f = rs[0]["first"]
        line += f"; during {f['during_mw']} after {f['after_mw']} before {rs[0]['before_mw']}"
        print(line)
PY
