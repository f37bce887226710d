#!/usr/bin/python3
"""Searches side by side at equal budgets: GP against evolution against random (docs/hpo.md).

    /usr/bin/python3 scripts/search_compare.py LABEL=SEARCH_DIR [LABEL=SEARCH_DIR ...] [--budgets 1,2,3]
        [--out PREFIX]

Each SEARCH_DIR is a `mpigan optimize` directory; its trials.jsonl is the record. A trial's cost is
the CPU time of its folds (each fold's `cpu_seconds`, over its ranks and threads, unaffected by
other work on the same cores; a fold recorded without it counts its wall seconds, one core), so
searches run with other block sizes or fold counts are compared at the same compute; a trial interrupted by
stopping the search is left out (its point runs again when the search resumes). For each search: the trials
done, pruned and failed, the CPU-hours spent, the best value with its spread over the folds and the
trial that found it, and the best value found within each budget (CPU-hours) of --budgets (the
search's best over the trials that ended within it; a budget the search did not reach is "—").
The best is over trials that ran to the end, as the search's own best.yaml is: a pruned trial's
value is its score where it was stopped, at fewer samples than the objective's.
--baseline DIR: the experiment's own configuration trained on the same folds (DIR/fold-*/metrics.csv,
as scripts/search_study.sh makes it), scored like a trial (--metric, the mean of its --last scores
per fold, then the mean and spread over the folds): the line a search has to beat, in the table's
last line and as a band on the plot.
Writes PREFIX.md (the table) and PREFIX.png (best value so far against CPU-hours), and prints the table.
Values are minimised (the search's objective as recorded: a maximised metric is stored negated by
the search, and shown here as recorded). The last line names the best trial over all the searches
with its overrides (--set KEY=VALUE each), the configuration to confirm with fresh seeds.
"""

import argparse
import math
import os
import re
import sys

import plot_search  # scripts/: its reader of trials.jsonl


def fold_cpu_seconds(fold):
    """A fold's CPU seconds; its wall seconds (one core) when the search did not record them."""
    cpu = fold.get("cpu_seconds")
    if cpu is not None and float(cpu) >= 0.0:
        return float(cpu)
    return float(fold.get("seconds") or 0.0)


def load_trials(path):
    """Ended trials of a trials.jsonl, in the order they ended: dicts with value, spread, status,
    trial, cpu_s (sum of the folds' CPU seconds, or wall seconds where those were not recorded), ended."""
    ended = {}
    for e in plot_search.read_records(path):
        if e.get("event") != "end" or e.get("status") == "interrupted":
            continue  # an interrupted trial (the search was stopped) runs again: its partial time is not the algorithm's
        folds = e.get("folds") or []
        cpu = sum(fold_cpu_seconds(fo) for fo in folds)
        if not folds:
            cpu = max(0.0, float(e.get("ended") or 0.0) - float(e.get("started") or 0.0))
        value = e.get("value")
        ended[e["trial"]] = {
            "trial": int(e["trial"]),
            "status": e.get("status", ""),
            "value": float(value) if value is not None and math.isfinite(float(value)) else None,
            "spread": float(e.get("spread") or 0.0),
            "cpu_s": cpu,
            "ended": float(e.get("ended") or 0.0),
            "overrides": list(e.get("overrides") or []),
        }
    return sorted(ended.values(), key=lambda t: (t["ended"], t["trial"]))


def fold_objective(path, metric, last):
    """The mean of the last `last` values of `metric` in a run's metrics.csv (its physics rows)."""
    import csv
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and metric not in rows[0]:
        raise SystemExit(f"{path}: no column '{metric}'")
    vals = [float(r[metric]) for r in rows if r.get(metric) not in (None, "", "nan")]
    vals = [v for v in vals if math.isfinite(v)]
    if len(vals) < last:
        raise SystemExit(f"{path}: {len(vals)} value(s) of {metric}, expected at least {last} (has the run ended?)")
    return sum(vals[-last:]) / last


def baseline(d, metric, last):
    """(mean, spread over folds, folds) of the experiment's own configuration in d/fold-*."""
    # fold-F directories only: search_study.sh writes each fold's log beside it (fold-F.log)
    folds = sorted(f for f in os.listdir(d) if re.fullmatch(r"fold-\d+", f) and os.path.isdir(os.path.join(d, f))) \
        if os.path.isdir(d) else []
    if not folds:
        raise SystemExit(f"--baseline {d}: no fold-*/ directories")
    v = [fold_objective(os.path.join(d, f, "metrics.csv"), metric, last) for f in folds]
    mean = sum(v) / len(v)
    spread = math.sqrt(sum((x - mean) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return mean, spread, len(v)


def summarise(trials, budgets_h):
    """The table's numbers for one search."""
    counts = {"done": 0, "pruned": 0, "failed": 0}
    for t in trials:
        if t["status"] in counts:
            counts[t["status"]] += 1
    curve = []  # (cumulative CPU-hours, best so far)
    spent = 0.0
    best = None
    for t in trials:
        spent += t["cpu_s"] / 3600.0
        if t["value"] is not None and t["status"] == "done" and (best is None or t["value"] < best["value"]):
            best = t
        curve.append((spent, best["value"] if best else None))
    within = []
    for b in budgets_h:
        if spent + 1e-12 < b:
            within.append(None)
            continue
        vals = [v for h, v in curve if h <= b + 1e-12 and v is not None]
        within.append(vals[-1] if vals else None)
    return {"counts": counts, "cpu_h": spent, "best": best, "curve": curve, "within": within}


def fmt(v):
    if v is None:
        return "—"
    return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def table(rows, budgets_h, base=None):
    head = ["search", "trials done", "pruned", "failed", "CPU-hours", "best (± fold spread)", "found at trial"]
    head += [f"best within {b:g} CPU-h" for b in budgets_h]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, s in rows:
        b = s["best"]
        cells = [label, str(s["counts"]["done"]), str(s["counts"]["pruned"]), str(s["counts"]["failed"]),
                 f"{s['cpu_h']:.2f}", f"{fmt(b['value'])} ± {fmt(b['spread'])}" if b else "—",
                 str(b["trial"]) if b else "—"]
        cells += [fmt(v) for v in s["within"]]
        lines.append("| " + " | ".join(cells) + " |")
    if base:
        mean, spread, n = base
        cells = [f"the experiment's own configuration ({n} folds)", "", "", "", "", f"{fmt(mean)} ± {fmt(spread)}", ""]
        lines.append("| " + " | ".join(cells + [""] * len(budgets_h)) + " |")
    return "\n".join(lines) + "\n"


def plot(rows, path, base=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, s in rows:
        pts = [(h, v) for h, v in s["curve"] if v is not None]
        if not pts:
            continue
        ax.step([h for h, _ in pts], [v for _, v in pts], where="post", label=label)
    if base:
        mean, spread, _ = base
        ax.axhline(mean, color="k", lw=1, ls="--", label="the experiment's own configuration")
        ax.axhspan(mean - spread, mean + spread, color="k", alpha=0.1)
    ax.set_xlabel("CPU-hours (the folds' CPU time)")
    ax.set_ylabel("best objective so far (lower is better)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("searches", nargs="+", help="LABEL=SEARCH_DIR")
    ap.add_argument("--budgets", default="1,2", help="CPU-hours at which to compare (comma-separated)")
    ap.add_argument("--out", default=None, help="write PREFIX.md and PREFIX.png")
    ap.add_argument("--baseline", default=None, help="DIR with fold-*/metrics.csv: the experiment's own configuration")
    ap.add_argument("--metric", default="fpd_hlf", help="the objective's column in metrics.csv (for --baseline)")
    ap.add_argument("--last", type=int, default=2, help="the objective: the mean of the last N scores (for --baseline)")
    a = ap.parse_args(argv)
    try:
        budgets = [float(x) for x in a.budgets.split(",") if x]
    except ValueError:
        ap.error(f"--budgets '{a.budgets}': expected CPU-hours separated by commas, e.g. 1,2,3")
    rows = []
    for spec in a.searches:
        if "=" not in spec:
            ap.error(f"'{spec}': expected LABEL=SEARCH_DIR")
        label, d = spec.split("=", 1)
        path = os.path.join(d, "trials.jsonl")
        if not os.path.isfile(path):
            ap.error(f"{label}: {path} does not exist (a `mpigan optimize` directory holds it)")
        rows.append((label, summarise(load_trials(path), budgets)))
    base = baseline(a.baseline, a.metric, a.last) if a.baseline else None
    md = table(rows, budgets, base)
    done = [(label, s["best"]) for label, s in rows if s["best"]]
    if done:
        label, b = min(done, key=lambda lb: lb[1]["value"])
        md += (f"\nBest over all: {label}, trial {b['trial']}, {fmt(b['value'])} ± {fmt(b['spread'])}: "
               f"{' '.join(b['overrides']) or '(no overrides recorded)'}\n")
    print(md, end="")
    if a.out:
        with open(a.out + ".md", "w") as f:
            f.write(md)
        plot(rows, a.out + ".png", base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
