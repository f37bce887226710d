#!/bin/bash
# run_all_mpigan.sh: the sweep behind results-mpigan.csv and docs/figures/smpi-speedup.png
# (docs/sandbox.md, "Scale"): the real masters with virtual workers at 3-1 024 workers, flat and
# with sub-masters (one per 32 workers), at a V100-like 1.64 s step for every rule and at a 0.25 s
# step (a master-bound stress) for downpour. Then: python3 plot_mpigan.py.
cd "$(dirname "$0")"
out=${OUT:-results-mpigan.csv}
./run_mpigan.sh --header > $out
V100=lognormal:1.64,0.05 FAST=lognormal:0.25,0.05
for n in 3 4 16 64 128 256 512 1024; do
  for rule in downpour easgd gem dc_asgd sync; do ./run_mpigan.sh $rule $n 1 1 $V100 | tee -a $out; done
  [ $n -lt 16 ] && continue  # 3 and 4: the staleness study's N, for its time to quality
  ./run_mpigan.sh downpour $n 1 1 $FAST | tee -a $out
  [ $n -lt 64 ] && continue
  k=$((n / 32 + 1))
  for rule in downpour easgd gem; do ./run_mpigan.sh $rule $n $k 4 $V100 | tee -a $out; done
  for e in 1 8; do ./run_mpigan.sh downpour $n $k $e $FAST | tee -a $out; done
done
