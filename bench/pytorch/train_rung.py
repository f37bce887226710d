#!/usr/bin/python3
"""Train mpigan's 3dgan-5 rung in PyTorch with mpigan's recipe (the peer of `mpigan train
examples/3dgan-5.yaml`), writing generated showers at given sample counts for `mpigan validate`.

    /usr/bin/python3 bench/pytorch/train_rung.py --seed 1 --snapshots 100000,200000,400000 \\
        --out runs/torch-rung5-s1 --threads 1

What it reproduces (docs/performance-pytorch-peer.md, "train_rung.py"):

* models: gan3d.Ecal5Generator / Ecal5Discriminator = models/gan_model.cpp build_3dgan_5;
* data: the sorted *.h5 of --data-dir; the last round(validation_fraction * files) files held out
  (data/dataset.cpp, split: files), the others trained on; preprocessing of the fixed-angle model
  (data/preprocess.cpp): cells < 1e-6 GeV -> 0, x 100, ECAL-sum target = sum of the preprocessed
  cells, energy target = E * 0.01; one permutation of the training events per epoch, full batches
  only (drop_last, train/sources.cpp); the run stops after ceil(max_samples / batch) steps;
* the step: models/gan_step.cpp GanStep::run (see RungStep.run);
* optimizers: Keras/mpigan RMSprop and Adam (nn/optimizer.hpp), one for D, one for G;
* generation: G in eval mode, one shower per held-out event at its energy, clamp at 0, / xscale.

Settings: read from the experiment YAML (--config, default examples/3dgan-5.yaml; PyYAML when
importable, else a small parser for the subset those files use); every command-line flag given
overrides the YAML; what neither gives takes mpigan's default. The resolved values are printed and
written to OUT/config.json.
"""

from __future__ import annotations

import argparse
import copy
import glob
import json
import math
import os
import sys
import time

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import gan3d  # noqa: E402

MODEL = "3dgan-5"
GEN_SEED = 0x9B15C5   # mpigan's physics-validation seed (train/physics_monitor.cpp), mixed with --seed


# --------------------------------------------------------------------------------------------
# Experiment YAML
# --------------------------------------------------------------------------------------------
def _scalar(text: str):
    t = text.strip()
    if t.startswith("[") and t.endswith("]"):
        return [_scalar(x) for x in t[1:-1].split(",") if x.strip()]
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "~", ""):
        return None
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    return t


def tiny_yaml(text: str) -> dict:
    """Block mappings by indentation, scalars, flow lists [a, b], # comments: the subset of the
    examples/*.yaml experiment files (no block lists, anchors or multi-line strings)."""
    root: dict = {}
    stack = [(-1, root)]
    for raw in text.splitlines():
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, sep, value = line.strip().partition(":")
        if not sep:
            raise ValueError(f"tiny_yaml: cannot read line {raw!r}")
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if value.strip() == "":
            parent[key] = {}
            stack.append((indent, parent[key]))
        else:
            parent[key] = _scalar(value)
    return root


def load_yaml(path: str) -> dict:
    with open(path) as f:
        text = f.read()
    try:
        import yaml  # type: ignore
        return yaml.safe_load(text) or {}
    except ImportError:
        return tiny_yaml(text)


def _get(d: dict, dotted: str, default=None):
    for k in dotted.split("."):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def resolve_settings(args, y: dict) -> dict:
    """The recipe: flag if given, else the YAML's value, else mpigan's default."""
    def pick(flag, key, default):
        v = getattr(args, flag)
        if v is not None:
            return v, "flag"
        v = _get(y, key)
        if v is not None:
            return v, "yaml"
        return default, "default"

    if _get(y, "model.name", MODEL) != MODEL:
        raise SystemExit(f"train_rung.py trains {MODEL}; the YAML's model.name is {_get(y, 'model.name')}")
    for sub in ("generator", "discriminator"):
        if _get(y, f"optimizer.{sub}") is not None:
            raise SystemExit(f"optimizer.{sub}: per-network optimizer settings are not supported here")
    s, src = {}, {}
    table = [  # name, flag, yaml key, mpigan default
        ("seed", "seed", "seed", 1),
        ("batch", "batch", "training.batch", 128),
        ("max_samples", "max_samples", "training.max_samples", 0),
        ("epochs", "epochs", "training.epochs", 1),
        ("optimizer", "optimizer", "optimizer.name", "rmsprop"),
        ("lr", "lr", "optimizer.lr", 1e-3),
        ("rho", "rho", "optimizer.rho", 0.9),
        ("beta1", "beta1", "optimizer.beta1", 0.9),
        ("beta2", "beta2", "optimizer.beta2", 0.999),
        ("epsilon", "epsilon", "optimizer.epsilon", 1e-7),
        ("label_flip", "label_flip", "training.label_flip", 0.05),
        ("fake_energy", "fake_energy", "training.fake_energy", [0.1, 5.0]),
        ("generator_passes", "generator_passes", "training.generator_passes", 2),
        ("ecal_fit", "ecal_fit", "training.ecal_fit", list(gan3d.REFERENCE_ECAL_FIT)),
        ("validation_fraction", "validation_fraction", "data.validation_fraction", 0.0),
        ("threshold", "threshold", "data.preprocess.threshold", 1e-6),
        ("xscale", "xscale", "data.preprocess.xscale", 100.0),
        ("power", "power", "data.preprocess.power", 0.5),        # 3dgan-5's default
        ("schedule", "schedule", "optimizer.schedule", "constant"),
        ("noise", "noise", "model.noise", "normal"),
        ("normalise_energy", "normalise_energy", "training.normalise_energy", False),
        ("condition", "condition", "model.condition", False),
        ("hlf_head", "hlf_head", "model.hlf_head", False),
        ("hlf_lr_scale", "hlf_lr_scale", "model.hlf_lr_scale", 1.0),
        ("input", "input", "model.input", "product"),
        ("generator_width", "generator_width", "model.generator_width", 1),
        ("ecal_mean_bins", "ecal_mean_bins", "training.ecal_mean_bins", 0),
        ("hlf_mmd", "hlf_mmd", "training.hlf_mmd", 0.0),
        ("response_mmd", "response_mmd", "training.response_mmd", 0.0),
        ("longitudinal_mmd", "longitudinal_mmd", "training.longitudinal_mmd", 0.0),
        ("transverse_mmd", "transverse_mmd", "training.transverse_mmd", 0.0),
        ("mmd_scale", "mmd_scale", "training.mmd_scale", "batch"),
        ("response_spread", "response_spread", "training.response_spread", 0.0),
        ("final_fraction", "final_fraction", "optimizer.final_fraction", 0.1),
        ("dropout", "dropout", "model.dropout", 0.2),
        ("log_every", "log_every", "logging.every", 10),
    ]
    for name, flag, key, default in table:
        s[name], src[name] = pick(flag, key, default)
    lw = _get(y, "model.loss_weights") or {}
    s["loss_weights"] = [float(lw.get("bce", 2.0)), float(lw.get("energy", 0.1)), float(lw.get("ecal", 0.1))]
    s["loss_weights"].append(float(lw.get("hlf", s["loss_weights"][0])))   # the hlf head's BCE: bce's
    src["loss_weights"] = "yaml" if lw else "default"
    for k in ("normalise_energy", "condition", "hlf_head"):
        if isinstance(s[k], str):
            s[k] = s[k].lower() == "true"
    if _get(y, "training.discriminator_fakes", "inference") != "inference":
        raise SystemExit("training.discriminator_fakes: the PyTorch peer draws D's fakes in eval mode (inference) only")
    for k in ("latent", "leaky_alpha", "bn_momentum"):
        if _get(y, f"model.{k}") is not None:
            raise SystemExit(f"model.{k} in the YAML: the PyTorch model has the defaults only")
    s["ecal_fit"] = [float(c) for c in s["ecal_fit"]]
    s["fake_energy"] = [float(c) for c in s["fake_energy"]]
    if len(s["ecal_fit"]) != 5 or len(s["fake_energy"]) != 2:
        raise SystemExit("ecal_fit needs 5 coefficients, fake_energy 2 values")
    if s["hlf_head"] and not s["condition"]:
        raise SystemExit("model.hlf_head needs model.condition (as in mpigan)")
    s["hlf_lr_scale"] = float(s["hlf_lr_scale"])
    s["generator_width"] = int(s["generator_width"])
    if s["generator_width"] < 1:
        raise SystemExit("model.generator_width is an integer >= 1 (as in mpigan)")
    for k in ("hlf_mmd", "response_mmd", "longitudinal_mmd", "transverse_mmd", "response_spread"):
        s[k] = float(s[k])
        if s[k] < 0.0 or (s[k] > 0.0 and not s["condition"]):
            raise SystemExit(f"training.{k} is a weight >= 0 and needs model.condition (as in mpigan)")
    if s["mmd_scale"] not in ("batch", "energy"):
        raise SystemExit(f"training.mmd_scale: batch or energy, got {s['mmd_scale']}")
    if s["hlf_lr_scale"] != 1.0 and not s["hlf_head"]:
        raise SystemExit("model.hlf_lr_scale needs model.hlf_head (as in mpigan)")
    if s["optimizer"] not in ("rmsprop", "adam"):
        raise SystemExit(f"optimizer {s['optimizer']}: rmsprop or adam")
    data_dir = args.data_dir
    if data_dir is None:
        train = _get(y, "data.train", "runs/rung5-data/*.h5")
        data_dir = os.path.dirname(train[0] if isinstance(train, list) else train)
        src["data_dir"] = "yaml"
    else:
        src["data_dir"] = "flag"
    s["data_dir"] = data_dir
    return s, src


# --------------------------------------------------------------------------------------------
# Keras / mpigan optimizers (nn/optimizer.hpp)
# --------------------------------------------------------------------------------------------
class KerasAdam(torch.optim.Optimizer):
    """t += 1; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
    w -= lr sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)  -- eps outside the bias correction
    (torch.optim.Adam adds eps to sqrt(v)/sqrt(1-b2^t) instead)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-7):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["m"] = torch.zeros_like(p)
                    st["v"] = torch.zeros_like(p)
                st["step"] += 1
                t = st["step"]
                lr_t = group["lr"] * math.sqrt(1.0 - b2 ** t) / (1.0 - b1 ** t)
                g = p.grad
                st["m"].mul_(b1).add_(g, alpha=1.0 - b1)
                st["v"].mul_(b2).addcmul_(g, g, value=1.0 - b2)
                p.addcdiv_(st["m"], st["v"].sqrt().add_(group["eps"]), value=-float(np.float32(lr_t)))


def make_optimizer(params, s: dict) -> torch.optim.Optimizer:
    if s["optimizer"] == "rmsprop":
        # torch: ms = a ms + (1-a) g^2; w -= lr g / (sqrt(ms) + eps) -- Keras' formula
        return torch.optim.RMSprop(params, lr=s["lr"], alpha=s["rho"], eps=s["epsilon"])
    return KerasAdam(params, lr=s["lr"], betas=(s["beta1"], s["beta2"]), eps=s["epsilon"])


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------
def preprocess(raw: np.ndarray, energy_gev: np.ndarray, threshold: float, xscale: float, power: float = 1.0):
    """data/preprocess.cpp for the fixed-angle model (file units GeV): cells < threshold -> 0,
    cells * xscale; targets E * 0.01 and the sum of the preprocessed cells (double, rounded once);
    then cells ** power."""
    raw = raw.astype(np.float32, copy=False)
    x = np.where(raw < np.float32(threshold), np.float32(0.0), raw * np.float32(xscale)).astype(np.float32)
    n = x.shape[0]
    ecal = x.reshape(n, -1).astype(np.float64).sum(axis=1).astype(np.float32)
    if power != 1.0:
        x = np.power(x, np.float32(power), where=x > 0, out=np.zeros_like(x)).astype(np.float32)
    e = energy_gev.astype(np.float32) * np.float32(0.01)
    return x.reshape(n, 1, *x.shape[1:]), e.reshape(n, 1), ecal.reshape(n, 1)


def split_files(data_dir: str, validation_fraction: float):
    files = sorted(glob.glob(os.path.join(data_dir, "*.h5")))
    if not files:
        raise SystemExit(f"no *.h5 in {data_dir}")
    nval = 0
    if validation_fraction > 0:
        nval = max(1, int(math.floor(validation_fraction * len(files) + 0.5)))   # llround
        if nval >= len(files):
            raise SystemExit(f"validation_fraction {validation_fraction} leaves no training file")
    return files[:len(files) - nval], files[len(files) - nval:]


def read_files(files):
    ecal, energy = [], []
    for p in files:
        with h5py.File(p, "r") as f:
            ecal.append(np.asarray(f["ECAL"], dtype=np.float32))
            energy.append(np.asarray(f["energy"], dtype=np.float32).reshape(-1))
    return np.concatenate(ecal), np.concatenate(energy)


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    return np.random.default_rng([seed, epoch, 0x5EED]).permutation(n)


# --------------------------------------------------------------------------------------------
# The step: models/gan_step.cpp GanStep::run
# --------------------------------------------------------------------------------------------
def latent(energy: torch.Tensor, n: int, sphere: bool, gen: torch.Generator | None = None,
           concat: bool = False) -> torch.Tensor:
    """(E/100) * z, z ~ N(0, 1)^n, or with model.input concat [E/100, z], z ~ N(0, 1)^(n-1); z on the
    sphere of radius sqrt(its size) with model.noise sphere."""
    m = n - 1 if concat else n
    z = torch.randn(energy.shape[0], m, generator=gen)
    if sphere:
        z = z * (math.sqrt(m) / z.norm(dim=1, keepdim=True).clamp(min=1e-30))
    return torch.cat([energy, z], dim=1) if concat else energy * z


class RungStep:
    def __init__(self, g, d, opt_g, opt_d, s: dict):
        self.g, self.d, self.opt_g, self.opt_d = g, d, opt_g, opt_d
        self.w = s["loss_weights"]
        self.flip = float(s["label_flip"])
        self.lo, self.hi = s["fake_energy"]
        self.xscale = float(s["xscale"])
        self.coeffs = tuple(s["ecal_fit"])
        self.passes = int(s["generator_passes"])
        self.ecal_bins = int(s.get("ecal_mean_bins", 0))
        self.sphere = s["noise"] == "sphere"
        self.concat = s.get("input", "product") == "concat"
        self.normalise = bool(s["normalise_energy"])
        self.power = float(s["power"])
        self.mmd = float(s.get("hlf_mmd", 0.0))
        self.response_mmd = float(s.get("response_mmd", 0.0))
        self.longitudinal_mmd = float(s.get("longitudinal_mmd", 0.0))
        self.transverse_mmd = float(s.get("transverse_mmd", 0.0))
        self.mmd_by_energy = s.get("mmd_scale", "batch") == "energy"
        self.response_spread = float(s.get("response_spread", 0.0))
        self.hlf_head = bool(s.get("hlf_head", False))

    def losses(self, outs, label, energy, ecal):
        """Weighted total and the unweighted heads: BCE(real/fake), MAPE(E/100), MAPE(ECAL sum)[, BCE(hlf)]."""
        fake, aux, esum = outs[:3]
        ecal_loss = (gan3d.binned_mean_ratio(esum, ecal, energy, self.ecal_bins, self.lo, self.hi) if self.ecal_bins > 0
                     else gan3d.keras_mape(esum, ecal))
        heads = (gan3d.keras_bce(fake, label), gan3d.keras_mape(aux, energy), ecal_loss)
        if len(outs) > 3:
            heads += (gan3d.keras_bce(outs[3], label),)
        return sum(w * h for w, h in zip(self.w, heads)), heads

    def _features(self, image: torch.Tensor, energy: torch.Tensor) -> torch.Tensor:
        """training.hlf_mmd: the features of D's input (after _scaled), as the discriminator computes them."""
        cells = image if self.power == 1.0 else image.clamp(min=0.0).pow(1.0 / self.power)
        f = gan3d.shower_features(cells.double(), energy.double())
        if self.transverse_mmd > 0.0:   # training.transverse_mmd: nn::transverse_features after them
            f = torch.cat([f, gan3d.transverse_features(cells.double())], dim=1)
        return f

    def _flipped(self, value: float, n: int) -> torch.Tensor:
        t = torch.full((n, 1), value)
        return torch.where(torch.rand(n, 1) < self.flip, 1.0 - t, t)

    def _latent(self, energy: torch.Tensor) -> torch.Tensor:
        return latent(energy, self.g.latent, self.sphere, concat=self.concat)

    def _scaled(self, image: torch.Tensor, energy: torch.Tensor) -> torch.Tensor:
        """normalise_energy: the D input per unit primary energy, cells**power / (E/100)**power."""
        return image * energy.view(-1, 1, 1, 1, 1).pow(-self.power) if self.normalise else image

    def _ecal(self, ecal: torch.Tensor, energy: torch.Tensor) -> torch.Tensor:
        return ecal / energy if self.normalise else ecal

    @staticmethod
    def _check(v: torch.Tensor, step: int, net: str, phase: str):
        if not torch.isfinite(v):
            raise FloatingPointError(f"step {step}: the {net} loss is not finite ({v.item()}) in '{phase}'")

    def run(self, image, energy, ecal, step: int = 0) -> dict:
        g, d = self.g, self.d
        n = image.shape[0]
        # Conditions of the fake batch, drawn once: the D fake pass and every G pass use them.
        fake_e = torch.empty(n, 1).uniform_(self.lo, self.hi)
        fake_ecal = self._ecal(gan3d.ecal_fit(fake_e, self.xscale, self.coeffs), fake_e)
        # 1. fake batch from G in inference mode (BatchNorm running statistics)
        g.eval()
        with torch.no_grad():
            fake = g(self._latent(fake_e))
        g.train()
        d.train()
        # 2. D on real: labels 1 with flips; BN batch statistics, running statistics updated
        self.opt_d.zero_grad(set_to_none=True)
        d_real, d_real_heads = self.losses(d(self._scaled(image, energy), energy), self._flipped(1.0, n), energy,
                                self._ecal(ecal, energy))
        self._check(d_real, step, "discriminator", "D on real")
        d_real.backward()
        self.opt_d.step()
        # 3. D on fake: labels 0 with flips, targets the sampled E/100 and the ECAL fit
        self.opt_d.zero_grad(set_to_none=True)
        d_fake, d_fake_heads = self.losses(d(self._scaled(fake, fake_e), fake_e), self._flipped(0.0, n), fake_e,
                                           fake_ecal)
        self._check(d_fake, step, "discriminator", "D on fake")
        d_fake.backward()
        self.opt_d.step()
        # 4. G through D frozen (train mode: batch statistics, dropout; no weight or running-
        #    statistics change), fresh noise, same conditions, labels 1
        ones = torch.ones(n, 1)
        g_total = 0.0
        g_heads = {}  # unweighted, averaged over the passes, in the order of head_names()
        terms = []   # (weight, kernel scales): the features' MMD^2, and the energy's and response's alone
        spread = None  # training.response_spread: the real batch's curve, energies and residuals
        if (self.mmd > 0.0 or self.response_mmd > 0.0 or self.longitudinal_mmd > 0.0 or self.transverse_mmd > 0.0
                or self.response_spread > 0.0):
            with torch.no_grad():
                real_raw = self._features(self._scaled(image, energy), energy)
                fit = gan3d.EnergyStandardiser(real_raw)
                if self.response_spread > 0.0:
                    spread = (fit, real_raw[:, 0], fit.residual(real_raw))
                # training.mmd_scale energy: both sides in units of the real batch's spread at each energy
                standardise = fit.apply if self.mmd_by_energy else (lambda f: f)
                real_f = standardise(real_raw)
                scale = gan3d.mmd_scales(real_f)
            shower = list(range(2 + 5 * image.shape[4]))   # the shower features; transverse ones follow
            if self.mmd > 0.0:
                terms.append((self.mmd, gan3d.subset_scales(scale, shower)))
            if self.response_mmd > 0.0:   # the energy and the response alone
                terms.append((self.response_mmd, gan3d.subset_scales(scale, [0, 1])))
            if self.longitudinal_mmd > 0.0:   # and each layer's energy fraction (feature 2 + 5z)
                terms.append((self.longitudinal_mmd,
                              gan3d.subset_scales(scale, [0, 1] + list(range(2, len(shower), 5)))))
            if self.transverse_mmd > 0.0:   # and the columns' and rows' percentages of the sum
                terms.append((self.transverse_mmd,
                              gan3d.subset_scales(scale, [0, 1] + list(range(len(shower), scale.numel())))))
        with gan3d.frozen(d):
            for _ in range(self.passes):
                self.opt_g.zero_grad(set_to_none=True)
                shown = self._scaled(g(self._latent(fake_e)), fake_e)
                loss, heads = self.losses(d(shown, fake_e), ones, fake_e, fake_ecal)
                heads = list(heads)
                if terms or spread is not None:
                    fake_raw = self._features(shown, fake_e)
                    fake_f = standardise(fake_raw)
                    for w, sc in terms:
                        v = gan3d.mmd2_rq(fake_f, real_f, sc).float()
                        heads.append(v)
                        loss = loss + w * v
                    if spread is not None:
                        fit, x_real, r_real = spread
                        v = gan3d.binned_spread(fake_raw[:, 0], fit.residual(fake_raw), x_real, r_real).float()
                        heads.append(v)
                        loss = loss + self.response_spread * v
                for k, v in enumerate(heads):
                    g_heads[k] = g_heads.get(k, 0.0) + float(v) / self.passes
                self._check(loss, step, "generator", "G through frozen D")
                loss.backward()
                self.opt_g.step()
                g_total += loss.item() / self.passes
        heads = {}
        for k, name in enumerate(self.head_names()):
            # the feature terms are the generator's only: 0 in D's columns, as mpigan writes them
            on_d = k < len(d_real_heads)
            heads[f"d_real_{name}"] = float(d_real_heads[k]) if on_d else 0.0
            heads[f"d_fake_{name}"] = float(d_fake_heads[k]) if on_d else 0.0
            heads[f"g_{name}"] = g_heads[k]
        return {"d_real": d_real.item(), "d_fake": d_fake.item(), "g": g_total, "heads": heads}

    def head_names(self) -> list:
        """mpigan's loss names (GanStep::loss_names): the discriminator's heads, then the feature terms."""
        names = ["fake", "energy", "ecal"] + (["hlf"] if self.hlf_head else [])
        if self.mmd > 0.0:
            names.append("hlf_mmd")
        if self.response_mmd > 0.0:
            names.append("response_mmd")
        if self.longitudinal_mmd > 0.0:
            names.append("longitudinal_mmd")
        if self.transverse_mmd > 0.0:
            names.append("transverse_mmd")
        if self.response_spread > 0.0:
            names.append("response_spread")
        return names


# --------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------
@torch.no_grad()
def generate(g, energy_gev: np.ndarray, xscale: float, seed: int, batch: int = 1000,
             power: float = 1.0, sphere: bool = False, concat: bool = False) -> np.ndarray:
    """G in eval mode at E/100 = E * 0.01 for each energy; clamp at 0 (NaN passes), / xscale in
    double as data/preprocess.cpp postprocess_images. Returns (N, X, Y, Z) float32 GeV."""
    was_training = g.training
    g.eval()
    gen = torch.Generator().manual_seed(seed)
    cond = torch.from_numpy(energy_gev.astype(np.float32) * np.float32(0.01)).reshape(-1, 1)
    out = []
    for b0 in range(0, cond.shape[0], batch):
        e = cond[b0:b0 + batch]
        z = latent(e, g.latent, sphere, gen, concat=concat)
        img = g(z)
        img = torch.where(img > 0, img, torch.where(torch.isnan(img), img, torch.zeros_like(img)))
        if power != 1.0:
            img = img.pow(1.0 / power)
        out.append((img.double() * (1.0 / xscale)).float().squeeze(1))
    g.train(was_training)
    return torch.cat(out).numpy()


def averaged_generator(ema, g, beta: float) -> None:
    """ema <- beta ema + (1 - beta) g over the parameters (an exponential moving average)."""
    with torch.no_grad():
        for pe, p in zip(ema.parameters(), g.parameters()):
            pe.mul_(beta).add_(p, alpha=1.0 - beta)


def recalibrate(net, s: dict, seed: int, batches: int = 32, batch: int = 64) -> None:
    """BatchNorm running statistics of @p net set to the mean of its batch statistics over @p batches
    batches of the training's fake conditions (weights as they are)."""
    gen = torch.Generator().manual_seed(seed)
    bns = [m for m in net.modules() if isinstance(m, gan3d.KerasBatchNorm3d)]
    saved = [m.momentum for m in bns]
    for m in bns:
        m.running_mean.zero_()
        m.running_var.zero_()
    net.train()
    with torch.no_grad():
        for k in range(batches):
            for m in bns:
                m.momentum = 1.0 / (k + 1)
            e = torch.empty(batch, 1).uniform_(*s["fake_energy"], generator=gen)
            net(latent(e, net.latent, s["noise"] == "sphere", gen, concat=s["input"] == "concat"))
    for m, mo in zip(bns, saved):
        m.momentum = mo
    net.eval()


def write_showers(path: str, ecal: np.ndarray, energy_gev: np.ndarray, attrs: dict | None = None) -> None:
    """`ECAL` (N, X, Y, Z) float32 chunked per event, gzip; `energy` (N,) float32 GeV."""
    tmp = path + ".tmp"
    with h5py.File(tmp, "w") as f:
        f.create_dataset("ECAL", data=ecal.astype(np.float32), chunks=(1,) + ecal.shape[1:], compression="gzip")
        f.create_dataset("energy", data=energy_gev.astype(np.float32), compression="gzip")
        for k, v in (attrs or {}).items():
            f.attrs[k] = v
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default=os.path.join(REPO, "examples", "3dgan-5.yaml"),
                   help="experiment YAML whose recipe is followed (default examples/3dgan-5.yaml)")
    p.add_argument("--data-dir", help="directory of the *.h5 files (default: the YAML's data.train)")
    p.add_argument("--seed", type=int)
    p.add_argument("--max-samples", type=int, help="stop after ceil(max_samples / batch) steps")
    p.add_argument("--epochs", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--optimizer", choices=["rmsprop", "adam"])
    p.add_argument("--beta1", type=float)
    p.add_argument("--beta2", type=float)
    p.add_argument("--rho", type=float)
    p.add_argument("--epsilon", type=float)
    p.add_argument("--label-flip", type=float)
    p.add_argument("--fake-energy", type=lambda t: [float(x) for x in t.split(",")], help="LO,HI in E/100")
    p.add_argument("--generator-passes", type=int)
    p.add_argument("--ecal-fit", type=lambda t: [float(x) for x in t.split(",")],
                   help="c4,c3,c2,c1,c0 (highest power first)")
    p.add_argument("--validation-fraction", type=float)
    p.add_argument("--threshold", type=float)
    p.add_argument("--xscale", type=float)
    p.add_argument("--power", type=float)
    p.add_argument("--schedule", choices=["constant", "cosine"])
    p.add_argument("--noise", choices=["normal", "sphere"])
    p.add_argument("--normalise-energy", dest="normalise_energy", action="store_true", default=None)
    p.add_argument("--ecal-mean-bins", dest="ecal_mean_bins", type=int,
                   help="the ECAL loss on the mean response in N bins of E/100 (training.ecal_mean_bins)")
    p.add_argument("--condition", action="store_true", default=None,
                   help="the discriminator reads E/100 as a second channel (model.condition)")
    p.add_argument("--input", choices=("product", "concat"),
                   help="the generator input: (E/100) z or [E/100, z] (model.input)")
    p.add_argument("--generator-width", dest="generator_width", type=int,
                   help="the generator's channels times this integer (model.generator_width)")
    p.add_argument("--hlf-head", dest="hlf_head", action="store_true", default=None,
                   help="a second real/fake head on the shower's high-level features (model.hlf_head)")
    p.add_argument("--hlf-mmd", dest="hlf_mmd", type=float,
                   help="the weight of MMD^2 between fake and real showers' features in G's loss (training.hlf_mmd)")
    p.add_argument("--response-mmd", dest="response_mmd", type=float,
                   help="the same on the energy and the response alone (training.response_mmd)")
    p.add_argument("--longitudinal-mmd", dest="longitudinal_mmd", type=float,
                   help="the same on the energy, the response and the layers' energy fractions "
                        "(training.longitudinal_mmd)")
    p.add_argument("--transverse-mmd", dest="transverse_mmd", type=float,
                   help="the same on the energy, the response and the columns' and rows' percentages of the "
                        "sum (training.transverse_mmd)")
    p.add_argument("--response-spread", dest="response_spread", type=float,
                   help="the weight of the response's spread about its curve, per energy bin, in G's loss "
                        "(training.response_spread)")
    p.add_argument("--mmd-scale", dest="mmd_scale", choices=("batch", "energy"),
                   help="the MMD terms' feature scales: the batch's spread or the spread at each energy "
                        "(training.mmd_scale)")
    p.add_argument("--hlf-lr-scale", dest="hlf_lr_scale", type=float,
                   help="the hlf head's learning rate as a multiple of the discriminator's")
    p.add_argument("--g-ema", dest="g_ema", type=float, default=0.0,
                   help="also keep an exponential moving average of the generator's weights with this "
                        "decay and write its showers (ema-N.h5, BatchNorm statistics recalibrated) beside gen-N.h5")
    p.add_argument("--final-fraction", dest="final_fraction", type=float)
    p.add_argument("--dropout", type=float)
    p.add_argument("--log-every", type=int)
    p.add_argument("--snapshots", default="",
                   help="N1,N2,...: sample counts after which DIR/gen-N.h5 is written (default: the last step)")
    p.add_argument("--events", type=int, default=10000, help="held-out events to generate like")
    p.add_argument("--like", default="",
                   help="FILE.h5[,FILE2.h5,...]: after the last step also write DIR/like-N.h5, one shower at each "
                        "of that file's energies (a Monte Carlo sample of another seed, as `mpigan generate "
                        "--like`), DIR/like2-N.h5 likewise for a second file and so on, and the generator's "
                        "weights DIR/generator-N.pt")
    p.add_argument("--stop-after", dest="stop_after", type=int, default=0,
                   help="stop once this many samples are seen (the schedule still spans max_samples): the first "
                        "part of a full-length run")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    y = load_yaml(args.config) if args.config else {}
    s, src = resolve_settings(args, y)
    B = int(s["batch"])
    seed = int(s["seed"])
    os.makedirs(args.out, exist_ok=True)

    train_files, val_files = split_files(s["data_dir"], float(s["validation_fraction"]))
    if not val_files:
        raise SystemExit("no held-out files: set validation_fraction (the YAML's 0.1667 holds out 2 of 12)")
    t0 = time.perf_counter()
    raw, e_gev = read_files(train_files)
    images, energy, ecal = (torch.from_numpy(a) for a in preprocess(raw, e_gev, s["threshold"], s["xscale"],
                                                                          float(s["power"])))
    del raw
    _, val_e = read_files(val_files)
    n_gen = min(args.events, val_e.shape[0])
    val_e = val_e[:n_gen]
    n_train = images.shape[0]
    per_epoch = n_train // B
    if per_epoch == 0:
        raise SystemExit(f"{n_train} training events are fewer than one batch of {B}")
    total_steps = int(s["epochs"]) * per_epoch
    if int(s["max_samples"]) > 0:
        total_steps = min(total_steps, (int(s["max_samples"]) + B - 1) // B)
    run_steps = total_steps if args.stop_after <= 0 else min(total_steps, (args.stop_after + B - 1) // B)
    snaps = sorted({int(x) for x in args.snapshots.split(",") if x.strip()}) or [run_steps * B]
    if snaps[-1] > run_steps * B:
        raise SystemExit(f"snapshot {snaps[-1]} is beyond the run's {run_steps * B} samples")
    print(f"data: {n_train} training events ({len(train_files)} files), {val_e.shape[0]} held-out events "
          f"generated like ({len(val_files)} files), read in {time.perf_counter() - t0:.1f} s")

    torch.manual_seed(seed)
    spec = gan3d.SPECS[MODEL]
    g = spec.make_g(width=int(s["generator_width"])) if s["generator_width"] != 1 else spec.make_g()
    d = spec.make_d(dropout=float(s["dropout"]), power=float(s["power"]), condition=bool(s["condition"]),
                    hlf_head=bool(s["hlf_head"]))
    gan3d.check_param_counts(spec, g, d)
    d_params = d.parameters()
    # model.hlf_lr_scale: the head's parameters in a group of their own at that multiple of the rate
    # (mpigan's gain reparametrisation of the head's Dense layers is the same under Adam and RMSprop)
    if getattr(d, "hlf", None) is not None and s["hlf_lr_scale"] != 1.0:
        head = {id(p) for p in d.hlf.parameters()}
        d_params = [{"params": [p for p in d.parameters() if id(p) not in head]},
                    {"params": list(d.hlf.parameters()), "lr": float(s["lr"]) * s["hlf_lr_scale"],
                     "lr_scale": s["hlf_lr_scale"]}]
    opt_g, opt_d = make_optimizer(g.parameters(), s), make_optimizer(d_params, s)
    stepper = RungStep(g, d, opt_g, opt_d, s)
    ema = copy.deepcopy(g) if args.g_ema > 0 else None  # --g-ema: also an averaged generator

    cfg = {"model": MODEL, "settings": s, "source": src, "config": args.config,
           "train_files": train_files, "held_out_files": val_files, "events_generated": int(n_gen),
           "snapshots": snaps, "steps": total_steps, "batches_per_epoch": per_epoch,
           "threads": args.threads, "torch": torch.__version__,
           "generation_seed": GEN_SEED ^ seed, "params": {"g": gan3d.n_params(g), "d": gan3d.n_params(d)}}
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print("recipe: " + ", ".join(f"{k}={s[k]} ({src[k]})" for k in s))

    csv = open(os.path.join(args.out, "losses.csv"), "w")
    # the per-head columns as mpigan's metrics.csv names them (d_real_fake, ..., g_hlf_mmd): unweighted
    head_cols = [f"{side}_{h}" for h in stepper.head_names() for side in ("d_real", "d_fake", "g")]
    csv.write("samples,d_real,d_fake,g," + ",".join(head_cols) + "\n")
    train_s = 0.0
    samples = 0
    perm = None
    written = []
    si = 0

    def snapshot(net, kind: str, attrs: dict, at: int, energies: np.ndarray) -> None:
        """OUT/KIND-AT.h5: @p net's showers at @p energies (GeV), the run's fixed noise."""
        tg = time.perf_counter()
        showers = generate(net, energies, float(s["xscale"]), GEN_SEED ^ seed, power=float(s["power"]),
                           sphere=s["noise"] == "sphere", concat=s["input"] == "concat")
        path = os.path.join(args.out, f"{kind}-{at}.h5")
        write_showers(path, showers, energies, {"samples": samples, "step": step + 1, "seed": seed, **attrs})
        empty = int((showers.reshape(len(showers), -1).sum(1) <= 0).sum())
        print(f"snapshot {path}: {len(showers)} showers at {samples} samples, mean sum/E "
              f"{float(np.mean(showers.reshape(len(showers), -1).sum(1) / energies)):.4f}, {empty} empty "
              f"({time.perf_counter() - tg:.1f} s)", flush=True)
        written.append(path)

    for step in range(run_steps):
        epoch, k = divmod(step, per_epoch)
        if k == 0:
            perm = torch.from_numpy(epoch_permutation(n_train, seed, epoch))
        idx = perm[k * B:(k + 1) * B]
        if s["schedule"] == "cosine":  # train/experiment.cpp LrSchedule::factor
            t = min(max(step / total_steps, 0.0), 1.0)
            f = float(s["final_fraction"])
            lr = float(s["lr"]) * (f + (1.0 - f) * 0.5 * (1.0 + math.cos(math.pi * t)))
            for opt in (opt_g, opt_d):
                for group in opt.param_groups:
                    group["lr"] = lr * group.get("lr_scale", 1.0)
        ts = time.perf_counter()
        L = stepper.run(images[idx], energy[idx], ecal[idx], step)
        train_s += time.perf_counter() - ts
        if ema is not None:
            averaged_generator(ema, g, args.g_ema)
        samples += B
        csv.write(f"{samples},{L['d_real']:.6g},{L['d_fake']:.6g},{L['g']:.6g},"
                  + ",".join(f"{L['heads'][c]:.6g}" for c in head_cols) + "\n")
        if (step + 1) % int(s["log_every"]) == 0 or step + 1 == run_steps:
            csv.flush()
            print(f"step {step + 1}/{total_steps} samples {samples} epoch {epoch + 1}: D real {L['d_real']:.4f} "
                  f"fake {L['d_fake']:.4f}  G {L['g']:.4f}  ({samples / train_s:.1f} samples/s)", flush=True)
        while si < len(snaps) and samples >= snaps[si]:
            snapshot(g, "gen", {}, snaps[si], val_e)
            if ema is not None:
                recalibrate(ema, s, GEN_SEED ^ seed ^ 0x5EED)
                snapshot(ema, "ema", {"ema": args.g_ema}, snaps[si], val_e)
            si += 1
    csv.close()
    if args.like:
        for k, like in enumerate(x for x in args.like.split(",") if x.strip()):
            _, like_e = read_files([like])
            snapshot(g, "like" if k == 0 else f"like{k + 1}", {"like": os.path.abspath(like)}, samples, like_e)
        torch.save(g.state_dict(), os.path.join(args.out, f"generator-{samples}.pt"))
    rate = samples / train_s if train_s > 0 else float("nan")
    cfg["result"] = {"samples": samples, "train_seconds": train_s, "samples_per_s": rate, "written": written}
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print(f"samples_per_s={rate:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
