#!/usr/bin/env bash
# `mpigan validate` end to end: two simulator samples (different seeds) give a report.json with a
# finite figure of merit near its floor, its bootstrap error, the CaloChallenge-convention FPD and
# KPD, the per-bin response within a few standard errors and the classifier's AUC near 0.5 (also at a
# fixed size per class), the profiles' cells with their errors, the CSV tables and the PNG plots; a bad
# input is named.
#
#   tests/physics/test_validate.sh MPIGAN
set -uo pipefail
mpigan=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$mpigan" simulate --events 1500 --geometry 25x25x25 --energy 40:110 --out "$work/a" --seed 1 >/dev/null 2>&1 || fail "simulate a"
"$mpigan" simulate --events 1500 --geometry 25x25x25 --energy 40:110 --out "$work/b" --seed 2 >/dev/null 2>&1 || fail "simulate b"
out=$("$mpigan" validate --generated "$work/b/EleEscan_001.h5" --reference "$work/a/EleEscan_001.h5" --out "$work/v" 2>&1) ||
  fail "validate failed: $out"
echo "$out"
python3 - "$work/v/report.json" <<'PY' || fail "report.json is not what was expected"
import json, sys
r = json.load(open(sys.argv[1]))
fom = r["figure_of_merit"]
assert fom["name"] == "fpd_hlf" and fom["value"] is not None and fom["value"] < 3.0, fom
bins = [b for b in r["sampling_fraction"]["bins"] if b["n_ref"] > 0]
assert [b["bin"] for b in bins] == ["50 GeV", "100 GeV"], bins
assert r["sampling_fraction"]["mre"] < 0.03, r["sampling_fraction"]
# By default: the bootstrap error, the CaloChallenge-convention distances, the per-bin response
# with pulls (Monte Carlo against Monte Carlo: within ~3 standard errors) and the classifier.
assert fom["bootstrap_error"] is not None and fom["bootstrap_error"] > 0, fom
for k in ("fpd_cc", "kpd_cc"):
    assert r[k]["value"] is not None and r[k]["error"] is not None and r[k]["scaled_by"] == 1000, r[k]
assert r["fpd_cc"]["bootstrap_error"] > 0, r["fpd_cc"]
resp = [b for b in r["response"]["bins"] if b["n_ref"] > 0]
assert [b["bin"] for b in resp] == ["50 GeV", "100 GeV"], resp
for b in resp:
    for q in ("resolution", "linearity", "occupancy"):
        assert abs(b[q]["pull"]) < 4, (b["bin"], q, b[q])
assert all(abs(v) < 4 for v in r["response"]["max_abs_pull"].values()), r["response"]["max_abs_pull"]
assert abs(r["classifier"]["auc"] - 0.5) < 4 * r["classifier"]["auc_error"], r["classifier"]
# The profiles' cell means with their standard errors: Monte Carlo against Monte Carlo, every cell
# that holds >= 1 % of its axis's energy within 5 combined errors, every such error positive.
import csv, math, os
cells = {}
for row in csv.DictReader(open(os.path.join(os.path.dirname(sys.argv[1]), "profiles.csv"))):
    cells.setdefault((row["bin"], row["axis"], row["index"]), {})[row["sample"]] = (float(row["mean_gev"]), float(row["error_gev"]))
checked = 0
for (b, axis, i), v in cells.items():
    total = sum(w["reference"][0] for (bb, aa, _), w in cells.items() if (bb, aa) == (b, axis) and "reference" in w)
    (mr, er), (mg, eg) = v["reference"], v["generated"]
    if mr < 0.01 * total:
        continue
    assert er > 0 and eg > 0, (b, axis, i, v)
    assert abs(mg - mr) < 5 * math.hypot(er, eg), (b, axis, i, v)
    checked += 1
assert checked >= 2 * 3 * 10, checked
PY
# The classifier at a fixed size per class (200 of each, 20 % of them in the test split), three of
# them averaged, their spread beside the mean.
out=$("$mpigan" validate --generated "$work/b/EleEscan_001.h5" --reference "$work/a/EleEscan_001.h5" --out "$work/c" \
  --classifier-events 200 --classifier-repeats 3 --no-plots 2>&1) || fail "validate --classifier-events failed: $out"
python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["classifier"]
assert (c["train_events"], c["test_events"], c["repeats"]) == (240, 80, 3) and c["auc_spread"] > 0, c' \
  "$work/c/report.json" || fail "--classifier-events 200 --classifier-repeats 3: not in report.json"
for f in report.json separation.csv sampling_fraction.csv gan3d_metric.csv response.csv profiles.csv spectrum.csv \
         events.csv sampling_fraction.png profiles.png spectrum.png moments.png observables.png response.png; do
  [[ -s $work/v/$f ]] || fail "validate did not write $f"
done
bad=$("$mpigan" validate --generated "$work/nope.h5" --reference "$work/a/EleEscan_001.h5" --out "$work/w" 2>&1) &&
  fail "a missing file was accepted"
grep -q "nope.h5" <<<"$bad" || fail "the error does not name the missing file: $bad"
for opt in "--recalibrate-bn 4" --batch-statistics; do
  # shellcheck disable=SC2086  # the option and its value are two words
  bad=$("$mpigan" validate --generated "$work/b/EleEscan_001.h5" --reference "$work/a/EleEscan_001.h5" $opt \
    --out "$work/w" 2>&1) && fail "$opt with --generated was accepted"
  grep -q -- "${opt%% *} changes how a generator generates" <<<"$bad" || fail "the error does not name ${opt%% *}: $bad"
done
# A report directory that cannot be made, and numbers that are not what an option takes: named.
bad=$("$mpigan" validate --generated "$work/b/EleEscan_001.h5" --reference "$work/a/EleEscan_001.h5" \
  --out "$work/a/EleEscan_001.h5/v" 2>&1) && fail "a report directory inside a file was accepted"
grep -q "cannot create the report directory --out '$work/a/EleEscan_001.h5/v': Not a directory" <<<"$bad" ||
  fail "the error does not name the report directory: $bad"
for case in "simulate --events 12abc|--events: expected a positive integer, got '12abc'" \
  "simulate --events 5 --seed -1|--seed: expected a seed, an integer in 0..18446744073709551615, got '-1'" \
  "simulate --events 5 --threads -2|--threads: expected an integer in 0..1024, got '-2'" \
  "validate --bin-half-width 0 --reference $work/a/EleEscan_001.h5|--bin-half-width: expected a number > 0, got '0'"; do
  # shellcheck disable=SC2086  # the command line is split into its words
  bad=$("$mpigan" ${case%%|*} --out "$work/never" 2>&1) &&
    fail "'${case%%|*}' was accepted"
  grep -q -F -- "${case#*|}" <<<"$bad" || fail "'${case%%|*}': expected '${case#*|}', got: $bad"
done
[[ ! -e $work/never ]] || fail "a refused command wrote its output"
echo "ok: validate wrote the report, tables and plots; a missing file is named; generation options without a generator are refused; bad option values are named"
