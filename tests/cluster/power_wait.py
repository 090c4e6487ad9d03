#!/usr/bin/python3
"""How long jobs waited for power under the power cap's queue, against an oracle that
knows exactly when power is freed (used by power.sh's P3; figures in docs/BENCHMARKS.md).

Input (a file or stdin): one job a line, "job submit start end watts nodes", times in
epoch seconds, watts the job's greenup licenses, in the order Slurm ranks them (submit
order: the test's jobs have equal priority). Arguments: LICENSED_W NODES.

The oracle knows each job's run time (its measured end - start) and, at every moment a
job arrives or ends, starts every waiting job that fits the licenses and nodes left, in
order: what Slurm's schedulers (main and backfill) would do if they saw freed power at
once and spent nothing between jobs. The difference between a job's
measured and oracle waits is what the mechanism adds: Slurm's scheduling passes
(sched_interval), the epilog before licenses return, and the prolog."""
import sys


def oracle(jobs, licensed, nodes):
    """Each job's wait when, at every moment power or a node is freed or a job arrives,
    the waiting jobs are taken in order and every one that fits starts at once."""
    events = sorted({j[1] for j in jobs})
    waiting = list(jobs)
    running = []  # (end, watts, nodes)
    out = {}
    t = events[0] if events else 0.0
    while waiting:
        running = [r for r in running if r[0] > t]
        used_w = sum(r[1] for r in running)
        used_n = sum(r[2] for r in running)
        for job in list(waiting):
            j, submit, start, end, watts, n = job
            if submit <= t and used_w + watts <= licensed and used_n + n <= nodes:
                out[j] = t - submit
                running.append((t + (end - start), watts, n))
                used_w, used_n = used_w + watts, used_n + n
                waiting.remove(job)
        later = [e for e in events if e > t] + [r[0] for r in running if r[0] > t]
        if not later:
            break
        t = min(later)
    return out


def main():
    licensed, nodes = float(sys.argv[1]), int(sys.argv[2])
    src = open(sys.argv[3]) if len(sys.argv) > 3 else sys.stdin
    jobs = []
    for line in src:
        f = line.split()
        if len(f) == 6:
            jobs.append((f[0], *map(float, f[1:5]), int(f[5])))
    want = oracle(jobs, licensed, nodes)
    lags = []
    for j, submit, start, _, watts, _ in jobs:
        got = start - submit
        lags.append(got - want[j])
        print(f"job {j}: {watts:.0f} W, waited {got:.0f} s, oracle {want[j]:.0f} s, lag {got - want[j]:+.0f} s")
    lags.sort()
    mean = sum(lags) / len(lags)
    print(f"jobs {len(lags)} lag mean {mean:+.1f} s median {lags[len(lags) // 2]:+.0f} s max {lags[-1]:+.0f} s")


if __name__ == "__main__":
    main()
