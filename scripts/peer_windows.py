#!/usr/bin/env python3
"""mpigan beside its PyTorch peer over windows of training rather than at single checkpoints.

A GAN's figure of merit swings from one checkpoint to the next by more than two implementations of
one recipe need differ, so a comparison at single sample counts over three seeds says little. This
script compares, per window of training:

  * the training losses (D on real, D on fake, G's weighted total), each run's mean over the
    window's steps: mpigan's metrics.csv step rows against the peer's losses.csv;
  * the figure of merit fpd_hlf, each run's geometric mean over the checkpoints in the window
    that every run of both sides has:
    mpigan's physics rows against the peer's scores.csv (scripts/rung_study.sh writes both, scored
    by `mpigan validate` against the same 2 000 held-out showers).

For each window and quantity it prints the median and range over seeds of each side and whether
each side's median lies inside the other's range.

  scripts/peer_windows.py --mpigan RUN1,RUN2,RUN3 --pytorch DIR1,DIR2,DIR3 [--window 32000]
                          [--fpd-windows 32000:96000,128000:192000,...] [--out table.md]
"""
import argparse
import csv
import math
import os
import statistics
import sys


def _number(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def read_mpigan(run):
    """Step rows as {column: value} (g_loss renamed g, as the peer names G's total), and fpd_hlf by samples."""
    steps, fpd = [], {}
    with open(os.path.join(run, "metrics.csv")) as f:
        for r in csv.DictReader(f):
            if r["kind"] == "step":
                row = {k: _number(v) for k, v in r.items() if k != "kind"}
                row["g"] = row.pop("g_loss")
                steps.append(row)
            elif r["kind"] == "physics" and r.get("fpd_hlf"):
                fpd[int(r["samples"])] = float(r["fpd_hlf"])
    return steps, fpd


def read_peer(d):
    steps, fpd = [], {}
    with open(os.path.join(d, "losses.csv")) as f:
        for r in csv.DictReader(f):
            steps.append({k: _number(v) for k, v in r.items()})
    with open(os.path.join(d, "scores.csv")) as f:
        for r in csv.DictReader(f):
            fpd[int(r["samples"])] = float(r["fpd_hlf"])
    return steps, fpd


def summary(values):
    return statistics.median(values), min(values), max(values)


def inside(a, b):
    """Each side's median inside the other's range: 'both', 'one' or 'neither'."""
    ma, la, ha = summary(a)
    mb, lb, hb = summary(b)
    n = (lb <= ma <= hb) + (la <= mb <= ha)
    return ("neither", "one", "both")[n]


def fmt(values, digits):
    m, lo, hi = summary(values)
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mpigan", required=True, help="comma-separated mpigan run directories, one per seed")
    p.add_argument("--pytorch", required=True, help="comma-separated peer output directories, one per seed")
    p.add_argument("--window", type=int, default=32000, help="samples per loss window (default 32000)")
    p.add_argument("--fpd-windows", default="32000:96000,128000:192000,160000:256000,192000:256000",
                   help="LO:HI sample ranges (inclusive) of checkpoints averaged for fpd_hlf")
    p.add_argument("--out", help="also write the tables here (markdown)")
    a = p.parse_args(argv)
    mp = [read_mpigan(r) for r in a.mpigan.split(",")]
    pt = [read_peer(d) for d in a.pytorch.split(",")]
    last = int(min(max(r["samples"] for r in steps) for steps, _ in mp + pt))
    # D on real, D on fake, G's total, and each per-head loss both sides log (the peer's losses.csv
    # carries mpigan's names for them: d_real_fake, ..., g_hlf_mmd)
    quantities = [("d_real", "D on real"), ("d_fake", "D on fake"), ("g", "G")]
    common = set(mp[0][0][0]) & set(pt[0][0][0])
    quantities += [(c, c) for c in mp[0][0][0] if c in common and c.startswith(("d_real_", "d_fake_", "g_"))]
    lines = [f"Training losses, each run's mean over windows of {a.window} samples; median [range] over "
             f"{len(mp)} mpigan and {len(pt)} PyTorch seeds; 'both': each median inside the other's range.", "",
             "| samples | quantity | mpigan | PyTorch | medians inside |", "|---|---|---|---|---|"]
    counts = {"both": 0, "one": 0, "neither": 0}
    for lo in range(0, last, a.window):
        hi = min(lo + a.window, last)
        for key, name in quantities:
            sides = []
            for runs in (mp, pt):
                sides.append([statistics.fmean(r[key] for r in steps if lo < r["samples"] <= hi) for steps, _ in runs])
            verdict = inside(*sides)
            counts[verdict] += 1
            lines.append(f"| {lo}–{hi} | {name} | {fmt(sides[0], 3)} | {fmt(sides[1], 3)} | {verdict} |")
    lines += ["", f"Loss windows: {counts['both']} both, {counts['one']} one, {counts['neither']} neither.", "",
              "fpd_hlf, each run's geometric mean over the checkpoints in the range that every run has; "
              "median [range] over seeds.", "",
              "| checkpoints | mpigan per seed | PyTorch per seed | mpigan | PyTorch | medians inside |",
              "|---|---|---|---|---|---|"]
    # the sample counts every run of both sides scored, so that both average the same checkpoints
    common = set.intersection(*(set(fpd) for _, fpd in mp + pt))
    for w in a.fpd_windows.split(","):
        lo, hi = (int(x) for x in w.split(":"))
        sides = []
        for runs in (mp, pt):
            vals = []
            for _, fpd in runs:
                pts = [v for s, v in fpd.items() if lo <= s <= hi and s in common]
                if not pts:
                    sys.exit(f"no fpd_hlf checkpoint in {lo}-{hi} in every run")
                vals.append(math.exp(statistics.fmean(math.log(v) for v in pts)))
            sides.append(vals)
        per = [" ".join(f"{v:.2f}" for v in s) for s in sides]
        lines.append(f"| {lo}–{hi} | {per[0]} | {per[1]} | {fmt(sides[0], 2)} | {fmt(sides[1], 2)} | "
                     f"{inside(*sides)} |")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
