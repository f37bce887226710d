#!/usr/bin/python3
"""Time 3DGAN training steps in PyTorch (the peer of `mpigan bench step`).

    /usr/bin/python3 bench/pytorch/bench_step.py --model 3dgan-25 --batch 16 --steps 20 --threads 2

Synthetic inputs are made once before timing, so only compute is measured. One step = one
generation in inference mode, two discriminator updates (real, fake) and two generator updates
(the reference Keras training step). Prints one line per step, then `peak_rss_mb=` (and on cuda
`peak_gpu_mem_mb=` over the whole run, `peak_gpu_mem_steps_mb=` over the timed steps alone) and,
as the last line, `samples_per_s=` = batch * steps / time of
the timed steps (warm-up excluded). See docs/performance-pytorch-peer.md.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gan3d  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=sorted(gan3d.SPECS), default="3dgan-25")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps before the timed ones")
    p.add_argument("--threads", type=int, default=os.cpu_count(),
                   help="torch.set_num_threads (default: all cores)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--tf32", action="store_true", help="allow TF32 matmul/conv on cuda")
    p.add_argument("--bf16", action="store_true", help="autocast the networks to bfloat16")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="store_true",
                   help="run 2 steps, assert finite losses and parameter counts")
    p.add_argument("--profile", metavar="N", type=int, default=0,
                   help="after timing, profile one step and print the top N ops by self GPU time (CPU time on cpu)")
    args = p.parse_args(argv)
    if args.batch < 1 or args.steps < 1 or args.warmup < 0 or args.threads < 1:
        p.error("--batch, --steps, --threads must be >= 1 and --warmup >= 0")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: this torch has no CUDA device")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.check:
        args.steps, args.warmup = 2, 0
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
        torch.backends.cudnn.benchmark = True

    spec = gan3d.SPECS[args.model]
    trainer = gan3d.Trainer(spec, device, bf16=args.bf16)
    gan3d.check_param_counts(spec, trainer.g, trainer.d)
    print(f"model={spec.name} batch={args.batch} steps={args.steps} warmup={args.warmup} "
          f"threads={torch.get_num_threads()} device={args.device} tf32={int(args.tf32)} "
          f"bf16={int(args.bf16)} torch={torch.__version__} "
          f"g_params={gan3d.n_params(trainer.g)} d_params={gan3d.n_params(trainer.d)}", flush=True)

    # Synthetic data, made once (a few distinct batches, cycled).
    gen = torch.Generator().manual_seed(args.seed + 1)
    batches = gan3d.make_batches(spec, args.batch, min(args.warmup + args.steps, 4), gen)
    batches = [gan3d.Batch(*(t.to(device) if t is not None else None for t in
                             (b.image, b.energy, b.ecal, b.angle))) for b in batches]

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    warmup_peak = 0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    total = 0.0
    times = []
    for i in range(args.warmup + args.steps):
        sync()
        t0 = time.perf_counter()
        losses = trainer.step(batches[i % len(batches)])
        sync()
        dt = time.perf_counter() - t0
        timed = i >= args.warmup
        if timed:
            total += dt
            times.append(dt)
        tag = "step" if timed else "warmup"
        if i == args.warmup - 1 and device.type == "cuda":
            # the warm-up's peak (cuDNN's benchmark searches), then the timed steps' own
            warmup_peak = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        if args.check:
            vals = {k: float(v) for k, v in losses.items()}
            for k, v in vals.items():
                assert math.isfinite(v), f"step {i}: loss {k} = {v}"
            extra = " " + " ".join(f"{k}={v:.4g}" for k, v in vals.items())
        else:
            extra = ""
        print(f"{tag} {i - args.warmup if timed else i}: {dt:.3f} s "
              f"({args.batch / dt:.2f} samples/s){extra}", flush=True)

    if args.profile:
        # On cuda: the kernels' own GPU time (what mpigan's `bench step --profile` compares with).
        from torch import profiler
        acts = [profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            acts.append(profiler.ProfilerActivity.CUDA)
        with profiler.profile(activities=acts) as prof:
            trainer.step(batches[0])
            sync()
        keys = ["self_device_time_total", "self_cuda_time_total"] if device.type == "cuda" else []
        for key in keys + ["self_cpu_time_total"]:
            try:
                print(prof.key_averages().table(sort_by=key, row_limit=args.profile))
                break
            except (AttributeError, KeyError, ValueError):
                continue

    if args.check:
        print(f"check ok: {spec.name} params G={gan3d.n_params(trainer.g)} "
              f"D={gan3d.n_params(trainer.d)}, losses finite")
    times.sort()
    print(f"step_time_s min={times[0]:.3f} median={times[len(times) // 2]:.3f} max={times[-1]:.3f} "
          f"(best-step samples/s {args.batch / times[0]:.3f})")
    print(f"peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
    if device.type == "cuda":
        steps_peak = torch.cuda.max_memory_allocated()
        print(f"peak_gpu_mem_mb={max(warmup_peak, steps_peak) / 2**20:.1f}")
        print(f"peak_gpu_mem_steps_mb={steps_peak / 2**20:.1f}")
    print(f"samples_per_s={args.batch * args.steps / total:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
