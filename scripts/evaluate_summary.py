#!/usr/bin/python3
"""Summarise scripts/evaluate.sh's runs.csv: per application and policy, the pairs'
slowdown and saving; the prediction error of the policy runs in order and by profile
version; and, per application, every setting run against the runs at f_max (time,
energy and average power, mean and standard error), which reads better than single pairs
on a noisy host. A run whose answer failed its check is left out of every figure and
counted instead (the pair it belonged to is dropped).
Usage: evaluate_summary.py RUNS.CSV [APP...]   (default: every application in the file)"""
import csv
import statistics
import sys


def spread(v):
    return (f"{statistics.mean(v):+.1f} ± {statistics.stdev(v):.1f} ({min(v):+.1f} to {max(v):+.1f})"
            if len(v) > 1 else f"{v[0]:+.1f}")


def se(v):
    return statistics.stdev(v) / len(v) ** 0.5 if len(v) > 1 else float("nan")


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    apps = sys.argv[2:] or list(dict.fromkeys(r["app"] for r in rows))
    rows = [r for r in rows if r["app"] in apps]
    bad = {r["job"] for r in rows if r["check"] != "ok"}
    good = [r for r in rows if r["check"] == "ok"]
    if bad:
        print(f"left out: {len(bad)} run(s) whose answer failed its check (jobs {', '.join(sorted(bad, key=int))}) and their pairs")
        print()
    print("| application | policy | pairs | baseline time s | policy time s | slowdown % | baseline energy kJ | policy energy kJ | saving % |")
    print("|---|---|---|---|---|---|---|---|---|")
    errors = {}
    for app in dict.fromkeys(r["app"] for r in rows):
        for pol in dict.fromkeys(r["policy"] for r in rows if r["app"] == app):
            pairs = {}
            for r in good:
                if r["app"] == app and r["policy"] == pol:
                    pairs.setdefault(r["pair"], {})[r["kind"]] = r
            full = [p for p in pairs.values() if "baseline" in p and "policy" in p]
            if full:
                bt = [float(p["baseline"]["time_s"]) for p in full]
                pt = [float(p["policy"]["time_s"]) for p in full]
                be = [float(p["baseline"]["energy_j"]) for p in full]
                pe = [float(p["policy"]["energy_j"]) for p in full]
                slow = [100 * (b - a) / a for a, b in zip(bt, pt)]
                save = [100 * (a - b) / a for a, b in zip(be, pe)]
                print(f"| {app} | {pol} | {len(full)} | {statistics.mean(bt):.1f} | {statistics.mean(pt):.1f} | {spread(slow)} "
                      f"| {statistics.mean(be)/1000:.2f} | {statistics.mean(pe)/1000:.2f} | {spread(save)} |")
            runs = [r for r in good if r["app"] == app and r["policy"] == pol and r["kind"] == "policy"
                    and r["pred_energy_j"] not in ("", "null")]
            errors[(app, pol)] = [(100 * (float(r["pred_time_s"]) - float(r["time_s"])) / float(r["time_s"]),
                                   100 * (float(r["pred_energy_j"]) - float(r["energy_j"])) / float(r["energy_j"]),
                                   r["profile_version"]) for r in runs]
    print()
    print("| application | policy | prediction error, run 1 (time, energy, profile version) | run 5 | mean abs. energy error, runs 1-5 |")
    print("|---|---|---|---|---|")
    for (app, pol), e in errors.items():
        if not e:
            continue
        one = f"{e[0][0]:+.1f}%, {e[0][1]:+.1f}% (v{e[0][2]})"
        five = f"{e[4][0]:+.1f}%, {e[4][1]:+.1f}% (v{e[4][2]})" if len(e) >= 5 else "not run"
        print(f"| {app} | {pol} | {one} | {five} | {statistics.mean(abs(x[1]) for x in e[:5]):.1f}% |")
    # A profile's version k has been refined from k-1 measured runs (any policy's), so the
    # error by version is the error after so many runs, whichever policy made them.
    print()
    print("| application | profile version (refined from that many runs, minus one) | policy runs | mean abs. time error | mean abs. energy error |")
    print("|---|---|---|---|---|")
    for app in dict.fromkeys(r["app"] for r in rows):
        byv = {}
        for (a, _), e in errors.items():
            if a == app:
                for t, en, v in e:
                    byv.setdefault(int(v), []).append((abs(t), abs(en)))
        for v in sorted(byv):
            x = byv[v]
            print(f"| {app} | v{v} | {len(x)} | {statistics.mean(t for t, _ in x):.1f}% | {statistics.mean(e for _, e in x):.1f}% |")
    # By setting: a baseline shared by several policies (TOGETHER=1) counts once.
    print()
    print("| application | setting | runs | time s | energy kJ | average power W | slowdown % | saving % | power % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for app in dict.fromkeys(r["app"] for r in rows):
        groups, seen = {}, set()
        for r in good:
            if r["app"] != app or r["job"] in seen:
                continue
            seen.add(r["job"])
            key = r["freqs_ghz"] if r["kind"] == "policy" else "f_max (baseline)"
            groups.setdefault(key, []).append((float(r["time_s"]), float(r["energy_j"])))
        base = groups.get("f_max (baseline)")
        for key, v in groups.items():
            t = [x[0] for x in v]
            e = [x[1] for x in v]
            p = [x[1] / x[0] for x in v]
            rel = "| | | "
            if base and key != "f_max (baseline)":
                bt, be, bp = ([x[0] for x in base], [x[1] for x in base], [x[1] / x[0] for x in base])

                def diff(a, b, sign):
                    m = sign * 100 * (statistics.mean(a) - statistics.mean(b)) / statistics.mean(b)
                    return f"{m:+.1f} ± {100 * (se(a) ** 2 + se(b) ** 2) ** 0.5 / statistics.mean(b):.1f}"
                rel = f"| {diff(t, bt, 1)} | {diff(e, be, -1)} | {diff(p, bp, 1)} "
            print(f"| {app} | {key} | {len(v)} | {statistics.mean(t):.1f} | {statistics.mean(e)/1000:.2f} "
                  f"| {statistics.mean(p):.0f} {rel}|")


if __name__ == "__main__":
    main()
