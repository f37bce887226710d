#!/usr/bin/env bash
# The whole test suite, from nothing: installs what is missing (MPICH, Slurm for the srun tests),
# builds everything (the CUDA backend too when a CUDA toolkit is present), and runs ctest.
# GPU tests print "SKIPPED: no GPU" where no device is visible; Slurm tests need root to start
# munged/slurmctld/slurmd on this host and are skipped (with a message) otherwise.
#
#   scripts/test.sh [ctest arguments, e.g. -L unit or -R data; -L scale: the 64-rank scale test]
#
# Environment: MPIGAN_WERROR=ON builds with warnings as errors (CI does).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
werror=()
[[ ${MPIGAN_WERROR:-OFF} == ON ]] && werror=(--werror)
scripts/setup.sh --with-slurm "${werror[@]}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
if (($#)); then
  ctest --test-dir build --output-on-failure --timeout 1500 "$@"
  exit
fi
# Without arguments: everything but the 64-rank scale test (label scale, ~5 min on 2 cores) and the
# container nodes (label container: it builds the image, ~15 min; `scripts/test.sh -L container`). The
# serial suites (label unit: each one process) two at a time, then the rest one at a time: the MPI
# and Slurm jobs oversubscribe the cores already.
rc=0
ctest --test-dir build --output-on-failure --timeout 1500 -L unit -j2 || rc=$?
ctest --test-dir build --output-on-failure --timeout 1500 -LE 'unit|scale|container' || rc=$?
exit "$rc"
