#!/usr/bin/python3
"""The physics figure of merit of every checkpoint of a run, after the fact.

    /usr/bin/python3 scripts/score_checkpoints.py RUN_DIR REFERENCE.h5 [--events N] [--mpigan PATH]

For a run trained without validation.physics (or to score its checkpoints on more events): runs
`mpigan validate CHECKPOINT --reference REFERENCE.h5 --events N --no-plots` for each
RUN_DIR/checkpoints/step-*.h5 not scored yet (reports in RUN_DIR/scores/step-N/), and writes
RUN_DIR/physics_checkpoints.csv with metrics.csv's physics columns (kind physics, step, samples,
fpd_hlf, fpd_hlf_error, sf_mre, sf_mre_error, gan3d_metric, kpd). `mpigan report RUN_DIR` draws
these rows with the run's own. Samples seen come from the run's metrics.csv step rows.
"""

import argparse
import csv
import glob
import json
import os
import re
import subprocess
import sys

COLUMNS = ["kind", "epoch", "step", "samples", "elapsed_s", "fpd_hlf", "fpd_hlf_error", "sf_mre", "sf_mre_error",
           "gan3d_metric", "kpd"]


def samples_by_step(run):
    out = {}
    path = os.path.join(run, "metrics.csv")
    if os.path.exists(path):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["kind"] == "step":
                    out[int(r["step"])] = int(r["samples"])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("reference")
    p.add_argument("--events", type=int, default=2000)
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--mpigan", default=os.path.join(here, "..", "build", "apps", "mpigan"))
    a = p.parse_args()
    samples = samples_by_step(a.run)
    rows = []
    for ckpt in sorted(glob.glob(os.path.join(a.run, "checkpoints", "step-*.h5"))):
        step = int(re.search(r"step-(\d+)\.h5$", ckpt).group(1))
        out = os.path.join(a.run, "scores", f"step-{step}")
        report = os.path.join(out, "report.json")
        if not os.path.exists(report):
            cmd = [a.mpigan, "validate", ckpt, "--reference", a.reference, "--events", str(a.events), "--no-plots",
                   "--out", out]
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            os.remove(os.path.join(out, "generated.h5"))  # large; regenerate with the same seed if needed
        r = json.load(open(report))
        fom = r["figure_of_merit"]
        rows.append({"kind": "physics", "epoch": 0, "step": step, "samples": samples.get(step, ""), "elapsed_s": "",
                     "fpd_hlf": fom["value"], "fpd_hlf_error": fom["error"],
                     "sf_mre": r["sampling_fraction"]["mre"], "sf_mre_error": r["sampling_fraction"]["error"],
                     "gan3d_metric": r["gan3d_metric"]["total"], "kpd": r["kpd"]["value"]})
        print(f"step {step}: fpd_hlf {fom['value']:.4g} +- {fom['error']:.2g}, SF MRE "
              f"{100 * r['sampling_fraction']['mre']:.2f} %", flush=True)
    if not rows:
        sys.exit(f"no checkpoints in {a.run}/checkpoints")
    path = os.path.join(a.run, "physics_checkpoints.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
