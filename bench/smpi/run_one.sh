#!/bin/bash
# run_one.sh N [mw options...]: one simulation; prints the RESULT line plus real time (s) and max RSS (MB).
N=$1; shift
P=daint-$N.xml; [ -f $P ] || python3 gen_platform.py $N >/dev/null
/usr/bin/time -f "REAL %e RSS_MB %M" -o /tmp/smpi-probe-time.$$ \
  smpirun -np $N -hostfile hosts-$N.txt -platform $P \
    --cfg=smpi/privatization:${PRIV:-no} --cfg=smpi/simulate-computation:no \
    --cfg=smpi/bw-factor:0:0.94 --cfg=smpi/lat-factor:0:1 \
    --log=root.thres:warning ${SMPIRUN_EXTRA} ./mw "$@" > /tmp/smpi-probe-out.$$ 2>&1
rc=$?
res=$(grep '^RESULT' /tmp/smpi-probe-out.$$)
t=$(awk '/^REAL/{printf "real_s=%s rss_mb=%.0f", $2, $4/1024}' /tmp/smpi-probe-time.$$)
if [ -z "$res" ]; then echo "FAILED rc=$rc N=$N $*"; tail -5 /tmp/smpi-probe-out.$$; else echo "$res $t"; fi
rm -f /tmp/smpi-probe-out.$$ /tmp/smpi-probe-time.$$
