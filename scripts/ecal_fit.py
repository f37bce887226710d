#!/usr/bin/python3
"""Fits the 3DGAN's ECAL-sum ratio to a data set: sum(ECAL)/E in percent as a quartic in x = E/100.

    scripts/ecal_fit.py FILE.h5 [FILE.h5 ...]

The reference code's GetEcalFit (0.0018x^4 - 0.023x^3 + 0.11x^2 - 0.28x + 2.21) was fitted to its
Geant4 files; the generator's ECAL-sum loss aims each fake shower of energy x at ratio(x) * x *
xscale, so a data set of another detector response needs its own fit. Prints the coefficients,
highest power first, as `training.ecal_fit` takes them, and the fit's residuals per energy decile.
Files in GeV x 50 (the variable-angle set) are divided by 50 first.
"""
import sys

import h5py
import numpy as np


def main(paths):
    if not paths:
        sys.exit("usage: scripts/ecal_fit.py FILE.h5 [FILE.h5 ...]")
    energy, total = [], []
    for p in paths:
        with h5py.File(p, "r") as f:
            e = np.asarray(f["energy"], dtype=np.float64)
            s = np.asarray(f["ECAL"], dtype=np.float64).reshape(len(e), -1).sum(axis=1)
        ratio = np.median(s / e)
        if ratio > 0.14:  # GeV x 50 (docs/data.md, units)
            s = s / 50.0
        energy.append(e)
        total.append(s)
    e = np.concatenate(energy)
    sf = 100.0 * np.concatenate(total) / e
    x = e / 100.0
    c = np.polyfit(x, sf, 4)
    print("training.ecal_fit: [" + ", ".join(f"{v:.6g}" for v in c) + "]")
    print(f"{len(e)} events, E {e.min():.1f}..{e.max():.1f} GeV")
    edges = np.quantile(x, np.linspace(0, 1, 11))
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (x >= lo) & (x <= hi)
        r = sf[m] - np.polyval(c, x[m])
        print(f"  E {100 * lo:6.1f}..{100 * hi:6.1f} GeV: mean SF {sf[m].mean():.4f} %, fit residual {r.mean():+.4f} %")


if __name__ == "__main__":
    main(sys.argv[1:])
