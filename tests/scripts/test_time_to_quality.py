#!/usr/bin/python3
"""scripts/time_to_quality.py on a study and a SimGrid sweep whose answers are computed by hand:
one worker reaches its quality at 400 000 samples in two of three seeds; gem at N = 4 at 320 000
and 480 000 (median 400 000) with 98 % efficiency; downpour at N = 4 never (a lower bound); gem at
N = 16 at 800 000 with an efficiency SimGrid gives only for another step time (so no time).
At 1.64 s per step of 64, one worker's time is 400 000 / (64 / 1.64) s = 10 250 s = 171 min."""

import csv
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "..", "..", "scripts", "time_to_quality.py")
failures = []

with tempfile.TemporaryDirectory() as tmp:
    study = os.path.join(tmp, "study.csv")
    with open(study, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rule", "workers", "seed", "reach_1worker"])
        w.writerows([["single", 1, 1, 400000], ["single", 1, 2, 400000], ["single", 1, 3, -400000],
                     ["gem", 4, 1, 320000], ["gem", 4, 2, 480000],
                     ["downpour", 4, 1, -400000], ["downpour", 4, 2, -400000],
                     ["gem (1.2M samples)", 16, 1, 800000]])
    smpi = os.path.join(tmp, "smpi.csv")
    with open(smpi, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rule", "workers", "masters", "every", "step", "efficiency"])
        w.writerows([["gem", 4, 1, 1, "lognormal:1.64,0.05", 0.98], ["downpour", 4, 1, 1, "lognormal:1.64,0.05", 0.99],
                     ["gem", 4, 3, 4, "lognormal:1.64,0.05", 0.5],       # a tree: not the flat master's
                     ["gem", 16, 1, 1, "lognormal:0.25,0.05", 0.9]])     # another step time
    out = os.path.join(tmp, "ttq")
    text = subprocess.run([sys.executable, script, study, "--smpi", smpi, "--out", out], check=True,
                          capture_output=True, text=True).stdout
    rows = {line.split("|")[1].strip() + "/" + line.split("|")[2].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in text.splitlines() if line.startswith("| ") and not line.startswith("| rule")}

    def expect(key, column, want):
        got = rows[key][column]
        if got != want:
            failures.append(f"{key} column {column}: got {got!r}, want {want!r}")

    t1 = 400000 / (64 / 1.64) / 60                   # 170.8 min
    t4 = 400000 / (4 * 0.98 * 64 / 1.64) / 60        # 43.6 min
    expect("single/1", 1, "1")
    expect("single/1", 2, "2 of 3")
    expect("single/1", 3, "400k")
    expect("single/1", 5, f"{t1:.0f} min")
    expect("gem/4", 2, "2 of 2")
    expect("gem/4", 3, "400k")
    expect("gem/4", 4, "98.0 %")
    expect("gem/4", 5, f"{t4:.0f} min")
    expect("gem/4", 6, f"{t1 / t4:.1f}×")
    expect("downpour/4", 2, "0 of 2")
    expect("downpour/4", 3, ">400k")
    expect("downpour/4", 5, f">{400000 / (4 * 0.99 * 64 / 1.64) / 60:.0f} min")
    expect("downpour/4", 6, f"<{t1 / (400000 / (4 * 0.99 * 64 / 1.64) / 60):.1f}×")
    expect("gem (1.2M samples)/16", 4, "not simulated")
    expect("gem (1.2M samples)/16", 5, "—")
    if not os.path.exists(out + ".md") or not os.path.exists(out + ".png"):
        failures.append("PREFIX.md and PREFIX.png not both written")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("time_to_quality: every value as computed by hand")
