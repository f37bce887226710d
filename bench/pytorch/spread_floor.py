#!/usr/bin/env python3
"""The noise floor of training.response_spread: its value for two batches of real showers.

The term (mpigan's nn::binned_spread_loss, gan3d.binned_spread here) compares the response's rms
about the real batch's fitted curve in four energy bins of about 16 showers each, so even two real
batches score well above 0. This draws PAIRS pairs of batches of BATCH showers from the training
files and prints the term's mean (with its standard error) when the second batch's spread about its
own curve is scaled by k = 1 (the floor), 0.9 and 0.85, so that the value a training logs
(g_response_spread in metrics.csv) can be read as a spread ratio.

  bench/pytorch/spread_floor.py [--data 'runs/rung5-data/*.h5'] [--files 2] [--pairs 400] [--batch 64]
"""
import argparse
import glob
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gan3d  # noqa: E402
import train_rung as tr  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="runs/rung5-data/*.h5")
    p.add_argument("--files", type=int, default=2, help="read the first N files (default 2: 10 000 showers)")
    p.add_argument("--pairs", type=int, default=400)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bins", type=int, default=4, help="energy bins of the term (mpigan uses 4)")
    a = p.parse_args(argv)
    files = sorted(glob.glob(a.data))[:a.files]
    if not files:
        sys.exit(f"no files match {a.data}")
    ecal, energy = tr.read_files(files)
    # the features of D's input as the training computes them (power 0.5, xscale 100, no energy scaling)
    img = torch.as_tensor(tr.preprocess(ecal, energy, 1e-6, 100.0, 0.5)[0])
    e = torch.as_tensor(energy / 100.0).view(-1, 1)
    f = gan3d.shower_features(img.clamp(min=0.0).pow(2.0).double(), e.double())
    rng = np.random.default_rng(a.seed)
    print(f"{len(f)} showers from {len(files)} files; {a.pairs} pairs of batches of {a.batch}, {a.bins} bins")
    for k in (1.0, 0.9, 0.85):
        vals = []
        for _ in range(a.pairs):
            real = f[rng.choice(len(f), a.batch, replace=False)]
            other = f[rng.choice(len(f), a.batch, replace=False)]
            fit, own = gan3d.EnergyStandardiser(real), gan3d.EnergyStandardiser(other)
            # the other batch's residuals about the real curve, its spread about its own curve times k
            r = fit.residual(other) - own.residual(other) + k * own.residual(other)
            vals.append(float(gan3d.binned_spread(other[:, 0], r, real[:, 0], fit.residual(real), bins=a.bins)))
        print(f"spread x{k:.2f}: {np.mean(vals):.4f} +- {np.std(vals) / np.sqrt(len(vals)):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
