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
  A process pinned to one of its job's CPUs (its affinity mask that one CPU alone, as
  `srun --cpu-bind` or taskset leave a rank that owns its core) gets a cgroup of its own
  below the job's, whose quota is that CPU's share alone, SHARE * speed / ncpus * f_c /
  f_max: it runs at its own core's clock, whatever the job's other CPUs run at. While a
  node holds such a cgroup, all of its cgroups take a CFS period long enough that that
  quota at the node's lowest P-state stays above the kernel's 1 ms least (one period for
  parent and children, so a parent's shorter period never cuts a child's turn in two; a
  clock-modulated CPU below that P-state is held at that least: too fast there).
- power: the RAPL counter advances by
      P = idle_w + sum over CPUs c of (busy_w(f_c) - idle_w) / ncpus * u_c
  where u_c, a job CPU's utilization, is the job's CPU time (cpuacct) over what its quota
  allows at the CPUs' frequencies, at most 1 (a pinned CPU's, its pinned processes' CPU
  time over its own quota; the job's other CPUs share the rest). A job that busy-polls draws busy power; one
  that sleeps draws only idle power. The counter wraps at max_energy_range_uj, like RAPL.
  A node's law is either a closed form given on the command line (NODE:STATIC_W:DYNAMIC_W:
  idle_w = static, busy_w = static + dynamic (f/f_max)^3, greenup.yaml's own law, which the
  mechanism tests derive their expected numbers from) or a real CPU's published
  measurements (NODE:CPU with PHYSICS=tests/physics/cpus.yaml: idle and busy node AC watts
  at each P-state, straight lines between them).
- a job's clock sensitivity: a job whose environment has GC_BETA=b (test-only; Hsu and
  Feng's beta, tests/physics/programs.yaml) runs as a program of which only the share b of
  its time at f_max scales with 1/f: its CPUs' speed is 1 / (b / x + 1 - b) at x = f/f_max
  instead of x. Without it b = 1, a compute-bound program.
- What it pinned: each job and CPU it gave a pinned process's cgroup, one line each,
  appended to SYSFS/NODE/standin-pinned (test-only, not a kernel file).
- RAPL power limits: each tick it reads the zone's enabled flag and its long-term and
  short-term constraints (constraint_{0,1}_power_limit_uw, _time_window_us). Where the
  node's power averaged over a constraint's window would exceed its limit, it lowers the
  node's effective clock (a ceiling on every CPU's f/f_max, which the quotas, the power
  and scaling_cur_freq then use) to the highest one whose power, at the CPUs' present
  utilization, keeps the window's average within the limit: first through the P-states
  (power static + dynamic x^3), below the lowest P-state by clock modulation (speed and
  dynamic power both proportional to the duty cycle, down to 1/8). A limit the node cannot
  meet even there (below its static power) leaves it at that lowest speed. The ceiling
  rises back by at most RISE (f/f_max per second) per tick. What it reached goes to
  SYSFS/NODE/standin-rapl (test-only, not a kernel file).

It finds a node's processes by its slurmd's pid file and a job's as the descendants of
the slurmstepd processes that carry its id ("slurmstepd: [JOB.STEP]"), and a job's CPUs on a node by
`scontrol show job -d` once per job, so it depends on no Slurm cgroup plugin. It runs in
one process and forks only that scontrol, so the CPU it takes does not crowd the Slurm
daemons and jobs it stands beside (the overhead benchmark runs with it).

Usage: powermodel.py SYSFS PIDDIR NODE:STATIC_W:DYNAMIC_W[:SPEED] ...
       PHYSICS=tests/physics/cpus.yaml powermodel.py SYSFS PIDDIR NODE:CPU[:SPEED] ...
       powermodel.py --cleanup      (move every process out of the bench's cgroups, remove them)
Environment: TICK (seconds, 0.2), RISE (2.0), SHARE (host cores per node at speed 1, f_max; default
90% of the host's cores split over the nodes), CGROUP_ROOT (/sys/fs/cgroup), GC_CGROUP
(greenup-test: the cgroups' name), PERIOD_US (10000: the CFS period; for measuring the
bench, tests/cluster/README.md), PHYSICS (the published measurements NODE:CPU names)."""
import os
import re
import signal
import subprocess
import sys
import time
from collections import deque

TICK = float(os.environ.get("TICK", "0.2"))
CGROUP_ROOT = os.environ.get("CGROUP_ROOT", "/sys/fs/cgroup")
# The bench's cgroups, below each hierarchy: another name keeps two benches on one host
# (the host's and the Debian 13 root's, tests/slurm24) from removing each other's.
GROUP = os.environ.get("GC_CGROUP", "greenup-test")
# A short CFS period: a rank out of quota cannot answer its peers until the period ends,
# so with the kernel's 100 ms default every MPI exchange could wait tens of milliseconds.
PERIOD_US = int(os.environ.get("PERIOD_US", "10000"))
STEPD = re.compile(rb"^slurmstepd: \[(\d+)\.")
# How fast a throttled node's clock ceiling may rise again (f/f_max per second): from a
# window's payback (a tick far below the limit) back to the limit's clock in two ticks.
# A load that dips for a tick does not open the clock: the ceiling is set for each CPU's
# highest utilization of the last UTIL_MEMORY_S.
RISE = float(os.environ.get("RISE", "2.0"))
# Where a limit binds, the clock is set for this much less than the limit, so the
# utilization's jitter from tick to tick does not carry the node over.
MARGIN = 0.01
# Clock modulation's least duty cycle (Intel's T-states: 12.5%), below the lowest P-state.
MIN_DUTY = 1 / 8
# How often to ask scontrol again for a job's CPUs it did not give at the job's start.
CPUS_RETRY_S = 2.0
# The utilization a node's clock is set for: the highest of each CPU's over this long.
UTIL_MEMORY_S = 1.0


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


def quota_us(cores, period_us=PERIOD_US):
    """CFS quota per period for `cores` of CPU time per second (the kernel's least: 1 ms)."""
    return max(int(period_us * cores), 1000)


def pinned_period_us(least_cores):
    """The CFS period of a node holding a pinned process: PERIOD_US, or longer where the quota
    at `least_cores` (its CPU at the node's lowest P-state) would fall below the kernel's
    1 ms least; at most a second."""
    if least_cores <= 0:
        return 1_000_000
    return min(max(PERIOD_US, -(-1000 * 1_000_000 // int(least_cores * 1_000_000))), 1_000_000)


def new_cgroups(cgs, period_us=PERIOD_US):
    for cg in cgs:
        os.makedirs(cg, exist_ok=True)
    poke(os.path.join(cgs[0], "cpu.cfs_period_us"), period_us)


def set_quota(cg, cores, current, period_us=PERIOD_US):
    """Give cgroup CG `cores` of CPU time per second (CFS quota); the quota now set."""
    quota = quota_us(cores, period_us)
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
        name, self.law, self.speed = node_spec(spec)
        self.name = name
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
        self.ran = None  # {cpu: f/f_max} in force since the last tick, under the RAPL ceiling
        # A process whose affinity is all of these is not pinned (on a one-CPU host,
        # nothing is).
        self.host_cpus = os.sched_getaffinity(0)
        self.lo = 1.0  # the node's lowest P-state, f/f_max
        self.period = PERIOD_US  # every cgroup of the node's (pinned_period_us)
        self.ncpus = 1
        self.rapl = Rapl(os.path.join(self.tree, "class/powercap/intel-rapl:0"))

    def frequencies(self):
        """Each policy's requested frequency, as the kernel would choose it from the governor:
        {cpu: f/f_max}, {cpu: lowest f/f_max}, and [(policy dir, f kHz, f_max kHz)]."""
        base = os.path.join(self.tree, "devices/system/cpu/cpufreq")
        try:
            policies = sorted(p for p in os.listdir(base) if p.startswith("policy"))
        except OSError:
            return {}, {}, []
        x, lo_of, pols = {}, {}, []
        for p in policies:
            d = os.path.join(base, p)
            hi = read_int(f"{d}/cpuinfo_max_freq", 1)
            lo = read_int(f"{d}/cpuinfo_min_freq", 0)
            knob = "scaling_setspeed" if read(f"{d}/scaling_governor", "") == "userspace" else "scaling_max_freq"
            f = min(max(read_int(f"{d}/{knob}", hi), lo), hi)
            pols.append((d, f, hi))
            for c in cpu_list(read(f"{d}/affected_cpus", p[len("policy"):])):
                x[c] = f / hi
                lo_of[c] = lo / hi
        return x, lo_of, pols

    def show_clock(self, pols, ceiling):
        """scaling_cur_freq: the clock each policy runs at, under the RAPL ceiling."""
        for d, f, hi in pols:
            cur = str(round(min(f, ceiling * hi) / 1000) * 1000)
            if read(f"{d}/scaling_cur_freq", "") != cur:
                write(f"{d}/scaling_cur_freq", cur)

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
            if job is None:
                # A slurmstepd's child is a slurmstepd until it execs the job's program:
                # judged again at the next tick, not kept as the node's own.
                if not STEPD.match(parent_and_cmd(pid)[1]):
                    self.seen[pid] = None
                continue
            self.seen[pid] = job
            if job not in self.jobs:
                cpus = job_cpus(job, self.name)
                new_cgroups([os.path.join(cg, f"job_{job}") for cg in self.cgs], self.period)
                self.jobs[job] = {"cpus": cpus, "usage": 0, "quota": None, "carry": 0.0, "beta": 1.0,
                                  "beta_from": None, "pinned": {}}
            j = self.jobs[job]
            if j["beta_from"] is None:
                beta = job_beta(pid)
                if beta is not None:
                    j["beta"], j["beta_from"] = beta, pid
            for cg in self.cgs:
                poke(os.path.join(cg, f"job_{job}", "cgroup.procs"), pid)
        self.seen = {p: j for p, j in self.seen.items() if p in live}

    def pin_processes(self):
        """Move each job process pinned to one of its job's CPUs into that CPU's cgroup
        below the job's. A process pinned later (taskset execs after its fork) is found at
        a later tick; one that widens its mask again keeps its CPU."""
        for job, j in self.jobs.items():
            if not j["cpus"]:
                # scontrol may not have answered at the job's start (slurmctld busy with
                # its prologs): ask again, at most every CPUS_RETRY_S.
                now = time.monotonic()
                if now - j.get("cpus_asked", 0.0) < CPUS_RETRY_S:
                    continue
                j["cpus_asked"] = now
                j["cpus"] = job_cpus(job, self.name)
                if not j["cpus"]:
                    continue
            for pid in procs(os.path.join(self.cgs[0], f"job_{job}")):
                try:
                    mask = os.sched_getaffinity(pid)
                except OSError:
                    continue
                if len(mask) != 1 or mask == self.host_cpus:
                    continue
                c = next(iter(mask))
                if c not in j["cpus"]:
                    continue
                if c not in j["pinned"]:
                    per_cpu = self.share * self.speed / max(self.ncpus, 1)
                    self.set_period(pinned_period_us(per_cpu * clock_speed(self.lo, j["beta"])))
                    new_cgroups([os.path.join(cg, f"job_{job}", f"cpu_{c}") for cg in self.cgs], self.period)
                    j["pinned"][c] = {"usage": 0, "carry": 0.0, "quota": None}
                    # What it pinned, for the bench to check its runs by (test-only).
                    with open(os.path.join(self.tree, "standin-pinned"), "a") as f:
                        f.write(f"{job} {c}\n")
                for cg in self.cgs:
                    poke(os.path.join(cg, f"job_{job}", f"cpu_{c}", "cgroup.procs"), pid)

    def set_period(self, period):
        """Give every cgroup of the node's the CFS period `period`: quotas are lifted first
        (the kernel checks a period against the parent's bandwidth), and the next
        apply() sets them again for it."""
        if period == self.period:
            return
        self.period = period
        dirs = [self.cgs[0]]
        for job, j in self.jobs.items():
            d = os.path.join(self.cgs[0], f"job_{job}")
            dirs += [d] + [os.path.join(d, f"cpu_{c}") for c in j["pinned"]]
            j["quota"] = None
            for p in j["pinned"].values():
                p["quota"] = None
        self.quota = None
        for d in dirs:
            poke(os.path.join(d, "cpu.cfs_quota_us"), -1)
        for d in dirs:
            poke(os.path.join(d, "cpu.cfs_period_us"), period)

    def caps(self, x):
        """CPU time per second (host cores) for the node and for each job at clocks x: a
        CPU's share at f_max times its job's speed at its clock (x itself for a
        compute-bound job); and for each CPU a job's process is pinned to, that CPU's."""
        per_cpu = self.share * self.speed / max(len(x), 1)
        speed = dict(x)
        caps = {}
        for job, j in self.jobs.items():
            cpus = [c for c in (j["cpus"] or x.keys()) if c in x]
            own = {c: clock_speed(x[c], j["beta"]) for c in cpus}
            for c, v in own.items():
                speed[c] = max(speed[c], v)
            pinned = {c: per_cpu * own[c] for c in j["pinned"] if c in own}
            caps[job] = (cpus, per_cpu * sum(own.values()), pinned)
        return per_cpu * sum(speed.values()), caps

    def set_pinned(self, job, j, pinned, lower_only):
        for c, cores in pinned.items():
            p = j["pinned"][c]
            if not lower_only or p["quota"] is None or quota_us(cores, self.period) < p["quota"]:
                p["quota"] = set_quota(os.path.join(self.cgs[0], f"job_{job}", f"cpu_{c}"), cores,
                                       p["quota"], self.period)

    def apply(self, x):
        """Set the node's and each job's CFS quota for clocks x (f/f_max per CPU)."""
        cap, caps = self.caps(x)
        # A pinned CPU's share is counted once more in its job's quota and its node's: the
        # kernel hands a cgroup's time to each host CPU in slices (5 ms), so a parent whose
        # quota only just covers a pinned child could leave part of it on the CPU the
        # child does not run on (the job's srun, the node's slurmd) and throttle the child
        # before its own quota is spent. The job's unpinned processes may use that much
        # more; they are its batch script and srun, which wait.
        extra = {job: sum(caps[job][2].values()) for job in caps}
        job_quota = {job: caps[job][1] + extra[job] for job in caps}
        # The kernel refuses a parent a quota below its child's: lower the children first
        # and raise them last.
        for job, j in self.jobs.items():
            self.set_pinned(job, j, caps[job][2], True)
            if j["quota"] is None or quota_us(job_quota[job], self.period) < j["quota"]:
                j["quota"] = set_quota(os.path.join(self.cgs[0], f"job_{job}"), job_quota[job], j["quota"],
                                       self.period)
        self.quota = set_quota(self.cgs[0], cap + sum(extra.values()), self.quota, self.period)
        for job, j in self.jobs.items():
            j["quota"] = set_quota(os.path.join(self.cgs[0], f"job_{job}"), job_quota[job], j["quota"],
                                   self.period)
            self.set_pinned(job, j, caps[job][2], False)

    def measure(self, x, dt):
        """Each CPU's busy fraction over the last dt, in which the quotas of clocks x held."""
        busy = {c: 0.0 for c in x}
        cap, caps = self.caps(x)
        total = read_int(os.path.join(self.cgs[-1], "cpuacct.usage"), self.account["usage"])
        own = (total - self.account["usage"]) / 1e9  # cpuacct counts children in parents
        self.account["usage"] = total
        for job, j in list(self.jobs.items()):
            cpus, jcap, pinned = caps[job]
            usage = read_int(os.path.join(self.cgs[-1], f"job_{job}", "cpuacct.usage"), j["usage"])
            used, j["usage"] = (usage - j["usage"]) / 1e9, usage
            own -= used
            # A pinned CPU is as busy as its own processes keep it (cpuacct counts them in
            # the job's too); the job's other CPUs share the rest.
            for c, ccap in pinned.items():
                p = j["pinned"][c]
                cg = os.path.join(self.cgs[-1], f"job_{job}", f"cpu_{c}")
                usage = read_int(os.path.join(cg, "cpuacct.usage"), p["usage"])
                pused, p["usage"] = (usage - p["usage"]) / 1e9, usage
                used -= pused
                busy[c] += utilization(p, pused, ccap, dt)
            rest = [c for c in cpus if c not in pinned]
            if rest:
                u = utilization(j, used, jcap - sum(pinned.values()), dt)
                for c in rest:
                    busy[c] += u
            else:
                own += used  # the job's unpinned processes, on its pinned CPUs
            dirs = [os.path.join(cg, f"job_{job}") for cg in self.cgs]
            kids = [os.path.join(d, f"cpu_{c}") for d in dirs for c in j["pinned"]]
            if not any(procs(d) for d in dirs + kids):
                for d in kids + dirs:
                    try:
                        os.rmdir(d)
                    except OSError:
                        pass
                del self.jobs[job]
                if not any(k["pinned"] for k in self.jobs.values()):
                    self.set_period(PERIOD_US)
        # The node's own processes (slurmd, the meter, a job process not sorted yet) run on
        # its cores too, at their clocks.
        u = utilization(self.account, own, cap, dt)
        return {c: min(busy[c] + u, 1.0) for c in x}

    def power(self, x, lo, busy):
        """Watts at clocks x (f/f_max, after any RAPL ceiling) and busy fractions: each CPU
        its share of the node's idle watts, and of its busy watts as far as it is busy."""
        n = max(len(x), 1)
        total = 0.0
        for c in x:
            idle = self.law.idle(max(x[c], lo[c]))
            total += idle + (busy_watts(self.law, x[c], lo[c]) - idle) * busy[c]
        return total / n

    def tick(self, dt):
        want, lo, pols = self.frequencies()
        if not want:
            return
        self.lo, self.ncpus = min(lo.values()), len(want)
        self.adopt_slurmd()
        self.sort_processes()
        self.pin_processes()
        # The clocks of the tick that just ended, under the ceiling set at its start.
        ran = self.ran if self.ran is not None and self.ran.keys() == want.keys() else want
        busy = self.measure(ran, dt)
        watts = self.power(ran, lo, busy)
        z = os.path.join(self.tree, "class/powercap/intel-rapl:0")
        energy, span = read_int(f"{z}/energy_uj"), read_int(f"{z}/max_energy_range_uj", 0)
        energy += watts * dt * 1e6
        if span > 0:
            energy %= span
        write(f"{z}/energy_uj", f"{energy:.0f}")
        ceiling = self.rapl.next_ceiling(dt, watts, busy, lambda c, b: self.power(
            {k: min(v, c) for k, v in want.items()}, lo, b), min(lo.values()) * MIN_DUTY)
        self.ran = {c: min(f, ceiling) for c, f in want.items()}
        self.apply(self.ran)
        self.show_clock(pols, ceiling)
        write(os.path.join(self.tree, "standin-rapl"), self.rapl.status())


def busy_watts(law, x, lo):
    """A busy node's watts at effective clock x (f/f_max): the law's through the P-states;
    below the lowest one (lo) the clock is modulated at lo's voltage, so what a busy core
    adds to idle falls with the duty cycle only."""
    if x >= lo:
        return law.busy(x)
    idle = law.idle(lo)
    return idle + (law.busy(lo) - idle) * x / lo


def clock_speed(x, beta):
    """How fast a program runs at clock x (f/f_max) against f_max, when the share beta of
    its time at f_max scales with 1/f (Hsu and Feng's model) and the rest does not."""
    return 1.0 / (beta / x + 1.0 - beta)


class ClosedForm:
    """greenup.yaml's own law: static watts idle, static + dynamic (f/f_max)^3 busy."""

    def __init__(self, static, dynamic):
        self.static, self.dynamic = static, dynamic

    def idle(self, x):
        return self.static

    def busy(self, x):
        return self.static + self.dynamic * x ** 3


class Measured:
    """A real CPU's node AC watts as published (tests/physics/cpus.yaml): idle and busy at
    each P-state, a straight line between two P-states."""

    def __init__(self, name, rows):
        self.name = name
        self.rows = sorted(rows)  # [(ghz, idle_w, busy_w)]
        self.top = self.rows[-1][0]

    def at(self, x, k):
        ghz = x * self.top
        rows = self.rows
        if ghz <= rows[0][0]:
            return rows[0][k]
        for (g0, *a), (g1, *b) in zip(rows, rows[1:]):
            if ghz <= g1:
                return a[k - 1] + (b[k - 1] - a[k - 1]) * (ghz - g0) / (g1 - g0)
        return rows[-1][k]

    def idle(self, x):
        return self.at(x, 1)

    def busy(self, x):
        return self.at(x, 2)


def load_cpu(path, name):
    """The named CPU's P-states from the physics file as [(ghz, idle AC W, busy AC W)]."""
    import yaml  # only the published physics needs it (python3-yaml)

    with open(path) as f:
        doc = yaml.safe_load(f)
    for cpu in doc.get("cpus", []):
        if cpu.get("name") == name:
            rows = []
            for p in cpu.get("pstates", []):
                if "idle_ac_w" not in p or "busy_ac_w" not in p:
                    sys.exit(f"powermodel: {path}: {name} at {p.get('ghz')} GHz has no idle_ac_w and busy_ac_w")
                rows.append((float(p["ghz"]), float(p["idle_ac_w"]), float(p["busy_ac_w"])))
            if not rows:
                sys.exit(f"powermodel: {path}: {name} has no pstates")
            return rows
    names = ", ".join(c.get("name", "?") for c in doc.get("cpus", []))
    sys.exit(f"powermodel: {path}: no CPU named {name!r}; expected one of: {names}")


def node_spec(spec):
    """NODE:STATIC_W:DYNAMIC_W[:SPEED] or NODE:CPU[:SPEED] -> (name, law, speed)."""
    name, *rest = spec.split(":")
    try:
        if len(rest) in (2, 3) and all(_number(v) for v in rest):
            return name, ClosedForm(float(rest[0]), float(rest[1])), float(rest[2]) if len(rest) == 3 else 1.0
        if len(rest) in (1, 2) and not _number(rest[0]) and all(_number(v) for v in rest[1:]):
            physics = os.environ.get("PHYSICS")
            if not physics:
                sys.exit(f"powermodel: {spec}: a CPU name needs PHYSICS=FILE (tests/physics/cpus.yaml)")
            return name, Measured(rest[0], load_cpu(physics, rest[0])), float(rest[1]) if len(rest) == 2 else 1.0
    except ValueError:
        pass
    sys.exit(f"powermodel: node spec {spec!r}: expected NODE:STATIC_W:DYNAMIC_W[:SPEED] or NODE:CPU[:SPEED]")


def _number(v):
    try:
        float(v)
        return True
    except ValueError:
        return False


def job_beta(pid):
    """GC_BETA from a job process's environment (0 < beta <= 1), or None if it has none."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return None
    for kv in env:
        if kv.startswith(b"GC_BETA="):
            try:
                beta = float(kv[len(b"GC_BETA="):])
            except ValueError:
                return None
            return beta if 0 < beta <= 1 else None
    return None


class Rapl:
    """A node's package zone: its power limits and the clock ceiling that meets them."""

    def __init__(self, zone):
        self.zone = zone
        self.files = {}  # the last value each control file read as a number
        self.past = deque()  # (seconds, joules) of the last ticks, newest last
        self.busy = deque()  # each tick's {cpu: busy}, newest last
        self.ceiling = 1.0
        self.watts = 0.0
        self.limited = False  # a limit binds
        self.unmet = False  # a limit binds that even the lowest clock cannot meet

    def number(self, name):
        """A control file's value; a file being rewritten (empty, partial) keeps the last."""
        v = read(os.path.join(self.zone, name), "")
        if v.isdigit():
            self.files[name] = int(v)
        return self.files.get(name, 0)

    def limits(self):
        """[(watts, window seconds)] of each constraint set (limit and window above 0)."""
        if self.number("enabled") != 1:
            return []
        out = []
        for i in (0, 1):
            uw, us = self.number(f"constraint_{i}_power_limit_uw"), self.number(f"constraint_{i}_time_window_us")
            if uw > 0 and us > 0:
                out.append((uw / 1e6, us / 1e6))
        return out

    def next_ceiling(self, dt, watts, busy, power_at, floor):
        """The clock ceiling (f/f_max) for the next tick, given the tick just ended (dt
        seconds at `watts`, CPUs `busy`) and power_at(ceiling, busy) for the next one."""
        self.watts = watts
        self.past.append((dt, watts * dt))
        self.busy.append(busy)
        keep = max(1, round(UTIL_MEMORY_S / TICK))
        while len(self.busy) > keep:
            self.busy.popleft()
        load = {c: max(b.get(c, 0.0) for b in self.busy) for c in busy}
        limits = self.limits()
        longest = max([w for _, w in limits], default=0.0)
        while len(self.past) > 1 and sum(s for s, _ in self.past) - self.past[0][0] >= longest:
            self.past.popleft()
        # Each window's average stays within its limit: the next tick may draw the limit
        # over the window, less what the window's earlier part drew (the oldest tick in it
        # in proportion), and never more than the limit. A window shorter than a tick is
        # held per tick, the finest the stand-in sees.
        allowed = float("inf")
        nxt = max(TICK, dt)  # the next tick lasts about as long as the last one
        for limit, window in limits:
            span, seen, drawn = window - nxt, 0.0, 0.0
            for s, j in reversed(self.past):
                if seen >= span or s <= 0:
                    break
                take = min(s, span - seen)
                seen += take
                drawn += j * take / s
            room = limit * (seen + nxt) - drawn
            allowed = min(allowed, limit, room / nxt)
        top = min(1.0, self.ceiling + RISE * dt)
        # (a node at its limit exactly, as at the default limit, its TDP, is not over it)
        self.limited = power_at(top, load) > allowed * (1 + 1e-9)
        self.unmet = self.limited and power_at(floor, load) > allowed * (1 - MARGIN)
        if not self.limited:
            self.ceiling = top
        elif self.unmet:
            self.ceiling = floor
        else:
            lo, hi = floor, top  # power rises with the ceiling: bisect
            for _ in range(30):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if power_at(mid, load) <= allowed * (1 - MARGIN) else (lo, mid)
            self.ceiling = lo
        return self.ceiling

    def status(self):
        state = "unmet" if self.unmet else "limited" if self.limited else "free"
        return f"ceiling={self.ceiling:.4f} watts={self.watts:.1f} {state}"


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
