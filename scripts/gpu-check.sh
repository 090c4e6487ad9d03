#!/bin/bash
# greenup on a real NVIDIA GPU: the project's first measurement on real hardware.
#
#   bash scripts/gpu-check.sh /path/to/greenup OUT_DIR [/path/to/gpu_prolog]
#
# Run as root on a machine with an NVIDIA GPU (H100/H200), nvidia-smi and PyTorch in
# python3; no network needed; about 3 to 5 minutes. gpu_prolog is the job prolog's GPU
# part (`cargo build --release -p spank_greenup --example gpu_prolog`); by default it is
# looked for beside greenup and in its examples/ folder, and its step is skipped without
# it. It writes at most 9 files to OUT_DIR:
#   nvidia-smi-q.txt   nvidia-smi -q, before anything is changed
#   greenup-gpu.txt    greenup gpu (table and --json) before, while held, and after
#   controls.json      set and restore of a power limit and locked clocks: what greenup
#                      did, what the device refused (verbatim), nvidia-smi before/during/after
#   runs.csv           the matrix-product runs: setting, time, energy by greenup's counter,
#                      energy and power by nvidia-smi's sampling
#   smi-samples.csv    nvidia-smi's samples during the runs
#   bench.json         the prolog's GPU cost timed in-process (greenup gpu bench)
#   share.json         the prolog's GPU part for a node's power share: each GPU's limit set
#                      to its part of the share (and clamped at its lowest), restored by the
#                      epilog's part, nvidia-smi before/after, both parts timed (gpu_prolog)
#   summary.txt        the summary table (also printed)
#   log.txt            everything this script printed
# Whatever it cannot do (no nvidia-smi, no PyTorch, a refused control) it says and skips.
#
# For tests only: GREENUP_GPU_CHECK_NVML names another NVML library (the stand-in), and
# GREENUP_GPU_CHECK_FAKE_WORK=1 replaces the GPU workload with sleeps of the same length.
set -u

if [ $# -ne 2 ] && [ $# -ne 3 ]; then
  echo "usage: $0 GREENUP_BINARY OUT_DIR [GPU_PROLOG_BINARY]" >&2
  exit 2
fi
greenup=$(readlink -f "$1")
out=$2
gpu_prolog=${3:-}
if [ -z "$gpu_prolog" ]; then
  for c in "$(dirname "$greenup")/gpu_prolog" "$(dirname "$greenup")/examples/gpu_prolog"; do
    if [ -x "$c" ]; then gpu_prolog=$c; break; fi
  done
fi
[ -n "$gpu_prolog" ] && gpu_prolog=$(readlink -f "$gpu_prolog")
if [ ! -x "$greenup" ]; then
  echo "$1: not an executable greenup binary" >&2
  exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

check() {

nvml=${GREENUP_GPU_CHECK_NVML:-}
if [ -z "$nvml" ]; then
  for c in /usr/local/nvidia/lib64/libnvidia-ml.so.1 /usr/local/nvidia/lib/libnvidia-ml.so.1 \
    $(ldconfig -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 /{print $NF}'); do
    if [ -e "$c" ]; then nvml=$c; break; fi
  done
fi
nvml=${nvml:-libnvidia-ml.so.1}
# Saved settings live on tmpfs, as /run/greenup does on a node (the prolog's cost counts it).
run_dir=$(mktemp -d /run/greenup-gpu-check.XXXXXX 2>/dev/null || mktemp -d /dev/shm/greenup-gpu-check.XXXXXX 2>/dev/null || mktemp -d /tmp/greenup-gpu-check.XXXXXX)

echo "== greenup gpu check: $(date -u +%FT%TZ) on $(hostname), kernel $(uname -r)"
echo "greenup: $greenup ($("$greenup" --version 2>&1)); gpu_prolog: ${gpu_prolog:-none}"
echo "NVML: $nvml; saved settings under $run_dir"

if command -v nvidia-smi >/dev/null; then
  timeout 60 nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1 || echo "nvidia-smi -q failed (exit $?)"
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id,power.limit,power.default_limit,clocks.max.sm --format=csv 2>&1 | head -5
else
  echo "skipped: nvidia-smi -q (no nvidia-smi on this machine)" | tee "$out/nvidia-smi-q.txt"
fi

{
  echo "== before: greenup gpu"
  "$greenup" gpu --nvml "$nvml" --run-dir "$run_dir"
  "$greenup" gpu --nvml "$nvml" --run-dir "$run_dir" --json
} > "$out/greenup-gpu.txt" 2>&1
echo "greenup gpu exit $? (before):"
head -n 12 "$out/greenup-gpu.txt"

GREENUP="$greenup" GPU_PROLOG="$gpu_prolog" NVML="$nvml" RUN_DIR="$run_dir" OUT="$out" timeout 420 python3 - <<'PY'
import csv, datetime, json, os, shutil, statistics, subprocess, sys, time

T0 = time.time()
DEADLINE = T0 + 210  # the runs stop here, leaving room for the bench and the restore checks
G, NVML, RUN, OUT = (os.environ[k] for k in ("GREENUP", "NVML", "RUN_DIR", "OUT"))
GP = os.environ.get("GPU_PROLOG") or None
FAKE = os.environ.get("GREENUP_GPU_CHECK_FAKE_WORK") == "1"
SMI = shutil.which("nvidia-smi")
skipped = []


def gg(*args, timeout=120):
    cmd = [G, "gpu", *args, "--nvml", NVML, "--run-dir", RUN]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return {"cmd": " ".join(cmd[1:]), "rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
    except subprocess.TimeoutExpired:
        return {"cmd": " ".join(cmd[1:]), "rc": "timeout", "stdout": "", "stderr": ""}


def gg_json(*args, timeout=120):
    r = gg(*args, "--json", timeout=timeout)
    try:
        r["json"] = json.loads(r["stdout"]) if r["rc"] == 0 else None
    except ValueError:
        r["json"] = None
    return r


def append_greenup(title):
    r = gg()
    with open(os.path.join(OUT, "greenup-gpu.txt"), "a") as f:
        f.write(f"\n== {title}: greenup gpu (exit {r['rc']})\n{r['stdout']}{r['stderr']}")


def smi(fields, gpu):
    if not SMI:
        return None
    try:
        p = subprocess.run([SMI, "-i", gpu, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    if p.returncode != 0:
        return {"error": (p.stdout + p.stderr).strip()}
    return dict(zip(fields.split(","), [v.strip() for v in p.stdout.strip().split(",")]))


shown = gg_json()
if not shown["json"]:
    print("greenup gpu could not read the GPUs; nothing more to do:", shown["stderr"].strip())
    json.dump({"greenup_gpu": shown}, open(os.path.join(OUT, "controls.json"), "w"), indent=2)
    sys.exit(1)
gpu0 = shown["json"][0]
minor, uuid = str(gpu0["minor"]), gpu0["uuid"]
clocks = gpu0.get("supported_sm_mhz") or []
limit_mw, rng = gpu0.get("power_limit_mw"), gpu0.get("power_limit_range")
print(f"GPU nvidia{minor} {gpu0.get('name')} {uuid}: limit {limit_mw} mW, range {rng}, "
      f"{len(clocks)} SM clocks {clocks[-1] if clocks else '?'}-{clocks[0] if clocks else '?'} MHz")

# --- Controls: set a power limit and locked clocks through greenup, then restore. ---------
SMI_STATE = "power.limit,enforced.power.limit,clocks.sm,clocks.max.sm,clocks_event_reasons.applications_clocks_setting"
def smi_state():
    s = smi(SMI_STATE, uuid)
    if s and "error" in s:  # an older nvidia-smi names the event reasons otherwise
        s = smi("power.limit,enforced.power.limit,clocks.sm,clocks.max.sm", uuid)
    return s

mid = clocks[len(clocks) // 2] if clocks else None
want_w = None
if limit_mw and rng:
    want_w = max(rng["min_mw"], int(limit_mw * 0.75)) // 1000
controls = {"gpu": gpu0, "smi_before": smi_state(), "steps": []}
held = {"power_limit": False, "clocks": False}
set_args = ["set", "--gpus", minor]
if want_w:
    set_args += ["--power-limit", f"{want_w}W"]
if mid:
    set_args += ["--lock-clocks", f"{mid},{mid}"]
if len(set_args) > 3:
    r = gg_json(*set_args)
    controls["steps"].append(r)
    for g in (r["json"] or {}).get("gpus", []):
        for c in ("power_limit", "clocks"):
            st = g[c]
            held[c] = st["status"] == "held"
            print(f"set {c}: {st['status']} {st.get('detail', '')}".rstrip())
    if r["rc"] != 0:
        print(f"greenup gpu set failed (exit {r['rc']}): {r['stderr'].strip()}")
    time.sleep(1)
    controls["smi_during"] = smi_state()
    controls["greenup_during"] = gg_json()
    append_greenup("while held by greenup gpu set")
    r = gg_json("restore")
    controls["steps"].append(r)
    print(f"greenup gpu restore: exit {r['rc']} {r['stderr'].strip()}")
    time.sleep(1)
    controls["smi_after"] = smi_state()
    controls["greenup_after"] = gg_json()
    b, a = controls["smi_before"] or {}, controls["smi_after"] or {}
    if SMI and "error" not in b and "error" not in a:
        controls["restored_power_limit_per_nvidia_smi"] = b.get("power.limit") == a.get("power.limit")
        print(f"nvidia-smi power.limit before {b.get('power.limit')} W, during "
              f"{(controls['smi_during'] or {}).get('power.limit')} W, after {a.get('power.limit')} W; "
              f"clocks.sm before {b.get('clocks.sm')}, during {(controls['smi_during'] or {}).get('clocks.sm')}, "
              f"after {a.get('clocks.sm')} MHz")
    else:
        skipped.append("restore verified by nvidia-smi (no nvidia-smi)")
else:
    skipped.append("set/restore (the GPU reports no power limit and no clocks)")
json.dump(controls, open(os.path.join(OUT, "controls.json"), "w"), indent=2)

# --- The prolog's GPU part for a node's power share (gpu_prolog), then the epilog's. ------
# greenup's split gives the GPU a part of the node's share; the prolog's code sets it as
# the GPU's limit (clamped into NVML's range) and the epilog's restores what was there.
share = {"cases": []}
if not GP or not os.access(GP, os.X_OK):
    skipped.append("prolog GPU share (no gpu_prolog binary)")
elif not (limit_mw and rng):
    skipped.append("prolog GPU share (the GPU reports no power limit range)")
else:
    share_run = os.path.join(RUN, "share")  # `greenup gpu restore` may have removed RUN
    os.makedirs(share_run, mode=0o700, exist_ok=True)
    site = os.path.join(share_run, "site.yaml")
    with open(site, "w") as f:
        f.write("node_types:\n  gpucheck:\n    frequencies: [1.0, 2.0]\n"
                "    power: {dynamic_w: 100, static_w: 50}\n"
                f"    gpus: {{count: {len(shown['json'])}, power: {{dynamic_w: 630, static_w: 70}}}}\n"
                f"nodes:\n  gpucheck: gpucheck\ndvfs:\n  nvml_library: {NVML}\n")
    lo_w, hi_w = rng["min_mw"] / 1000, rng["max_mw"] / 1000
    # A part inside the range (60% of the limit in force), and one below its lowest.
    for part in (round(limit_mw * 0.6 / 1000, 1), round(lo_w * 0.5, 1)):
        want_mw = round(min(max(part, lo_w), hi_w) * 1000)
        smi_b = smi("power.limit", uuid)
        cmd = [GP, "--site", site, "--node", "gpucheck", "--gpus", minor, "--gpu-part-w", str(part),
               "--iterations", "20", "--run-dir", share_run]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
            rc, stdout, stderr = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            rc, stdout, stderr = "timeout", "", ""
        case = {"part_w": part, "expected_limit_mw": want_mw, "cmd": " ".join(cmd), "rc": rc,
                "stderr": stderr, "smi_before": smi_b, "smi_after": smi("power.limit", uuid)}
        try:
            case["result"] = json.loads(stdout)
        except ValueError:
            case["result"], case["stdout"] = None, stdout
        r = case["result"] or {}
        first = r.get("first") or {}
        during = (first.get("during_mw") or {}).get(minor)
        case["set_as_expected"] = during == want_mw
        case["restored"] = (first.get("after_mw") or {}).get(minor) == (r.get("before_mw") or {}).get(minor) \
            and (r.get("after_all_mw") or {}).get(minor) == (r.get("before_mw") or {}).get(minor)
        share["cases"].append(case)
        pro, epi = r.get("prolog_gpu") or {}, r.get("epilog_gpu") or {}
        print(f"share: part {part} W -> limit during {during} mW (expected {want_mw}), restored "
              f"{case['restored']}, nvidia-smi {(case['smi_before'] or {}).get('power.limit')} -> "
              f"{(case['smi_after'] or {}).get('power.limit')} W; prolog GPU part median "
              f"{pro.get('median_ms')} ms p90 {pro.get('p90_ms')} ms, epilog median {epi.get('median_ms')} ms; "
              f"note: {first.get('start_note')}; warning: {first.get('start_warning')}; rc {rc} {stderr.strip()}")
json.dump(share, open(os.path.join(OUT, "share.json"), "w"), indent=2)

# --- Workload: a fixed number of bf16 matrix products at several settings. ---------------
settings = [("default", None, None)]
top = clocks[0] if clocks else None
if held["clocks"] and clocks:
    for frac in (1.0, 0.8, 0.6):
        c = min(clocks, key=lambda x: abs(x - top * frac))
        settings.append((f"lock {c} MHz", None, c))
if held["power_limit"] and limit_mw and rng:
    fracs = (0.6,) if held["clocks"] else (0.8, 0.65, 0.5)
    for frac in fracs:
        w = max(rng["min_mw"], int(limit_mw * frac)) // 1000
        settings.append((f"limit {w} W", w, None))
if len(settings) < 4:
    skipped.append("3 or more locked clocks or power limits (the device refused both controls)")

torch = None
if not FAKE:
    try:
        import torch  # noqa: F401
        if not torch.cuda.is_available():
            skipped.append("workload (PyTorch sees no CUDA device)")
            torch = None
    except Exception as e:  # no PyTorch
        skipped.append(f"workload (no PyTorch: {e})")
        torch = None

sampler, samples_path = None, os.path.join(OUT, "smi-samples.csv")
SAMPLE_FIELDS = ["timestamp", "total_energy_consumption", "power.draw", "clocks.sm", "utilization.gpu"]
if SMI and (torch or FAKE):
    probe = smi(",".join(SAMPLE_FIELDS[1:]), uuid)
    if probe is None or "error" in probe:
        print(f"nvidia-smi rejects total_energy_consumption ({probe}); sampling power only")
        SAMPLE_FIELDS.remove("total_energy_consumption")
    sampler = subprocess.Popen(
        [SMI, "-i", uuid, f"--query-gpu={','.join(SAMPLE_FIELDS)}", "--format=csv,noheader,nounits", "-lms", "100"],
        stdout=open(samples_path, "w"), stderr=subprocess.STDOUT)
elif not SMI:
    skipped.append("nvidia-smi cross-check of the runs (no nvidia-smi)")

runs = []
if torch or FAKE:
    if torch:
        dev = torch.device("cuda")
        n = 8192
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
        def work(k):
            for _ in range(k):
                torch.matmul(a, b, out=c)
            torch.cuda.synchronize()
        work(50)  # warm up
        t = time.time(); work(200); per = (time.time() - t) / 200
        flop = 2 * n ** 3
    else:
        per, flop = 0.01, 0
        def work(k):
            time.sleep(k * per)
    products = max(100, int(20.0 / per))
    print(f"calibrated: {per * 1e3:.3f} ms per product; {products} products per run "
          f"(~{products * per:.0f} s at the default setting)")
    for name, watts, mhz in settings:
        if time.time() + products * per * (top / mhz if mhz else 2.0) > DEADLINE:
            skipped.append(f"run '{name}' (would pass the time limit)")
            continue
        row = {"setting": name, "products": products, "held": "", "note": ""}
        if watts or mhz:
            args = ["set", "--gpus", minor] + (["--power-limit", f"{watts}W"] if watts else []) \
                + (["--lock-clocks", f"{mhz},{mhz}"] if mhz else [])
            r = gg_json(*args)
            sts = [g[k]["status"] for g in (r["json"] or {}).get("gpus", []) for k in ("power_limit", "clocks")
                   if g[k]["status"] != "not_asked"]
            row["held"] = "+".join(sts) or f"set failed: {r['stderr'].strip()}"
            if "held" not in sts:
                row["note"] = "not held: ran as default"
        r0 = gg_json()
        t0 = time.time()
        work(products)
        t1 = time.time()
        r1 = gg_json()
        if watts or mhz:
            rr = gg("restore")
            if rr["rc"] != 0:
                row["note"] += f" restore failed: {rr['stderr'].strip()}"
        g0 = (r0["json"] or [{}])[0]
        g1 = (r1["json"] or [{}])[0]
        row.update(time_s=round(t1 - t0, 3), tflops=round(flop * products / (t1 - t0) / 1e12, 1) if flop else "")
        if g0.get("energy_mj") is not None and g1.get("energy_mj") is not None:
            e = (g1["energy_mj"] - g0["energy_mj"]) / 1000.0
            window = g1["unix_s"] - g0["unix_s"]
            row.update(greenup_energy_j=round(e, 1), greenup_window_s=round(window, 3),
                       greenup_avg_power_w=round(e / window, 1) if window > 0 else "")
        row.update(window_start=g0.get("unix_s"), window_end=g1.get("unix_s"))
        runs.append(row)
        print(f"{name}: {row['time_s']} s, greenup {row.get('greenup_energy_j')} J "
              f"({row.get('greenup_avg_power_w')} W over {row.get('greenup_window_s')} s) {row['held']} {row['note']}")
        time.sleep(2)

if sampler:
    sampler.terminate()
    sampler.wait()
    samples = []
    for line in open(samples_path):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(SAMPLE_FIELDS):
            continue
        try:
            ts = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            vals = [float(v) for v in parts[1:]]
        except ValueError:
            continue
        samples.append(dict(zip(SAMPLE_FIELDS, [ts] + vals)))
    for row in runs:
        lo, hi = row.get("window_start"), row.get("window_end")
        inside = [s for s in samples if lo and hi and lo <= s["timestamp"] <= hi]
        if len(inside) < 2:
            row["smi_note"] = f"{len(inside)} nvidia-smi samples in the window"
            continue
        integral = sum((b["timestamp"] - a["timestamp"]) * (a["power.draw"] + b["power.draw"]) / 2
                       for a, b in zip(inside, inside[1:]))
        span = inside[-1]["timestamp"] - inside[0]["timestamp"]
        row.update(smi_samples=len(inside), smi_power_integral_j=round(integral, 1),
                   smi_span_s=round(span, 3),
                   smi_mean_sm_mhz=round(statistics.mean(s["clocks.sm"] for s in inside)),
                   smi_mean_util_pct=round(statistics.mean(s["utilization.gpu"] for s in inside), 1))
        if "total_energy_consumption" in SAMPLE_FIELDS:
            # nvidia-smi prints this counter in its own unit; the raw difference is kept,
            # and its ratio to greenup's joules shows the unit (1 = J, 1000 = mJ).
            raw = inside[-1]["total_energy_consumption"] - inside[0]["total_energy_consumption"]
            row["smi_energy_counter_delta_raw"] = raw
            if row.get("greenup_energy_j") and span > 0 and row.get("greenup_window_s"):
                row["smi_counter_over_greenup"] = round(
                    raw / span / (row["greenup_energy_j"] / row["greenup_window_s"]), 4)

cols = ["setting", "held", "products", "time_s", "tflops", "greenup_energy_j", "greenup_window_s",
        "greenup_avg_power_w", "smi_samples", "smi_span_s", "smi_power_integral_j",
        "smi_energy_counter_delta_raw", "smi_counter_over_greenup", "smi_mean_sm_mhz",
        "smi_mean_util_pct", "window_start", "window_end", "note", "smi_note"]
with open(os.path.join(OUT, "runs.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
    w.writeheader()
    for row in runs:
        w.writerow(row)

# --- The prolog's GPU cost, timed in-process by greenup gpu bench. -----------------------
# NVML's init alone can take from milliseconds to a second (no persistence daemon): three
# iterations first, then as many as fit in about 40 s, at most 50.
t = time.time()
probe = gg_json("bench", "--iterations", "3", "--gpus", minor, timeout=60)
each = max((time.time() - t) / 3, 1e-3)
iters = str(int(min(50, max(5, 40 / each))))
print(f"bench: {each * 1e3:.0f} ms per iteration in the probe; {iters} iterations")
bench = {"probe": probe, "read_and_save": gg_json("bench", "--iterations", iters, "--gpus", minor, timeout=100)}
bench_args = []
if held["power_limit"] and limit_mw:
    bench_args += ["--power-limit", f"{limit_mw / 1000:g}W"]
if held["clocks"] and top:
    bench_args += ["--lock-clocks", f"{top},{top}"]
if bench_args and time.time() < T0 + 250:
    bench["read_save_set_restore"] = gg_json("bench", "--iterations", iters, "--gpus", minor, *bench_args, timeout=100)
json.dump(bench, open(os.path.join(OUT, "bench.json"), "w"), indent=2)

# --- Summary. -------------------------------------------------------------------------------
lines = [f"greenup gpu check, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
         f"{gpu0.get('name')} ({uuid}), NVML {NVML}"]
lines.append(f"controls: power limit {'held' if held['power_limit'] else 'NOT held'}, "
             f"locked clocks {'held' if held['clocks'] else 'NOT held'}; "
             f"power limit restored per nvidia-smi: {controls.get('restored_power_limit_per_nvidia_smi', 'unchecked')}")
lines.append("")
hdr = ["setting", "time_s", "tflops", "greenup_energy_j", "greenup_avg_power_w", "smi_power_integral_j",
       "smi_counter_over_greenup", "smi_mean_sm_mhz", "smi_mean_util_pct"]
table = [hdr] + [[str(r.get(h, "")) for h in hdr] for r in runs]
widths = [max(len(row[i]) for row in table) for i in range(len(hdr))]
lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in table]
lines.append("")
for k, r in bench.items():
    if k == "probe":
        continue
    for s in ((r.get("json") or {}).get("steps") or []):
        lines.append(f"bench {k}: {s['step']}: median {s['median_ms']:.3f} ms, p90 {s['p90_ms']:.3f} ms")
    if not r.get("json"):
        lines.append(f"bench {k}: failed (exit {r['rc']}): {r['stderr'].strip()}")
def ms(x):
    return f"{x:.3f}" if isinstance(x, (int, float)) else "?"
for c in share["cases"]:
    r = c.get("result") or {}
    pro, epi = r.get("prolog_gpu") or {}, r.get("epilog_gpu") or {}
    lines.append(f"share: GPU part {c['part_w']} W: limit set as expected ({c['expected_limit_mw']} mW) "
                 f"{c['set_as_expected']}, restored {c['restored']}; prolog GPU part median "
                 f"{ms(pro.get('median_ms'))} ms, p90 {ms(pro.get('p90_ms'))} ms; "
                 f"epilog GPU part median {ms(epi.get('median_ms'))} ms, p90 {ms(epi.get('p90_ms'))} ms")
lines.append("skipped: " + ("; ".join(skipped) if skipped else "nothing"))
lines.append(f"python part took {time.time() - T0:.0f} s")
text = "\n".join(lines)
open(os.path.join(OUT, "summary.txt"), "w").write(text + "\n")
print("\n" + text)
PY
rc=$?
echo "python part exit $rc"

# Whatever happened above, greenup's own hold is let go; then nvidia-smi says what is left.
"$greenup" gpu restore --nvml "$nvml" --run-dir "$run_dir" 2>&1 | sed 's/^/final restore: /'
{
  echo
  echo "== after: greenup gpu"
  "$greenup" gpu --nvml "$nvml" --run-dir "$run_dir"
} >> "$out/greenup-gpu.txt" 2>&1
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=power.limit,power.default_limit,clocks.sm --format=csv 2>&1 | sed 's/^/after: /'
fi
rm -rf "$run_dir"
echo "files: $(ls "$out" | tr '\n' ' ')"
return $rc
}

check 2>&1 | tee "$out/log.txt"
exit "${PIPESTATUS[0]}"
