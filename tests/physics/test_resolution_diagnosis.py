#!/usr/bin/python3
"""scripts/resolution_diagnosis.py on samples whose answers are known: the response built as
r = a - b z + e with the depth z and the fluctuation e drawn independently, so that the spread at
a fixed depth is sd(e) / mean and the depth's spread sd(z). A generated sample with e's spread
halved must show 'at z' near 0.5 and 'z rms' near 1; one with z's spread halved the reverse; a
second sample of the same law near 1 everywhere."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import resolution_diagnosis as rd  # noqa: E402

N = 20000
failures = []


def sample(rng, z_sd=0.15, e_sd=0.02):
    ep = rng.uniform(10, 500, N)
    z = 1.8 + z_sd * rng.standard_normal(N)
    r = 1.0 - 0.3 * (z - 1.8) + e_sd * rng.standard_normal(N)
    return r, z, ep


def ratios(mc, gen, figure):
    rows = rd.compare(mc, gen, 20, np.random.default_rng(3))
    return np.array([r["ratio"] for r in rows if r["figure"] == figure]), rows


def check(name, value, lo, hi):
    ok = lo <= value <= hi
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {value:.4f} in [{lo}, {hi}]")
    if not ok:
        failures.append(name)


rng = np.random.default_rng(1)
mc = sample(rng)

# hand-computed figures of one bin: sd(e)/mean = 0.02, sd(z) = 0.15, corr = -0.045/sqrt(0.045^2 + 0.02^2)
r, z, _ = mc
f = rd.figures(r, z)
check("at z, hand-computed 0.02", f["at z"], 0.0195, 0.0205)
check("z rms, hand-computed 0.15", f["z rms"], 0.147, 0.153)
check("corr, hand-computed -0.914", f["corr"], -0.92, -0.908)
check("res, hand-computed 0.0492", f["res"], 0.048, 0.0505)

same, rows = ratios(mc, sample(np.random.default_rng(2)), "at z")
check("same law: bins compared", len(same), 6, 6)
check("same law: worst 'at z' ratio", float(np.max(np.abs(same - 1))), 0.0, 0.12)
check("same law: bootstrap error present", float(min(r["ratio_error"] for r in rows)), 1e-4, 0.2)

narrow_e = sample(np.random.default_rng(2), e_sd=0.01)
at_z, _ = ratios(mc, narrow_e, "at z")
z_rms, _ = ratios(mc, narrow_e, "z rms")
check("fluctuation halved: 'at z' ratio, mean over bins", float(at_z.mean()), 0.45, 0.55)
check("fluctuation halved: 'z rms' ratio, mean over bins", float(z_rms.mean()), 0.93, 1.07)

narrow_z = sample(np.random.default_rng(2), z_sd=0.075)
at_z, _ = ratios(mc, narrow_z, "at z")
z_rms, _ = ratios(mc, narrow_z, "z rms")
check("depth halved: 'z rms' ratio, mean over bins", float(z_rms.mean()), 0.45, 0.55)
check("depth halved: 'at z' ratio, mean over bins", float(at_z.mean()), 0.93, 1.07)

sys.exit(1 if failures else 0)
