#!/usr/bin/env python3
"""Checks of the SimGrid test (tests/simgrid/run.sh) from its results (one JSON line per
run, greenup-sim's report tagged with site, app and kind).

Every bound comes from SimGrid's measurements: the two monitor runs give the measured
f_max baseline (their mean) and the spread between identical runs; on the bench, the
brute-force runs (every pair of per-type frequencies) give the least energy and the best
MaxDist distance any uniform-per-type setting reaches. greenup's prediction is only ever
the thing checked, never the yardstick. Prints a table, one line per check, and last
'N passed, M failed' (M counts the runs the driver saw fail, its second argument)."""
import json
import sys
from collections import defaultdict

runs = defaultdict(lambda: defaultdict(list))
for line in open(sys.argv[1]):
    d = json.loads(line)
    runs[(d["site"], d["app"])][d["kind"]].append(d)

passed = 0
# Runs the driver counted as failed (greenup-sim or profile learn exited non-zero).
failed = int(sys.argv[2]) if len(sys.argv) > 2 else 0


def check(name, ok, detail):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")


print(f"{'site':9} {'app':3} {'run':10} {'time s':>9} {'energy J':>10} {'slowdown':>9} {'saving':>8} "
      f"{'dist':>7} {'err T':>7} {'err E':>7}  frequencies")
for (site, app), kinds in sorted(runs.items()):
    mon = kinds["monitor"]
    if len(mon) < 2:
        check(f"{site} {app} baseline", False, f"{len(mon)} monitor runs, need 2")
        continue
    tb = sum(m["measured"]["time_s"] for m in mon) / len(mon)
    eb = sum(m["measured"]["energy_j"] for m in mon) / len(mon)
    spread = max(
        max(abs(a["measured"]["time_s"] - b["measured"]["time_s"]) / tb,
            abs(a["measured"]["energy_j"] - b["measured"]["energy_j"]) / eb)
        for a in mon for b in mon)
    # Differences within twice the spread of identical runs say nothing.
    tol = max(2 * spread, 0.01)

    def metrics(r):
        t, e = r["measured"]["time_s"], r["measured"]["energy_j"]
        return t / tb - 1, 1 - e / eb, tb / t - e / eb

    def row(kind, r):
        s, v, d = metrics(r)
        p = r.get("predicted")
        et = (p["time_s"] / r["measured"]["time_s"] - 1) if p else None
        ee = (p["energy_j"] / r["measured"]["energy_j"] - 1) if p else None
        fq = sorted({(h["node_type"], h["freq_ghz"]) for h in r["measured"]["hosts"]})
        fmt = lambda x: f"{100 * x:+6.1f}%" if x is not None else "      -"
        print(f"{site:9} {app:3} {kind:10} {r['measured']['time_s']:9.3f} {r['measured']['energy_j']:10.1f} "
              f"{fmt(s):>9} {fmt(v):>8} {d:7.3f} {fmt(et):>7} {fmt(ee):>7}  "
              + ", ".join(f"{t} {f:g}" for t, f in fq))

    live = kinds.get("live", [])
    for m in live:
        row("live", m)
    for m in mon:
        row("monitor", m)
    brute = kinds.get("brute", [])
    for policy in ("max-dist", "min-energy"):
        for r in kinds.get(policy, []):
            row(policy, r)
    print(f"{'':9} {app:3} spread between the identical monitor runs: {100 * spread:.2f} %")
    if len(live) == 2:
        lt = abs(live[0]["measured"]["time_s"] / live[1]["measured"]["time_s"] - 1)
        le = abs(live[0]["measured"]["energy_j"] / live[1]["measured"]["energy_j"] - 1)
        print(f"{'':9} {app:3} spread between two live runs (this machine's noise, not a bound): "
              f"time {100 * lt:.2f} %, energy {100 * le:.2f} %")
    for policy in ("max-dist", "min-energy"):
        rs = kinds.get(policy, [])
        if not rs:
            check(f"{site} {app} {policy}", False, "no run")
            continue
        r = rs[-1]
        slowdown, saving, dist = metrics(r)
        check(f"{site} {app} {policy} planned by greenupd", r["verdict"] == "planned",
              f"verdict {r['verdict']} {r.get('reason') or ''}")
        check(f"{site} {app} {policy} saves energy", saving > tol,
              f"saving {100 * saving:.1f} % against the measured baseline, noise bound {100 * tol:.1f} %")
        if policy == "max-dist":
            check(f"{site} {app} max-dist keeps P_norm - E_norm positive", dist > 0,
                  f"measured distance {dist:.3f} (slowdown {100 * slowdown:.1f} %, saving {100 * saving:.1f} %)")
        p = r.get("predicted")
        if p:
            et = abs(p["time_s"] / r["measured"]["time_s"] - 1)
            ee = abs(p["energy_j"] / r["measured"]["energy_j"] - 1)
            bound = 0.05 + tol
            check(f"{site} {app} {policy} model error", max(et, ee) <= bound,
                  f"time {100 * et:.1f} %, energy {100 * ee:.1f} %, bound {100 * bound:.1f} % "
                  f"(5 % + the noise bound)")
        if brute:
            # Each side is one run, each within the noise bound of its true value.
            if policy == "min-energy":
                best = min(b["measured"]["energy_j"] for b in brute)
                got = r["measured"]["energy_j"]
                check(f"{site} {app} min-energy near the brute-force least energy",
                      got <= best * (1 + 2 * tol),
                      f"{got:.1f} J against {best:.1f} J, the least of {len(brute)} simulated settings")
            else:
                best = max(brute, key=lambda b: metrics(b)[2])
                bd = metrics(best)[2]
                check(f"{site} {app} max-dist near the brute-force best distance", dist >= bd - 2 * tol,
                      f"{dist:.3f} against {bd:.3f} (slowdown {100 * metrics(best)[0]:.1f} %, saving "
                      f"{100 * metrics(best)[1]:.1f} %) of {len(brute)} simulated settings")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
