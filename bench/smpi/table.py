#!/usr/bin/env python3
"""Speed-up and efficiency from results.txt (RESULT lines of run_all.sh / run_one.sh)."""
import re, sys
rows = []
for line in open(sys.argv[1] if len(sys.argv) > 1 else "results.txt"):
    if not line.startswith("RESULT"):
        continue
    kv = dict(re.findall(r"(\w+)=([^\s]+)", line))
    rows.append(kv)
base = next(float(r["updates_per_s"]) for r in rows if r["ranks"] == "2" and r["mode"] == "flat")
print(f"baseline: 1 worker = {base:.3f} updates/s ({1/base:.4f} s per update)")
print(f"{'ranks':>5} {'mode':>5} {'subs':>4} {'every':>5} {'workers':>7} {'U':>6} {'upd/s':>9} {'speed-up':>8} "
      f"{'eff/wrk':>7} {'eff/rnk':>7} {'busy':>5} {'sim_s':>7} {'real_s':>7} {'pss_MB':>6}")
for r in rows:
    u = float(r["updates_per_s"]); s = u / base; w = int(r["workers"]); n = int(r["ranks"])
    print(f"{n:>5} {r['mode']:>5} {r['subs']:>4} {r['every']:>5} {w:>7} {r['U']:>6} {u:>9.1f} {s:>8.1f} "
          f"{100*s/w:>6.1f}% {100*s/(n-1):>6.1f}% {float(r['master_busy_frac']):>5.2f} {float(r['t_end']):>7.2f} "
          f"{r['real_s']:>7} {r.get('peak_pss_mb','-'):>6}")
