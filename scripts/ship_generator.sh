#!/usr/bin/env bash
# Ships a trained generator with mpigan: generators/NAME/ laid out as a run directory (config.yaml,
# checkpoints/latest, the checkpoint), validated against Monte Carlo of another seed than its
# training data (validation/, validation.json with a one-line summary that `mpigan generate --list`
# prints, targets.txt), and PROVENANCE.md (the experiment, the commit, the commands).
#
#   scripts/ship_generator.sh RUN_DIR CHECKPOINT NAME REFERENCE.h5 "TRAINING COMMAND"
#
# CHECKPOINT: a file of RUN_DIR/checkpoints (best.h5: the generator of the best figure of merit).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ $# -eq 5 ]] || { sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
run=$1 ckpt=$2 name=$3 ref=$4 command=$5
mpigan=${MPIGAN:-$root/build/apps/mpigan}
[[ -f $run/config.yaml && -f $run/checkpoints/$ckpt ]] || { echo "ship: $run/config.yaml or $run/checkpoints/$ckpt missing" >&2; exit 2; }
cd "$root"
dest=generators/$name
rm -rf "$dest"
mkdir -p "$dest/checkpoints"
cp "$run/config.yaml" "$dest/config.yaml"
cp "$run/checkpoints/$ckpt" "$dest/checkpoints/$ckpt"
echo "$ckpt" > "$dest/checkpoints/latest"
[[ -f $run/metrics.csv ]] && cp "$run/metrics.csv" "$dest/metrics.csv"
"$mpigan" validate "$dest" --reference "$ref" --out "$dest/validation" > "$dest/validation.txt"
/usr/bin/python3 "$root/scripts/rung_targets.py" "$dest/validation" --json "$dest/targets.json" > "$dest/targets.txt"
rm -f "$dest/validation/generated.h5" "$dest/validation/events.csv"
/usr/bin/python3 - "$dest" "$ref" <<'PY'
import json, sys
dest, ref = sys.argv[1], sys.argv[2]
r = json.load(open(f"{dest}/validation/report.json"))
fom, c = r["figure_of_merit"], r.get("classifier", {})
bins = r["response"]["bins"]
sf = max(abs(b["linearity"]["ratio"] - 1) for b in bins)
res = max(abs(b["resolution"]["ratio"] - 1) for b in bins)
summary = (f"fpd_hlf {fom['value']:.3g} +- {fom.get('bootstrap_error', fom['error']):.2g}, "
           f"AUC {c.get('auc', float('nan')):.3f} +- {c.get('auc_error', float('nan')):.3f}, "
           f"sampling fraction off by up to {100 * sf:.1f} %, resolution by up to {100 * res:.0f} % "
           f"over the energy bins ({r['reference']['events']} showers of {ref.split('/')[-1]})")
json.dump({"summary": summary, "reference": ref, "figure_of_merit": fom, "classifier": c,
           "targets": json.load(open(f"{dest}/targets.json"))}, open(f"{dest}/validation.json", "w"), indent=1)
print(summary)
PY
commit=$(git -C "$root" rev-parse --short HEAD)
cat > "$dest/PROVENANCE.md" <<MD
# Generator $name

Trained by mpigan at commit $commit, from the run directory \`$run\` (checkpoint \`$ckpt\`):

\`\`\`sh
$command
\`\`\`

Validated against Monte Carlo of another seed than the training data:

\`\`\`sh
mpigan validate $name --reference $ref --out validation
scripts/rung_targets.py validation
\`\`\`

validation.json holds the summary, validation.txt and targets.txt what the two commands printed,
validation/ the report and plots, metrics.csv the training run's history.
MD
echo "shipped: $dest"
