#!/usr/bin/python3
"""The stand-in hardware's laws against the figures they stand for (run by scripts/test.sh):
the published nodes' watts as tests/physics/cpus.yaml prints them, Hsu and Feng's clock
law worked by hand, the closed form the cluster tests rely on, and bad node specs.
The expected numbers are typed from the physics file's tables, not computed by
powermodel.py."""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ["PHYSICS"] = os.path.join(HERE, "../physics/cpus.yaml")
import powermodel as pm  # noqa: E402


def node_watts(spec, ghz, busy, lo_ghz, top_ghz, cpus=4):
    """The watts the stand-in's node of SPEC draws with every CPU at GHZ and BUSY."""
    _, law, _ = pm.node_spec(spec)
    node = object.__new__(pm.Node)
    node.law = law
    x = {c: ghz / top_ghz for c in range(cpus)}
    lo = {c: lo_ghz / top_ghz for c in range(cpus)}
    return node.power(x, lo, {c: busy for c in range(cpus)})


class Published(unittest.TestCase):
    def test_epyc_node_draws_the_published_node_ac_watts_at_each_pstate(self):
        # cpus[epyc-7502].pstates: idle_ac_w / busy_ac_w
        for ghz, idle, busy in [(1.5, 101.8, 234.1), (2.2, 101.8, 279.2), (2.5, 99.05, 315.4)]:
            self.assertAlmostEqual(node_watts("n1:epyc-7502", ghz, 1.0, 1.5, 2.5), busy, places=6)
            self.assertAlmostEqual(node_watts("n1:epyc-7502", ghz, 0.0, 1.5, 2.5), idle, places=6)
        # Half busy at 2.5 GHz: halfway between idle and busy.
        self.assertAlmostEqual(node_watts("n1:epyc-7502", 2.5, 0.5, 1.5, 2.5), (99.05 + 315.4) / 2, places=6)

    def test_between_pstates_the_watts_lie_on_the_straight_line(self):
        # 1.85 GHz is halfway from 1.5 to 2.2 GHz.
        self.assertAlmostEqual(node_watts("n1:epyc-7502", 1.85, 1.0, 1.5, 2.5), (234.1 + 279.2) / 2, places=6)

    def test_below_the_lowest_pstate_only_the_duty_cycle_cuts_the_busy_watts(self):
        # 0.75 GHz: the 1.5 GHz P-state at half duty.
        self.assertAlmostEqual(node_watts("n1:epyc-7502", 0.75, 1.0, 1.5, 2.5), 101.8 + (234.1 - 101.8) / 2, places=6)

    def test_the_xeon_node_has_its_one_published_pstate(self):
        self.assertAlmostEqual(node_watts("n3:xeon-e5-2680v3:0.3", 2.0, 1.0, 2.0, 2.0), 188.6, places=6)
        self.assertAlmostEqual(node_watts("n3:xeon-e5-2680v3:0.3", 2.0, 0.0, 2.0, 2.0), 79.8, places=6)
        self.assertEqual(pm.node_spec("n3:xeon-e5-2680v3:0.3")[2], 0.3)

    def test_power_rises_with_the_clock_so_the_rapl_bisection_holds(self):
        w = [node_watts("n1:epyc-7502", g / 100, 1.0, 1.5, 2.5) for g in range(20, 251)]
        self.assertTrue(all(a <= b for a, b in zip(w, w[1:])))


class ClosedForm(unittest.TestCase):
    def test_the_law_bench_keeps_static_plus_dynamic_cubed(self):
        # fast node: 40 + 120 (f/f_max)^3 busy; at 1.5 of 3.0 GHz: 40 + 15 = 55 W.
        self.assertAlmostEqual(node_watts("n1:40:120", 1.5, 1.0, 1.0, 3.0), 55.0, places=9)
        self.assertAlmostEqual(node_watts("n1:40:120", 1.5, 0.0, 1.0, 3.0), 40.0, places=9)
        # Below 1.0 GHz (x = 1/3) by clock modulation at 0.5 GHz: 40 + 120 (1/3)^2 (1/6) W.
        self.assertAlmostEqual(node_watts("n1:40:120", 0.5, 1.0, 1.0, 3.0), 40 + 120 / 9 / 6, places=9)


class Pinned(unittest.TestCase):
    def node(self, pinned):
        """A node of 4 CPUs, 0.4 host cores at f_max, with one job on CPUs 0-3 and
        processes pinned to the CPUs in `pinned`."""
        node = object.__new__(pm.Node)
        node.share, node.speed = 0.4, 1.0
        node.jobs = {7: {"cpus": [0, 1, 2, 3], "beta": 1.0, "pinned": {c: {} for c in pinned}}}
        return node

    def test_a_pinned_cpu_gets_its_own_clocks_share_alone(self):
        # Plan at 1/3 of f_max on every CPU, CPU 0 raised to f_max by its rank:
        # each CPU is 0.1 cores at f_max; the job 0.1 (1 + 3/3) = 0.2 cores, CPU 0 0.1.
        x = {0: 1.0, 1: 1 / 3, 2: 1 / 3, 3: 1 / 3}
        cap, caps = self.node([0]).caps(x)
        cpus, job, pinned = caps[7]
        self.assertEqual(cpus, [0, 1, 2, 3])
        self.assertAlmostEqual(job, 0.2, places=12)
        self.assertEqual(list(pinned), [0])
        self.assertAlmostEqual(pinned[0], 0.1, places=12)
        self.assertAlmostEqual(cap, 0.2, places=12)
        # Unraised, the pinned rank runs at a third of that.
        _, caps = self.node([0]).caps({c: 1 / 3 for c in range(4)})
        self.assertAlmostEqual(caps[7][2][0], 0.1 / 3, places=12)

    def test_a_job_with_nothing_pinned_keeps_its_pooled_quota(self):
        _, caps = self.node([]).caps({0: 1.0, 1: 1 / 3, 2: 1 / 3, 3: 1 / 3})
        self.assertAlmostEqual(caps[7][1], 0.2, places=12)
        self.assertEqual(caps[7][2], {})

    def test_the_period_keeps_the_least_quota_above_the_kernels_one_ms(self):
        # 0.0375 cores (0.15 at a quarter of the node, at 1/4 of f_max): 1 ms of quota
        # needs a period of 1 / 0.0375 = 26.67 ms.
        self.assertEqual(pm.pinned_period_us(0.0375), 26667)
        self.assertEqual(pm.pinned_period_us(0.5), pm.PERIOD_US)
        self.assertEqual(pm.pinned_period_us(0.0), 1_000_000)
        self.assertEqual(pm.quota_us(0.0375, 26667), 1000)


class ClockLaw(unittest.TestCase):
    def test_speed_follows_hsu_and_feng(self):
        self.assertAlmostEqual(pm.clock_speed(0.6, 1.0), 0.6, places=12)
        # beta 0.5 at 0.6: time 0.5/0.6 + 0.5 = 4/3 of f_max's, speed 0.75.
        self.assertAlmostEqual(pm.clock_speed(0.6, 0.5), 0.75, places=12)
        self.assertAlmostEqual(pm.clock_speed(1.0, 0.3), 1.0, places=12)

    def test_a_job_reads_its_beta_from_its_environment(self):
        p = subprocess.Popen(["sleep", "5"], env={"GC_BETA": "0.4"})
        q = subprocess.Popen(["sleep", "5"], env={"GC_BETA": "1.5"})
        try:
            self.assertEqual(pm.job_beta(p.pid), 0.4)
            self.assertIsNone(pm.job_beta(q.pid))  # out of (0, 1]: ignored
            self.assertIsNone(pm.job_beta(999999999))
        finally:
            for proc in (p, q):
                proc.kill()
                proc.wait()


class BadSpecs(unittest.TestCase):
    def one_line(self, spec, env):
        r = subprocess.run([sys.executable, "-c", f"import powermodel; powermodel.node_spec({spec!r})"],
                           cwd=HERE, env=env, capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        return r.stderr

    def test_each_bad_spec_is_one_line_that_says_what_is_valid(self):
        env = dict(os.environ)
        self.assertIn("expected one of: epyc-7502, xeon-e5-2680v3", self.one_line("n1:pentium", env))
        self.assertIn("expected NODE:STATIC_W:DYNAMIC_W", self.one_line("n1:40:x", env))
        env.pop("PHYSICS")
        self.assertIn("needs PHYSICS=FILE", self.one_line("n1:epyc-7502", env))


if __name__ == "__main__":
    unittest.main()
