#!/usr/bin/python3
"""Fidelity against the number of workers, in the sandbox: each rule at each N, at an equal number
of samples (docs/sandbox.md).

    /usr/bin/python3 scripts/sandbox_scan.py EXPERIMENT.yaml OUT_DIR [--rules sync,downpour,...]
        --batch B [--workers 1,4,16,64] [--samples S] [--compute constant:0.25] [--set KEY=VALUE ...]
        [--mpigan PATH] [--baseline LABEL=RUN_DIR ...] [--reuse | --table-only]

Runs `mpigan sandbox EXPERIMENT --workers N --set algorithm.name=RULE --set
training.max_samples=S` for every pair (run directories OUT_DIR/RULE-N): S / batch versions for the
asynchronous rules (one worker's batch each) and S / (batch N) for sync (a round of N batches each),
so every run sees S samples; then writes
OUT_DIR/scan.csv (rule, workers, updates, samples, simulated seconds, samples/s, mean and max
staleness, max/min updates per worker, rejected updates, last validation D and G losses, the last
physics figure of merit and sampling-fraction error when the experiment scores physics, whether the
generator is dead (every shower empty), diverged), OUT_DIR/scan.md (the same
as a Markdown table), OUT_DIR/table.md (one row per rule, one column per N: the figure of merit, the
sampling-fraction error and the validation D loss, as docs/sandbox.md shows them) and
OUT_DIR/scan.png (validation G loss, or the figure of merit, against N). With --recalibrated
REFERENCE.h5 each final generator is also scored with its BatchNorm statistics re-estimated for its
weights (an asynchronous master's statistics lag its weights; docs/physics.md).
A run that diverged or whose losses are not finite is marked so; nothing is averaged over it.
"""

import argparse
import csv
import json
import math
import os
import subprocess

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def last_row(path, kind, column):
    value = None
    if not os.path.exists(path):
        return None
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["kind"] == kind and row.get(column):
                value = float(row[column])
    return value


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment")
    ap.add_argument("out")
    ap.add_argument("--rules", default="sync,downpour,easgd,gem,dc_asgd")
    ap.add_argument("--workers", default="1,4,16,64")
    ap.add_argument("--samples", type=int, default=2048)
    ap.add_argument("--batch", type=int, required=True, help="training.batch of every run")
    ap.add_argument("--compute", default="constant:0.25")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--mpigan", default=os.path.join(HERE, "..", "build", "apps", "mpigan"))
    ap.add_argument("--baseline", action="append", default=[], metavar="LABEL=RUN_DIR",
                    help="draw a finished run's figures as a dashed line (e.g. the untrained generator)")
    ap.add_argument("--recalibrated", metavar="REFERENCE.h5",
                    help="also score each run's final generator with its BatchNorm statistics re-estimated for its "
                         "weights (`mpigan validate RUN --reference REFERENCE.h5 --recalibrate-bn 8`, 400 events, "
                         "into RUN/recalibrated): columns fpd_recal and sf_recal_pct")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the runs that finished (OUT/RULE-N/sandbox.json exists): only tabulate and plot them")
    ap.add_argument("--table-only", action="store_true",
                    help="run nothing: tabulate and plot the runs that finished, leave out the others")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    batch = a.batch
    rows = []
    for rule in a.rules.split(","):
        for n in [int(x) for x in a.workers.split(",")]:
            per_version = batch * (n if rule == "sync" else 1)
            updates = -(-a.samples // per_version)  # the version that spends training.max_samples
            run = os.path.join(a.out, f"{rule}-{n}")
            cmd = [a.mpigan, "sandbox", a.experiment, "--workers", str(n), "--compute", a.compute, "--out", run,
                   "--set", f"algorithm.name={rule}", "--set", f"training.max_samples={a.samples}",
                   "--set", f"training.batch={batch}"] + sum((["--set", s] for s in a.set), [])
            if a.table_only and not os.path.exists(os.path.join(run, "sandbox.json")):
                continue
            if (a.reuse or a.table_only) and os.path.exists(os.path.join(run, "sandbox.json")):
                rc = 0
            else:
                print("+", " ".join(cmd), flush=True)
                with open(run + ".log", "w") as log:
                    rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
            summary = {}
            if os.path.exists(os.path.join(run, "sandbox.json")):
                with open(os.path.join(run, "sandbox.json")) as f:
                    summary = json.load(f)
            metrics = os.path.join(run, "metrics.csv")
            d = last_row(metrics, "validation", "d_loss")
            g = last_row(metrics, "validation", "g_loss")
            fom = last_row(metrics, "physics", "fpd_hlf")
            sf = last_row(metrics, "physics", "sf_mre")
            sf_err = last_row(metrics, "physics", "sf_mre_error")
            empty = last_row(metrics, "physics", "empty_showers")
            physics = summary.get("physics") or {}
            # A dead generator (every shower empty): the sandbox says so; runs scored before it did
            # show its exact signature, every sampling fraction 0 (MRE 1, no spread).
            if "dead" in physics:
                dead = bool(physics["dead"])
            else:
                dead = sf == 1.0 and sf_err == 0.0
            fpd_recal = sf_recal = None
            if a.recalibrated and os.path.exists(os.path.join(run, "sandbox.json")):
                fpd_recal, sf_recal = recalibrated_score(a, run)
            per = summary.get("updates_per_worker", [])
            finite = all(v is not None and math.isfinite(v) for v in (d, g))
            diverged = rc != 0 or bool(summary.get("failure")) or not finite
            rows.append({
                "rule": rule, "workers": n, "updates": summary.get("version", ""),
                "samples": summary.get("samples", ""), "simulated_s": round(summary.get("simulated_s", 0), 2),
                "samples_per_s": round(summary.get("samples_per_s", 0), 1),
                "mean_staleness": round(summary.get("mean_staleness", 0), 2),
                "max_staleness": summary.get("max_staleness", ""),
                "fairness": round(max(per) / min(per), 2) if per and min(per) > 0 else "",
                "rejected": summary.get("rejected", ""),
                "val_d": "" if d is None else f"{d:.4g}", "val_g": "" if g is None else f"{g:.4g}",
                "fpd_hlf": "" if fom is None else f"{fom:.4g}",
                "sf_mre_pct": "" if sf is None else f"{100 * sf:.0f}",
                "empty_showers": "" if empty is None else f"{empty:.0f}",
                "dead": "yes" if dead else "no", "diverged": "yes" if diverged else "no",
                **({"fpd_recal": "" if fpd_recal is None else f"{fpd_recal:.4g}",
                    "sf_recal_pct": "" if sf_recal is None else f"{100 * sf_recal:.0f}"} if a.recalibrated else {})})
            print(f"  {rule} N={n}: D {rows[-1]['val_d']} G {rows[-1]['val_g']} diverged {rows[-1]['diverged']}",
                  flush=True)
    with open(os.path.join(a.out, "scan.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(a.out, "scan.md"), "w") as f:
        keys = list(rows[0].keys())
        f.write("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys) + "\n")
        for r in rows:
            f.write("| " + " | ".join(str(r[k]) for k in keys) + " |\n")
    write_compact(a, rows)
    use_fom = any(r["fpd_hlf"] for r in rows)
    key, label = ("fpd_hlf", "fpd_hlf (lower is better)") if use_fom else ("val_g", "validation G loss")
    # With physics, a second panel: the sampling-fraction error, which fpd_hlf does not weigh much
    # (a generator off in energy scale by 5x can score a lower fpd_hlf than one off by 80 %).
    panels = [(key, label)] + ([("sf_mre_pct", "sampling-fraction error (%)")] if use_fom else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.2), squeeze=False)
    for ax, (k, lab) in zip(axes[0], panels):
        for rule in a.rules.split(","):
            pts = [(r["workers"], float(r[k])) for r in rows if r["rule"] == rule and r[k] and r["diverged"] == "no"]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=rule)
            for r in rows:
                if r["rule"] == rule and r["diverged"] == "yes":
                    ax.annotate("diverged", (r["workers"], ax.get_ylim()[1]), fontsize=7, rotation=90)
                if r["rule"] == rule and r.get("dead") == "yes" and r[k]:
                    ax.annotate("dead", (r["workers"], float(r[k])), fontsize=7, xytext=(4, 4),
                                textcoords="offset points")
        for i, spec in enumerate(a.baseline):
            label, _, run = spec.partition("=")
            metrics = os.path.join(run, "metrics.csv")
            column = {"sf_mre_pct": "sf_mre", "fpd_hlf": "fpd_hlf", "val_g": "g_loss"}[k]
            v = last_row(metrics, "validation" if k == "val_g" else "physics", column)
            if v is None:
                raise SystemExit(f"--baseline {spec}: no '{column}' in {metrics}")
            ax.axhline(100 * v if k == "sf_mre_pct" else v, color=f"C{7 + i}", ls="--", lw=1, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("virtual workers N")
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"{os.path.basename(a.experiment)}: {a.samples} samples, batch {batch}")
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "scan.png"), dpi=120)
    print(f"wrote {a.out}/scan.csv, scan.md, scan.png")


def recalibrated_score(a, run):
    """fpd_hlf and the sampling-fraction MRE of RUN's final generator, statistics re-estimated."""
    out = os.path.join(run, "recalibrated")
    report = os.path.join(out, "report.json")
    if not os.path.exists(report):
        cmd = [a.mpigan, "validate", run, "--reference", a.recalibrated, "--events", "400", "--recalibrate-bn", "8",
               "--no-plots", "--out", out]
        print("+", " ".join(cmd), flush=True)
        if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT).returncode != 0:
            return None, None
    with open(report) as f:
        r = json.load(f)
    return r["figure_of_merit"]["value"], r["sampling_fraction"]["mre"]


def compact_cell(r):
    """One run as docs/sandbox.md's tables show it: figure of merit, sampling-fraction error, D."""
    if r["diverged"] == "yes":
        return "**diverged**"
    if not r["fpd_hlf"]:
        return f"D {r['val_d']}, G {r['val_g']}"
    cell = f"{float(r['fpd_hlf']):.2g}".replace("e+0", "e") + f", SF {r['sf_mre_pct']} %, D {float(r['val_d']):.3g}"
    if r["dead"] == "yes":
        return cell + " **dead**"
    if r.get("empty_showers") not in ("", "0", None):
        cell += f", {r['empty_showers']} empty"
    if r.get("sf_recal_pct"):
        cell += f" (recalibrated: SF {r['sf_recal_pct']} %)"
    return cell


def write_compact(a, rows):
    ns = sorted({r["workers"] for r in rows})
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write("| rule | " + " | ".join(f"N = {n}" for n in ns) + " |\n|---|" + "---|" * len(ns) + "\n")
        for rule in a.rules.split(","):
            cells = {r["workers"]: compact_cell(r) for r in rows if r["rule"] == rule}
            if cells:
                f.write(f"| {rule} | " + " | ".join(cells.get(n, "not run") for n in ns) + " |\n")


if __name__ == "__main__":
    main()
