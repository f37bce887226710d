#!/usr/bin/python3
"""Wall time to a generator of one worker's quality, against the number of workers, per rule.

    /usr/bin/python3 scripts/time_to_quality.py STUDY.csv [STUDY.csv ...] [--smpi CSV] [--step S]
        [--batch B] [--out PREFIX]

Combines two measurements:
  - the samples each run needed to reach one worker's figure of merit (the column reach_1worker of
    the study.csv files that scripts/staleness_table.py writes; negative when the run never did,
    its magnitude the samples it ran): per rule and N the median over the seeds that reached it,
    or a lower bound when none did;
  - the throughput of mpigan's real master under SimGrid on a Piz Daint-like machine
    (bench/smpi/results-mpigan.csv, docs/sandbox.md "Scale"): the efficiency of N workers under a
    flat master at the step time --step (default 1.64 s, one 3DGAN step on a V100, batch 64).
Wall time to quality = samples / (N x efficiency x batch / step); one worker is one process
(efficiency 1). The speed-up to quality is one worker's time over N workers'. Rules are matched by
the first word of the study's label ("gem (lr 1.25e-4)" takes gem's efficiency); an N that SimGrid
did not simulate is left without a time.

Writes PREFIX.md (the table) and PREFIX.png (time to quality against N for each rule's defaults
and for the runs with a larger budget, lower bounds as open markers with an arrow; the other
variants are in the table only); PREFIX defaults to time-to-quality in the current directory.
"""

import csv
import math
import statistics
import sys


def read_studies(paths):
    """{(label, N): [reach_1worker of each seed]}"""
    groups = {}
    for path in paths:
        for r in csv.DictReader(open(path)):
            if not r.get("reach_1worker"):
                continue
            groups.setdefault((r["rule"], int(r["workers"])), []).append(int(float(r["reach_1worker"])))
    return groups


def read_smpi(path, step):
    """{(rule, N): efficiency} of the flat-master simulations at @p step seconds."""
    eff = {}
    for r in csv.DictReader(open(path)):
        if int(r["masters"]) != 1 or not r["step"].startswith(f"lognormal:{step:g},"):
            continue
        eff[(r["rule"], int(r["workers"]))] = float(r["efficiency"])
    return eff


def samples_to_quality(values):
    """(samples, is_lower_bound, reached, seeds)"""
    done = sorted(v for v in values if v > 0)
    if done:
        return statistics.median(done), False, len(done), len(values)
    return max(-v for v in values), True, 0, len(values)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.exit(__doc__)
    opts = {"--smpi": "bench/smpi/results-mpigan.csv", "--step": "1.64", "--batch": "64", "--out": "time-to-quality"}
    studies = []
    i = 0
    while i < len(argv):
        if argv[i] in opts:
            opts[argv[i]] = argv[i + 1]
            i += 2
        else:
            studies.append(argv[i])
            i += 1
    step, batch = float(opts["--step"]), int(opts["--batch"])
    groups = read_studies(studies)
    eff = read_smpi(opts["--smpi"], step)
    rows = []
    for (label, n), values in groups.items():
        samples, lower, reached, seeds = samples_to_quality(values)
        rule = label.split()[0]
        e = 1.0 if n == 1 else eff.get((rule, n))
        hours = samples / (n * e * batch / step) / 3600 if e else None
        rows.append(dict(label=label, n=n, samples=samples, lower=lower, reached=reached, seeds=seeds, eff=e,
                         hours=hours))
    one = [r for r in rows if r["n"] == 1 and not r["lower"] and r["hours"]]
    t1 = statistics.median(r["hours"] for r in one) if one else None
    lines = [f"| rule | N | seeds reaching it | samples to one worker's fpd_hlf | efficiency (SimGrid, {step:g} s "
             f"step) | wall time to it | speed-up over one worker |", "|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["n"], r["label"])):
        bound = ">" if r["lower"] else ""
        samples = f"{bound}{r['samples'] / 1000:.0f}k"
        e = f"{r['eff'] * 100:.1f} %" if r["eff"] and r["n"] > 1 else ("one process" if r["n"] == 1 else "not simulated")
        t = f"{bound}{r['hours'] * 60:.0f} min" if r["hours"] else "—"
        # a lower bound on the time is an upper bound on the speed-up
        s = (("<" if r["lower"] else "") + f"{t1 / r['hours']:.1f}×") if r["hours"] and t1 else "—"
        lines.append(f"| {r['label']} | {r['n']} | {r['reached']} of {r['seeds']} | {samples} | {e} | {t} | {s} |")
    text = "\n".join(lines) + "\n"
    open(opts["--out"] + ".md", "w").write(text)
    print(text, end="")
    plot(rows, t1, opts["--out"] + ".png", step, batch)


def plot(rows, t1, path, step, batch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    labels = sorted({r["label"] for r in rows if r["n"] > 1 and ("(" not in r["label"] or "samples)" in r["label"])})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    ns = sorted({r["n"] for r in rows})
    if t1:
        ax.plot(ns, [t1 * 60 / n for n in ns], "k:", lw=1, label="one worker's time / N (perfect scaling)")
        ax.plot([1], [t1 * 60], "ks", label="one worker")
    for k, label in enumerate(labels):
        pts = sorted((r for r in rows if r["label"] == label and r["hours"]), key=lambda r: r["n"])
        if not pts:
            continue
        c = colors[k % len(colors)]
        shift = 1.0 + 0.04 * (k - (len(labels) - 1) / 2)  # side by side where points coincide
        ax.plot([r["n"] * shift for r in pts], [r["hours"] * 60 for r in pts], "-", color=c, lw=1)
        for r in pts:
            x, y = r["n"] * shift, r["hours"] * 60
            ax.plot(x, y, "o", color=c, mfc="none" if r["lower"] else c, label=label if r is pts[0] else None)
            if r["lower"]:
                ax.annotate("", xy=(x, y * 1.8), xytext=(x, y), arrowprops=dict(arrowstyle="->", color=c))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("workers N")
    ax.set_ylabel(f"minutes to one worker's fpd_hlf ({step:g} s per step of {batch})")
    ax.set_title("wall time to one worker's quality (open: not reached, a lower bound)", fontsize=9)
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1:])
