#!/usr/bin/python3
"""The rung's physics targets against Monte Carlo, read from a `mpigan validate` output folder.

    /usr/bin/python3 scripts/rung_targets.py VALIDATION_DIR [--json OUT.json]

Targets (docs/physics.md, "The 5x5x5 rung"), each printed as met or MISSED with the worst value:
  * classifier AUC on the high-level features <= 0.75 (moonshot 0.6), with its error (for the mean
    of several classifiers, `mpigan validate --classifier-repeats`, the larger of one classifier's
    error and the classifiers' spread);
  * sampling fraction (mean sum/E) within 2 % of Monte Carlo in every energy bin;
  * energy resolution (sigma/mean of sum/E) within 15 % of Monte Carlo in every energy bin;
  * longitudinal and transverse mean profiles within 10 % of Monte Carlo in every cell of every
    bin where Monte Carlo holds >= 1 % of the energy along that axis.
Each worst value comes with its statistical error (both samples'); a miss says how many errors
beyond the tolerance it lies ("MISSED 0.4 err": a verdict a larger sample may reverse, "MISSED 6 err":
a real difference). The verdict itself is the value's, not widened by the error.
Reads report.json (classifier, response) and profiles.csv (its error_gev column where present). Exits
0 whatever the verdict (a report), 2 when the folder lacks what it needs.
"""

import csv
import json
import math
import os
import sys
from collections import defaultdict


def fail(msg):
    print(f"rung_targets: {msg}", file=sys.stderr)
    sys.exit(2)


def main(argv):
    if not argv:
        fail("usage: rung_targets.py VALIDATION_DIR [--json OUT.json]")
    folder = argv[0]
    out_json = argv[argv.index("--json") + 1] if "--json" in argv else None
    try:
        report = json.load(open(os.path.join(folder, "report.json")))
    except (OSError, ValueError) as e:
        fail(f"cannot read {folder}/report.json: {e}")
    rows = []  # (target, worst value text, met)

    def beyond(dev, err, tol):
        """A miss's distance beyond the tolerance, in errors (None without an error)."""
        return (abs(dev) - tol) / err if err and err > 0 and abs(dev) > tol else None

    c = report.get("classifier") or {}
    if "auc" in c:
        auc, err = c["auc"], c.get("auc_error", float("nan"))
        n = c.get("train_events", 0) + c.get("validation_events", 0) + c.get("test_events", 0)
        tag = "met (moonshot 0.6 met too)" if auc <= 0.6 else "met" if auc <= 0.75 else "MISSED"
        repeats = c.get("repeats", 1)
        if repeats > 1:
            # the mean of several classifiers: the larger of one's error and their spread
            err = max(err, c.get("auc_spread", 0.0))
            text = f"{auc:.3f} +- {err:.3f} (mean of {repeats} classifiers, spread {c.get('auc_spread', 0.0):.3f}; "
            text += f"{n // 2} events per class)"
        else:
            text = f"{auc:.3f} +- {err:.3f} ({n // 2} events per class)"
        rows.append(("classifier AUC <= 0.75", text, tag, beyond(auc - 0.75, err, 0.0) if tag == "MISSED" else None))
    else:
        rows.append(("classifier AUC <= 0.75", "not computed (--no-classifier?)", "MISSED", None))

    bins = (report.get("response") or {}).get("bins") or []
    if not bins:
        fail(f"{folder}/report.json has no per-bin response")
    for key, name, tol in (("linearity", "sampling fraction within 2 %", 0.02),
                           ("resolution", "resolution within 15 %", 0.15)):
        worst, where, n_ok = None, "", 0
        for b in bins:
            q = b.get(key) or {}
            if "ratio" not in q:
                continue
            dev = q["ratio"] - 1.0
            n_ok += abs(dev) <= tol
            if worst is None or abs(dev) > abs(worst[0]):
                worst = (dev, q.get("ratio_error", float("nan")))
                where = b["bin"]
        if worst is None:
            rows.append((name, "no bin", "MISSED", None))
            continue
        rows.append((name, f"worst {100 * worst[0]:+.1f} % +- {100 * worst[1]:.1f} ({where}); {n_ok}/{len(bins)} bins",
                     "met" if n_ok == len(bins) else "MISSED", beyond(worst[0], worst[1], tol)))

    prof = defaultdict(lambda: defaultdict(dict))  # (bin, axis) -> index -> {sample: (mean, error)}
    try:
        with open(os.path.join(folder, "profiles.csv"), newline="") as h:
            for r in csv.DictReader(h):
                err = float(r["error_gev"]) if r.get("error_gev") not in (None, "") else float("nan")
                prof[(r["bin"], r["axis"])][int(r["index"])][r["sample"]] = (float(r["mean_gev"]), err)
    except OSError as e:
        fail(f"cannot read {folder}/profiles.csv: {e}")
    for axes, name in (("z", "longitudinal profile within 10 %"), ("xy", "transverse profiles within 10 %")):
        worst, worst_err, where, cells, ok = 0.0, float("nan"), "", 0, 0
        for (b, axis), cells_of in prof.items():
            if axis not in axes:
                continue
            total = sum(v.get("reference", (0.0, 0.0))[0] for v in cells_of.values())
            for i, v in cells_of.items():
                (ref, ref_err), (gen, gen_err) = v.get("reference", (0.0, 0.0)), v.get("generated", (0.0, 0.0))
                if total <= 0 or ref < 0.01 * total:
                    continue
                dev = gen / ref - 1.0
                cells += 1
                ok += abs(dev) <= 0.10
                if abs(dev) > abs(worst):
                    worst, where = dev, f"{b}, {axis}[{i}]"
                    worst_err = (gen / ref) * math.hypot(ref_err / ref, gen_err / gen) if gen > 0 else float("nan")
        err_text = "" if math.isnan(worst_err) else f" +- {100 * worst_err:.1f}"
        rows.append((name, f"worst {100 * worst:+.1f} %{err_text} ({where}); {ok}/{cells} cells",
                     "met" if cells and ok == cells else "MISSED", beyond(worst, worst_err, 0.10)))

    width = max(len(r[0]) for r in rows)
    print(f"rung targets against Monte Carlo ({folder}):")
    for t, v, m, z in rows:
        verdict = m if z is None else f"{m} {z:.1f} err"
        print(f"  {t:<{width}}  {verdict:<14} {v}")
    missed = [r[0] for r in rows if r[2] == "MISSED"]
    print("all targets met" if not missed else f"{len(missed)} of {len(rows)} targets missed: " + "; ".join(missed))
    if out_json:
        json.dump([{"target": t, "value": v, "verdict": m, "errors_beyond": z} for t, v, m, z in rows],
                  open(out_json, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
