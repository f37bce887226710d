#!/usr/bin/python3
"""The staleness study's table (scripts/staleness_study.sh): per rule and number of workers, the
median and the range over seeds of each final generator's scores against fresh Monte Carlo.

    /usr/bin/python3 scripts/staleness_table.py OUT_DIR [--baseline LABEL=RUN_DIR,RUN_DIR,...]
                                                [--rows STUDY.csv] [--target FPD_HLF]

Reads OUT_DIR/RULE-N-seedS/val-fresh/report.json (fpd_hlf and its error, the classifier AUC),
targets.json (scripts/rung_targets.py: the energy bins whose sampling fraction is within 2 % and
whose resolution is within 15 % of Monte Carlo) and sandbox.json (samples, mean staleness); a
baseline's run directories are read the same way (RUN_DIR/val-fresh, RUN_DIR/targets.json when
present). Writes OUT_DIR/study.csv (one row per run) and OUT_DIR/study.md (one row per rule and N).

The cost of staleness in samples: each run's physics rows in metrics.csv (fpd_hlf on the held-out
showers, scored during training: `validation.physics.every`) give the first number of samples at
which its fpd_hlf is at or below one worker's, the median over the N = 1 runs' final held-out
fpd_hlf ('reaches 1-worker fpd_hlf at'; '>S' when no row does, S its last). One checkpoint's fpd_hlf
swings by 2-4x from the next, so this is as coarse as the rows are far apart.

--rows adds the rows of an earlier study.csv as they are (their reach_1worker too), so that runs
scored before and runs scored now make one table (a run, i.e. a rule, N and seed, counts once: one
scored now replaces its earlier row, and an earlier row repeated is taken once); --target gives
one worker's fpd_hlf where no N = 1 run directory is read (the value an earlier study.md states).
"""

import csv
import json
import os
import re
import statistics
import sys


def targets(run):
    """(bins with SF within 2 %, bins with resolution within 15 %, bins, targets met, targets) from
    targets.json or the validation folder (rung_targets.py is run when targets.json is missing)."""
    path = os.path.join(run, "targets.json")
    if not os.path.exists(path):
        import subprocess

        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "rung_targets.py"), os.path.join(run, "val-fresh"),
                        "--json", path], check=True, stdout=subprocess.DEVNULL)
    verdicts = json.load(open(path))
    rows = {r["target"]: r["value"] for r in verdicts}
    met = sum(r.get("verdict") == "met" for r in verdicts)

    def bins(key):
        for t, v in rows.items():
            if t.startswith(key):
                m = re.search(r"(\d+)/(\d+) bins", v)
                if m:
                    return int(m.group(1)), int(m.group(2))
        return None, None

    sf, n = bins("sampling fraction")
    res, _ = bins("resolution")
    return sf, res, n, met, len(verdicts)


def score(run):
    report = json.load(open(os.path.join(run, "val-fresh", "report.json")))
    fom = report["figure_of_merit"]
    sf, res, bins, met, verdicts = targets(run)
    row = {"fpd_hlf": fom["value"], "fpd_hlf_error": fom.get("bootstrap_error", fom["error"]),
           "auc": report.get("classifier", {}).get("auc", float("nan")), "sf_bins": sf, "resolution_bins": res,
           "bins": bins, "targets_met": met, "targets": verdicts}
    summary = os.path.join(run, "sandbox.json")
    if os.path.exists(summary):
        s = json.load(open(summary))
        row.update(samples=s.get("samples"), mean_staleness=s.get("mean_staleness"), failure=s.get("failure", ""))
    return row


def physics_rows(run):
    """(samples, fpd_hlf) of every physics row of RUN/metrics.csv that has a figure of merit."""
    path = os.path.join(run, "metrics.csv")
    if not os.path.exists(path):
        return []
    rows = []
    for r in csv.DictReader(open(path)):
        if r.get("kind") == "physics" and r.get("fpd_hlf"):
            rows.append((int(float(r["samples"])), float(r["fpd_hlf"])))
    return rows


def reach(rows, target):
    """The first samples of @p rows (physics_rows) at which fpd_hlf <= target, or -(the last samples)
    when none."""
    for samples, fpd in rows:
        if fpd <= target:
            return samples
    return -rows[-1][0] if rows else None


def reach_text(values):
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    if all(v < 0 for v in values):
        return f">{-max(values) // 1000}k"
    done = sorted(v for v in values if v > 0)
    text = f"{statistics.median(done) // 1000:g}k"
    if done[0] != done[-1]:
        text += f" [{done[0] // 1000}k–{done[-1] // 1000}k]"
    if len(done) < len(values):
        text += f", {len(values) - len(done)} not reached"
    return text


def spread(values, fmt):
    """'median [min–max]' of @p values (the median alone for one); @p fmt a format string, or a function."""
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    f = fmt if callable(fmt) else fmt.format
    med = statistics.median(values)
    if len(values) == 1:
        return f(med)
    return f"{f(med)} [{f(min(values))}–{f(max(values))}]"


def two_digits(v):
    """@p v to two significant digits, as measured: 0.50, 2.0, 16."""
    return f"{v:#.2g}".rstrip(".")


def all_met(rows):
    """'K of S seeds': the runs that met every rung target (scripts/rung_targets.py), of those whose
    verdicts are known."""
    known = [r for r in rows if r.get("targets")]
    if not known:
        return "—"
    return f"{sum(r['targets_met'] == r['targets'] for r in known)} of {len(known)}"


COLUMNS = ["rule", "workers", "seed", "samples", "mean_staleness", "fpd_hlf", "fpd_hlf_error", "auc", "sf_bins",
           "resolution_bins", "bins", "reach_1worker", "failure", "run", "targets_met", "targets"]
# columns a study.csv written before them may lack (read as empty)
OPTIONAL = {"targets_met", "targets"}


def option(argv, name):
    """The values after --NAME up to the next option."""
    if name not in argv:
        return []
    values = []
    for v in argv[argv.index(name) + 1:]:
        if v.startswith("--"):
            break
        values.append(v)
    return values


def earlier_rows(path):
    """The rows of an earlier study.csv, typed as score() types them."""
    ints = {"workers", "seed", "samples", "sf_bins", "resolution_bins", "bins", "reach_1worker", "targets_met", "targets"}
    floats = {"mean_staleness", "fpd_hlf", "fpd_hlf_error", "auc"}
    rows = []
    if not os.path.isfile(path):
        sys.exit(f"staleness_table.py: --rows {path}: no such file (an earlier study.csv)")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = set(COLUMNS) - OPTIONAL - set(reader.fieldnames or [])
        if missing:
            sys.exit(f"staleness_table.py: {path} lacks the columns {sorted(missing)}")
        for line, raw in enumerate(reader, start=2):
            r = {}
            for k in COLUMNS:
                v = raw.get(k) or ""
                try:
                    r[k] = (int(float(v)) if k in ints else float(v) if k in floats else v) if v != "" else None
                except ValueError:
                    sys.exit(f"staleness_table.py: {path} line {line}: column {k} holds '{v}', not a number")
            r["failure"] = r["failure"] or ""
            rows.append(r)
    return rows


def main(argv):
    if not argv:
        sys.exit(__doc__)
    out = argv[0]
    rows = []
    for name in sorted(os.listdir(out)):
        m = re.fullmatch(r"(.+)-(\d+)-seed(\d+)", name)
        run = os.path.join(out, name)
        if not m or not os.path.exists(os.path.join(run, "val-fresh", "report.json")):
            continue
        r = score(run)
        r.update(rule=m.group(1), workers=int(m.group(2)), seed=int(m.group(3)), run=run)
        rows.append(r)
    for spec in option(argv, "--baseline"):
        label, dirs = spec.split("=", 1)
        for i, run in enumerate(dirs.split(",")):
            if not os.path.exists(os.path.join(run, "val-fresh", "report.json")):
                continue
            r = score(run)
            r.update(rule=label, workers=1, seed=i + 1, run=run)
            rows.append(r)
    for r in rows:
        r["physics"] = physics_rows(r["run"])
    finals = [r["physics"][-1][1] for r in rows if r["workers"] == 1 and r["physics"]]
    target = statistics.median(finals) if finals else None
    if option(argv, "--target"):
        target = float(option(argv, "--target")[0])
    for r in rows:
        r["reach_1worker"] = reach(r["physics"], target) if target is not None else None
    scored_now = {(r["rule"], r["workers"], r["seed"]) for r in rows}
    for path in option(argv, "--rows"):
        for r in earlier_rows(path):
            key = (r["rule"], r["workers"], r["seed"])
            if key in scored_now:
                print(f"staleness_table.py: {path}: the row of {key[0]}, N = {key[1]}, seed {key[2]} is replaced by "
                      "the run scored now", file=sys.stderr)
                continue
            scored_now.add(key)  # a second copy in the earlier files is dropped as well
            rows.append(r)
    rows.sort(key=lambda r: (r["rule"], r["workers"], r["seed"]))
    groups = {}  # (label, workers) -> [rows]
    for r in rows:
        groups.setdefault((r["rule"], r["workers"]), []).append(r)
    with open(os.path.join(out, "study.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    lines = ["| rule | N | seeds | mean staleness | fpd_hlf | AUC | SF bins within 2 % | resolution bins within 15 % "
             "| all rung targets met | reaches 1-worker fpd_hlf at |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (rule, n), rs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        bins = rs[0].get("bins") or 6
        lines.append(
            f"| {rule} | {n} | {len(rs)} | {spread([r.get('mean_staleness') for r in rs], '{:.2f}')} "
            f"| {spread([r['fpd_hlf'] for r in rs], two_digits)} | {spread([r['auc'] for r in rs], '{:.3f}')} "
            f"| {spread([r['sf_bins'] for r in rs], '{:g}')} of {bins} "
            f"| {spread([r['resolution_bins'] for r in rs], '{:g}')} of {bins} | {all_met(rs)} "
            f"| {reach_text([r.get('reach_1worker') for r in rs])} |")
    if target is not None:
        lines.append(f"\n(1-worker fpd_hlf: {target:.2f}, the median of the N = 1 runs' final fpd_hlf on the held-out "
                     "showers.)")
    text = "\n".join(lines) + "\n"
    open(os.path.join(out, "study.md"), "w").write(text)
    print(text, end="")
    plot(groups, os.path.join(out, "study.png"))


def plot(groups, path):
    """fpd_hlf of every seed (points) and the median (bar) per rule and N, one row each, grouped by
    N, log scale; the band is one worker's seed range (the rows named 'single')."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(groups, key=lambda k: (k[1], statistics.median(r["fpd_hlf"] for r in groups[k])))
    fig, ax = plt.subplots(figsize=(8.5, 1.4 + 0.3 * len(keys)))
    single = [r["fpd_hlf"] for k in keys if k[0] == "single" for r in groups[k]]
    if single:
        ax.axvspan(min(single), max(single), color="tab:blue", alpha=0.12, label="one worker's seed range")
    for i, k in enumerate(keys):
        values = [r["fpd_hlf"] for r in groups[k]]
        ax.barh(i, statistics.median(values), color="tab:blue" if k[1] == 1 else "tab:orange", alpha=0.35)
        ax.plot(values, [i] * len(values), "o", color="black", ms=3.5)
        if i > 0 and keys[i - 1][1] != k[1]:
            ax.axhline(i - 0.5, color="gray", lw=0.6)
    ax.set_xscale("log")
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([f"{k[0]}, N = {k[1]} ({len(groups[k])} seed{'s' if len(groups[k]) > 1 else ''})" for k in keys],
                       fontsize=7.5)
    ax.invert_yaxis()
    ax.set_xlabel("fpd_hlf against fresh Monte Carlo (lower is better)")
    ax.set_title("final generators at their runs' budgets (points: seeds, bar: median)", fontsize=9)
    ax.grid(axis="x", which="both", alpha=0.3)
    if single:
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1:])
