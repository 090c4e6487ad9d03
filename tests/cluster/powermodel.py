#!/usr/bin/python3
"""TEST-ONLY stand-in for the hardware: it is not one of greenup's models and ships
nowhere (tests/cluster/README.md says what it emulates and what it cannot). Every tick
it plays the kernel's part for each node's sysfs tree and CPU time:

- cpufreq: it sets each policy's scaling_cur_freq from its governor (userspace ->
  scaling_setspeed, otherwise scaling_max_freq).
- speed: each node owns SHARE * speed of the host's cores at f_max (cgroup v1 cpu
  controller, CFS quota per 10 ms period), so the four nodes do not contend. A node's slurmd is put in the
  node's cgroup, so every process it starts stays there; each job's processes (whatever a
  slurmstepd of that job starts) get a cgroup of their own below it, whose quota is
      SHARE * speed / ncpus * sum over the job's CPUs c of f_c / f_max
  (the node's own quota is the same sum over all its CPUs).
  A compute-bound job at half of f_max thus gets half the CPU time and takes twice as long.
- power: the RAPL counter advances by
      P = static_w + sum over CPUs c of dynamic_w / ncpus * (f_c / f_max)^3 * u_c
  where u_c, a job CPU's utilization, is the job's CPU time (cpuacct) over what its quota
  allows at the CPUs' frequencies, at most 1. A job that busy-polls draws dynamic power; one
  that sleeps draws only static power. The counter wraps at max_energy_range_uj, like RAPL.

It finds a node's processes by its slurmd's pid file and a job's as the descendants of
the slurmstepd processes that carry its id ("slurmstepd: [JOB.STEP]"), and a job's CPUs on a node by
`scontrol show job -d` once per job, so it depends on no Slurm cgroup plugin. It runs in
one process and forks only that scontrol, so the CPU it takes does not crowd the Slurm
daemons and jobs it stands beside (the overhead benchmark runs with it).

Usage: powermodel.py SYSFS PIDDIR NODE:STATIC_W:DYNAMIC_W[:SPEED] ...
       powermodel.py --cleanup      (move every process out of the bench's cgroups, remove them)
Environment: TICK (seconds, 0.2), SHARE (host cores per node at speed 1, f_max; default
90% of the host's cores split over the nodes), CGROUP_ROOT (/sys/fs/cgroup), GC_CGROUP
(greenup-test: the cgroups' name), PERIOD_US (10000: the CFS period; for measuring the
bench, tests/cluster/README.md)."""
import os
import re
import signal
import subprocess
import sys
import time

TICK = float(os.environ.get("TICK", "0.2"))
CGROUP_ROOT = os.environ.get("CGROUP_ROOT", "/sys/fs/cgroup")
# The bench's cgroups, below each hierarchy: another name keeps two benches on one host
# (the host's and the Debian 13 root's, tests/slurm24) from removing each other's.
GROUP = os.environ.get("GC_CGROUP", "greenup-test")
# A short CFS period: a rank out of quota cannot answer its peers until the period ends,
# so with the kernel's 100 ms default every MPI exchange could wait tens of milliseconds.
PERIOD_US = int(os.environ.get("PERIOD_US", "10000"))
STEPD = re.compile(rb"^slurmstepd: \[(\d+)\.")


def read(path, default=0):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def read_int(path, default=0):
    v = read(path, "")
    return int(v) if v.lstrip("-").isdigit() else default


def write(path, value):
    """Replace the file's contents the way the kernel's attributes read: whole, at once."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{value}\n")
    os.replace(tmp, path)


def poke(path, value):
    """Write a cgroup control file in place; False if the kernel refused (a pid gone)."""
    try:
        with open(path, "w") as f:
            f.write(f"{value}\n")
        return True
    except OSError:
        return False


def hierarchies():
    """The cpu and cpuacct hierarchies, once each when they are mounted together."""
    out = []
    for c in ("cpu", "cpuacct"):
        p = os.path.realpath(os.path.join(CGROUP_ROOT, c))
        if not os.path.isfile(os.path.join(p, "cgroup.procs")):
            sys.exit(f"powermodel: no cgroup v1 {c} controller at {CGROUP_ROOT}/{c}")
        if p not in out:
            out.append(p)
    return out


def cpu_list(text):
    """'0-1,3' -> [0, 1, 3]"""
    cpus = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        if a.isdigit():
            cpus.extend(range(int(a), int(b or a) + 1))
    return cpus


def hostnames(expr):
    """Expand a Slurm host list such as 'n[1-2,4],m3'."""
    names = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?", expr):
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            names.append(prefix)
            continue
        for part in ranges.split(","):
            a, _, b = part.partition("-")
            width = len(a)
            for i in range(int(a), int(b or a) + 1):
                names.append(f"{prefix}{i:0{width}d}")
    return names


def job_cpus(job, node):
    """The CPU ids Slurm gave JOB on NODE, or None if scontrol does not say."""
    try:
        out = subprocess.run(["scontrol", "show", "job", "-d", str(job)], capture_output=True,
                             text=True, timeout=3).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for m in re.finditer(r"\bNodes=(\S+) CPU_IDs=(\S+)", out):
        if node in hostnames(m.group(1)):
            return cpu_list(m.group(2))
    return None


def quota_us(cores):
    """CFS quota per PERIOD_US for `cores` of CPU time per second (the kernel's least: 1 ms)."""
    return max(int(PERIOD_US * cores), 1000)


def new_cgroups(cgs):
    for cg in cgs:
        os.makedirs(cg, exist_ok=True)
    poke(os.path.join(cgs[0], "cpu.cfs_period_us"), PERIOD_US)


def set_quota(cg, cores, current):
    """Give cgroup CG `cores` of CPU time per second (CFS quota); the quota now set."""
    quota = quota_us(cores)
    if quota != current:
        poke(os.path.join(cg, "cpu.cfs_quota_us"), quota)
    return quota


def utilization(acct, used, cores, dt):
    """Busy fraction of `cores` over dt in which `used` seconds of CPU time were used.
    CFS hands out quota per 100 ms period, so a tick may see a period more or less than its
    share: time over the cap is carried into the next tick (up to a second's worth) rather
    than cut, which would bias power low."""
    used += acct["carry"]
    if cores <= 0 or dt <= 0:
        return 0.0
    u = min(max(used, 0.0) / (cores * dt), 1.0)
    acct["carry"] = min(max(used, 0.0) - u * cores * dt, cores)
    return u


def procs(cg):
    try:
        with open(os.path.join(cg, "cgroup.procs")) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def parent_and_cmd(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return None, b""
    return int(stat[stat.rindex(b")") + 2:].split()[1]), cmd


class Node:
    def __init__(self, spec, sysfs, piddir, share, hier):
        name, static, dynamic, *speed = spec.split(":")
        self.name, self.static, self.dynamic = name, float(static), float(dynamic)
        self.speed = float(speed[0]) if speed else 1.0
        self.tree = os.path.join(sysfs, name)
        self.pidfile = os.path.join(piddir, f"slurmd-{name}.pid")
        self.share = share
        self.cgs = [os.path.join(h, GROUP, name) for h in hier]
        new_cgroups(self.cgs)
        self.quota = None
        self.account = {"usage": 0, "carry": 0.0}  # the node cgroup's cpuacct.usage (ns)
        self.slurmd = None
        self.seen = {}  # pid -> job id, or None for the node's own (non-job) processes
        self.jobs = {}  # job id -> {"cpus": [...], "usage": ns, "quota": us}

    def frequencies(self):
        """Set each policy's scaling_cur_freq as the kernel would; return {cpu: f/f_max}."""
        base = os.path.join(self.tree, "devices/system/cpu/cpufreq")
        try:
            policies = sorted(p for p in os.listdir(base) if p.startswith("policy"))
        except OSError:
            return {}
        x = {}
        for p in policies:
            d = os.path.join(base, p)
            hi = read_int(f"{d}/cpuinfo_max_freq", 1)
            lo = read_int(f"{d}/cpuinfo_min_freq", 0)
            knob = "scaling_setspeed" if read(f"{d}/scaling_governor", "") == "userspace" else "scaling_max_freq"
            f = min(max(read_int(f"{d}/{knob}", hi), lo), hi)
            if read(f"{d}/scaling_cur_freq", "") != str(f):
                write(f"{d}/scaling_cur_freq", f)
            for c in cpu_list(read(f"{d}/affected_cpus", p[len("policy"):])):
                x[c] = f / hi
        return x

    def adopt_slurmd(self):
        pid = read_int(self.pidfile, 0)
        if pid and pid != self.slurmd and os.path.exists(f"/proc/{pid}"):
            if all(poke(os.path.join(cg, "cgroup.procs"), pid) for cg in self.cgs):
                self.slurmd = pid

    def job_of(self, pid):
        """The job whose slurmstepd started PID, or None; walks up to the node's slurmd.
        A slurmstepd itself stays with the node: it serves the job (PMIx among others),
        and in the job's cgroup a rank polling for it would take the CPU time it needs."""
        if STEPD.match(parent_and_cmd(pid)[1]):
            return None
        for _ in range(64):
            if pid in self.seen and self.seen[pid] is not None:
                return self.seen[pid]
            ppid, cmd = parent_and_cmd(pid)
            m = STEPD.match(cmd)
            if m:
                return int(m.group(1))
            if ppid is None or ppid <= 1 or pid == self.slurmd:
                return None
            pid = ppid
        return None

    def sort_processes(self):
        """Move each new job process from the node's cgroup into its job's."""
        live = set()
        for pid in procs(self.cgs[0]):
            live.add(pid)
            if pid in self.seen:
                continue
            job = self.job_of(pid)
            self.seen[pid] = job
            if job is None:
                continue
            if job not in self.jobs:
                cpus = job_cpus(job, self.name)
                new_cgroups([os.path.join(cg, f"job_{job}") for cg in self.cgs])
                self.jobs[job] = {"cpus": cpus, "usage": 0, "quota": None, "carry": 0.0}
            for cg in self.cgs:
                poke(os.path.join(cg, f"job_{job}", "cgroup.procs"), pid)
        self.seen = {p: j for p, j in self.seen.items() if p in live}

    def watts(self, x, dt):
        """Set each job's quota from its CPUs' frequencies; the node's power over the last dt."""
        ncpu = max(len(x), 1)
        per_cpu = self.share * self.speed / ncpu
        busy = {c: 0.0 for c in x}
        # The node's own processes (slurmd, the meter, a job process not sorted yet) run on
        # its cores too, at their frequencies.
        cap = per_cpu * sum(x.values())
        caps = {}
        for job, j in self.jobs.items():
            cpus = [c for c in (j["cpus"] or x.keys()) if c in x]
            caps[job] = (cpus, per_cpu * sum(x[c] for c in cpus))
        # The kernel refuses a parent a quota below its child's: lower the jobs' first and
        # raise them last.
        for job, j in self.jobs.items():
            if j["quota"] is None or quota_us(caps[job][1]) < j["quota"]:
                j["quota"] = set_quota(os.path.join(self.cgs[0], f"job_{job}"), caps[job][1], j["quota"])
        self.quota = set_quota(self.cgs[0], cap, self.quota)
        for job, j in self.jobs.items():
            j["quota"] = set_quota(os.path.join(self.cgs[0], f"job_{job}"), caps[job][1], j["quota"])
        total = read_int(os.path.join(self.cgs[-1], "cpuacct.usage"), self.account["usage"])
        own = (total - self.account["usage"]) / 1e9  # cpuacct counts children in parents
        self.account["usage"] = total
        for job, j in list(self.jobs.items()):
            cpus, jcap = caps[job]
            usage = read_int(os.path.join(self.cgs[-1], f"job_{job}", "cpuacct.usage"), j["usage"])
            used, j["usage"] = (usage - j["usage"]) / 1e9, usage
            own -= used
            u = utilization(j, used, jcap, dt)
            for c in cpus:
                busy[c] += u
            if not any(procs(os.path.join(cg, f"job_{job}")) for cg in self.cgs):
                for cg in reversed(self.cgs):
                    try:
                        os.rmdir(os.path.join(cg, f"job_{job}"))
                    except OSError:
                        pass
                del self.jobs[job]
        u = utilization(self.account, own, cap, dt)
        for c in x:
            busy[c] += u
        dyn = self.dynamic / ncpu
        return self.static + sum(dyn * x[c] ** 3 * min(busy[c], 1.0) for c in x)

    def tick(self, dt):
        x = self.frequencies()
        if not x:
            return
        self.adopt_slurmd()
        self.sort_processes()
        watts = self.watts(x, dt)
        z = os.path.join(self.tree, "class/powercap/intel-rapl:0")
        energy, span = read_int(f"{z}/energy_uj"), read_int(f"{z}/max_energy_range_uj", 0)
        energy += watts * dt * 1e6
        if span > 0:
            energy %= span
        write(f"{z}/energy_uj", f"{energy:.0f}")


def cleanup(hier):
    """Move every process in the bench's cgroups back to the root one; remove the cgroups."""
    for h in hier:
        top = os.path.join(h, GROUP)
        for d, _, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
            for pid in procs(d):
                poke(os.path.join(h, "cgroup.procs"), pid)
            try:
                os.rmdir(d)
            except OSError:
                pass


def main():
    hier = hierarchies()
    if sys.argv[1:] == ["--cleanup"]:
        cleanup(hier)
        return
    sysfs, piddir, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
    share = float(os.environ.get("SHARE", 0) or 0.9 * os.cpu_count() / len(specs))
    cleanup(hier)  # a run killed before it could clean up
    for h in hier:
        os.makedirs(os.path.join(h, GROUP), exist_ok=True)
    # Within its quota a node's processes are served before the host's other work, as a
    # node's own cores would be.
    poke(os.path.join(hier[0], GROUP, "cpu.shares"), 1024 * len(specs) * 4)
    nodes = [Node(s, sysfs, piddir, share, hier) for s in specs]

    def stop(*_):
        cleanup(hier)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    last = time.monotonic()
    while True:
        time.sleep(TICK)
        now = time.monotonic()
        dt, last = now - last, now
        for n in nodes:
            n.tick(dt)


if __name__ == "__main__":
    main()
