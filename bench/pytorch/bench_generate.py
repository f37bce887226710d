#!/usr/bin/python3
"""Time 3DGAN shower generation in PyTorch (the peer of `mpigan bench generate`).

    /usr/bin/python3 bench/pytorch/bench_generate.py --model 3dgan-25 --batch 128 --batches 4 --threads 2
    /usr/bin/python3 bench/pytorch/bench_generate.py --device cuda --tf32 --batch 1024

The generator of bench/pytorch/gan3d.py (the same network as mpigan's) in eval mode under
torch.no_grad(): per batch, the latent (E/100 times Gaussian noise; for the angle model
[E, angle, noise]) and the forward pass, then the inverse preprocessing mpigan's `generate`
applies (clamp at 0, cells^(1/power), / xscale). On cuda the showers end in host memory, as
`mpigan generate`'s do (the copy is timed and is the batch's synchronisation). Prints one line per
batch, `peak_rss_mb=` (and on cuda `peak_gpu_mem_mb=` over the run, `peak_gpu_mem_steps_mb=` over
the timed batches) and, last, `showers_per_s=` over the timed
batches (warm-up excluded).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gan3d  # noqa: E402

# Inverse preprocessing of the two models (data/preprocess.hpp): xscale and cell power.
POST = {"3dgan-25": (100.0, 1.0), "anglegan-51": (1.0, 0.85), "3dgan-5": (100.0, 1.0)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=sorted(gan3d.SPECS), default="3dgan-25")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--batches", type=int, default=4, help="timed batches")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bf16", action="store_true", help="autocast the generator to bfloat16")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--tf32", action="store_true", help="allow TF32 convolutions and matmuls (cuda)")
    a = p.parse_args(argv)
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: this torch has no CUDA device")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
        torch.backends.cudnn.benchmark = True
    spec = gan3d.SPECS[a.model]
    g = spec.make_g().to(dev)
    g.eval()
    xscale, power = POST[a.model]
    print(f"model={a.model} batch={a.batch} batches={a.batches} threads={a.threads} bf16={int(a.bf16)} "
          f"device={a.device} tf32={int(a.tf32)} torch={torch.__version__}")

    def one_batch() -> torch.Tensor:
        n = a.batch
        energy = torch.rand(n, 1, device=dev) * 4.9 + 0.1  # E/100 for 10..500 GeV
        if spec.angle:
            angle = torch.rand(n, 1, device=dev) * 1.0 + 1.07
            z = torch.cat([energy, angle, torch.randn(n, g.latent - 2, device=dev)], dim=1)
        else:
            z = energy * torch.randn(n, g.latent, device=dev)
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.bf16):
            img = g(z).float().clamp_min(0.0)
            if power != 1.0:
                img = img.pow(1.0 / power)
            return (img / xscale).cpu()

    for w in range(a.warmup):
        t0 = time.perf_counter()
        one_batch()
        print(f"warmup {w}: {time.perf_counter() - t0:.3f} s")
    warmup_peak = 0
    if dev.type == "cuda":
        warmup_peak = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    total = 0.0
    for b in range(a.batches):
        t0 = time.perf_counter()
        out = one_batch()
        dt = time.perf_counter() - t0
        total += dt
        print(f"batch {b}: {dt:.3f} s  mean cell {out.mean().item():.3e}")
    print(f"peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
    if dev.type == "cuda":
        steps_peak = torch.cuda.max_memory_allocated()
        print(f"peak_gpu_mem_mb={max(warmup_peak, steps_peak) / 2**20:.1f}")
        print(f"peak_gpu_mem_steps_mb={steps_peak / 2**20:.1f}")
    print(f"showers_per_s={a.batch * a.batches / total:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
