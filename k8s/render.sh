#!/usr/bin/env bash
# k8s/mpijob.yaml for a cluster, without Helm: N workers, the image, the experiment file (as the
# ConfigMap the job mounts) and the job's name. Prints the ConfigMap and the MPIJob on stdout.
#
#   k8s/render.sh --workers N --image IMAGE --experiment FILE [--name NAME] > job.yaml
#   kubectl apply -f k8s/storage.yaml   # once: the data and runs volumes
#   kubectl apply -f job.yaml
#
# The job has N + 1 ranks: the top master on the launcher pod, one worker per Worker pod, one GPU
# each. The run directory is /runs/NAME on the runs volume; applying the same job again after it
# stopped resumes it there.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
workers="" image="" experiment="" name=mpigan
die() {
  echo "render.sh: $*" >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --workers) workers=${2:-}; shift 2 ;;
    --image) image=${2:-}; shift 2 ;;
    --experiment) experiment=${2:-}; shift 2 ;;
    --name) name=${2:-}; shift 2 ;;
    -h | --help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $workers =~ ^[1-9][0-9]*$ ]] || die "--workers: a whole number >= 1, got '$workers'"
[[ -n $image && $image != *[[:space:]]* ]] || die "--image: an image reference without spaces, got '$image'"
[[ -f $experiment ]] || die "--experiment: no such file '$experiment'"
# A Kubernetes object name (RFC 1123 label: the operator names pods and services after it).
[[ $name =~ ^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$ ]] ||
  die "--name: lower-case letters, digits and '-', at most 40, starting and ending alphanumeric; got '$name'"
grep -q $'\t' "$experiment" && die "--experiment: '$experiment' holds a tab, which YAML does not allow for indentation"

cat <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: $name-experiment
  labels:
    app.kubernetes.io/name: mpigan
data:
  experiment.yaml: |
YAML
sed 's/^/    /' "$experiment"
echo "---"
# The template with its marked values replaced; comments before the object are dropped.
sed -n '/^apiVersion:/,$p' "$here/mpijob.yaml" |
  sed -E -e "s|^(\s*)image: \S+  # set: the image$|\1image: $image|" \
    -e "s|^(\s*)replicas: [0-9]+  # set: N.*$|\1replicas: $workers|" \
    -e "0,/^  name: mpigan$/s//  name: $name/" \
    -e "s|name: mpigan-experiment$|name: $name-experiment|" \
    -e "s|run=/runs/mpigan;|run=/runs/$name;|"
