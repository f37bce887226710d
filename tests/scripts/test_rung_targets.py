#!/usr/bin/python3
"""scripts/rung_targets.py on a validation folder whose verdicts are computed by hand.

Two energy bins. The classifier scores 0.780 +- 0.010 on 5 000 events per class: missed, 3.0 errors
beyond 0.75. The sampling fraction is 1.5 % high at worst (met). The resolution is 18 % narrow at
100 GeV with an error of 6 %: missed, (0.18 - 0.15) / 0.06 = 0.5 errors beyond. Longitudinal: the
z[0] cell of 50 GeV holds 2 of 100 GeV (>= 1 %), generated 2.5 +- 0.1 against 2.0 +- 0.1 GeV: +25 %,
with the ratio's error 1.25 * hypot(0.05, 0.04) = 0.0800, (0.25 - 0.10) / 0.08 = 1.9 errors beyond;
z[4] holds 0.5 of 100 GeV (< 1 %) and is not judged, whatever its ratio. Transverse: every cell
within 10 %. A folder written before profiles.csv carried errors is read too (no error shown), and a
folder without report.json is refused with exit 2."""

import json
import math
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "..", "..", "scripts", "rung_targets.py")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def write_folder(d, with_errors):
    os.makedirs(d)
    report = {
        "classifier": {"auc": 0.780, "auc_error": 0.010, "train_events": 6000, "validation_events": 2000,
                       "test_events": 2000},
        "response": {"bins": [
            {"bin": "50 GeV", "linearity": {"ratio": 1.015, "ratio_error": 0.004},
             "resolution": {"ratio": 0.95, "ratio_error": 0.05}},
            {"bin": "100 GeV", "linearity": {"ratio": 0.990, "ratio_error": 0.004},
             "resolution": {"ratio": 0.82, "ratio_error": 0.06}}]},
    }
    json.dump(report, open(os.path.join(d, "report.json"), "w"))
    # z: 50 GeV's cells 2, 30, 40, 27.5, 0.5 (sum 100); 100 GeV's 4, 60, 80, 55, 1 (sum 200).
    ref_z = {"50 GeV": [2.0, 30.0, 40.0, 27.5, 0.5], "100 GeV": [4.0, 60.0, 80.0, 55.0, 1.0]}
    gen_z = {"50 GeV": [2.5, 30.5, 39.0, 27.0, 0.9], "100 GeV": [4.1, 61.0, 79.0, 54.0, 1.9]}
    ref_x = [10.0, 20.0, 40.0, 20.0, 10.0]
    gen_x = [10.5, 19.0, 41.0, 20.5, 9.5]
    header = "bin,sample,axis,index,mean_gev" + (",error_gev" if with_errors else "")
    lines = [header]
    for b in ("50 GeV", "100 GeV"):
        for sample, z, x in (("reference", ref_z[b], ref_x), ("generated", gen_z[b], gen_x)):
            for axis, vals in (("x", x), ("y", x), ("z", z)):
                for i, v in enumerate(vals):
                    err = 0.1 if (axis == "z" and i == 0 and b == "50 GeV") else 0.01 * v
                    lines.append(f'"{b}",{sample},{axis},{i},{v}' + (f",{err}" if with_errors else ""))
    open(os.path.join(d, "profiles.csv"), "w").write("\n".join(lines) + "\n")


with tempfile.TemporaryDirectory() as tmp:
    folder = os.path.join(tmp, "v")
    write_folder(folder, True)
    out_json = os.path.join(tmp, "t.json")
    text = subprocess.run([sys.executable, script, folder, "--json", out_json], check=True, capture_output=True,
                          text=True).stdout
    print(text)
    rows = {r["target"]: r for r in json.load(open(out_json))}
    c = rows["classifier AUC <= 0.75"]
    check(c["verdict"] == "MISSED" and abs(c["errors_beyond"] - 3.0) < 1e-9, f"classifier: {c}")
    check("5000 events per class" in c["value"], f"classifier events: {c}")
    sf = rows["sampling fraction within 2 %"]
    check(sf["verdict"] == "met" and sf["errors_beyond"] is None and "+1.5 %" in sf["value"], f"SF: {sf}")
    res = rows["resolution within 15 %"]
    check(res["verdict"] == "MISSED" and abs(res["errors_beyond"] - 0.5) < 1e-9 and "(100 GeV); 1/2 bins" in res["value"],
          f"resolution: {res}")
    lon = rows["longitudinal profile within 10 %"]
    check(lon["verdict"] == "MISSED" and abs(lon["errors_beyond"] - 0.15 / (1.25 * math.hypot(0.05, 0.04))) < 1e-9, f"longitudinal: {lon}")
    check("+25.0 % +- 8.0 (50 GeV, z[0]); 7/8 cells" in lon["value"], f"longitudinal text: {lon}")
    tr = rows["transverse profiles within 10 %"]
    check(tr["verdict"] == "met" and "20/20 cells" in tr["value"], f"transverse: {tr}")
    check("MISSED 1.9 err" in text and "3 of 5 targets missed" in text, "printed verdicts")

    # The mean of five classifiers: 0.760 with one's error 0.008 and a spread of 0.020, so the
    # error is 0.020 and the miss 0.5 errors beyond 0.75.
    rep = json.load(open(os.path.join(folder, "report.json")))
    rep["classifier"].update({"auc": 0.760, "auc_error": 0.008, "repeats": 5, "auc_spread": 0.020})
    json.dump(rep, open(os.path.join(folder, "report.json"), "w"))
    subprocess.run([sys.executable, script, folder, "--json", out_json], check=True, capture_output=True, text=True)
    c = {r["target"]: r for r in json.load(open(out_json))}["classifier AUC <= 0.75"]
    check(abs(c["errors_beyond"] - 0.5) < 1e-9 and "mean of 5 classifiers, spread 0.020" in c["value"],
          f"classifier, five repeats: {c}")

    old = os.path.join(tmp, "old")
    write_folder(old, False)
    text = subprocess.run([sys.executable, script, old], check=True, capture_output=True, text=True).stdout
    check("+25.0 % (50 GeV, z[0]); 7/8 cells" in text, f"a folder without errors:\n{text}")

    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    r = subprocess.run([sys.executable, script, empty], capture_output=True, text=True)
    check(r.returncode == 2 and "report.json" in r.stderr, f"a folder without report.json: {r.returncode} {r.stderr}")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("ok: rung_targets.py's verdicts and errors as computed by hand")
