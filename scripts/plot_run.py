#!/usr/bin/python3
"""A training run's history (written by `mpigan report RUN_DIR`).

    /usr/bin/python3 scripts/plot_run.py RUN_DIR OUT.png

Reads RUN_DIR/metrics.csv (and RUN_DIR/updates.csv for a distributed run, whose metrics.csv holds
no step rows, and RUN_DIR/physics_checkpoints.csv of scripts/score_checkpoints.py) and draws, against the number of training samples seen:
  1. the discriminator and generator losses: every step (thin) with a running mean of 50 steps,
     and the validation losses (markers), log y when they span more than two decades;
  2. the physics figure of merit fpd_hlf with its error bars (validation.physics), log y, with the
     off-scale line (100) and the floor of two Monte Carlo samples (~0.7, docs/physics.md);
  3. the sampling-fraction mean relative error, in percent, with its error bars.
Prints one summary line per panel (what a user reads without opening the picture).
"""

import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

OFF_SCALE = 100.0  # train/physics_monitor.hpp kFomOffScale
FLOOR = 0.7  # fpd_hlf of two simulator samples of 3 000 showers (docs/physics.md)


def number(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return math.nan


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def running_mean(y, k=50):
    if len(y) < 2:
        return y
    k = max(1, min(k, len(y) // 5 or 1))
    c = np.cumsum(np.insert(np.nan_to_num(y), 0, 0.0))
    out = np.empty_like(y)
    for i in range(len(y)):
        lo = max(0, i - k + 1)
        out[i] = (c[i + 1] - c[lo]) / (i + 1 - lo)
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_run.py RUN_DIR OUT.png")
    run, out = sys.argv[1], sys.argv[2]
    metrics = read(os.path.join(run, "metrics.csv"))
    steps = [r for r in metrics if r["kind"] == "step"]
    vals = [r for r in metrics if r["kind"] == "validation"]
    phys = [r for r in metrics if r["kind"] == "physics"]
    scored = os.path.join(run, "physics_checkpoints.csv")  # scripts/score_checkpoints.py
    if os.path.exists(scored):
        phys = sorted(phys + read(scored), key=lambda r: number(r["step"]))

    # Losses per step: the trainer's step rows, or a distributed run's updates.csv.
    if steps:
        x = np.array([number(r["samples"]) for r in steps])
        d = np.array([number(r["d_loss"]) for r in steps])
        g = np.array([number(r["g_loss"]) for r in steps])
        source = "steps"
    elif os.path.exists(os.path.join(run, "updates.csv")):
        upd = read(os.path.join(run, "updates.csv"))
        x = np.cumsum([number(r["samples"]) for r in upd])
        d = np.array([number(r["d_loss"]) for r in upd])
        g = np.array([number(r["g_loss"]) for r in upd])
        source = "updates"
    else:
        x = d = g = np.array([])
        source = "none"

    fig, axes = plt.subplots(3, 1, figsize=(8, 10), sharex=True)
    ax = axes[0]
    if len(x):
        ax.plot(x, d, color="tab:blue", alpha=0.25, lw=0.6)
        ax.plot(x, g, color="tab:orange", alpha=0.25, lw=0.6)
        ax.plot(x, running_mean(d), color="tab:blue", label="D loss (running mean)")
        ax.plot(x, running_mean(g), color="tab:orange", label="G loss (running mean)")
    if vals:
        vx = [number(r["samples"]) for r in vals]
        ax.plot(vx, [number(r["d_loss"]) for r in vals], "o", color="tab:blue", mfc="none", label="D validation")
        ax.plot(vx, [number(r["g_loss"]) for r in vals], "s", color="tab:orange", mfc="none", label="G validation")
    finite = np.concatenate([d[np.isfinite(d) & (d > 0)], g[np.isfinite(g) & (g > 0)]]) if len(x) else np.array([])
    if len(finite) and finite.max() / max(finite.min(), 1e-12) > 100:
        ax.set_yscale("log")
    ax.set_ylabel("loss")
    ax.set_title(f"{os.path.basename(os.path.normpath(run))}: losses and physics against samples seen")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)

    ax = axes[1]
    ax2 = axes[2]
    if phys:
        px = np.array([number(r["samples"]) for r in phys])
        fom = np.array([number(r["fpd_hlf"]) for r in phys])
        err = np.array([number(r["fpd_hlf_error"]) for r in phys])
        ok = np.isfinite(fom)
        ax.errorbar(px[ok], fom[ok], yerr=np.nan_to_num(err[ok]), fmt="o-", color="tab:red", ms=3, capsize=2,
                    label="fpd_hlf (generated vs held-out Monte Carlo)")
        if (~ok).any():
            for xv in px[~ok]:
                ax.axvline(xv, color="black", ls=":", lw=1)
            ax.plot([], [], color="black", ls=":", label="diverged (NaN/inf showers)")
        ax.axhline(OFF_SCALE, color="gray", ls="--", lw=1, label=f"off the scale ({OFF_SCALE:g})")
        ax.axhline(FLOOR, color="green", ls="--", lw=1, label="Monte Carlo vs Monte Carlo (< 1)")
        ax.set_yscale("log")
        sf = np.array([number(r["sf_mre"]) for r in phys]) * 100
        sfe = np.array([number(r["sf_mre_error"]) for r in phys]) * 100
        ok2 = np.isfinite(sf)
        ax2.errorbar(px[ok2], sf[ok2], yerr=np.nan_to_num(sfe[ok2]), fmt="o-", color="tab:purple", ms=3, capsize=2,
                     label="sampling-fraction MRE")
        ax2.axhline(5, color="gray", ls="--", lw=1, label="5 % (the goal per energy bin)")
        if ok2.any() and np.nanmax(sf[ok2]) > 50:
            ax2.set_yscale("log")
        ax2.legend(fontsize=8)
    else:
        for a in (ax, ax2):
            a.text(0.5, 0.5, "no physics validation in this run (validation.physics)", ha="center", va="center",
                   transform=a.transAxes)
    ax.set_ylabel("figure of merit fpd_hlf (lower is better)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    ax2.set_ylabel("sampling-fraction MRE [%]")
    ax2.set_xlabel("training samples seen")
    ax2.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(out, dpi=110)

    print(f"losses: {len(x)} {source} rows, {len(vals)} validations", end="")
    if len(x):
        print(f"; last running mean D {running_mean(d)[-1]:.4g}, G {running_mean(g)[-1]:.4g}", end="")
    print()
    if phys:
        fom = [(number(r["fpd_hlf"]), int(number(r["samples"])), r["step"]) for r in phys]
        finite = [f for f in fom if math.isfinite(f[0])]
        last = fom[-1]
        print(f"physics: {len(phys)} validations; last fpd_hlf {last[0]:.4g} at step {last[2]} ({last[1]} samples)",
              end="")
        if finite:
            best = min(finite)
            print(f"; best {best[0]:.4g} at step {best[2]} ({best[1]} samples)", end="")
        print()
    print(f"plot: {out}")


if __name__ == "__main__":
    main()
