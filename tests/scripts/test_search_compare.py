#!/usr/bin/python3
"""scripts/search_compare.py on two searches written by hand. Search A: trial 0 ends after 0.8
CPU-hours (two folds of 1 440 s) with 5.0, trial 1 fails after 0.2 h more (1.0 h in all), trial 2
after 0.5 h more (1.5 h) with 3.0 +- 0.4 (its spread: one fold's CPU seconds, 900 of its
5 000 wall seconds, the other's wall seconds where no CPU time was recorded); the start events, trial 1's interruption
before its re-run (its 5 000 s not counted) and a torn last line are ignored. Search B: one trial, pruned, with 4.0, recorded without folds: its wall time of 0.5 h
counts, and a pruned trial is no search's best (its value is at fewer samples than the objective's). Budgets 1, 1.5 and 2 CPU-hours: A's best within them is 5.0, 3.0 and not reached (A spent
1.5 h); B reached none of them. The experiment's own configuration on two folds (--baseline)
scores 3.5 +- 0.707; the best over all is A's trial 2 with its overrides; a fold of it that has not ended is named. A bad line in the middle is named
by line."""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "search_compare.py")


def end(trial, status, value, folds=None, spread=0.0, started=0.0, ended=0.0):
    return json.dumps({"event": "end", "trial": trial, "status": status, "value": value, "spread": spread,
                       "folds": folds or [], "started": started, "ended": ended})


def write(d, lines):
    os.makedirs(d)
    with open(os.path.join(d, "trials.jsonl"), "w") as f:
        f.write("\n".join(lines))


def main():
    failures = []
    with tempfile.TemporaryDirectory() as root:
        a, b, bad = (os.path.join(root, n) for n in ("a", "b", "bad"))
        write(a, [
            json.dumps({"event": "start", "trial": 0}),
            end(0, "done", 5.0, [{"seconds": 1440.0}, {"seconds": 1440.0}], ended=10),
            json.dumps({"event": "start", "trial": 1}),
            end(1, "interrupted", None, [{"seconds": 5000.0}], ended=15),
            end(1, "failed", None, [{"seconds": 360.0}, {"seconds": 360.0}], ended=20),
            # fold 0 ran beside other work: 5 000 s of wall time, 900 s of CPU; fold 1 has no CPU time
            json.dumps({"event": "end", "trial": 2, "status": "done", "value": 3.0, "spread": 0.4, "ended": 30,
                        "overrides": ["optimizer.lr=0.0003", "training.batch=48"],
                        "folds": [{"seconds": 5000.0, "cpu_seconds": 900.0}, {"seconds": 900.0, "cpu_seconds": -1}]}),
            '{"event": "end", "tri',
        ])
        write(b, [end(0, "pruned", 4.0, None, started=100.0, ended=1900.0)])
        # the experiment's own configuration on the two folds: fpd_hlf 9, 4, 2 and 5, 3, 5 among
        # training rows without it: the mean of the last two, 3 and 4; over the folds 3.5 ± 0.707
        base = os.path.join(root, "base")
        for f, vals in ((0, (9, 4, 2)), (1, (5, 3, 5))):
            os.makedirs(os.path.join(base, f"fold-{f}"))
            with open(os.path.join(base, f"fold-{f}", "metrics.csv"), "w") as m:
                m.write("kind,samples,d_loss,fpd_hlf\n")
                for i, v in enumerate(vals):
                    m.write(f"train,{i * 10},1.5,\nphysics,{i * 10},,{v}\n")
            # the fold's log beside it, as search_study.sh writes it: not a fold
            with open(os.path.join(base, f"fold-{f}.log"), "w") as log:
                log.write("training\n")
        r = subprocess.run([sys.executable, SCRIPT, f"A={a}", f"B={b}", "--budgets", "1,1.5,2",
                            "--out", os.path.join(root, "cmp"), "--baseline", base], capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"exit {r.returncode}: {r.stderr}")
        rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
                for line in r.stdout.splitlines() if line.startswith("| A") or line.startswith("| B")}
        want = {"A": ["2", "0", "1", "1.50", "3 ± 0.4", "2", "5", "3", "—"],
                "B": ["0", "1", "0", "0.50", "—", "—", "—", "—", "—"]}
        for k, v in want.items():
            if rows.get(k) != v:
                failures.append(f"row {k}: {rows.get(k)}, expected {v}")
        if "Best over all: A, trial 2, 3 ± 0.4: optimizer.lr=0.0003 training.batch=48" not in r.stdout:
            failures.append(f"the best over all: {r.stdout}")
        own = [line for line in r.stdout.splitlines() if "own configuration (2 folds)" in line]
        if not own or "3.5 ± 0.707" not in own[0]:
            failures.append(f"the baseline row: {own}")
        with open(os.path.join(base, "fold-1", "metrics.csv"), "w") as m:
            m.write("kind,samples,fpd_hlf\nphysics,0,7\n")
        r2 = subprocess.run([sys.executable, SCRIPT, f"A={a}", "--baseline", base], capture_output=True, text=True)
        if r2.returncode == 0 or "fold-1/metrics.csv: 1 value(s) of fpd_hlf, expected at least 2" not in r2.stderr:
            failures.append(f"a baseline fold that has not ended: exit {r2.returncode}, {r2.stderr}")
        if "torn last line" not in r.stderr:
            failures.append(f"the torn last line was not reported: {r.stderr}")
        for ext in ("md", "png"):
            if not os.path.isfile(os.path.join(root, "cmp." + ext)):
                failures.append(f"cmp.{ext} not written")
        write(bad, ['{"event": "end", "trial": 0', end(1, "done", 1.0)])
        r = subprocess.run([sys.executable, SCRIPT, f"X={bad}"], capture_output=True, text=True)
        if r.returncode == 0 or "trials.jsonl:1: not JSON" not in (r.stderr + str(r.stdout)):
            failures.append(f"a bad line in the middle: exit {r.returncode}, {r.stderr}")
    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
