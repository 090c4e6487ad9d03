#!/usr/bin/python3
"""TEST-ONLY stand-in for the hardware: it is not one of greenup's models and ships
nowhere. Every tick it plays the kernel's part for each node's sysfs tree: it sets
scaling_cur_freq from the governor (userspace -> scaling_setspeed, otherwise
scaling_max_freq), then advances the RAPL counter by
  P = static_w + dynamic_w * (f / f_max)^3 * load
where load is 1 while any job step runs on the node (a step socket exists in the
node's slurmd spool), else 0. The counter wraps at max_energy_range_uj, like RAPL.

It runs in one process without forking, so that the CPU it takes does not crowd the
Slurm daemons and jobs it stands beside (the overhead benchmark runs with it).
Usage: powermodel.py SYSFS SPOOL NODE:STATIC_W:DYNAMIC_W ...   (TICK=seconds)"""
import os
import re
import sys
import time

TICK = float(os.environ.get("TICK", "0.2"))
# slurmd names a step's socket NODE_JOBID.STEPID in its spool directory.
STEP_SOCKET = re.compile(r"^(?P<node>[^_]+)_\d+\.\d+$")


def read(path, default=0):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def read_int(path, default=0):
    v = read(path, "")
    return int(v) if v.isdigit() else default


def write(path, value):
    """Replace the file's contents the way the kernel's attributes read: whole, at once."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{value}\n")
    os.replace(tmp, path)


def loaded(spool, node):
    try:
        return any(
            (m := STEP_SOCKET.match(e)) and m.group("node") == node for e in os.listdir(spool)
        )
    except OSError:
        return False


def node_frequencies(tree):
    """Set each policy's scaling_cur_freq as the kernel would; return (mean kHz, max kHz)."""
    base = os.path.join(tree, "devices/system/cpu/cpufreq")
    try:
        policies = sorted(p for p in os.listdir(base) if p.startswith("policy"))
    except OSError:
        return None
    total, count, fmax = 0, 0, 1
    for p in policies:
        d = os.path.join(base, p)
        hi = read_int(f"{d}/cpuinfo_max_freq", 1)
        lo = read_int(f"{d}/cpuinfo_min_freq", 0)
        knob = "scaling_setspeed" if read(f"{d}/scaling_governor", "") == "userspace" else "scaling_max_freq"
        f = min(max(read_int(f"{d}/{knob}", hi), lo), hi)
        if read(f"{d}/scaling_cur_freq", "") != str(f):
            write(f"{d}/scaling_cur_freq", f)
        total, count, fmax = total + f, count + 1, hi
    return (total / count, fmax) if count else None


def main():
    sysfs, spool_root, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
    nodes = []
    for s in specs:
        name, static, dynamic = s.split(":")
        nodes.append((name, float(static), float(dynamic)))
    last = time.monotonic()
    while True:
        time.sleep(TICK)
        now = time.monotonic()
        dt, last = now - last, now
        for name, static, dynamic in nodes:
            tree = os.path.join(sysfs, name)
            freqs = node_frequencies(tree)
            if freqs is None:
                continue
            x = freqs[0] / freqs[1]
            load = 1 if loaded(os.path.join(spool_root, f"d-{name}"), name) else 0
            watts = static + dynamic * x**3 * load
            z = os.path.join(tree, "class/powercap/intel-rapl:0")
            energy, span = read_int(f"{z}/energy_uj"), read_int(f"{z}/max_energy_range_uj", 0)
            energy += watts * dt * 1e6
            if span > 0:
                energy %= span
            write(f"{z}/energy_uj", f"{energy:.0f}")


if __name__ == "__main__":
    main()
