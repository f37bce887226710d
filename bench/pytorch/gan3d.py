"""PyTorch peer of the CERN openlab 3DGAN models, for side-by-side benchmarks with mpigan.

Three architectures, the first two transcribed from the Keras reference (svalleco/3Dgan; see
the reference Keras code, svalleco/3Dgan, and docs/performance-pytorch-peer.md):

* ``3dgan-25``  -- EcalEnergyGan, fixed angle, 25x25x25 showers (``keras/EcalEnergyGan.py``).
* ``anglegan-51`` -- AngleGAN, variable angle, 51x51x25 showers (``keras/AngleArch3dGAN.py``).
* ``3dgan-5``   -- mpigan's fixed-angle 3DGAN sized for the 5x5x5 read-out (the converging rung;
  ``build_3dgan_5`` in models/gan_model.cpp), trained by ``train_rung.py``.

Layout: NCDHW with D = x, H = y, W = depth, i.e. tensors of shape (N, 1, X, Y, Z); the Keras
code is channels_last (N, X, Y, Z, 1). Keras conventions reproduced: LeakyReLU slope 0.3,
BatchNorm momentum 0.99 in Keras terms (PyTorch momentum 0.01), TF ``same`` padding (for even
kernels (k-1)//2 before and k//2 after), ZeroPadding3D symmetric per axis, UpSampling3D =
nearest-neighbour repeat, Keras initialisers, Keras binary cross-entropy and MAPE.

The training step (``Trainer.step``) follows section 1.3: generate in inference mode, one
discriminator update on the real batch and one on the fake batch, then two generator updates
through the frozen discriminator (batch statistics, but running statistics left untouched).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

KERAS_EPS = 1e-7          # keras.backend.epsilon()
LRELU_SLOPE = 0.3         # keras LeakyReLU default alpha
BN_MOMENTUM = 0.01        # keras momentum 0.99 -> torch momentum 1 - 0.99
ANGLE_POWER = 0.85        # AngleGAN stores images as X**0.85


# --------------------------------------------------------------------------------------------
# Keras initialisers
# --------------------------------------------------------------------------------------------
def _fans(w: torch.Tensor) -> tuple[int, int]:
    # torch: Linear (out, in); Conv3d (out, in, kx, ky, kz). Keras computes the same fans.
    receptive = w[0][0].numel() if w.dim() > 2 else 1
    return w.shape[1] * receptive, w.shape[0] * receptive


def _trunc_normal(w: torch.Tensor, std: float) -> None:
    # TF2 truncated normal (cut at 2 sigma), stddev corrected as Keras does.
    std = std / 0.87962566103423978
    nn.init.trunc_normal_(w, 0.0, std, -2.0 * std, 2.0 * std)


def keras_init(w: torch.Tensor, kind: str) -> None:
    fan_in, fan_out = _fans(w)
    if kind == "glorot_uniform":          # Keras default kernel initialiser
        nn.init.xavier_uniform_(w)
    elif kind == "he_uniform":            # limit sqrt(6 / fan_in)
        nn.init.kaiming_uniform_(w, a=0.0, nonlinearity="relu")
    elif kind == "glorot_normal":         # truncated normal, std sqrt(2 / (fan_in + fan_out))
        _trunc_normal(w, math.sqrt(2.0 / (fan_in + fan_out)))
    elif kind == "variance_scaling":      # VarianceScaling() defaults: scale 1, fan_in, truncated
        _trunc_normal(w, math.sqrt(1.0 / fan_in))
    else:
        raise ValueError(kind)


def _conv(cin: int, cout: int, k, init: str, padding=0, bias: bool = True) -> nn.Conv3d:
    conv = nn.Conv3d(cin, cout, k, padding=padding, bias=bias)
    keras_init(conv.weight, init)
    if bias:
        nn.init.zeros_(conv.bias)
    return conv


def _dense(cin: int, cout: int, init: str = "glorot_uniform") -> nn.Linear:
    lin = nn.Linear(cin, cout)
    keras_init(lin.weight, init)
    nn.init.zeros_(lin.bias)
    return lin


def _bn(c: int, eps: float) -> nn.BatchNorm3d:
    return nn.BatchNorm3d(c, eps=eps, momentum=BN_MOMENTUM)


def _lrelu() -> nn.LeakyReLU:
    return nn.LeakyReLU(LRELU_SLOPE, inplace=True)


class SameConv3d(nn.Module):
    """Conv3D(padding='same') as TensorFlow pads it: (k-1)//2 before, k//2 after (stride 1).

    Odd kernels pad symmetrically, which the convolution does itself; only even kernels need
    an explicit F.pad.
    """

    def __init__(self, cin: int, cout: int, k, init: str, bias: bool = True):
        super().__init__()
        k = (k,) * 3 if isinstance(k, int) else tuple(k)
        if all(kk % 2 == 1 for kk in k):
            self.pad = None
            self.conv = _conv(cin, cout, k, init, padding=tuple(kk // 2 for kk in k), bias=bias)
        else:
            pad = []
            for kk in reversed(k):  # F.pad lists the last dimension (depth) first
                pad += [(kk - 1) // 2, kk // 2]
            self.pad = tuple(pad)
            self.conv = _conv(cin, cout, k, init, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pad is not None:
            x = F.pad(x, self.pad)
        return self.conv(x)


# --------------------------------------------------------------------------------------------
# Physics lambdas (no weights)
# --------------------------------------------------------------------------------------------
def ecal_sum(image: torch.Tensor) -> torch.Tensor:
    """Sum over all cells: (N, 1, X, Y, Z) -> (N, 1)."""
    return image.sum(dim=(2, 3, 4))


def shower_features(cells: torch.Tensor, energy: torch.Tensor | None) -> torch.Tensor:
    """mpigan's nn::shower_features on the cells' energies (N, 1, X, Y, Z) (the preprocessed image
    to the power 1/power) and E/100 (N, 1): (N, 2 + 5Z) = [log10 E/100, 10 (log10((S + eps)/(E/100))
    - 2.3), per layer z: 2 (log10((S_z + eps)/(S + eps)) + 1), 5 x_z, 5 y_z, 5 w_x - 2, 5 w_y - 2],
    transverse coordinates (i - (n - 1)/2) * 5/n, eps 1e-3, widths sqrt(max(var, 0) + 1e-6)."""
    eps = 1e-3
    c = cells[:, 0]                                   # (N, X, Y, Z)
    n, X, Y, Z = c.shape
    ux = (torch.arange(X, dtype=c.dtype) - 0.5 * (X - 1)) * 5.0 / X
    uy = (torch.arange(Y, dtype=c.dtype) - 0.5 * (Y - 1)) * 5.0 / Y
    px, py = c.sum(dim=2), c.sum(dim=1)               # (N, X, Z), (N, Y, Z)
    Sz = c.sum(dim=(1, 2))                            # (N, Z)
    St = Sz.sum(dim=1, keepdim=True) + eps
    D = Sz + eps
    mx = (px * ux.view(1, X, 1)).sum(dim=1) / D
    my = (py * uy.view(1, Y, 1)).sum(dim=1) / D
    vx = (px * (ux * ux).view(1, X, 1)).sum(dim=1) / D - mx * mx
    vy = (py * (uy * uy).view(1, Y, 1)).sum(dim=1) / D - my * my
    wx = torch.sqrt(vx.clamp(min=0.0) + 1e-6)
    wy = torch.sqrt(vy.clamp(min=0.0) + 1e-6)
    e = energy.view(n, 1) if energy is not None else torch.ones(n, 1, dtype=c.dtype)
    f0 = torch.log10(e) if energy is not None else torch.zeros(n, 1, dtype=c.dtype)
    f1 = 10.0 * (torch.log10(St / e) - 2.3)
    per = torch.stack([2.0 * (torch.log10(D / St) + 1.0), 5.0 * mx, 5.0 * my, 5.0 * wx - 2.0, 5.0 * wy - 2.0],
                      dim=2).reshape(n, 5 * Z)
    return torch.cat([f0, f1, per], dim=1)


def transverse_features(cells: torch.Tensor) -> torch.Tensor:
    """mpigan's nn::transverse_features on the cells' energies (N, 1, X, Y, Z): (N, X + Y), the
    columns' (x) then the rows' (y) percentages of the sum, 100 C / (S + eps), eps 1e-3."""
    c = cells[:, 0]
    St = c.sum(dim=(1, 2, 3)).unsqueeze(1) + 1e-3
    return 100.0 * torch.cat([c.sum(dim=(2, 3)), c.sum(dim=(1, 3))], dim=1) / St


def ecal_angle(image: torch.Tensor) -> torch.Tensor:
    """Measured polar angle (rad) of each shower, as ``ecal_angle`` in AngleArch3dGAN.py.

    image: (N, 1, X, Y, Z), already raised to 1/0.85. Returns (N, 1). Coordinates are
    index + 0.5; per-layer barycentres relative to the global one give a slope
    m = (y_mid - y_ref) / sqrt((x_mid - x_ref)^2 + (z - z_ref)^2) (sign flipped upstream of
    z_ref), angle_z = pi/2 - atan(m), averaged with weights z over non-empty layers; 100 for an
    empty image. Divisions by zero are guarded with safe denominators so that the masked-out
    branches stay finite in the backward pass (forward values are those of the Keras code).
    """
    img = image.squeeze(1)
    n, nx, ny, nz = img.shape
    dev, dt = img.device, img.dtype
    xs = torch.arange(nx, device=dev, dtype=dt) + 0.5
    ys = torch.arange(ny, device=dev, dtype=dt) + 0.5
    zs = torch.arange(nz, device=dev, dtype=dt) + 0.5

    sumtot = img.sum(dim=(1, 2, 3))                       # (N,)
    empty = sumtot == 0
    safe_tot = torch.where(empty, torch.ones_like(sumtot), sumtot)
    x_ref = torch.where(empty, torch.ones_like(sumtot), (img.sum(dim=(2, 3)) * xs).sum(1) / safe_tot)
    y_ref = torch.where(empty, torch.ones_like(sumtot), (img.sum(dim=(1, 3)) * ys).sum(1) / safe_tot)
    z_ref = torch.where(empty, torch.ones_like(sumtot), (img.sum(dim=(1, 2)) * zs).sum(1) / safe_tot)
    x_ref, y_ref, z_ref = x_ref[:, None], y_ref[:, None], z_ref[:, None]

    sumz = img.sum(dim=(1, 2))                            # (N, Z)
    zmask = (sumz != 0).to(dt)
    safe_z = torch.where(sumz == 0, torch.ones_like(sumz), sumz)
    x_mid = (img.sum(dim=2) * xs[:, None]).sum(1) / safe_z * zmask   # (N, Z)
    y_mid = (img.sum(dim=1) * ys[:, None]).sum(1) / safe_z * zmask

    z = zs.expand(n, nz)
    zproj = torch.sqrt(torch.clamp((x_mid - x_ref) ** 2 + (z - z_ref) ** 2, min=KERAS_EPS))
    m = (y_mid - y_ref) / zproj                           # zproj >= sqrt(eps) > 0
    m = torch.where(z < z_ref, -m, m)
    ang = (math.pi / 2.0 - torch.atan(m)) * zmask * z
    weight = (z * zmask).sum(1)
    ang = ang.sum(1) / torch.where(weight == 0, torch.ones_like(weight), weight)
    ang = torch.where(empty, torch.full_like(ang, 100.0), ang)
    return ang[:, None]


# --------------------------------------------------------------------------------------------
# EcalEnergyGan, 25x25x25
# --------------------------------------------------------------------------------------------
class EcalGenerator(nn.Module):
    """Generator of keras/EcalEnergyGan.py; input (E/100) * z, z ~ N(0, 1)^200."""

    latent = 200

    def __init__(self, bn_eps: float = 1e-3):
        super().__init__()
        self.dense = _dense(self.latent, 64 * 7 * 7)
        # Keras reshapes to channels_last (7, 7, 8, 8); viewing as (8, 7, 7, 8) here only
        # permutes the Dense outputs, an equivalent parametrisation.
        self.net = nn.Sequential(
            SameConv3d(8, 64, (6, 6, 8), "he_uniform"), _lrelu(), _bn(64, bn_eps),
            nn.Upsample(scale_factor=(2, 2, 2), mode="nearest"),                  # 14x14x16
            _conv(64, 6, (6, 5, 8), "he_uniform", padding=(2, 2, 0)), _lrelu(), _bn(6, bn_eps),
            nn.Upsample(scale_factor=(2, 2, 3), mode="nearest"),                  # 26x28x27
            _conv(6, 6, (3, 3, 8), "he_uniform", padding=(1, 0, 3)), _lrelu(),   # 26x26x26
            _conv(6, 1, (2, 2, 2), "glorot_normal", bias=False), nn.ReLU(inplace=True),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(self.dense(z).view(-1, 8, 7, 7, 8))


class EcalDiscriminator(nn.Module):
    """Discriminator of keras/EcalEnergyGan.py: outputs (real/fake prob, E/100, ECAL sum)."""

    def __init__(self, bn_eps: float = 1e-3):
        super().__init__()
        g = "glorot_uniform"
        self.features = nn.Sequential(
            SameConv3d(1, 32, 5, g), _lrelu(), nn.Dropout(0.2),
            _conv(32, 8, 5, g, padding=2), _lrelu(), _bn(8, bn_eps), nn.Dropout(0.2),
            _conv(8, 8, 5, g, padding=2), _lrelu(), _bn(8, bn_eps), nn.Dropout(0.2),
            _conv(8, 8, 5, g, padding=1), _lrelu(), _bn(8, bn_eps), nn.Dropout(0.2),  # 23^3
            nn.AvgPool3d(2),                                                          # 11^3
            nn.Flatten(),
        )
        self.fake = _dense(8 * 11 ** 3, 1)
        self.aux = _dense(8 * 11 ** 3, 1)

    def forward(self, image: torch.Tensor):
        h = self.features(image)
        return torch.sigmoid(self.fake(h)), self.aux(h), ecal_sum(image)


# --------------------------------------------------------------------------------------------
# 3dgan-5: the fixed-angle design sized for the 5x5x5 read-out (mpigan build_3dgan_5)
# --------------------------------------------------------------------------------------------
class KerasBatchNorm3d(nn.BatchNorm3d):
    """BatchNorm3d whose running variance tracks the *biased* batch variance, as Keras and
    mpigan's BatchNorm3d do (torch's tracks the unbiased one). Normalisation is unchanged:
    batch statistics (biased variance) in train mode, running statistics in eval mode.
    ``momentum`` is torch's (fraction of the new batch: Keras 0.99 -> 0.01); momentum 0 (as
    ``frozen`` sets it) leaves the running statistics untouched."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                False, 0.0, self.eps)
        y = F.batch_norm(x, None, None, self.weight, self.bias, True, 0.0, self.eps)
        if self.momentum:
            with torch.no_grad():
                xd = x.detach()
                dims = [0] + list(range(2, xd.dim()))
                var, mean = torch.var_mean(xd, dims, unbiased=False)
                m = float(self.momentum)
                self.running_mean.mul_(1.0 - m).add_(mean, alpha=m)
                self.running_var.mul_(1.0 - m).add_(var, alpha=m)
                self.num_batches_tracked += 1
        return y


def _kbn(c: int, eps: float) -> KerasBatchNorm3d:
    return KerasBatchNorm3d(c, eps=eps, momentum=BN_MOMENTUM)


class Ecal5Generator(nn.Module):
    """Generator of mpigan's ``3dgan-5`` (models/gan_model.cpp, build_3dgan_5); input (E/100) * z,
    z ~ N(0, 1)^64. Dense 64->864 (glorot_uniform), view (32, 3, 3, 3), Conv3D 64 k3 same
    (he_uniform) -> LReLU -> BN, UpSampling x2 (6^3), Conv3D 32 k2 valid (5^3) -> LReLU -> BN,
    Conv3D 16 k3 same -> LReLU, Conv3D 1 k3 same without bias (glorot_normal) -> ReLU."""

    latent = 64

    def __init__(self, bn_eps: float = 1e-3, width: int = 1):
        """``width``: model.generator_width, every hidden layer's channels times this integer."""
        super().__init__()
        h = "he_uniform"
        c16, c32, c64 = 16 * width, 32 * width, 64 * width
        self.width = width
        self.dense = _dense(self.latent, c32 * 3 * 3 * 3)
        self.net = nn.Sequential(
            SameConv3d(c32, c64, 3, h), _lrelu(), _kbn(c64, bn_eps),
            nn.Upsample(scale_factor=(2, 2, 2), mode="nearest"),                  # 6^3
            _conv(c64, c32, 2, h), _lrelu(), _kbn(c32, bn_eps),                    # 5^3
            SameConv3d(c32, c16, 3, h), _lrelu(),
            SameConv3d(c16, 1, 3, "glorot_normal", bias=False), nn.ReLU(inplace=True),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(self.dense(z).view(-1, 32 * self.width, 3, 3, 3))


class Ecal5Discriminator(nn.Module):
    """Discriminator of mpigan's ``3dgan-5``: Conv3D 32 k3 same -> LReLU -> Dropout 0.2, then twice
    Conv3D 16 k3 same -> LReLU -> BN -> Dropout (all glorot_uniform), flatten (2000); outputs
    (sigmoid real/fake, linear E/100, ECAL sum of input**(1/power): the cells' energy). With
    ``condition`` (mpigan's model.condition) the convolutions read E/100 as a second channel."""

    def __init__(self, bn_eps: float = 1e-3, dropout: float = 0.2, power: float = 0.5, condition: bool = False,
                 hlf_head: bool = False):
        super().__init__()
        g = "glorot_uniform"
        # model.hlf_head: a second real/fake head, an MLP on shower_features (mpigan's add_hlf_head)
        self.hlf = nn.Sequential(_dense(2 + 5 * 5, 64), nn.LeakyReLU(0.2), _dense(64, 64), nn.LeakyReLU(0.2),
                                 _dense(64, 1)) if hlf_head else None
        self.power = power  # cells are X**power; the ECAL head sums image**(1/power)
        self.condition = condition  # model.condition: E/100 as a second input channel
        self.features = nn.Sequential(
            SameConv3d(2 if condition else 1, 32, 3, g), _lrelu(), nn.Dropout(dropout),
            SameConv3d(32, 16, 3, g), _lrelu(), _kbn(16, bn_eps), nn.Dropout(dropout),
            SameConv3d(16, 16, 3, g), _lrelu(), _kbn(16, bn_eps), nn.Dropout(dropout),
            nn.Flatten(),
        )
        self.fake = _dense(16 * 5 ** 3, 1)
        self.aux = _dense(16 * 5 ** 3, 1)

    def forward(self, image: torch.Tensor, energy: torch.Tensor = None):
        x = image
        if self.condition:
            x = torch.cat([image, energy.view(-1, 1, 1, 1, 1).expand_as(image)], dim=1)
        h = self.features(x)
        cells = image if self.power == 1.0 else image.clamp(min=0.0).pow(1.0 / self.power)
        out = (torch.sigmoid(self.fake(h)), self.aux(h), ecal_sum(cells))
        if self.hlf is None:
            return out
        return out + (torch.sigmoid(self.hlf(shower_features(cells, energy if self.condition else None))),)


# --------------------------------------------------------------------------------------------
# AngleGAN, 51x51x25
# --------------------------------------------------------------------------------------------
class AngleGenerator(nn.Module):
    """Generator of keras/AngleArch3dGAN.py; input concat[E/100, theta, 254 x N(0, 1)]."""

    latent = 256

    def __init__(self, bn_eps: float = 1e-6):
        super().__init__()
        h = "he_uniform"
        self.dense = _dense(self.latent, 5184)
        self.net = nn.Sequential(
            nn.Upsample(scale_factor=(6, 6, 6), mode="nearest"),                  # 54x54x48
            _conv(8, 8, (6, 6, 8), h), nn.ReLU(inplace=True), _bn(8, bn_eps),     # 49x49x41
            _conv(8, 6, (4, 4, 6), h, padding=(2, 2, 1)), nn.ReLU(inplace=True), _bn(6, bn_eps),
            _conv(6, 6, (4, 4, 6), h, padding=(2, 2, 1)), nn.ReLU(inplace=True), _bn(6, bn_eps),
            _conv(6, 6, (4, 4, 6), h, padding=(2, 2, 1)), nn.ReLU(inplace=True), _bn(6, bn_eps),
            _conv(6, 6, (3, 3, 5), h, padding=(1, 1, 0)), nn.ReLU(inplace=True), _bn(6, bn_eps),
            _conv(6, 6, (3, 3, 3), h, padding=(1, 1, 0)), nn.ReLU(inplace=True),  # 52x52x26
            _conv(6, 1, (2, 2, 2), "glorot_normal"), nn.ReLU(inplace=True),      # 51x51x25
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(self.dense(z).view(-1, 8, 9, 9, 8))


class AngleDiscriminator(nn.Module):
    """Discriminator of keras/AngleArch3dGAN.py: (real/fake, E/100, angle, ECAL sum)."""

    def __init__(self, bn_eps: float = 1e-6, power: float = ANGLE_POWER):
        super().__init__()
        v = "variance_scaling"
        k = (5, 6, 6)
        self.power = power
        self.features = nn.Sequential(
            SameConv3d(1, 16, k, v), _lrelu(), nn.Dropout(0.2),
            _conv(16, 8, k, v, padding=(0, 0, 1)), _lrelu(), _bn(8, bn_eps), nn.Dropout(0.2),
            _conv(8, 8, k, v, padding=(0, 0, 1)), _lrelu(), _bn(8, bn_eps), nn.Dropout(0.2),
            _conv(8, 8, k, v), _lrelu(), _bn(8, bn_eps), nn.Dropout(0.2),       # 39x36x14
            nn.AvgPool3d(2),                                                    # 19x18x7
            nn.Flatten(),
        )
        self.fake = _dense(8 * 19 * 18 * 7, 1, v)
        self.aux = _dense(8 * 19 * 18 * 7, 1, v)

    def forward(self, image: torch.Tensor):
        h = self.features(image)
        inv = image.float().pow(1.0 / self.power)   # back to energy units
        return torch.sigmoid(self.fake(h)), self.aux(h), ecal_angle(inv), ecal_sum(inv)


# --------------------------------------------------------------------------------------------
# Losses (Keras definitions)
# --------------------------------------------------------------------------------------------
def keras_bce(p: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    p = p.float().clamp(KERAS_EPS, 1.0 - KERAS_EPS)
    return -(y * torch.log(p + KERAS_EPS) + (1.0 - y) * torch.log(1.0 - p + KERAS_EPS)).mean()


def keras_mape(p: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 100.0 * ((y - p.float()).abs() / y.abs().clamp(min=KERAS_EPS)).mean()


def binned_mean_ratio(p: torch.Tensor, y: torch.Tensor, key: torch.Tensor, bins: int, lo: float, hi: float):
    """mpigan's nn::binned_mean_ratio_loss: 100 sum_b (n_b/N) |mean_b(p/y) - 1| over `bins` equal bins
    of key in [lo, hi] (keys outside go to the first or last bin)."""
    b = ((key - lo) / (hi - lo) * bins).floor().long().clamp(0, bins - 1).view(-1)
    r = (p.float() / y.abs().clamp(min=KERAS_EPS)).view(-1)
    total = p.new_zeros(())
    for k in range(bins):
        m = b == k
        if m.any():
            total = total + 100.0 * m.sum() / r.numel() * (r[m].mean() - 1.0).abs()
    return total


MMD_ENERGY_WEIGHT = 4.0   # mpigan's models::kMmdEnergyWeight


def mmd_scales(real: torch.Tensor) -> torch.Tensor:
    """The kernel's per-feature scales of mpigan's StepConfig::hlf_mmd: 1 / (the real batch's
    standard deviation, population form, at least 0.05), the energy feature's times MMD_ENERGY_WEIGHT."""
    scale = 1.0 / real.std(dim=0, unbiased=False).clamp(min=0.05)
    scale[0] = scale[0] * MMD_ENERGY_WEIGHT
    return scale


class EnergyStandardiser:
    """mpigan's nn::EnergyStandardiser (training.mmd_scale: energy): column 0 is x = log10 E, kept;
    every other column k becomes (f_k - mu_k(x)) / sigma_k(x), mu_k quadratic and the variance linear
    in x - mean(x), fitted on the reference rows by least squares (minimum norm when x is constant),
    sigma_k = sqrt(max(v_k, floor^2)). Differentiable in the features (autograd)."""

    def __init__(self, reference: torch.Tensor, floor: float = 0.05):
        ref = reference.detach().double()
        self.x0, self.floor = ref[:, 0].mean(), floor
        u = ref[:, 0] - self.x0
        a = torch.stack([torch.ones_like(u), u, u * u], dim=1)
        self.mean = torch.linalg.pinv(a) @ ref[:, 1:]                       # (3, d - 1)
        r2 = (ref[:, 1:] - a @ self.mean).pow(2)
        self.var = torch.linalg.pinv(a[:, :2]) @ r2                         # (2, d - 1)

    def sigma(self, x: torch.Tensor) -> torch.Tensor:
        u = (x.double() - self.x0).view(-1, 1)
        return (self.var[0] + u * self.var[1]).clamp(min=self.floor ** 2).sqrt()

    def residual(self, f: torch.Tensor, k: int = 1) -> torch.Tensor:
        """Column k's residual about its fitted mean curve, f_k - mu_k(x) (not divided by sigma)."""
        u = f[:, 0].double() - self.x0
        c = self.mean[:, k - 1]
        return f[:, k].double() - (c[0] + u * c[1] + u * u * c[2])

    def apply(self, f: torch.Tensor) -> torch.Tensor:
        u = (f[:, :1].double() - self.x0)
        mu = self.mean[0] + u * self.mean[1] + u * u * self.mean[2]
        rest = (f[:, 1:].double() - mu) / self.sigma(f[:, 0])
        return torch.cat([f[:, :1].double(), rest], dim=1).to(f.dtype)


def binned_spread(x_fake: torch.Tensor, r_fake: torch.Tensor, x_real: torch.Tensor, r_real: torch.Tensor,
                  bins: int = 4, fitted: int = 3) -> torch.Tensor:
    """mpigan's nn::binned_spread_loss: bins of x at the reference's quantiles k/bins (sorted x at
    index k n / bins, upper bound); per bin m_f = mean r_fake^2, m_r = mean r_real^2 n / (n - fitted);
    sum_b (n_b / N) (ln(m_f / m_r) / 2)^2 over bins with 2 or more of each. Differentiable in r_fake."""
    n = x_real.numel()
    edges = torch.sort(x_real.detach().double())[0][[k * n // bins for k in range(1, bins)]]
    bf = torch.searchsorted(edges, x_fake.detach().double().contiguous(), right=True)
    br = torch.searchsorted(edges, x_real.detach().double().contiguous(), right=True)
    total = torch.zeros((), dtype=torch.float64)
    for b in range(bins):
        mf, mr = bf == b, br == b
        if int(mf.sum()) < 2 or int(mr.sum()) < 2:
            continue
        m_r = r_real.detach().double()[mr].pow(2).mean() * n / (n - fitted)
        if float(m_r) <= 0.0:
            continue
        m_f = r_fake.double()[mf].pow(2).mean().clamp(min=1e-300)
        total = total + float(mf.sum()) / x_fake.numel() * (0.5 * torch.log(m_f / m_r)).pow(2)
    return total


def subset_scales(scale: torch.Tensor, keep: list) -> torch.Tensor:
    """mpigan's MMD term on some of the features (models/gan_step.cpp): the kept features' scales
    grown by sqrt(F / their count), the others 0, so that the kernel's mean over the F dimensions
    is their mean."""
    some = torch.zeros_like(scale)
    some[keep] = scale[keep] * (scale.numel() / len(keep)) ** 0.5
    return some


def mmd2_rq(x: torch.Tensor, y: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """mpigan's nn::mmd2_rq: the unbiased MMD^2 between the rows of x (n, d) and y (m, d) under
    sum_{a in 0.2, 0.5, 1, 2, 5} (1 + s/(2a))^-a, s = |scale (a - b)|^2 / d."""
    d = x.shape[1]
    xs, ys = x * scale / d ** 0.5, y * scale / d ** 0.5

    def k(a, b):
        s = (a.unsqueeze(1) - b.unsqueeze(0)).pow(2).sum(dim=2)
        return sum((1.0 + s / (2.0 * al)).pow(-al) for al in (0.2, 0.5, 1.0, 2.0, 5.0))

    n, m = x.shape[0], y.shape[0]
    kxx, kyy = k(xs, xs), k(ys, ys)
    off = (kxx.sum() - kxx.diagonal().sum()) / (n * (n - 1))
    off_y = (kyy.sum() - kyy.diagonal().sum()) / (m * (m - 1))
    return off + off_y - 2.0 * k(xs, ys).mean()


def keras_mae(p: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (y - p.float()).abs().mean()


REFERENCE_ECAL_FIT = (0.0018, -0.023, 0.11, -0.28, 2.21)   # GetEcalFit, highest power first


def ecal_fit(x: torch.Tensor, xscale: float = 1.0, coeffs=REFERENCE_ECAL_FIT) -> torch.Tensor:
    """GetEcalFit(mod=1): ECAL-sum target for generated showers, x = E/100.

    ratio(x) = c0 x^4 + c1 x^3 + c2 x^2 + c3 x + c4 (``coeffs`` highest power first, as mpigan's
    StepConfig::ecal_fit / training.ecal_fit; default the reference's fit), target = ratio * x * xscale.
    """
    c0, c1, c2, c3, c4 = coeffs
    ratio = (((c0 * x + c1) * x + c2) * x + c3) * x + c4
    return ratio * x * xscale


def bit_flip(y: torch.Tensor, prob: float = 0.05) -> torch.Tensor:
    """Label noise as GANutils.BitFlip: each 0/1 label flipped with probability prob."""
    flip = torch.rand_like(y) < prob
    return torch.where(flip, 1.0 - y, y)


# --------------------------------------------------------------------------------------------
# Model specs, synthetic data
# --------------------------------------------------------------------------------------------
@dataclass
class Spec:
    name: str
    shape: tuple[int, int, int]
    make_g: type
    make_d: type
    g_params: int | None          # asserted exactly when not None
    d_params: int | None
    loss_weights: tuple[float, ...]
    angle: bool
    extra_checks: dict = field(default_factory=dict)


SPECS = {
    "3dgan-25": Spec("3dgan-25", (25, 25, 25), EcalGenerator, EcalDiscriminator,
                     872_808, 73_402, (2.0, 0.1, 0.1), angle=False),
    "anglegan-51": Spec("anglegan-51", (51, 51, 25), AngleGenerator, AngleDiscriminator,
                        1_364_983, 87_354, (3.0, 0.1, 25.0, 0.1), angle=True,
                        extra_checks={"g.dense": 1_332_288, "d.features.0.conv": 2_896}),
    # mpigan `inspect 3dgan-5`: generator 142,400 / discriminator 25,730 trainable parameters
    "3dgan-5": Spec("3dgan-5", (5, 5, 5), Ecal5Generator, Ecal5Discriminator,
                    142_400, 25_730, (2.0, 0.1, 0.1), angle=False,
                    extra_checks={"g.dense": 56_160, "g.net.0.conv": 55_360, "g.net.2": 128,
                                  "g.net.4": 16_416, "g.net.6": 64, "g.net.7.conv": 13_840,
                                  "g.net.9.conv": 432,
                                  "d.features.0.conv": 896, "d.features.3.conv": 13_840,
                                  "d.features.5": 32, "d.features.7.conv": 6_928,
                                  "d.features.9": 32, "d.fake": 2_001, "d.aux": 2_001}),
}


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def check_param_counts(spec: Spec, g: nn.Module, d: nn.Module) -> None:
    ng, nd = n_params(g), n_params(d)
    # a conditioned discriminator's energy channel doubles its first convolution's weights
    extra = d.features[0].conv.weight.numel() // 2 if getattr(d, "condition", False) else 0
    hlf = n_params(d.hlf) if getattr(d, "hlf", None) is not None else 0
    want_d = spec.d_params + extra + hlf if spec.d_params is not None else None
    if getattr(g, "width", 1) != 1:
        w = g.width   # mpigan's test_rung5: 85 504 w^2 + 56 896 w
        assert ng == 85_504 * w * w + 56_896 * w, f"{spec.name}: width-{w} generator has {ng} params"
        if want_d is not None:
            assert nd == want_d, f"{spec.name}: discriminator has {nd} params, want {want_d}"
        return
    if spec.g_params is not None:
        assert ng == spec.g_params, f"{spec.name}: generator has {ng} params, want {spec.g_params}"
    if want_d is not None:
        assert nd == want_d, f"{spec.name}: discriminator has {nd} params, want {want_d}"
    mods = {**{"g." + k: m for k, m in g.named_modules()}, **{"d." + k: m for k, m in d.named_modules()}}
    for name, want in spec.extra_checks.items():
        want += extra if name.startswith("d.features.0.") else 0
        got = n_params(mods[name])
        assert got == want, f"{spec.name}: {name} has {got} params, want {want}"


def synthetic_showers(n: int, shape, energy: torch.Tensor, angle: torch.Tensor | None,
                      total: torch.Tensor, gen: torch.Generator,
                      threshold: float = 0.0) -> torch.Tensor:
    """Random non-negative shower-like images (N, 1, X, Y, Z) whose cells sum to ``total``.

    Longitudinal gamma profile peaking deeper for higher energy, GFlash-like transverse
    profile R^2 / (r^2 + R^2)^2 (heavy tails, so no denormals), the axis tilted along y by
    cot(theta) for the angle model, exponential cell-to-cell fluctuations, cells below
    ``threshold`` zeroed as in the Keras preprocessing (1e-6 fixed-angle, 0 angle model).
    """
    nx, ny, nz = shape
    e_gev = (energy * 100.0).view(n, 1, 1, 1)
    x = torch.arange(nx, dtype=torch.float32).view(1, nx, 1, 1) + 0.5
    y = torch.arange(ny, dtype=torch.float32).view(1, 1, ny, 1) + 0.5
    z = torch.arange(nz, dtype=torch.float32).view(1, 1, 1, nz) + 0.5
    beta = 0.5
    tmax = (6.0 + 1.2 * torch.log(e_gev / 10.0)) * (nz / 25.0)
    alpha = 1.0 + beta * tmax
    long = torch.exp((alpha - 1.0) * torch.log(z) - beta * z)
    cx = nx / 2 + torch.rand(n, 1, 1, 1, generator=gen) - 0.5
    cy = ny / 2 + torch.rand(n, 1, 1, 1, generator=gen) - 0.5
    if angle is not None:
        cy = cy + (z - nz / 2) * 0.63 / torch.tan(angle.view(n, 1, 1, 1))
    r2 = (x - cx) ** 2 + (y - cy) ** 2
    rm = 1.0 + 0.04 * z
    trans = rm ** 2 / (r2 + rm ** 2) ** 2
    img = long * trans * -torch.log1p(-torch.rand(n, nx, ny, nz, generator=gen))
    img = img / img.sum(dim=(1, 2, 3), keepdim=True) * total.view(n, 1, 1, 1)
    img = torch.where(img < threshold, torch.zeros_like(img), img)
    return img.unsqueeze(1).contiguous()


@dataclass
class Batch:
    image: torch.Tensor    # (N, 1, X, Y, Z), as fed to D
    energy: torch.Tensor   # (N, 1) E/100
    ecal: torch.Tensor     # (N, 1) ECAL-sum target
    angle: torch.Tensor | None = None  # (N, 1) theta in rad


def make_batches(spec: Spec, batch: int, count: int, gen: torch.Generator, xscale: float = 1.0):
    out = []
    for _ in range(count):
        energy = torch.empty(batch, 1).uniform_(0.1, 5.0, generator=gen)
        if spec.angle:
            angle = torch.empty(batch, 1).uniform_(math.radians(60), math.radians(120), generator=gen)
            # file units GeV x 50, sampling fraction from GetEcalFit; D sees X**0.85
            raw_sum = 50.0 * ecal_fit(energy)
            raw = synthetic_showers(batch, spec.shape, energy, angle, raw_sum, gen)
            out.append(Batch(raw.pow(ANGLE_POWER), energy, raw.sum(dim=(2, 3, 4)), angle))
        else:
            # raw GeV (xscale = 1): the ECAL sum matches the GetEcalFit target of fakes
            img = synthetic_showers(batch, spec.shape, energy, None, ecal_fit(energy, xscale), gen,
                                    threshold=1e-6 * xscale)
            out.append(Batch(img, energy, img.sum(dim=(2, 3, 4))))
    return out


# --------------------------------------------------------------------------------------------
# Training step
# --------------------------------------------------------------------------------------------
@contextlib.contextmanager
def frozen(d: nn.Module):
    """D as in the Keras combined model: no weight updates, BatchNorm on batch statistics
    (train mode, dropout active) but running statistics not updated (momentum 0)."""
    bns = [m for m in d.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved = [m.momentum for m in bns]
    d.requires_grad_(False)
    for m in bns:
        m.momentum = 0.0
    try:
        yield
    finally:
        for m, mom in zip(bns, saved):
            m.momentum = mom
        d.requires_grad_(True)


class Trainer:
    def __init__(self, spec: Spec, device: torch.device, *, bf16: bool = False,
                 xscale: float = 1.0, lr: float = 1e-3):
        self.spec = spec
        self.device = device
        self.g = spec.make_g().to(device)
        self.d = spec.make_d().to(device)
        self.xscale = xscale
        opt = dict(lr=lr, alpha=0.9, eps=1e-7)   # Keras RMSprop defaults
        self.opt_d = torch.optim.RMSprop(self.d.parameters(), **opt)
        self.opt_g = torch.optim.RMSprop(self.g.parameters(), **opt)  # the combined model's
        self.bf16 = bf16

    def _autocast(self):
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def _d_loss(self, outs, targets) -> torch.Tensor:
        w = self.spec.loss_weights
        if self.spec.angle:
            fake, aux, ang, ecal = outs
            label, energy, angle, ecal_t = targets
            return (w[0] * keras_bce(fake, label) + w[1] * keras_mape(aux, energy)
                    + w[2] * keras_mae(ang, angle) + w[3] * keras_mape(ecal, ecal_t))
        fake, aux, ecal = outs
        label, energy, ecal_t = targets
        return (w[0] * keras_bce(fake, label) + w[1] * keras_mape(aux, energy)
                + w[2] * keras_mape(ecal, ecal_t))

    def _latent(self, energy: torch.Tensor, angle: torch.Tensor | None) -> torch.Tensor:
        n = energy.shape[0]
        if self.spec.angle:
            noise = torch.randn(n, self.g.latent - 2, device=self.device)
            return torch.cat([energy, angle, noise], dim=1)
        return energy * torch.randn(n, self.g.latent, device=self.device)

    def _conditions(self, real: Batch):
        """(energy, angle, ecal target) for generated showers."""
        if self.spec.angle:   # conditioned on the real batch; targets are the real ones
            return real.energy, real.angle, real.ecal
        energy = torch.empty_like(real.energy).uniform_(0.1, 5.0)
        return energy, None, ecal_fit(energy, self.xscale)

    def _targets(self, label, energy, angle, ecal):
        return (label, energy, angle, ecal) if self.spec.angle else (label, energy, ecal)

    def _d_update(self, image, targets) -> torch.Tensor:
        self.opt_d.zero_grad(set_to_none=True)
        with self._autocast():
            outs = self.d(image)
        loss = self._d_loss(outs, targets)
        loss.backward()
        self.opt_d.step()
        return loss.detach()

    def step(self, real: Batch) -> dict:
        n = real.energy.shape[0]
        ones = torch.ones(n, 1, device=self.device)
        zeros = torch.zeros(n, 1, device=self.device)

        # 1. generate in inference mode (BN moving averages)
        energy, angle, ecal = self._conditions(real)
        self.g.eval()
        with torch.no_grad(), self._autocast():
            generated = self.g(self._latent(energy, angle)).float()
        self.g.train()

        # 2./3. discriminator on real (labels ~1), then on fake (labels ~0), one update each
        self.d.train()
        d_real = self._d_update(real.image, self._targets(bit_flip(ones), real.energy, real.angle, real.ecal))
        d_fake = self._d_update(generated, self._targets(bit_flip(zeros), energy, angle, ecal))

        # 4. two generator updates through the frozen discriminator, labels 1, fresh noise
        g_losses = []
        with frozen(self.d):
            for _ in range(2):
                if not self.spec.angle:   # EcalEnergyTrain.py resamples energies per G update
                    energy, angle, ecal = self._conditions(real)
                self.opt_g.zero_grad(set_to_none=True)
                with self._autocast():
                    outs = self.d(self.g(self._latent(energy, angle)))
                loss = self._d_loss(outs, self._targets(ones, energy, angle, ecal))
                loss.backward()
                self.opt_g.step()
                g_losses.append(loss.detach())
        return {"d_real": d_real, "d_fake": d_fake, "g": torch.stack(g_losses).mean()}
