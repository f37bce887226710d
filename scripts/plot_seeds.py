#!/usr/bin/python3
"""Convergence over seeds: figures of merit against samples seen, the median of each group of runs
with the band of its seeds, for runs of mpigan and of another trainer scored the same way.

    /usr/bin/python3 scripts/plot_seeds.py OUT.png LABEL=RUN[,RUN...] [LABEL=RUN,...] [--csv OUT.csv]

Each RUN is a run directory with metrics.csv (its `physics` rows) or a CSV file with the columns
samples, fpd_hlf, fpd_hlf_error[, auc, auc_error] (scripts/score_snapshots.sh writes one per
PyTorch run). Runs of one group are put on a common grid of sample counts (the counts the runs
share; a run without that metric, e.g. a run from before the metric was recorded, is left out of
its panel, and the legend says over how many seeds each median is). Panels: fpd_hlf (log y) and, where
the runs have it, the classifier AUC. Prints, per group, the median and range over seeds at the
last common count, and writes them with --csv.
"""

import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

COLOURS = ["tab:red", "tab:blue", "tab:green", "tab:orange", "tab:purple"]


def number(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return math.nan


def read_run(path):
    """{samples: {metric: value}} of one run."""
    f = os.path.join(path, "metrics.csv") if os.path.isdir(path) else path
    if not os.path.exists(f):
        sys.exit(f"plot_seeds: {f} does not exist")
    out = {}
    with open(f, newline="") as h:
        for row in csv.DictReader(h):
            if "kind" in row and row["kind"] != "physics":
                continue
            s = int(number(row["samples"]))
            out[s] = {k: number(row.get(k)) for k in ("fpd_hlf", "fpd_hlf_error", "auc", "auc_error")}
    if not out:
        sys.exit(f"plot_seeds: {f} has no physics scores")
    return out


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    out_png = argv[0]
    csv_out = None
    groups = []
    rest = argv[1:]
    while rest:
        a = rest.pop(0)
        if a == "--csv":
            csv_out = rest.pop(0)
            continue
        label, _, runs = a.partition("=")
        if not runs:
            sys.exit(f"plot_seeds: expected LABEL=RUN[,RUN...], got '{a}'")
        groups.append((label, [read_run(r) for r in runs.split(",")], runs.split(",")))
    metrics = [("fpd_hlf", "fpd_hlf (lower is better)", True), ("auc", "classifier AUC (0.5 = Monte Carlo)", False)]
    present = [m for m in metrics if any(any(not math.isnan(v[m[0]]) for v in r.values()) for _, rs, _ in groups
                                         for r in rs)]
    fig, axes = plt.subplots(1, len(present), figsize=(6.2 * len(present), 4.4), squeeze=False)
    summary = []
    for gi, (label, runs, names) in enumerate(groups):
        colour = COLOURS[gi % len(COLOURS)]
        counts = sorted(set.intersection(*[set(r) for r in runs]))
        for ax, (key, title, logy) in zip(axes[0], present):
            med, lo, hi, xs = [], [], [], []
            for s in counts:
                vals = [r[s][key] for r in runs if not math.isnan(r[s][key])]
                if not vals:
                    continue
                have = len(vals)
                xs.append(s)
                med.append(np.median(vals))
                lo.append(min(vals))
                hi.append(max(vals))
            if not xs:
                continue
            ax.plot(xs, med, "-o", color=colour, ms=3, label=f"{label}: median of {have} seeds")
            ax.fill_between(xs, lo, hi, color=colour, alpha=0.2, label=f"{label}: seed range")
            ax.set_title(title)
            ax.set_xlabel("training samples seen")
            if logy:
                ax.set_yscale("log")
            if key == "auc":
                ax.axhline(0.75, color="grey", ls="--", lw=0.8)
                ax.axhline(0.5, color="black", ls=":", lw=0.8)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
            summary.append((label, key, xs[-1], med[-1], lo[-1], hi[-1], have))
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    for label, key, s, m, lo, hi, n in summary:
        print(f"{label}: {key} at {s} samples: median {m:.4g}, range {lo:.4g}..{hi:.4g} over {n} seeds")
    if csv_out:
        with open(csv_out, "w", newline="") as h:
            w = csv.writer(h)
            w.writerow(["group", "metric", "samples", "median", "min", "max", "seeds"])
            for row in summary:
                w.writerow(row)
    print(f"plot: {out_png}")


if __name__ == "__main__":
    main(sys.argv[1:])
