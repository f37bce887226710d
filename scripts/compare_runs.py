#!/usr/bin/python3
"""Several runs' validation histories side by side, against the number of training samples.

    /usr/bin/python3 scripts/compare_runs.py OUT.png LABEL=RUN_DIR [LABEL=RUN_DIR ...]

Reads each RUN_DIR/metrics.csv (a single-process, distributed or sandbox run with
validation.every and validation.physics.every set) and draws three panels against samples: the
validation D loss, the physics figure of merit fpd_hlf and the sampling-fraction error (percent),
with a cross where a physics point had empty showers. Prints each run's last row. Used for
docs/sandbox.md's longer runs (the same rule at N = 1 and N = 64 virtual workers).
"""

import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def series(path, kind, column):
    out = []
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["kind"] == kind and row.get(column) not in (None, ""):
                out.append((int(row["samples"]), float(row[column]), row))
    return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    if len(sys.argv) < 3 or any("=" not in a for a in sys.argv[2:]):
        raise SystemExit(f"expected OUT.png and at least one LABEL=RUN_DIR, got {sys.argv[1:]}\n{__doc__}")
    out = sys.argv[1]
    runs = [a.rsplit("=", 1) for a in sys.argv[2:]]  # the label may hold "=", the path not
    panels = [("validation", "d_loss", "validation D loss", 1.0),
              ("physics", "fpd_hlf", "fpd_hlf (lower is better)", 1.0),
              ("physics", "sf_mre", "sampling-fraction error (%)", 100.0)]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.0))
    for label, run in runs:
        metrics = os.path.join(run, "metrics.csv")
        if not os.path.exists(metrics):
            raise SystemExit(f"{label}: no {metrics}")
        last = {}
        for ax, (kind, column, title, scale) in zip(axes, panels):
            pts = series(metrics, kind, column)
            if not pts:
                raise SystemExit(f"{label}: no '{column}' in the {kind} rows of {metrics}")
            line, = ax.plot([p[0] for p in pts], [scale * p[1] for p in pts], marker="o", ms=3, label=label)
            empty = [p for p in pts if float(p[2].get("empty_showers") or 0) > 0]
            ax.scatter([p[0] for p in empty], [scale * p[1] for p in empty], marker="x", s=40, color=line.get_color())
            last[column] = pts[-1]
        print(f"{label}: {last['d_loss'][0]} samples, D {last['d_loss'][1]:.3g}, fpd_hlf {last['fpd_hlf'][1]:.3g}, "
              f"SF {100 * last['sf_mre'][1]:.0f} %")
    for ax, (_, _, title, _) in zip(axes, panels):
        ax.set_yscale("log")
        ax.set_xlabel("training samples")
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[-1].annotate("x: some showers empty", (0.02, 0.02), xycoords="axes fraction", fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
