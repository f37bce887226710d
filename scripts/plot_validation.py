#!/usr/bin/python3
"""Plots of a validation report directory (written by `mpigan validate`; physics/report.hpp).

    /usr/bin/python3 scripts/plot_validation.py DIR

Reads DIR/{sampling_fraction,profiles,spectrum,events}.csv and DIR/report.json and writes:
  sampling_fraction.png  mean E/Ep per energy bin, reference vs generated, with statistical errors,
                         and the generated/reference ratio below
  profiles.png           per energy bin, mean longitudinal (z) and transverse (x, y) profiles, log y
  spectrum.png           cell-energy spectrum per energy bin, log-log
  moments.png            distributions of the first and second moments along x, y, z
  observables.png        ECAL sum, sampling fraction and hit multiplicity distributions
  response.png           per energy bin, the resolution sigma/mean of E/Ep and the linearity (mean E/Ep
                         relative to the reference), with errors, and the pulls (gen - ref) / error of
                         resolution, linearity, occupancy and E/Ep shape (response.csv)
Reference (Monte Carlo) in black, generated in red, everywhere.
"""

import csv
import json
import math
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

REF, GEN = dict(color="black", label="Monte Carlo"), dict(color="tab:red", label="generated")


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def title(report):
    fom = report["figure_of_merit"]
    v = fom["value"]
    if v is None:
        return fom["name"]
    boot = fom.get("bootstrap_error")
    return f"{fom['name']} = {v:.3g} ± {fom['error']:.2g}" + (f" (bootstrap ± {boot:.2g})" if boot is not None else "")


def plot_sampling_fraction(d, report):
    r = [x for x in rows(os.path.join(d, "sampling_fraction.csv")) if int(x["n_ref"]) > 0 and int(x["n_gen"]) > 0]
    if not r:
        return
    centres = np.array([float(x["bin"].split()[0]) if x["bin"].split()[0].replace(".", "").isdigit() else i
                        for i, x in enumerate(r)])
    def stat(side):
        mean = np.array([float(x[f"mean_{side}"]) for x in r])
        err = np.array([float(x[f"sigma_{side}"]) / math.sqrt(int(x[f"n_{side}"])) for x in r])
        return mean, err
    mr, er = stat("ref")
    mg, eg = stat("gen")
    fig, (a, b) = plt.subplots(2, 1, sharex=True, figsize=(6, 5.5), gridspec_kw={"height_ratios": [3, 1]})
    a.errorbar(centres, mr, er, fmt="o", capsize=3, **REF)
    a.errorbar(centres + 4, mg, eg, fmt="s", capsize=3, **GEN)
    a.set_ylabel("sampling fraction  ⟨E_ECAL / E_p⟩")
    a.legend()
    a.set_title(f"Sampling fraction per energy bin ({title(report)})", fontsize=9)
    ratio = mg / mr
    b.errorbar(centres, ratio, ratio * np.sqrt((eg / mg) ** 2 + (er / mr) ** 2), fmt="s", capsize=3, color="tab:red")
    b.axhline(1.0, color="black", lw=0.8)
    b.axhspan(0.95, 1.05, color="grey", alpha=0.2, label="±5 %")
    b.set_ylabel("gen / MC")
    b.set_xlabel("primary energy E_p [GeV]")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "sampling_fraction.png"), dpi=110)
    plt.close(fig)


def plot_profiles(d):
    prof = defaultdict(list)
    for x in rows(os.path.join(d, "profiles.csv")):
        prof[(x["bin"], x["sample"], x["axis"])].append(float(x["mean_gev"]))
    bins = sorted({k[0] for k in prof if (k[0], "generated", "z") in prof and (k[0], "reference", "z") in prof},
                  key=bin_order)
    if not bins:
        return
    fig, axes = plt.subplots(len(bins), 3, figsize=(11, 2.6 * len(bins)), squeeze=False)
    for i, b in enumerate(bins):
        for j, (axis, name) in enumerate([("z", "longitudinal (depth z)"), ("x", "transverse x"), ("y", "transverse y")]):
            ax = axes[i][j]
            for side, style in (("reference", REF), ("generated", GEN)):
                v = np.array(prof[(b, side, axis)])
                ax.step(np.arange(len(v)), np.where(v > 0, v, np.nan), where="mid", **style)
            ax.set_yscale("log")
            ax.set_title(f"{b}: {name}", fontsize=9)
            ax.set_xlabel("cell index")
            ax.set_ylabel("⟨energy⟩ [GeV]")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "profiles.png"), dpi=90)
    plt.close(fig)


def bin_order(label):
    first = label.split()[0]
    return (label == "all", float(first) if first.replace(".", "").isdigit() else 0.0, label)


def plot_spectrum(d):
    spec = defaultdict(list)
    for x in rows(os.path.join(d, "spectrum.csv")):
        hi = float(x["hi_gev"]) if x["hi_gev"] != "inf" else float("nan")
        spec[(x["bin"], x["sample"])].append((float(x["lo_gev"]), hi, float(x["cells_per_event"])))
    bins = sorted({k[0] for k in spec}, key=bin_order)
    if not bins:
        return
    n = len(bins)
    cols = min(3, n)
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(4 * cols, 3.2 * ((n + cols - 1) // cols)),
                             squeeze=False)
    for i, b in enumerate(bins):
        ax = axes[i // cols][i % cols]
        for side, style in (("reference", REF), ("generated", GEN)):
            pts = [(math.sqrt(lo * hi), c) for lo, hi, c in spec[(b, side)] if lo > 0 and hi == hi and c > 0]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker=".", **style)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"cell energies, {b}", fontsize=9)
        ax.set_xlabel("cell energy [GeV]")
        ax.set_ylabel("cells per shower")
    for k in range(n, axes.size):
        axes.flat[k].axis("off")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "spectrum.png"), dpi=90)
    plt.close(fig)


def hist_pair(ax, ref, gen, name, log=False):
    both = np.concatenate([ref, gen])
    lo, hi = np.percentile(both, [0.5, 99.5]) if len(both) else (0, 1)
    if hi <= lo:
        hi = lo + 1
    edges = np.linspace(lo, hi, 41)
    ax.hist(ref, bins=edges, histtype="step", density=True, **REF)
    ax.hist(gen, bins=edges, histtype="step", density=True, **GEN)
    ax.set_xlabel(name)
    ax.set_ylabel("normalised")
    if log:
        ax.set_yscale("log")


def plot_events(d):
    ev = defaultdict(lambda: defaultdict(list))
    for x in rows(os.path.join(d, "events.csv")):
        for k, v in x.items():
            if k != "sample":
                ev[x["sample"]][k].append(float(v))
    r, g = ev["reference"], ev["generated"]
    fig, axes = plt.subplots(2, 3, figsize=(11, 6))
    for i, key in enumerate(["m1_x", "m1_y", "m1_z", "m2_x", "m2_y", "m2_z"]):
        hist_pair(axes.flat[i], np.array(r[key]), np.array(g[key]), key + " [cells]" + ("²" if key.startswith("m2") else ""))
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("shower moments (all energies)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "moments.png"), dpi=90)
    plt.close(fig)
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    hist_pair(axes[0], np.array(r["ecal_sum_gev"]), np.array(g["ecal_sum_gev"]), "ECAL sum [GeV]")
    hist_pair(axes[1], np.array(r["sampling_fraction"]), np.array(g["sampling_fraction"]), "E_ECAL / E_p")
    hist_pair(axes[2], np.array(r["hits"]), np.array(g["hits"]), "hits (cells > 2e-4 GeV)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "observables.png"), dpi=90)
    plt.close(fig)


def plot_response(d):
    path = os.path.join(d, "response.csv")
    if not os.path.exists(path):
        return
    q = defaultdict(dict)
    for x in rows(path):
        if int(x["n_ref"]) > 1 and int(x["n_gen"]) > 1:
            q[x["quantity"]][x["bin"]] = {k: float(v) if k not in ("bin", "quantity") else v for k, v in x.items()}
    bins = sorted(q.get("resolution", {}), key=bin_order)
    if not bins:
        return
    e = np.array([float(b.split()[0]) if b.split()[0].replace(".", "").isdigit() else i for i, b in enumerate(bins)])
    col = lambda name, key: np.array([q[name][b][key] for b in bins])  # noqa: E731
    fig, (a, b, c) = plt.subplots(3, 1, sharex=True, figsize=(6, 7.5), gridspec_kw={"height_ratios": [3, 2, 2]})
    a.errorbar(e, col("resolution", "ref"), col("resolution", "ref_error"), fmt="o", capsize=3, **REF)
    a.errorbar(e + 4, col("resolution", "gen"), col("resolution", "gen_error"), fmt="s", capsize=3, **GEN)
    a.set_ylabel("resolution  σ / mean of E_ECAL / E_p")
    a.legend(fontsize=8)
    a.set_title("Energy response per bin, with statistical errors", fontsize=9)
    b.errorbar(e, col("resolution", "ratio"), col("resolution", "ratio_error"), fmt="s", capsize=3,
               color="tab:red", label="resolution gen / MC")
    b.errorbar(e + 4, col("linearity", "ratio"), col("linearity", "ratio_error"), fmt="^", capsize=3,
               color="tab:blue", label="linearity gen / MC")
    b.axhline(1.0, color="black", lw=0.8)
    b.set_ylabel("gen / MC")
    b.legend(fontsize=8)
    for k, (name, m) in enumerate([("resolution", "s"), ("linearity", "^"), ("occupancy", "o"),
                                   ("shape_separation", "D")]):
        if name in q:
            c.plot(e + 3 * k, col(name, "pull"), m, label=name)
    c.axhspan(-3, 3, color="grey", alpha=0.2, label="±3")
    c.axhline(5, color="tab:red", lw=0.8, ls="--")
    c.axhline(-5, color="tab:red", lw=0.8, ls="--")
    c.set_ylabel("pull  (gen − MC) / error")
    c.set_xlabel("primary energy E_p [GeV]")
    c.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "response.png"), dpi=110)
    plt.close(fig)


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    d = argv[1]
    with open(os.path.join(d, "report.json")) as f:
        report = json.load(f)
    plot_sampling_fraction(d, report)
    plot_profiles(d)
    plot_spectrum(d)
    plot_events(d)
    plot_response(d)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
