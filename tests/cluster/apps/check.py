#!/usr/bin/python3
"""Check a real application's answer (run-app.sh calls this). Each expected value is
derived independently of the run:

lammps  The Lennard-Jones melt starts from a perfect fcc lattice at reduced density
        0.8442, so its first potential energy per atom is the lattice sum of
        4 (r^-12 - r^-6) over neighbours within the 2.5 cutoff, computed here; its
        temperature is the 3.0 the input asks for. Over the run (NVE) total energy
        must stay within 1% of where it started.
nwchem  RHF/6-31G* (Cartesian d) energy of benzene at the input's geometry:
        -230.701828892 hartree as computed by PySCF 2.14.0 (scf.RHF, conv_tol 1e-11,
        cart=True); NWChem must agree within 1e-6 hartree.
hpcc    HPCC verifies itself: every HPL run passes its scaled residual check, and no
        test reports a failure.
bsp     The bench's cross-check loop (bsp.c): the allreduce of rank + 1 summed over
        STEPS steps must be STEPS * P (P + 1) / 2, and every rank must end with the same
        value of the recurrence.

Usage: check.py APP DIR. Prints one line, "check APP: ok (...)" or
"check APP: FAILED: why", and exits 0 or 1."""
import itertools
import math
import re
import sys

NWCHEM_RHF_BENZENE = -230.701828892


def lj_lattice_energy(rho=0.8442, cutoff=2.5):
    a = (4 / rho) ** (1 / 3)
    basis = [(0, 0, 0), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)]
    m = math.ceil(cutoff / a) + 1
    e = 0.0
    for i, j, k in itertools.product(range(-m, m + 1), repeat=3):
        for b in basis:
            r = a * math.sqrt((i + b[0]) ** 2 + (j + b[1]) ** 2 + (k + b[2]) ** 2)
            if 0 < r < cutoff:
                e += 4 * (r**-12 - r**-6)
    return e / 2


def lammps(d):
    text = open(f"{d}/log.lammps").read()
    rows = re.findall(r"^\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$", text, re.M)
    if len(rows) < 2:
        return None, "no thermo output in log.lammps"
    step0, last = [float(x) for x in rows[0]], [float(x) for x in rows[-1]]
    want = lj_lattice_energy()
    if abs(step0[2] - want) > 1e-6:
        return None, f"first E_pair {step0[2]} is not the lattice sum {want:.7f}"
    if abs(step0[1] - 3.0) > 1e-6:
        return None, f"first temperature {step0[1]}, expected 3.0"
    drift = abs(last[4] - step0[4]) / abs(step0[4])
    if drift > 0.01:
        return None, f"total energy drifted {drift:.2%} over {int(last[0])} steps"
    return f"E_pair(0) {step0[2]:.7f} = lattice sum, energy drift {drift:.3%} over {int(last[0])} steps", None


def nwchem(d):
    m = re.findall(r"Total SCF energy =\s+(\S+)", open(f"{d}/nwchem.out").read())
    if not m:
        return None, "no 'Total SCF energy' in nwchem.out"
    e = float(m[-1])
    if abs(e - NWCHEM_RHF_BENZENE) > 1e-6:
        return None, f"SCF energy {e:.9f}, expected {NWCHEM_RHF_BENZENE} (PySCF)"
    return f"SCF energy {e:.9f} hartree, PySCF {NWCHEM_RHF_BENZENE}", None


def hpcc(d):
    text = open(f"{d}/hpccoutf.txt").read()
    passed = re.search(r"(\d+) tests completed and passed residual checks", text)
    failed = re.search(r"(\d+) tests completed and failed residual checks", text)
    if not passed or not failed or int(passed.group(1)) == 0 or int(failed.group(1)) != 0:
        return None, "HPL residual checks did not all pass"
    if re.search(r"FAILED|[1-9]\d* errors in", text):
        return None, "a test reports a failure"
    if "End of HPC Challenge tests." not in text:
        return None, "HPCC did not finish"
    gf = re.search(r"^HPL_Tflops=(\S+)", text, re.M)
    return f"{passed.group(1)} HPL runs passed their residual checks, HPL {float(gf.group(1)) * 1000:.2f} Gflop/s", None


def bsp(d):
    text = open(f"{d}/bsp.out").read()
    head = re.search(r"^bsp: (\d+) ranks, (\d+) steps of \d+: wall (\S+) s", text, re.M)
    check = re.search(r"^bsp check: (\S+) \S+ (\w+)", text, re.M)
    if not head or not check:
        return None, "bsp did not finish"
    p, steps = int(head.group(1)), int(head.group(2))
    want = steps * p * (p + 1) / 2
    if float(check.group(1)) != want:
        return None, f"allreduce sum {check.group(1)}, expected {want:.0f}"
    if check.group(2) != "same":
        return None, "the ranks' recurrences differ"
    return f"{p} ranks, {steps} steps, sum {want:.0f}, wall {head.group(3)} s", None


def main():
    app, d = sys.argv[1], sys.argv[2]
    try:
        ok, why = {"lammps": lammps, "nwchem": nwchem, "hpcc": hpcc, "bsp": bsp}[app](d)
    except (OSError, ValueError, KeyError) as e:
        ok, why = None, str(e)
    if ok is None:
        print(f"check {app}: FAILED: {why}")
        return 1
    print(f"check {app}: ok ({ok})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
