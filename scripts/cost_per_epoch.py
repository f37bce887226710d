#!/usr/bin/python3
"""Time and cost per epoch of a 3DGAN job on N cloud GPUs, and to a generator of one worker's quality.

    /usr/bin/python3 scripts/cost_per_epoch.py [--gpus CSV] [--smpi CSV] [--study CSV] [--rule RULE]
        [--study-label LABEL ...] [--workers 1,4,16,64,256] [--epoch-events E] [--quality-epochs Q]
        [--master-usd-per-hour gpu|P] [--smpi-payload-mb MB] [--model M] [--gpu G] [--out FILE]

Inputs (each an assumption or a measurement, none a result):
  --gpus   one row per GPU, math and model (bench/cost/gpus.csv): the model's payload (MB each way per
           update), one worker's samples/s at its batch and where that figure comes from, and the price
           per GPU-hour with its source and date.
  --smpi   mpigan's real master simulated by SimGrid on a Piz Daint-like network
           (bench/smpi/results-mpigan.csv; docs/sandbox.md, "Scale"): efficiency per rule, N and step.
  --study  the staleness study (docs/figures/staleness-concat/study.csv; docs/sandbox.md, "Time to a good
           generator"): per run, the samples it needed to reach one worker's figure of merit
           (reach_1worker; negative when it never did, its magnitude the samples it ran).

The model, per GPU row and N:
  step          = batch / samples_per_s                      (one worker's compute per update, s)
  efficiency    = N = 1: 1 (one process, no master). Otherwise that of the flat-master SimGrid run of the
                  rule that loads the master at least as much: the master serves N / step updates per
                  second of payload_mb each, a run N_sim / step_sim of smpi-payload-mb each. Of the runs
                  with N_sim >= N and a load >= the job's (2 % tolerance: the simulated steps scatter by
                  5 %), the least loaded. None: "not simulated" (no extrapolation).
  samples/s     = N x samples_per_s x efficiency
  time / epoch  = epoch-events / samples/s
  cost / epoch  = (N x price + master's price) x time / 3600; the master's price is one more GPU of the row
                  by default (k8s/mpijob.yaml gives the master a GPU for its validation passes)
  master in+out = N x efficiency / step x 2 x payload_mb    (what the master's network carries)
  to quality    = r x quality-epochs x time / epoch (and cost), r = samples the rule's runs needed at N /
                  samples one worker's needed (medians over the runs that reached it; ">" when none did);
                  only where the study ran the rule at that N ("not measured" otherwise: no extrapolation).
                  The rule's runs: its own label and its larger budgets ("gem (1.2M samples)"), or --study-label.
"""

import argparse
import csv
import math
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the defaults are the repository's files


def number(text, minimum=None, integer=False):
    """@p text as a finite number (an int with @p integer), >= @p minimum when given; ValueError otherwise."""
    if text is None or text.strip() == "":
        raise ValueError("empty")
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not {'an integer' if integer else 'a number'}") from None
    if not math.isfinite(value):
        raise ValueError(f"'{text}' is not a finite number")
    if minimum is not None and value < minimum:
        raise ValueError(f"'{text}' is below {minimum:g}")
    return value


def text(value):
    if value is None or value.strip() == "":
        raise ValueError("empty (state the source)")
    return value.strip()


def read_table(path, columns):
    """The rows of the CSV @p path, each column of @p columns converted by its function. Every missing column or
    bad value is reported at once, as FILE:LINE: column 'NAME': what is wrong (LINE: the row's line in the file)."""
    try:
        f = open(path, newline="", encoding="utf-8")
    except OSError as e:
        sys.exit(f"{path}: cannot read it: {e.strerror}")
    with f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in columns if c not in header]
        if missing:
            sys.exit(f"{path}:1: missing column{'s' if len(missing) > 1 else ''} "
                     f"{', '.join(repr(c) for c in missing)} (the header has: {', '.join(header)})")
        rows, errors = [], []
        for raw in reader:
            row = dict(raw, line=reader.line_num)
            for column, convert in columns.items():
                try:
                    row[column] = convert(raw[column])
                except ValueError as e:
                    errors.append(f"{path}:{reader.line_num}: column '{column}': {e}")
            rows.append(row)
    if errors:
        sys.exit("\n".join(errors))
    return rows


def efficiency(runs, rule, n, step, payload_ratio):
    """(efficiency, the SimGrid run it comes from) for N workers at @p step s, or (None, None)."""
    if n == 1:
        return 1.0, None
    load = n / step * payload_ratio  # the master's work per second, in the simulated runs' payloads
    # 2 % tolerance: a run's mean step is its drawn steps' (σ = 0.05), so a GPU of the same step may read 0.1 % off
    fits = [r for r in runs if r["rule"] == rule and r["masters"] == 1 and r["workers"] >= n
            and r["workers"] / r["mean_step_s"] >= 0.98 * load]
    if not fits:
        return None, None
    run = min(fits, key=lambda r: (r["workers"] / r["mean_step_s"], r["workers"]))
    # above 1 is the drawn steps' noise (docs/sandbox.md: 100.1 %); N workers never beat N times one
    return min(run["efficiency"], 1.0), run


def samples_ratio(study, labels, n):
    """(r, is_lower_bound, runs reaching it, runs) of the study's runs labelled one of @p labels at N against
    one worker, or None."""

    def summary(values):
        done = [v for v in values if v > 0]
        if done:
            return statistics.median(done), False, len(done), len(values)
        return max(-v for v in values), True, 0, len(values)

    # one worker: every run at N = 1 (the study's "single")
    one = [r["reach_1worker"] for r in study if r["workers"] == 1 and r["reach_1worker"] is not None]
    mine = one if n == 1 else [r["reach_1worker"] for r in study if r["workers"] == n
                               and r["rule"] in labels and r["reach_1worker"] is not None]
    if not one or not mine or summary(one)[1]:
        return None
    s, lower, reached, runs = summary(mine)
    return s / summary(one)[0], lower, reached, runs


def thousands(x):
    return f"{x:,.0f}".replace(",", " ")


def fmt_time(s):
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    if s < 48 * 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def fmt_usd(c):
    return f"${thousands(c)}" if c >= 1000 else f"${c:.2f}"


def fmt_rate(mb_per_s):
    return f"{mb_per_s:.0f} MB/s" if mb_per_s < 1000 else f"{mb_per_s / 1000:.1f} GB/s"


def shown(path):
    """@p path relative to the repository when inside it (the notes under the table read the same anywhere)"""
    return os.path.relpath(path, ROOT) if os.path.abspath(path).startswith(ROOT + os.sep) else path


def workers_list(value):
    try:
        ns = [int(v) for v in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{value}' is not a comma-separated list of integers") from None
    if any(n < 1 for n in ns):
        raise argparse.ArgumentTypeError(f"'{value}': every N must be >= 1")
    return ns


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpus", default=os.path.join(ROOT, "bench/cost/gpus.csv"))
    p.add_argument("--smpi", default=os.path.join(ROOT, "bench/smpi/results-mpigan.csv"))
    p.add_argument("--study", default=os.path.join(ROOT, "docs/figures/staleness-concat/study.csv"))
    p.add_argument("--rule", default="gem", help="the update rule whose SimGrid efficiency and study runs count")
    p.add_argument("--study-label", action="append",
                   help="a label of the study's runs to count (repeat it); default: the rule's own label and its "
                   "larger budgets ('gem (1.2M samples)'), not its variants with other settings ('sync (lr ×2)')")
    p.add_argument("--workers", type=workers_list, default=[1, 4, 16, 64, 256], help="N, comma-separated")
    p.add_argument("--epoch-events", type=float, default=180000,
                   help="events per epoch (default 180 000: 90 %% of the reference 200 000-event 3dgan-25 set; "
                   "the cloud study's 100-200 GeV AngleGAN subset: 124 987)")
    p.add_argument("--quality-epochs", type=float, default=30,
                   help="epochs one worker needs to a good generator (an assumption; default 30, the low end of "
                   "the reference recipe's 30-50)")
    p.add_argument("--master-usd-per-hour", default="gpu",
                   help="the master's price per hour: 'gpu' (one more GPU of the row, the default) or a number")
    p.add_argument("--smpi-payload-mb", type=float, default=3.79,
                   help="the payload of the SimGrid runs (3dgan-25's, docs/sandbox.md)")
    p.add_argument("--model", help="only the rows of gpus.csv of this model")
    p.add_argument("--gpu", help="only the rows of gpus.csv of this GPU")
    p.add_argument("--out", help="write the Markdown here instead of standard output")
    a = p.parse_args()
    master_price = None
    if a.master_usd_per_hour != "gpu":
        try:
            master_price = number(a.master_usd_per_hour, minimum=0)
        except ValueError as e:
            p.error(f"--master-usd-per-hour: {e} (give 'gpu' or a price per hour)")
    for name in ("epoch_events", "quality_epochs", "smpi_payload_mb"):
        if not getattr(a, name) > 0:
            p.error(f"--{name.replace('_', '-')} must be > 0")

    gpus = read_table(a.gpus, {"gpu": text, "math": text, "model": text,
                               "payload_mb": lambda v: number(v, minimum=1e-9),
                               "batch": lambda v: number(v, minimum=1, integer=True),
                               "samples_per_s": lambda v: number(v, minimum=1e-9), "source": text,
                               "price_per_gpu_hour_usd": lambda v: number(v, minimum=0), "price_source": text,
                               "price_date": text})
    gpus = [g for g in gpus if (a.model is None or g["model"] == a.model) and (a.gpu is None or g["gpu"] == a.gpu)]
    if not gpus:
        sys.exit(f"{a.gpus}: no row with model {a.model!r} and gpu {a.gpu!r}")
    runs = read_table(a.smpi, {"rule": text, "workers": lambda v: number(v, minimum=1, integer=True),
                               "masters": lambda v: number(v, minimum=1, integer=True),
                               "mean_step_s": lambda v: number(v, minimum=1e-9),
                               "efficiency": lambda v: number(v, minimum=0)})
    rules = sorted({r["rule"] for r in runs if r["masters"] == 1})
    if a.rule not in rules:
        sys.exit(f"{a.smpi}: unknown rule '{a.rule}': no flat-master run of it (rules there: {', '.join(rules)})")
    study = read_table(a.study, {"rule": text, "workers": lambda v: number(v, minimum=1, integer=True),
                                 "reach_1worker": lambda v: None if v is None or v.strip() == "" else number(v)})

    labels = set(a.study_label or [r["rule"] for r in study if r["rule"] == a.rule
                                   or r["rule"].startswith(a.rule + " (") and r["rule"].endswith(" samples)")])
    out = ["| GPU, math, model | payload | batch | samples/s of one worker | step | source | $ per GPU-hour "
           "| price source, date |", "|---|---|---|---|---|---|---|---|"]
    for g in gpus:
        out.append(f"| {g['gpu']} {g['math']}, {g['model']} | {g['payload_mb']:g} MB | {g['batch']} | "
                   f"{g['samples_per_s']:g} | "
                   f"{g['batch'] / g['samples_per_s']:.3f} s | {g['source']} | {g['price_per_gpu_hour_usd']:.2f} | "
                   f"{g['price_source']}, {g['price_date']} |")
    qe = f"{a.quality_epochs:g}"
    out += ["", f"| GPU, math, model | N | efficiency (SimGrid run, {a.rule}) | samples/s | time per epoch "
            f"| cost per epoch "
            f"| master in+out | samples to one worker's quality ({a.rule}) | time to it ({qe} epochs of one worker) "
            f"| cost to it |", "|---|---|---|---|---|---|---|---|---|---|"]
    for g in gpus:
        step, price = g["batch"] / g["samples_per_s"], g["price_per_gpu_hour_usd"]
        for n in a.workers:
            e, run = efficiency(runs, a.rule, n, step, g["payload_mb"] / a.smpi_payload_mb)
            head = f"| {g['gpu']} {g['math']}, {g['model']} | {n} |"
            if e is None:
                out.append(f"{head} not simulated | — | — | — | — | — | — | — |")
                continue
            rate = n * g["samples_per_s"] * e
            seconds = a.epoch_events / rate
            master = 0 if n == 1 else price if master_price is None else master_price
            cost = (n * price + master) * seconds / 3600
            eff = "one process" if run is None else \
                f"{e * 100:.1f} % (N={run['workers']} at {run['mean_step_s']:.2f} s)"
            traffic = "—" if n == 1 else fmt_rate(n * e / step * 2 * g["payload_mb"])
            q = samples_ratio(study, labels, n)
            if q is None:
                quality = "not measured | — | —"
            else:
                r, lower, reached, total = q
                bound = ">" if lower else ""
                quality = (f"{bound}{r:.2f}× ({reached} of {total} runs) | "
                           f"{bound}{fmt_time(r * a.quality_epochs * seconds)} | "
                           f"{bound}{fmt_usd(r * a.quality_epochs * cost)}")
            out.append(f"{head} {eff} | {thousands(rate)} | {fmt_time(seconds)} | {fmt_usd(cost)} | {traffic} | "
                       f"{quality} |")
    master = "one more GPU of the row" if master_price is None else f"${master_price:g} per hour"
    out += ["", f"Epoch: {thousands(a.epoch_events)} events. Master (N > 1): {master}. Efficiency: {shown(a.smpi)}, "
            f"flat master, rule {a.rule}, the runs' payload {a.smpi_payload_mb:g} MB. "
            f"Samples to quality: {shown(a.study)}, runs labelled {', '.join(sorted(labels)) or '(none)'} against one "
            f"worker's."]
    text_out = "\n".join(out) + "\n"
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text_out)
    else:
        sys.stdout.write(text_out)


if __name__ == "__main__":
    main()
