#!/bin/bash
# run_all.sh: the flat and tree sweeps at 16..1024 ranks; appends to results.txt.
cd "$(dirname "$0")"
out=${OUT:-results.txt}
run() { ./memwatch.sh ./run_one.sh "$@" | tr '\n' ' ' | sed 's/ $/\n/' | tee -a $out; }
run 2
for n in 16 64 256 1024; do
  k=$(( n <= 16 ? 2 : n <= 64 ? 4 : n <= 256 ? 8 : 16 ))
  run $n
  run $n --mode tree --subs $k --every 1
  run $n --mode tree --subs $k --every 4
done
run 256 --mode tree --subs 8 --every 2
run 1024 --mode tree --subs 16 --every 8
run 1024 --mode tree --subs 32 --every 8
