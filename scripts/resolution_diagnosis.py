#!/usr/bin/python3
"""Where a generator's energy resolution differs from Monte Carlo's: per energy bin, the spread of
the response r = sum/Ep split into the part the shower's depth explains and the rest.

    /usr/bin/python3 scripts/resolution_diagnosis.py MC.h5 GENERATED.h5 [GENERATED.h5 ...]
                                                     [--boot 200] [--csv OUT.csv] [--smear F]

In this calorimeter the layers' sampling fractions differ, so a shower that starts late deposits
more of its energy where the sampling fraction is lower: the response falls with the shower's
longitudinal barycentre z (energy-weighted mean layer index). Per bin (Ep within +-10 GeV of 50,
100, 200, 300, 400, 500, as `mpigan validate`'s response bins), for Monte Carlo and each generated
file, this prints:

  res      rms / mean of r                        (the validation's resolution)
  core     (q84 - q16) / 2 / median of r          (the resolution without the tails)
  z rms    the spread of the barycentre z, in layers
  corr     the correlation of z and r
  at z     rms / mean of r about its straight-line fit in z (the spread at a fixed depth:
           the sampling and containment fluctuations)

and each generated figure's ratio to Monte Carlo's, with a bootstrap error (both samples
resampled). The file's events are compared as they are: give GENERATED.h5 from `mpigan generate
--like MC.h5` so that both hold the same energies. A second Monte Carlo file of another seed in
place of GENERATED.h5 shows the ratios' statistical floor.

--smear F multiplies each generated shower by its own factor 1 + F n, n ~ N(0, 1), before comparing:
a what-if, the resolution the generator would have with a constant term of F added in quadrature.
The response's share of variance that the depth explains is corr^2; the rest, at a fixed depth,
is ('at z' / 'res')^2.
"""

import argparse
import csv
import sys

import numpy as np

BINS = [50, 100, 200, 300, 400, 500]
HALF_WIDTH = 10.0
FIGURES = ["res", "core", "z rms", "corr", "at z"]


def load(path):
    import h5py

    try:
        f = h5py.File(path, "r")
    except OSError as e:
        sys.exit(f"resolution_diagnosis: cannot read {path}: {e}")
    with f:
        missing = [k for k in ("ECAL", "energy") if k not in f]
        if missing:
            sys.exit(f"resolution_diagnosis: {path} has no dataset {', '.join(missing)} (expected ECAL, the "
                     "showers with depth last, and energy, the primary energy in GeV)")
        x = f["ECAL"][:].astype(np.float64)
        ep = f["energy"][:].astype(np.float64)
    if x.ndim < 3 or len(x) != len(ep):
        sys.exit(f"resolution_diagnosis: {path}: ECAL {x.shape} and energy {ep.shape} do not hold the same "
                 "showers (expected ECAL (N, ..., depth) and energy (N,))")
    total = x.reshape(len(ep), -1).sum(1)
    layers = x.sum(axis=tuple(range(1, x.ndim - 1)))  # depth is the last axis
    z = (layers * np.arange(layers.shape[1])).sum(1) / np.maximum(total, 1e-12)
    return total / ep, z, ep


def figures(r, z):
    mean = r.mean()
    q16, q50, q84 = np.percentile(r, [16, 50, 84])
    slope, icept = np.polyfit(z, r, 1)
    return {"res": r.std(ddof=1) / mean, "core": (q84 - q16) / 2 / q50, "z rms": z.std(ddof=1),
            "corr": np.corrcoef(z, r)[0, 1], "at z": (r - slope * z - icept).std(ddof=2) / mean}


def compare(mc, gen, boot, rng):
    """Rows (bin, n_mc, n_gen, figure, mc, gen, ratio, ratio_error) for two samples, each a tuple
    (response, depth, Ep) of arrays; a bin with fewer than 10 events on either side is left out."""
    rows = []
    for c in BINS:
        sel = [np.abs(s[2] - c) <= HALF_WIDTH for s in (mc, gen)]
        (rm, zm), (rg, zg) = [(s[0][k], s[1][k]) for s, k in zip((mc, gen), sel)]
        if len(rm) < 10 or len(rg) < 10:
            continue
        fm, fg = figures(rm, zm), figures(rg, zg)
        ratios = {f: [] for f in FIGURES}
        for _ in range(boot):
            i, j = rng.integers(0, len(rm), len(rm)), rng.integers(0, len(rg), len(rg))
            bm, bg = figures(rm[i], zm[i]), figures(rg[j], zg[j])
            for f in FIGURES:
                ratios[f].append(bg[f] / bm[f])
        for f in FIGURES:
            err = float(np.std(ratios[f], ddof=1)) if boot > 1 else float("nan")
            rows.append({"ep_gev": c, "n_mc": len(rm), "n_gen": len(rg), "figure": f, "mc": fm[f], "gen": fg[f],
                         "ratio": fg[f] / fm[f], "ratio_error": err})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mc")
    ap.add_argument("generated", nargs="+")
    ap.add_argument("--boot", type=int, default=200, help="bootstrap resamples of each bin (0: no errors)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--csv", help="write every figure, ratio and error here")
    ap.add_argument("--smear", type=float, default=0.0, help="scale each generated shower by 1 + F n")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    mc = load(a.mc)
    rows = []
    for path in a.generated:
        print(f"{path} against {a.mc}")
        print("  Ep GeV |  n MC  gen | " + " | ".join(f"{f:>6} MC    gen   ratio" for f in FIGURES))
        gen = load(path)
        if a.smear > 0:
            gen = (gen[0] * (1 + a.smear * rng.standard_normal(len(gen[0]))), gen[1], gen[2])
        found = compare(mc, gen, a.boot, rng)
        if not found:
            sys.exit(f"resolution_diagnosis: no energy bin holds 10 showers of both {a.mc} and {path} (bins: "
                     f"{', '.join(f'{c} +- {HALF_WIDTH:g}' for c in BINS)} GeV)")
        for i in range(0, len(found), len(FIGURES)):
            b = found[i:i + len(FIGURES)]
            cells = [f"{r['mc']:6.3f} {r['gen']:6.3f} {r['ratio']:4.2f}±{r['ratio_error']:4.2f}" for r in b]
            print(f"  {b[0]['ep_gev']:6d} | {b[0]['n_mc']:4d} {b[0]['n_gen']:4d} | " + " | ".join(cells))
        rows += [{"generated": path, **r} for r in found]
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
