#!/usr/bin/env bash
# The sanitizer run of CI: configures and builds the asan preset (AddressSanitizer with LeakSanitizer,
# and UndefinedBehaviorSanitizer; CPU only; warnings as errors) in build-asan/, then runs the unit and
# MPI suites there. Every finding fails the run; the only exceptions are the third-party ones listed,
# each with its reason, in tests/sanitizers/*.supp. Needs the packages of scripts/setup.sh.
#
#   scripts/sanitize.sh [more ctest arguments, e.g. -R data]
#
# Environment: MPIGAN_JOBS (parallel build jobs; default: number of cores).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${MPIGAN_JOBS:-$(nproc)}
supp="$root/tests/sanitizers"

echo "== sanitize: configuring and building build-asan with $jobs jobs"
# The asan preset leaves out one UBSan check, -fsanitize=alignment: it alone nearly doubles the
# compile of every batch (algos/: 16.2 s with it, 9.6 s without, 9.4 s without UBSan at all) for
# the least of UBSan's findings here. mpigan's typed views of raw memory are the dropout masks
# (uint32 over float tensors) and the doorbells (uint32 in a float segment), 4-byte aligned by
# construction, and x86-64 loads misaligned data correctly; the other checks stay.
# The suites need no benchmarks; -O1 -g1 (line tables, no variable info) compiles in about half
# the time of -O2 -g and keeps file:line in every sanitizer report; a unity build (batches of 16
# sources) takes about 40 % less again.
cmake --preset asan -DMPIGAN_WERROR=ON -DMPIGAN_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD=ON \
  -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" >/dev/null
t0=$SECONDS
cmake --build --preset asan -j "$jobs"
echo "== sanitize: build took $((SECONDS - t0)) s"

export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# The serial suites two at a time (each is one process); the MPI suites one at a time, as in
# scripts/test.sh: they oversubscribe the cores already.
echo "== sanitize: ctest -L unit -j2"
ctest --test-dir build-asan -L unit -j2 --output-on-failure "$@"
echo "== sanitize: ctest -L mpi"
ctest --test-dir build-asan -L mpi --output-on-failure "$@"
