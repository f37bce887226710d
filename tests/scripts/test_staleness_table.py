#!/usr/bin/python3
"""scripts/staleness_table.py joining runs scored now with the rows of an earlier study.csv, on
values computed by hand: one new gem run at N = 16 (its physics rows cross one worker's fpd_hlf of
1.0 at 192 000 samples) beside two earlier ones (reached at 128 000 and never, by 320 000); the
group's median fpd_hlf of 0.5, 0.7 and 0.9 is 0.70, its range 0.50-0.90 (two digits), and its reach 160k (the
median of the two that reached it) with one not reached. A run counts once however often its row
is joined; a bad earlier row is named by line. The new run met one of its two rung targets ('0 of 1'
seeds with all targets met); the earlier rows, written before that column, are not counted."""

import csv
import io
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "staleness_table.py")
COLUMNS = ("rule,workers,seed,samples,mean_staleness,fpd_hlf,fpd_hlf_error,auc,sf_bins,resolution_bins,bins,"
           "reach_1worker,failure,run")


def run(args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def new_run(root):
    d = os.path.join(root, "gem-16-seed3")
    os.makedirs(os.path.join(d, "val-fresh"))
    json.dump({"figure_of_merit": {"name": "fpd_hlf", "value": 0.5, "error": 0.01, "bootstrap_error": 0.05},
               "classifier": {"auc": 0.80}}, open(os.path.join(d, "val-fresh", "report.json"), "w"))
    json.dump([{"target": "sampling fraction within 2 %", "value": "worst 1.0 %; 6/6 bins", "verdict": "met"},
               {"target": "resolution within 15 %", "value": "worst 21 %; 4/6 bins", "verdict": "MISSED"}],
              open(os.path.join(d, "targets.json"), "w"))
    json.dump({"samples": 320000, "mean_staleness": 16.0}, open(os.path.join(d, "sandbox.json"), "w"))
    with open(os.path.join(d, "metrics.csv"), "w") as f:
        f.write("kind,samples,fpd_hlf\nstep,64000,\nphysics,64000,3.0\nphysics,128000,1.5\nphysics,192000,0.95\n"
                "physics,256000,1.2\n")


def main():
    failures = []
    with tempfile.TemporaryDirectory() as root:
        out = os.path.join(root, "study")
        os.makedirs(out)
        new_run(out)
        earlier = os.path.join(root, "earlier.csv")
        with open(earlier, "w") as f:
            f.write(COLUMNS + "\n")
            f.write("gem,16,1,320000,16.0,0.9,0.1,0.90,5,2,6,128000,,runs/a\n")
            f.write("gem,16,2,320000,16.0,0.7,0.1,0.85,6,3,6,-320000,,runs/b\n")
        p = run([out, "--rows", earlier, "--target", "1.0"])
        if p.returncode != 0:
            failures.append(f"exit {p.returncode}: {p.stderr}")
        md = open(os.path.join(out, "study.md")).read() if os.path.exists(os.path.join(out, "study.md")) else ""
        want = "| gem | 16 | 3 | 16.00 [16.00–16.00] | 0.70 [0.50–0.90] | 0.850 [0.800–0.900] | 6 [5–6] of 6 " \
               "| 3 [2–4] of 6 | 0 of 1 | 160k [128k–192k], 1 not reached |"
        if want not in md:
            failures.append(f"study.md lacks\n  {want}\nit holds\n{md}")
        csv_text = open(os.path.join(out, "study.csv")).read() if os.path.exists(os.path.join(out, "study.csv")) else ""
        if "gem,16,3,320000,16.0,0.5,0.05,0.8,6,4,6,192000" not in csv_text:
            failures.append(f"study.csv lacks the new run's row with reach 192000:\n{csv_text}")
        new_rows = [r for r in csv.DictReader(io.StringIO(csv_text)) if r["rule"] == "gem" and r["seed"] == "3"]
        if [(r["targets_met"], r["targets"]) for r in new_rows] != [("1", "2")]:
            failures.append(f"study.csv lacks the new run's targets met (1 of 2):\n{csv_text}")
        if csv_text.count("\ngem,16,") != 3:
            failures.append(f"study.csv should hold three gem rows:\n{csv_text}")
        # the earlier file holding the new run's row (a study.csv written by the same join) and a
        # repeated row: each run counts once, the one scored now winning
        with open(earlier, "a") as f:
            f.write("gem,16,3,320000,16.0,9.0,0.1,0.99,1,1,6,-320000,,runs/old\n")
            f.write("gem,16,2,320000,16.0,0.7,0.1,0.85,6,3,6,-320000,,runs/b\n")
        p = run([out, "--rows", earlier, "--target", "1.0"])
        md = open(os.path.join(out, "study.md")).read()
        if p.returncode != 0 or want not in md:
            failures.append(f"a re-scored and a repeated row: exit {p.returncode}, study.md\n{md}")
        if "seed 3 is replaced by the run scored now" not in p.stderr:
            failures.append(f"the replaced row is not reported: {p.stderr!r}")
        # a bad earlier row: named with its file, line and column
        with open(earlier, "a") as f:
            f.write("gem,16,4,320000,16.0,zero,0.1,0.85,6,3,6,128000,,runs/c\n")
        p = run([out, "--rows", earlier, "--target", "1.0"])
        if p.returncode == 0 or f"{earlier} line 6: column fpd_hlf holds 'zero'" not in p.stderr:
            failures.append(f"a bad row: exit {p.returncode}, stderr {p.stderr!r}")
    for f in failures:
        print("FAIL:", f)
    print("staleness_table:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
