#!/usr/bin/env python3
"""Plots of a hyper-parameter search (mpigan optimize; docs/hpo.md), from SEARCH_DIR/trials.jsonl.

  search_fom.png     the objective of every trial against its number, with the best so far
  search_params.png  the objective against each searched parameter (log axes for log dimensions)

Failed trials are drawn as crosses at the top of each panel, pruned ones hollow.

  python3 scripts/plot_search.py SEARCH_DIR
"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_records(path):
    """The records of a search's trials.jsonl in file order. A torn last line (a search killed
    while appending it; docs/hpo.md) is skipped with a warning; any other line that is not JSON is
    an error naming it."""
    with open(path) as f:
        lines = f.read().split("\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            if i != last:
                raise SystemExit(f"{path}:{i + 1}: not JSON: {err}")
            print(f"{path}:{i + 1}: torn last line skipped", file=sys.stderr)
    return records


def load(search_dir):
    with open(f"{search_dir}/search.json") as f:
        header = json.load(f)
    trials = {r["trial"]: r for r in read_records(f"{search_dir}/trials.jsonl")}
    return header, [trials[k] for k in sorted(trials)]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    header, trials = load(d)
    metric, minimize = header["objective"], header["mode"] == "min"
    done = [t for t in trials if t["status"] in ("done", "pruned") and t["value"] is not None]
    failed = [t for t in trials if t["status"] == "failed"]
    if not done:
        print(f"plot_search: no finished trial in {d}")
        return
    values = [t["value"] for t in done]
    positive = all(v > 0 for v in values)
    top = max(values) if minimize else min(values)

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for status, style in (("done", dict(color="C0")), ("pruned", dict(facecolors="none", edgecolors="C1"))):
        pts = [t for t in done if t["status"] == status]
        if pts:
            ax.scatter([t["trial"] for t in pts], [t["value"] for t in pts], label=status, zorder=3, **style)
            for t in pts:
                if t.get("spread", 0) > 0:
                    ax.errorbar(t["trial"], t["value"], yerr=t["spread"], color="C0", alpha=0.5, zorder=2)
    if failed:
        ax.scatter([t["trial"] for t in failed], [top] * len(failed), marker="x", color="C3", label="failed", zorder=3)
    best, xs, ys = None, [], []
    for t in sorted(done, key=lambda t: t["trial"]):
        if t["status"] != "done":
            continue
        if best is None or (t["value"] < best if minimize else t["value"] > best):
            best = t["value"]
        xs.append(t["trial"])
        ys.append(best)
    if xs:
        ax.step(xs, ys, where="post", color="k", label="best so far")
    if positive and max(values) / min(values) > 30:
        ax.set_yscale("log")
    ax.set_xlabel("trial")
    ax.set_ylabel(metric)
    ax.set_title(f"{header['algorithm']} search: {metric} ({header['mode']}), "
                 f"{header['folds']} fold(s), blocks of {header['block_size']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{d}/search_fom.png", dpi=110)

    dims = header["dimensions"]
    n = len(dims)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for i, dim in enumerate(dims):
        ax = axes[i // cols][i % cols]
        cat = dim["type"] == "categorical"
        def coord(t):
            return t["x"][i]
        ax.scatter([coord(t) for t in done], values, c=[t["trial"] for t in done], cmap="viridis", zorder=3)
        if failed:
            ax.scatter([coord(t) for t in failed], [top] * len(failed), marker="x", color="C3", zorder=3)
        if cat:
            ax.set_xticks(range(len(dim["choices"])))
            ax.set_xticklabels(dim["choices"])
            ax.set_xlim(-0.5, len(dim["choices"]) - 0.5)
        elif dim["type"].startswith("log"):
            ax.set_xscale("log")
            ax.set_xlim(dim["low"] / 1.2, dim["high"] * 1.2)  # the searched range
        else:
            pad = 0.04 * (dim["high"] - dim["low"]) or 0.5
            ax.set_xlim(dim["low"] - pad, dim["high"] + pad)
        if positive and max(values) / min(values) > 30:
            ax.set_yscale("log")
        ax.set_xlabel(dim["key"])
        ax.set_ylabel(metric)
    for j in range(n, rows * cols):
        axes[j // cols][j % cols].axis("off")
    fig.suptitle(f"{metric} against each parameter (colour: trial number)")
    fig.tight_layout()
    fig.savefig(f"{d}/search_params.png", dpi=110)


if __name__ == "__main__":
    main()
