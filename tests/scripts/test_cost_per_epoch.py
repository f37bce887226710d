#!/usr/bin/python3
"""scripts/cost_per_epoch.py on a SimGrid sweep, a GPU list and a study whose answers are computed by hand.

GPU "X": 100 samples/s at batch 100 (a 1 s step), $360 per GPU-hour, the master at $36 per hour, 1 000 events
per epoch, one worker needing 2 epochs to quality. SimGrid (1 s steps, payload 1 MB): gem at N = 4 50 %
efficient, at 16 80 %, at 64 only under a tree of masters (not a flat master's: not used).
  N = 1:  100 samples/s, 10 s per epoch, $360 x 10 / 3600 = $1.00 (no master)
  N = 2:  no run at 2; the least loaded run at least as loaded is N = 4 (50 %): 100 samples/s, 10 s,
          (2 x 360 + 36) x 10 / 3600 = $2.10
  N = 4:  200 samples/s, 5 s, (4 x 360 + 36) x 5 / 3600 = $2.05; the master carries 4 x 0.5 / 1 s x 2 x 1 MB
  N = 16: 1 280 samples/s, 0.78 s, (16 x 360 + 36) x 0.78125 / 3600 = $1.26
  N = 64: not simulated
Study: one worker reaches its quality at 1 000 samples (2 of 3 runs); gem at N = 4 at 2 000 and 4 000 (median
3 000: 3x, so 3 x 2 epochs x 5 s = 30 s and 3 x 2 x $2.05 = $12.30); gem at N = 16 never in 5 000 samples (>5x);
"gem (lr x2)" at N = 4 (another recipe) is not counted, "gem (9k samples)" (a larger budget) is.
GPU "Y": payload 4 MB, so the master's load at N = 4 is that of the run at N = 16 (80 %).
"""

import csv
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "..", "..", "scripts", "cost_per_epoch.py")
failures = []

GPU_HEADER = ["gpu", "math", "model", "payload_mb", "batch", "samples_per_s", "source", "price_per_gpu_hour_usd",
              "price_source", "price_date"]
SMPI_HEADER = ["rule", "workers", "masters", "every", "mean_step_s", "efficiency"]


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def run(args):
    return subprocess.run([sys.executable, script] + args, capture_output=True, text=True)


with tempfile.TemporaryDirectory() as tmp:
    gpus, smpi, study = (os.path.join(tmp, name) for name in ("gpus.csv", "smpi.csv", "study.csv"))
    write(gpus, GPU_HEADER, [["X", "fp32", "m", 1, 100, 100, "hand", 360, "hand", "2026-01-01"],
                             ["Y", "fp32", "m", 4, 100, 100, "hand", 360, "hand", "2026-01-01"]])
    write(smpi, SMPI_HEADER, [["gem", 4, 1, 1, 1.0, 0.5], ["gem", 16, 1, 1, 1.0, 0.8],
                              ["gem", 64, 3, 4, 1.0, 0.99],        # a tree of masters: not a flat master's
                              ["downpour", 4, 1, 1, 1.0, 0.9]])
    write(study, ["rule", "workers", "seed", "reach_1worker"],
          [["single", 1, 1, 1000], ["single", 1, 2, 1000], ["single", 1, 3, -1000],
           ["gem", 4, 1, 2000], ["gem (9k samples)", 4, 1, 4000], ["gem (lr x2)", 4, 1, 1000],
           ["gem", 16, 1, -5000], ["downpour", 4, 1, 3000]])
    base = ["--gpus", gpus, "--smpi", smpi, "--study", study, "--epoch-events", "1000", "--quality-epochs", "2",
            "--master-usd-per-hour", "36", "--smpi-payload-mb", "1"]
    r = run(base + ["--workers", "1,2,4,16,64"])
    if r.returncode != 0:
        failures.append(f"exit {r.returncode}: {r.stderr}")
    rows = {}
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 10 and cells[1].isdigit():
            rows[(cells[0].split()[0], int(cells[1]))] = cells

    def expect(gpu, n, column, want):
        got = rows.get((gpu, n), [None] * 10)[column]
        if got != want:
            failures.append(f"{gpu} N={n} column {column}: got {got!r}, want {want!r}")

    for column, want in enumerate(["X fp32, m", "1", "one process", "100", "10.0 s", "$1.00", "—",
                                   "1.00× (2 of 3 runs)", "20.0 s", "$2.00"]):
        expect("X", 1, column, want)
    for column, want in enumerate(["X fp32, m", "2", "50.0 % (N=4 at 1.00 s)", "100", "10.0 s", "$2.10", "2 MB/s",
                                   "not measured", "—", "—"]):
        expect("X", 2, column, want)
    for column, want in enumerate(["X fp32, m", "4", "50.0 % (N=4 at 1.00 s)", "200", "5.0 s", "$2.05", "4 MB/s",
                                   "3.00× (2 of 2 runs)", "30.0 s", "$12.30"]):
        expect("X", 4, column, want)
    for column, want in enumerate(["X fp32, m", "16", "80.0 % (N=16 at 1.00 s)", "1 280", "0.8 s", "$1.26",
                                   "26 MB/s", ">5.00× (0 of 1 runs)", ">7.8 s", ">$12.58"]):
        expect("X", 16, column, want)
    expect("X", 64, 2, "not simulated")
    expect("X", 64, 4, "—")
    expect("Y", 4, 2, "80.0 % (N=16 at 1.00 s)")     # payload 4x: the master loaded as by 16 workers
    expect("Y", 16, 2, "not simulated")

    # another rule, and a study label named explicitly (the other recipe then counts, alone)
    r = run(base + ["--workers", "4", "--rule", "downpour"])
    # 360 samples/s, 1 000 / 360 = 2.8 s, 1 476 x 2.78 / 3600 = $1.14, 4 x 0.9 x 2 MB/s; downpour at 4: 3x
    if "| X fp32, m | 4 | 90.0 % (N=4 at 1.00 s) | 360 | 2.8 s | $1.14 | 7 MB/s | 3.00× (1 of 1 runs) |" \
            not in r.stdout:
        failures.append(f"--rule downpour at N = 4:\n{r.stdout}{r.stderr}")
    r = run(base + ["--workers", "4", "--study-label", "gem (lr x2)"])
    if "| 1.00× (1 of 1 runs) | 10.0 s | $4.10 |" not in r.stdout:
        failures.append(f"--study-label 'gem (lr x2)' at N = 4:\n{r.stdout}{r.stderr}")

    # bad inputs: each named by file, line and column, every one of them at once
    def expect_error(args, *wants):
        r = run(args)
        if r.returncode == 0 or any(w not in r.stderr for w in wants):
            failures.append(f"{args[-2:]}: exit {r.returncode}, stderr {r.stderr!r}; want {wants}")

    bad = os.path.join(tmp, "bad.csv")
    write(bad, [c for c in GPU_HEADER if c != "samples_per_s"], [["X", "fp32", "m", 1, 100, "hand", 360, "hand", "d"]])
    expect_error(base[:1] + [bad] + base[2:], f"{bad}:1: missing column 'samples_per_s'")
    write(bad, GPU_HEADER, [["X", "fp32", "m", 1, 100, 100, "hand", 360, "hand", "d"],
                            ["Z", "fp32", "m", 1, 100, "fast", "hand", "cheap", "hand", "d"]])
    expect_error(base[:1] + [bad] + base[2:], f"{bad}:3: column 'samples_per_s': 'fast' is not a number",
                 f"{bad}:3: column 'price_per_gpu_hour_usd': 'cheap' is not a number")
    write(bad, GPU_HEADER, [["X", "fp32", "m", 1, 100, 100, "", 360, "hand", "d"]])
    expect_error(base[:1] + [bad] + base[2:], f"{bad}:2: column 'source': empty")
    write(bad, SMPI_HEADER, [["gem", 4, 1, 1, 1.0, 0.5], ["gem", 16, 1, 1, 1.0, "n/a"]])
    expect_error(base[:2] + ["--smpi", bad] + base[4:], f"{bad}:3: column 'efficiency': 'n/a' is not a number")
    expect_error(base + ["--rule", "nosuch"], f"{smpi}: unknown rule 'nosuch'", "rules there: downpour, gem")
    write(bad, ["rule", "workers", "reach_1worker"], [["gem", "four", 100]])
    expect_error(base[:4] + ["--study", bad] + base[6:], f"{bad}:2: column 'workers': 'four' is not an integer")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("cost_per_epoch: every value as computed by hand, every bad input named")
