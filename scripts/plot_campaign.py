#!/usr/bin/env python3
"""The 3dgan-25 campaign across GPU windows: fpd_hlf and the sampling fraction's mean relative
error against the showers seen, one marker per window, from bench/gpu/campaign/fom.csv.

    scripts/plot_campaign.py [FOM.csv] [OUT.png]

Rows scored during training (2 944 held-out showers) are joined by a line per run; rows of
`mpigan validate` (3 000 showers, bootstrap error) are drawn as open markers with their errors.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot_campaign.py: {path} holds no rows")
    need = {"window", "run", "samples", "fpd_hlf", "fpd_hlf_error", "sf_mre", "source"}
    missing = need - set(rows[0])
    if missing:
        sys.exit(f"plot_campaign.py: {path} lacks the columns {sorted(missing)}")
    return rows


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "bench/gpu/campaign/fom.csv"
    out = sys.argv[2] if len(sys.argv) > 2 else "docs/figures/gpu-campaign.png"
    rows = read(src)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    colours = {}
    for r in rows:
        w = r["window"]
        colours.setdefault(w, f"C{len(colours)}")
    for run in sorted({r["run"] for r in rows}):
        train = [r for r in rows if r["run"] == run and r["source"] == "training"]
        train.sort(key=lambda r: int(r["samples"]))
        if train:
            xs = [int(r["samples"]) for r in train]
            a.plot(xs, [float(r["fpd_hlf"]) for r in train], "-", color="0.7", zorder=1)
            b.plot(xs, [100 * float(r["sf_mre"]) for r in train], "-", color="0.7", zorder=1)
    for r in rows:
        x, c = int(r["samples"]), colours[r["window"]]
        validated = r["source"] != "training"
        style = dict(mfc="none" if validated else c, mec=c, color=c, ms=7, zorder=2)
        a.errorbar(x, float(r["fpd_hlf"]), yerr=float(r["fpd_hlf_error"]), fmt="s" if validated else "o", **style)
        b.plot(x, 100 * float(r["sf_mre"]), "s" if validated else "o", **style)
    for w, c in colours.items():
        a.plot([], [], "o", color=c, label=f"window {w}")
    a.plot([], [], "s", mfc="none", mec="k", label="mpigan validate (bootstrap error)")
    a.set(xlabel="showers seen", ylabel="fpd_hlf (lower is better)", yscale="log",
          title="3dgan-25 campaign: figure of merit")
    b.axhline(5, ls="--", color="k", lw=0.8)
    b.set(xlabel="showers seen", ylabel="sampling fraction, mean |relative error| (%)", ylim=(0, None),
          title="sampling fraction (dashed: 5 %)")
    a.legend(fontsize=8)
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1000:.0f}k"))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"plot_campaign.py: {out} ({len(rows)} rows)")


if __name__ == "__main__":
    main()
