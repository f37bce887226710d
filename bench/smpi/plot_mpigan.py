#!/usr/bin/python3
"""Speed-up against workers from results-mpigan.csv (run_all_mpigan.sh): the real masters of mpigan
under SMPI with virtual workers, flat and with sub-masters, next to the published 3DGAN scaling.

    /usr/bin/python3 plot_mpigan.py [results-mpigan.csv] [out.png]

Speed-up = N x (throughput in the middle half of the run) / (N x batch / mean step): the workers'
equivalent of a perfectly served single worker. The master's bound: a flat master serves one
update in t_serve seconds (receive, apply, reply), so no more than step / t_serve workers can be
kept busy; t_serve is taken from the saturated flat run at the 0.25 s step.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

src = sys.argv[1] if len(sys.argv) > 1 else "results-mpigan.csv"
out = sys.argv[2] if len(sys.argv) > 2 else "../../docs/figures/smpi-speedup.png"
rows = list(csv.DictReader(open(src)))
for r in rows:
    for k in ("workers", "masters", "every"):
        r[k] = int(r[k])
    for k in ("mean_step_s", "mid_samples_per_s", "speedup", "efficiency"):
        r[k] = float(r[k])

# t_serve: the flat master at its busiest (the 0.25 s step at the largest N), in seconds per update.
fast_flat = [r for r in rows if r["masters"] == 1 and r["rule"] == "downpour" and r["mean_step_s"] < 1]
sat = max(fast_flat, key=lambda r: r["workers"]) if fast_flat else None
t_serve = 64 / sat["mid_samples_per_s"] if sat else None

fig, (ax, ay) = plt.subplots(1, 2, figsize=(14, 6.2))
ns = sorted({r["workers"] for r in rows})
ax.plot([1, max(ns)], [1, max(ns)], color="0.6", lw=1, ls=":", label="ideal")
ay.axhline(1.0, color="0.6", lw=1, ls=":")
ay.axhline(0.95, color="0.3", lw=0.8, ls=(0, (2, 2)))
ay.text(8.5, 0.955, "goal: 0.95 at 128 workers", fontsize=7, color="0.3")


def series(sel, **kw):
    pts = sorted((r["workers"], r["speedup"], r["efficiency"]) for r in rows if sel(r))
    if pts:
        marker = kw.pop("marker", "o")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, ms=4, **kw)
        kw.pop("label", None)
        ay.plot([p[0] for p in pts], [p[2] for p in pts], marker=marker, ms=4, **kw)


slow = lambda r: r["mean_step_s"] > 1  # noqa: E731
for rule, c in (("downpour", "C0"), ("easgd", "C1"), ("gem", "C2"), ("dc_asgd", "C4"), ("sync", "C3")):
    series(lambda r, rule=rule: slow(r) and r["rule"] == rule and r["masters"] == 1, color=c, lw=1.2,
           label=f"{rule}, flat (1.64 s step)")
    series(lambda r, rule=rule: slow(r) and r["rule"] == rule and r["masters"] > 1, color=c, lw=1.2, ls="--",
           marker="s", label=f"{rule}, sub-masters every 4 (1.64 s)")
series(lambda r: not slow(r) and r["masters"] == 1, color="k", lw=1.5, label="downpour, flat (0.25 s step)")
for e, ls in ((1, "--"), (8, "-.")):
    series(lambda r, e=e: not slow(r) and r["masters"] > 1 and r["every"] == e, color="k", lw=1.2, ls=ls, marker="s",
           label=f"downpour, sub-masters every {e} (0.25 s)")
if t_serve:
    for step, c in ((1.6421, "C0"), (0.2503, "k")):
        b = step / t_serve
        ax.axhline(b, color=c, lw=0.8, ls=(0, (6, 3)), alpha=0.7)
        ax.text(max(ns), b * 1.07, f"flat master's bound, {step:.2f} s step: {b:.0f} ({t_serve * 1e3:.2f} ms/update)",
                fontsize=7, color=c, ha="right")
# Published 3DGAN scaling (docs/sandbox.md): mpi-learn on Piz Daint/Titan, Horovod, the cloud runs.
for a, y in ((ax, lambda n, e: n * e), (ay, lambda n, e: e)):
    lab = a is ax
    a.plot([20, 100], [y(20, 0.5), y(100, 0.2)], "v", color="C5", ms=8,
           label="mpi-learn 3DGAN, reported (~N/2 at 20, 20x at 100)" if lab else None)
    a.plot([12], [y(12, 0.989)], "^", color="C6", ms=8, label="Horovod 3DGAN, 12 GPUs (98.9 %)" if lab else None)
    a.plot([64, 128], [y(64, 0.94), y(128, 0.80)], "D", color="C8", ms=6,
           label="cloud 3DGAN, 64 / 128 V100 (94 %, ~80 %)" if lab else None)
ax.set_xscale("log", base=2)
ax.set_yscale("log", base=2)
ax.set_xlabel("workers (one GPU each)")
ax.set_ylabel("speed-up (workers kept busy)")
ax.set_title("speed-up")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=6.5, loc="upper left")
ay.set_xscale("log", base=2)
ay.set_ylim(0, 1.08)
ay.set_xlabel("workers (one GPU each)")
ay.set_ylabel("efficiency (speed-up / workers)")
ay.set_title("efficiency")
ay.grid(True, which="both", alpha=0.3)
fig.suptitle("mpigan's real masters under SimGrid SMPI with virtual workers: 3dgan-25 payload (3.8 MB each way), "
             "Piz Daint-like platform (10 GB/s)", fontsize=10)
fig.tight_layout()
fig.savefig(out, dpi=130)
print(f"wrote {out}; t_serve {t_serve * 1e3 if t_serve else float('nan'):.3f} ms")
