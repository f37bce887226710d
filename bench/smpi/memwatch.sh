#!/bin/bash
# memwatch.sh CMD...: runs CMD in the background and samples its process tree every 0.1 s;
# prints the peak RSS and PSS (shared pages counted once per process tree) in MB.
"$@" & pid=$!
desc() { local p=$1; echo $p; for c in $(pgrep -P $p); do desc $c; done; }
maxrss=0; maxpss=0
while kill -0 $pid 2>/dev/null; do
  rs=0; ps_=0
  for p in $(desc $pid); do
    [ -r /proc/$p/smaps_rollup ] || continue
    read r s < <(awk '/^Rss:/{r=$2}/^Pss:/{p=$2}END{print r+0, p+0}' /proc/$p/smaps_rollup 2>/dev/null)
    rs=$((rs + ${r:-0})); ps_=$((ps_ + ${s:-0}))
  done
  [ $rs -gt $maxrss ] && maxrss=$rs; [ $ps_ -gt $maxpss ] && maxpss=$ps_
  sleep 0.1
done
wait $pid
echo "MEM peak_rss_mb=$((maxrss/1024)) peak_pss_mb=$((maxpss/1024))"
