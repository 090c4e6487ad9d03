#!/usr/bin/python3
"""Plot paper 002's figures 2-9 from pascol.sh's runs.csv as one SVG, written directly
(no plotting library): for each operation, energy per MiB and latency against message
size, one line per mode, each normalized to polling at the same size (mean over rounds).
Also prints the normalized values as a Markdown table.
Usage: pascol_plot.py RUNS.CSV OUT.SVG"""
import csv
import math
import statistics
import sys

OPS = [("put", "Put"), ("get", "Get"), ("acc", "Accumulate"), ("sput", "Put strided")]
MODES = [("poll", "polling", "#444444", ""), ("block", "blocking waits", "#1f77b4", "6,3"),
         ("dvfs", "DVFS (polling)", "#d62728", "2,2"), ("both", "DVFS + blocking", "#2ca02c", "")]
METRICS = [("energy_j_per_mib", "Energy/MiB"), ("latency_us", "Latency")]


def load(path):
    by = {}
    for r in csv.DictReader(open(path)):
        v = {k: float(r[k]) for k, _ in METRICS}
        if any(math.isnan(x) for x in v.values()):
            continue
        by.setdefault((r["op"], int(r["bytes"]), r["mode"]), []).append(v)
    mean = {}
    for key, vs in by.items():
        mean[key] = {k: statistics.mean(v[k] for v in vs) for k, _ in METRICS}
    return mean


def size_label(b):
    return f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K"


def panel(out, x0, y0, w, h, title, series, sizes):
    """One panel: log2 x axis over sizes, linear y axis of normalized values."""
    ys = [v for s in series.values() for v in s.values()]
    lo = min(ys + [1.0]); hi = max(ys + [1.0])
    pad = (hi - lo) * 0.08 or 0.05
    lo, hi = lo - pad, hi + pad
    lx = [math.log2(b) for b in sizes]
    X = lambda b: x0 + (math.log2(b) - lx[0]) / ((lx[-1] - lx[0]) or 1) * w
    Y = lambda v: y0 + h - (v - lo) / (hi - lo) * h
    out.append(f'<text x="{x0 + w / 2}" y="{y0 - 8}" text-anchor="middle" font-weight="bold">{title}</text>')
    out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#000"/>')
    step = 10 ** math.floor(math.log10((hi - lo) / 4))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= 6:
            step *= m
            break
    t = math.ceil(lo / step) * step
    while t <= hi:
        out.append(f'<line x1="{x0}" x2="{x0 + w}" y1="{Y(t):.1f}" y2="{Y(t):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 4}" y="{Y(t) + 4:.1f}" text-anchor="end" font-size="10">{t:.2f}</text>')
        t += step
    out.append(f'<line x1="{x0}" x2="{x0 + w}" y1="{Y(1):.1f}" y2="{Y(1):.1f}" stroke="#888" stroke-dasharray="1,3"/>')
    for b in sizes:
        out.append(f'<text x="{X(b):.1f}" y="{y0 + h + 14}" text-anchor="middle" font-size="10">{size_label(b)}</text>')
    for mode, _, color, dash in MODES:
        pts = series.get(mode, {})
        if not pts:
            continue
        path = " ".join(f"{X(b):.1f},{Y(v):.1f}" for b, v in sorted(pts.items()))
        d = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{d}/>')
        for b, v in pts.items():
            out.append(f'<circle cx="{X(b):.1f}" cy="{Y(v):.1f}" r="2.5" fill="{color}"/>')


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: pascol_plot.py RUNS.CSV OUT.SVG")
    mean = load(sys.argv[1])
    norm = {}  # (op, metric) -> mode -> size -> value / polling's
    for (op, b, mode), v in mean.items():
        base = mean.get((op, b, "poll"))
        if base is None:
            continue
        for k, _ in METRICS:
            norm.setdefault((op, k), {}).setdefault(mode, {})[b] = v[k] / base[k]
    sizes = sorted({b for (_, b, _) in mean})
    W, H, pw, ph = 980, 1120, 380, 190
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">'
           'Displaced ring over MPI one-sided calls, 4 test nodes: normalized to polling</text>']
    for i, (op, name) in enumerate(OPS):
        for j, (k, label) in enumerate(METRICS):
            x0, y0 = 80 + j * (pw + 90), 70 + i * (ph + 75)
            panel(out, x0, y0, pw, ph, f"{name}: {label}", norm.get((op, k), {}), sizes)
            out.append(f'<text x="{x0 + pw / 2}" y="{y0 + ph + 30}" text-anchor="middle" font-size="11">message size (bytes)</text>')
    lx = 80
    for mode, label, color, dash in MODES:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{lx}" x2="{lx + 30}" y1="{H - 20}" y2="{H - 20}" stroke="{color}" stroke-width="2"{d}/>')
        out.append(f'<text x="{lx + 36}" y="{H - 16}">{label}</text>')
        lx += 200
    out.append("</svg>")
    tmp = sys.argv[2] + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
    import os
    os.replace(tmp, sys.argv[2])
    # The table behind the plot.
    print("| operation | size | " + " | ".join(f"{m} E/MiB | {m} latency" for m, *_ in MODES[1:]) + " | polling J/MiB | polling latency µs |")
    print("|---|---|" + "---|---|" * (len(MODES) - 1) + "---|---|")
    for op, name in OPS:
        for b in sizes:
            base = mean.get((op, b, "poll"))
            if base is None:
                continue
            cells = []
            for m, *_ in MODES[1:]:
                e = norm.get((op, "energy_j_per_mib"), {}).get(m, {}).get(b)
                t = norm.get((op, "latency_us"), {}).get(m, {}).get(b)
                cells += [f"{e:.2f}" if e is not None else "-", f"{t:.2f}" if t is not None else "-"]
            print(f"| {name} | {size_label(b)} | " + " | ".join(cells)
                  + f" | {base['energy_j_per_mib']:.3g} | {base['latency_us']:.0f} |")
    # The crossover: the smallest size from which a mode's energy per MiB stays below
    # polling's and its latency within 5% of polling's (or below) at every larger size.
    print()
    print("| operation | " + " | ".join(f"{m} crossover" for m, *_ in MODES[1:]) + " |")
    print("|---|" + "---|" * (len(MODES) - 1))
    for op, name in OPS:
        cells = []
        for m, *_ in MODES[1:]:
            e = norm.get((op, "energy_j_per_mib"), {}).get(m, {})
            t = norm.get((op, "latency_us"), {}).get(m, {})
            good = [b for b in sizes if b in e and b in t and e[b] < 1 and t[b] <= 1.05]
            cross = next((b for b in sizes if all(c in good for c in sizes if c >= b)), None)
            cells.append(size_label(cross) if cross else "none")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
