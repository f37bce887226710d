#!/usr/bin/python3
"""Checks of the 3dgan-5 PyTorch peer (gan3d.Ecal5*, train_rung.py): plain asserts, < 30 s.

    /usr/bin/python3 bench/pytorch/test_rung.py

Parameter counts against `mpigan inspect 3dgan-5`, shapes, the Keras losses and mpigan's optimizer
formulas on hand values, BatchNorm statistics, the step's semantics (which conditions, labels and
statistics each pass uses), one step changing the weights, the showers file's layout, and a
two-snapshot run of train_rung.main on a small made-up data set.
"""

from __future__ import annotations

import csv
import glob
import json
import math
import os
import sys
import tempfile

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gan3d  # noqa: E402
import train_rung as tr  # noqa: E402

YAML = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "3dgan-5.yaml")
RUNG_FIT = [0.00238946, -0.0294496, 0.134395, -0.307053, 2.26919]


def settings(**over):
    s, _ = tr.resolve_settings(tr.parse_args(["--out", "unused"]), tr.load_yaml(YAML))
    s.update(over)
    return s


def close(a, b, tol=1e-5):
    return abs(float(a) - float(b)) <= tol * max(1.0, abs(float(b)))


def test_models():
    spec = gan3d.SPECS["3dgan-5"]
    g, d = spec.make_g(), spec.make_d()
    gan3d.check_param_counts(spec, g, d)
    assert gan3d.n_params(g) == 142_400 and gan3d.n_params(d) == 25_730
    # BatchNorm state: 192 (G) and 64 (D) non-trainable values, as `inspect` reports
    assert sum(b.numel() for n, b in g.named_buffers() if "running" in n) == 192
    assert sum(b.numel() for n, b in d.named_buffers() if "running" in n) == 64
    bns = [m for m in list(g.modules()) + list(d.modules()) if isinstance(m, nn_bn())]
    assert len(bns) == 4 and all(b.momentum == 0.01 and b.eps == 1e-3 for b in bns)
    assert all(isinstance(m, gan3d.KerasBatchNorm3d) for m in bns)
    assert all(m.negative_slope == 0.3 for m in d.modules() if isinstance(m, torch.nn.LeakyReLU))
    assert g.net[9].conv.bias is None and isinstance(g.net[10], torch.nn.ReLU)
    assert g.net[3].mode == "nearest"
    # initialisers: zero biases, he_uniform / glorot limits, truncated glorot_normal
    lim = math.sqrt(6.0 / (32 * 27))
    w = g.net[0].conv.weight
    assert w.abs().max() <= lim and w.abs().max() > 0.9 * lim and g.net[0].conv.bias.abs().sum() == 0
    lim = math.sqrt(6.0 / (64 + 864))
    assert g.dense.weight.abs().max() <= lim and g.dense.weight.abs().max() > 0.9 * lim
    std = math.sqrt(2.0 / (16 * 27 + 27))
    assert g.net[9].conv.weight.abs().max() <= 2 * std / 0.87962566103423978 + 1e-6
    z = torch.randn(8, 64)
    img = g(z)
    assert img.shape == (8, 1, 5, 5, 5) and (img >= 0).all()
    outs = d(img)
    assert [tuple(o.shape) for o in outs] == [(8, 1)] * 3
    assert ((outs[0] > 0) & (outs[0] < 1)).all() and torch.allclose(outs[2], img.pow(2).sum(dim=(2, 3, 4)))  # power 0.5
    # 'same' padding keeps 5^3; the k2 valid conv takes the upsampled 6^3 to 5^3
    h = g.net[:4](g.dense(z).view(-1, 32, 3, 3, 3))
    assert h.shape == (8, 64, 6, 6, 6) and g.net[4](h).shape == (8, 32, 5, 5, 5)
    assert torch.equal(h[:, :, 0, 0, 0], h[:, :, 1, 1, 1])   # nearest = repeat


def nn_bn():
    return torch.nn.modules.batchnorm._BatchNorm


def test_losses_and_fit():
    p, y = torch.tensor([[0.9], [0.2], [0.0]]), torch.tensor([[1.0], [0.0], [1.0]])
    want = (-math.log(0.9 + 1e-7) - math.log(0.8 + 1e-7) - math.log(1e-7 + 1e-7)) / 3   # clipped p = 1e-7
    assert close(gan3d.keras_bce(p, y), want)
    p, y = torch.tensor([[1.1], [2.0], [0.5]]), torch.tensor([[1.0], [4.0], [0.0]])
    assert close(gan3d.keras_mape(p, y), 100 * (0.1 + 0.5 + 0.5 / 1e-7) / 3, 1e-5)
    # the step's weighted total: 2 BCE + 0.1 MAPE(E/100) + 0.1 MAPE(ECAL sum)
    st = tr.RungStep(None, None, None, None, settings())
    outs = (torch.tensor([[0.5]]), torch.tensor([[1.5]]), torch.tensor([[90.0]]))
    total, heads = st.losses(outs, torch.tensor([[1.0]]), torch.tensor([[1.0]]), torch.tensor([[100.0]]))
    assert close(heads[0], math.log(2.0), 1e-5) and close(heads[1], 50.0) and close(heads[2], 10.0)
    assert close(total, 2 * math.log(2.0) + 5.0 + 1.0, 1e-5)
    # GetEcalFit, default (reference) coefficients unchanged, and the rung's coefficients
    x = torch.tensor([[1.0], [2.5]])
    old = (((0.0018 * x - 0.023) * x + 0.11) * x - 0.28) * x + 2.21
    assert torch.equal(gan3d.ecal_fit(x), old * x)
    assert close(gan3d.ecal_fit(torch.tensor(1.0), 100.0), 201.88, 1e-5)
    got = gan3d.ecal_fit(x, 100.0, RUNG_FIT)
    want = np.polyval(RUNG_FIT, x.numpy().astype(np.float64)) * x.numpy() * 100.0
    assert np.allclose(got.numpy(), want, rtol=1e-5)


def test_batchnorm():
    torch.manual_seed(0)
    bn = gan3d.KerasBatchNorm3d(3, eps=1e-3, momentum=0.01)
    x = torch.randn(4, 3, 2, 2, 2) * 2 + 1
    y = bn(x)
    var, mean = torch.var_mean(x, dim=(0, 2, 3, 4), unbiased=False)
    assert torch.allclose(y, (x - mean.view(1, 3, 1, 1, 1)) / torch.sqrt(var.view(1, 3, 1, 1, 1) + 1e-3), atol=1e-5)
    assert torch.allclose(bn.running_mean, 0.01 * mean) and torch.allclose(bn.running_var, 0.99 + 0.01 * var)
    rm, rv = bn.running_mean.clone(), bn.running_var.clone()
    bn.momentum = 0.0          # as gan3d.frozen sets it
    bn(x * 3)
    assert torch.equal(bn.running_mean, rm) and torch.equal(bn.running_var, rv)
    bn.eval()
    assert torch.allclose(bn(x), (x - rm.view(1, 3, 1, 1, 1)) / torch.sqrt(rv.view(1, 3, 1, 1, 1) + 1e-3), atol=1e-6)


def test_optimizers():
    w0, gr = torch.tensor([1.0, -2.0]), torch.tensor([0.5, -0.25])
    for name in ("rmsprop", "adam"):
        p = torch.nn.Parameter(w0.clone())
        opt = tr.make_optimizer([p], settings(optimizer=name, lr=1e-3, beta1=0.9))  # Keras defaults
        ms = np.zeros(2)
        m, v = np.zeros(2), np.zeros(2)
        w = w0.double().numpy()
        for t in (1, 2):
            g = gr.double().numpy() * t
            p.grad = torch.from_numpy(g).float()
            opt.step()
            if name == "rmsprop":   # ms = rho ms + (1-rho) g^2; w -= lr g / (sqrt(ms) + eps)
                ms = 0.9 * ms + 0.1 * g * g
                w = w - 1e-3 * g / (np.sqrt(ms) + 1e-7)
            else:                   # w -= lr sqrt(1-b2^t)/(1-b1^t) m / (sqrt(v) + eps)
                m = 0.9 * m + 0.1 * g
                v = 0.999 * v + 0.001 * g * g
                w = w - 1e-3 * math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-7)
        assert np.allclose(p.detach().double().numpy(), w, rtol=0, atol=1e-6), (name, p, w)


def test_preprocess_and_split():
    raw = np.zeros((2, 5, 5, 5), np.float32)
    raw[0, 2, 2, 1] = 0.5
    raw[0, 0, 0, 0] = 5e-7      # below 1e-6 GeV: dropped
    raw[1, 1, 2, 3] = 2.0
    x, e, s = tr.preprocess(raw, np.array([250.0, 10.0], np.float32), 1e-6, 100.0)
    assert x.shape == (2, 1, 5, 5, 5) and x.dtype == np.float32
    assert x[0, 0, 2, 2, 1] == 50.0 and x[0, 0, 0, 0, 0] == 0.0 and x[1, 0, 1, 2, 3] == 200.0
    assert np.allclose(s[:, 0], [50.0, 200.0]) and np.allclose(e[:, 0], [2.5, 0.1])
    # power 0.5 (3dgan-5's): cells to the power, the ECAL target still the sum before it
    xp, _, sp = tr.preprocess(raw, np.array([250.0, 10.0], np.float32), 1e-6, 100.0, 0.5)
    assert np.isclose(xp[0, 0, 2, 2, 1], 50.0 ** 0.5) and xp[0, 0, 0, 0, 0] == 0.0 and np.allclose(sp, s)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(12):
            open(os.path.join(tmp, f"f_{i + 1:03d}.h5"), "w").close()
        train, held = tr.split_files(tmp, 0.1667)
        assert [os.path.basename(f) for f in held] == ["f_011.h5", "f_012.h5"] and len(train) == 10
    p0, p1 = tr.epoch_permutation(100, 1, 0), tr.epoch_permutation(100, 1, 1)
    assert sorted(p0) == list(range(100)) and not np.array_equal(p0, p1)
    assert np.array_equal(p0, tr.epoch_permutation(100, 1, 0))
    y = tr.tiny_yaml(open(YAML).read())
    assert tr._get(y, "training.ecal_fit") == RUNG_FIT and tr._get(y, "training.batch") == 64
    assert tr._get(y, "data.validation_fraction") == 0.1667 and tr._get(y, "optimizer.name") == "adam"
    s = settings()
    assert s["batch"] == 64 and s["max_samples"] == 400000 and s["ecal_fit"] == RUNG_FIT
    assert s["fake_energy"] == [0.1, 5.0] and s["loss_weights"] == [2.0, 0.1, 0.1, 2.0] and s["label_flip"] == 0.05


def test_step():
    torch.manual_seed(3)
    spec = gan3d.SPECS["3dgan-5"]
    g, d = spec.make_g(), spec.make_d()
    s = settings()
    st = tr.RungStep(g, d, tr.make_optimizer(g.parameters(), s), tr.make_optimizer(d.parameters(), s), s)
    n = 64
    image = torch.rand(n, 1, 5, 5, 5) * 20
    energy = torch.rand(n, 1) * 4.9 + 0.1
    ecal = image.sum(dim=(2, 3, 4))
    flips = st._flipped(1.0, 200000)
    assert set(flips.unique().tolist()) == {0.0, 1.0} and abs(flips.mean().item() - 0.95) < 0.003
    # record what each loss evaluation sees
    calls, totals = [], []
    real_losses = st.losses

    def spy(outs, label, e, c):
        calls.append((label.clone(), e.clone(), c.clone(), d.training,
                      [m.momentum for m in d.modules() if isinstance(m, nn_bn())],
                      any(p.requires_grad for p in d.parameters())))
        total, heads = real_losses(outs, label, e, c)
        totals.append(total.item())
        return total, heads
    st.losses = spy
    before_g = [p.detach().clone() for p in g.parameters()]
    before_d = [p.detach().clone() for p in d.parameters()]
    g_bn = [m for m in g.modules() if isinstance(m, nn_bn())]
    d_bn = [m for m in d.modules() if isinstance(m, nn_bn())]
    L = st.run(image, energy, ecal)
    assert all(math.isfinite(L[k]) for k in ("d_real", "d_fake", "g")), L
    assert all(math.isfinite(v) for v in L["heads"].values()) and "g_ecal" in L["heads"], L
    assert len(calls) == 4                       # D real, D fake, G pass 1, G pass 2
    (l_r, e_r, c_r, *_), (l_f, e_f, c_f, *_) = calls[0], calls[1]
    assert torch.equal(e_r, energy) and torch.equal(c_r, ecal)
    assert set(l_r.unique().tolist()) <= {0.0, 1.0} and set(l_f.unique().tolist()) <= {0.0, 1.0}
    assert l_r.mean() > 0.5 and l_f.mean() < 0.5
    assert e_f.min() >= 0.1 and e_f.max() <= 5.0 and not torch.equal(e_f, energy)
    assert torch.allclose(c_f, gan3d.ecal_fit(e_f, 100.0, RUNG_FIT))
    for label, e, c, training, moms, d_grad in calls[2:]:   # same conditions, labels 1, D frozen
        assert torch.equal(e, e_f) and torch.equal(c, c_f) and bool((label == 1).all())
        assert training and all(m == 0.0 for m in moms) and not d_grad
    for _, _, _, training, moms, d_grad in calls[:2]:
        assert training and all(m == 0.01 for m in moms) and d_grad
    # running statistics: D's updated by its two passes only, G's by the two G passes only
    assert all(int(m.num_batches_tracked) == 2 for m in d_bn), [int(m.num_batches_tracked) for m in d_bn]
    assert all(int(m.num_batches_tracked) == 2 for m in g_bn)
    assert all(m.momentum == 0.01 for m in d_bn) and all(p.requires_grad for p in d.parameters())
    assert all(not torch.equal(a, b) for a, b in zip(before_g, g.parameters())), "every G tensor moves"
    assert all(not torch.equal(a, b) for a, b in zip(before_d, d.parameters())), "every D tensor moves"
    # reported losses: the weighted totals of the D passes, the mean over the G passes
    assert close(L["d_real"], totals[0]) and close(L["d_fake"], totals[1])
    assert close(L["g"], (totals[2] + totals[3]) / 2)


def test_generate_and_file():
    torch.manual_seed(5)
    g = gan3d.SPECS["3dgan-5"].make_g()
    energy = np.array([10.0, 250.0, 500.0] * 5, np.float32)
    out = tr.generate(g, energy, 100.0, seed=7, batch=4)
    assert out.shape == (15, 5, 5, 5) and out.dtype == np.float32 and (out >= 0).all()
    assert np.array_equal(out, tr.generate(g, energy, 100.0, seed=7, batch=4)) and g.training
    g.eval()
    gen = torch.Generator().manual_seed(7)
    cond = torch.from_numpy(energy * np.float32(0.01)).view(-1, 1)
    with torch.no_grad():
        ref = torch.cat([g(cond[i:i + 4] * torch.randn(len(cond[i:i + 4]), 64, generator=gen))
                         for i in range(0, 15, 4)])
    assert np.allclose(out, (ref.clamp_min(0) / 100.0).squeeze(1).numpy(), atol=1e-7)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gen-64.h5")
        tr.write_showers(path, out, energy, {"samples": 64})
        with h5py.File(path, "r") as f:
            assert set(f.keys()) == {"ECAL", "energy"}
            e = f["ECAL"]
            assert e.shape == (15, 5, 5, 5) and e.dtype == np.float32 and e.chunks == (1, 5, 5, 5)
            assert e.compression == "gzip" and np.array_equal(e[...], out)
            assert f["energy"].shape == (15,) and f["energy"].dtype == np.float32
            assert np.array_equal(f["energy"][...], energy)


def rung_files(tmp: str, rng) -> str:
    """TMP/data/EleEscan5_001..012.h5: 40 random 5x5x5 showers each at sum/E 0.02; returns the folder."""
    data = os.path.join(tmp, "data")
    os.makedirs(data)
    for i in range(12):
        e = rng.uniform(10, 500, 40).astype(np.float32)
        cells = rng.exponential(1.0, (40, 5, 5, 5)).astype(np.float32)
        cells *= (0.02 * e / cells.reshape(40, -1).sum(1))[:, None, None, None]
        with h5py.File(os.path.join(data, f"EleEscan5_{i + 1:03d}.h5"), "w") as f:
            f["ECAL"], f["energy"] = cells, e
    return data


def test_main_small():
    with tempfile.TemporaryDirectory() as tmp:
        data = rung_files(tmp, np.random.default_rng(0))
        out = os.path.join(tmp, "run")
        rc = tr.main(["--data-dir", data, "--out", out, "--max-samples", "96", "--batch", "16",
                      "--snapshots", "32,96", "--events", "50", "--optimizer", "adam", "--log-every", "100"])
        assert rc == 0
        rows = list(csv.reader(open(os.path.join(out, "losses.csv"))))
        heads = [f"{side}_{h}" for h in ("fake", "energy", "ecal") for side in ("d_real", "d_fake", "g")]
        assert rows[0] == ["samples", "d_real", "d_fake", "g"] + heads and len(rows) == 7
        assert [int(r[0]) for r in rows[1:]] == [16, 32, 48, 64, 80, 96]
        cfg = json.load(open(os.path.join(out, "config.json")))
        assert cfg["settings"]["optimizer"] == "adam" and cfg["source"]["batch"] == "flag"
        assert cfg["settings"]["ecal_fit"] == RUNG_FIT and cfg["steps"] == 6 and cfg["batches_per_epoch"] == 25
        assert len(cfg["train_files"]) == 10 and cfg["events_generated"] == 50
        for snap in (32, 96):
            with h5py.File(os.path.join(out, f"gen-{snap}.h5"), "r") as f:
                assert f["ECAL"].shape == (50, 5, 5, 5) and f.attrs["samples"] == snap
        assert cfg["result"]["samples"] == 96


def test_hlf_lr_scale_and_ema():
    """--hlf-lr-scale changes the run; --g-ema writes ema-N.h5 and leaves the live generator's
    showers bit for bit as they are without it."""
    with tempfile.TemporaryDirectory() as tmp:
        data = rung_files(tmp, np.random.default_rng(1))
        common = ["--data-dir", data, "--max-samples", "64", "--batch", "16", "--events", "20", "--optimizer",
                  "adam", "--condition", "--hlf-head", "--schedule", "cosine", "--log-every", "100"]
        runs = {"plain": [], "scaled": ["--hlf-lr-scale", "5"], "ema": ["--g-ema", "0.9"]}
        for name, extra in runs.items():
            assert tr.main(common + extra + ["--out", os.path.join(tmp, name)]) == 0

        def showers(name, kind="gen"):
            with h5py.File(os.path.join(tmp, name, f"{kind}-64.h5"), "r") as f:
                return f["ECAL"][...]
        assert np.array_equal(showers("plain"), showers("ema"))
        assert not np.array_equal(showers("plain"), showers("scaled"))
        assert not np.array_equal(showers("ema"), showers("ema", "ema"))
        cfg = json.load(open(os.path.join(tmp, "scaled", "config.json")))
        assert cfg["settings"]["hlf_lr_scale"] == 5.0 and cfg["source"]["hlf_lr_scale"] == "flag"


def test_hlf_mmd():
    """gan3d.mmd2_rq on the hand-computed case of mpigan's test (x = {0, 1}, y = {0, 2} in one
    dimension: (k(4) - k(0)) / 2), near 0 for samples of one distribution and well above for a
    shift; --hlf-mmd changes the run and needs --condition."""
    def k(s):
        return sum((1.0 + s / (2.0 * a)) ** -a for a in (0.2, 0.5, 1.0, 2.0, 5.0))
    x, y = torch.tensor([[0.0], [1.0]], dtype=torch.float64), torch.tensor([[0.0], [2.0]], dtype=torch.float64)
    assert close(gan3d.mmd2_rq(x, y, torch.ones(1, dtype=torch.float64)), 0.5 * (k(4.0) - 5.0), 1e-12)
    gen = torch.Generator().manual_seed(3)
    a, same = torch.randn(300, 2, generator=gen, dtype=torch.float64), torch.randn(300, 2, generator=gen,
                                                                                  dtype=torch.float64)
    shifted = torch.randn(300, 2, generator=gen, dtype=torch.float64) + torch.tensor([0.5, 0.0], dtype=torch.float64)
    two = torch.ones(2, dtype=torch.float64)
    null, alt = float(gan3d.mmd2_rq(a, same, two)), float(gan3d.mmd2_rq(a, shifted, two))
    assert abs(null) < 0.01 and alt > 0.05 and alt > 5 * abs(null), (null, alt)
    f = torch.tensor([[0.0, 1.0, 5.0], [1.0, 1.0, 7.0], [2.0, 1.0, 9.0]], dtype=torch.float64)
    sc = gan3d.mmd_scales(f)   # std 0.816, 0 (floored to 0.05), 1.633; the energy's times 4
    assert close(sc[0], 4.0 / math.sqrt(2.0 / 3.0)) and close(sc[1], 20.0) and close(sc[2], 1.0 / math.sqrt(8.0 / 3.0))
    # the transverse profiles (transverse_mmd): mpigan's hand-computed shower of cells 16, 1, 1, 4 at
    # (x, y) = (0, 0), (-1, 0), (1, 0), (2, -1) on 5 x 5 x 3, as percentages of their sum + 1e-3
    cells = torch.zeros(1, 1, 5, 5, 3, dtype=torch.float64)
    for (x, y, z), c in {(0, 0, 0): 16.0, (-1, 0, 1): 1.0, (1, 0, 1): 1.0, (2, -1, 2): 4.0}.items():
        cells[0, 0, x + 2, y + 2, z] = c
    want = torch.tensor([0.0, 1.0, 16.0, 1.0, 4.0, 0.0, 4.0, 18.0, 0.0, 0.0], dtype=torch.float64) * 100.0 / 22.001
    assert torch.allclose(gan3d.transverse_features(cells)[0], want)
    # a term on some features (response_mmd, longitudinal_mmd): the others 0, these times sqrt(F / count)
    some = gan3d.subset_scales(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), [0, 1, 4])
    assert torch.allclose(some, torch.tensor([1.0, 2.0, 0.0, 0.0, 5.0, 0.0]) * math.sqrt(2.0))
    with tempfile.TemporaryDirectory() as tmp:
        data = rung_files(tmp, np.random.default_rng(2))
        common = ["--data-dir", data, "--max-samples", "32", "--batch", "16", "--events", "20", "--optimizer",
                  "adam", "--condition", "--log-every", "100"]
        runs = {"plain": [], "mmd": ["--hlf-mmd", "10"], "both": ["--hlf-mmd", "10", "--response-mmd", "5"],
                "long": ["--hlf-mmd", "10", "--response-mmd", "5", "--longitudinal-mmd", "5"],
                "tran": ["--hlf-mmd", "10", "--response-mmd", "5", "--longitudinal-mmd", "5", "--transverse-mmd", "5"]}
        for name, extra in runs.items():
            assert tr.main(common + extra + ["--out", os.path.join(tmp, name)]) == 0
        with open(os.path.join(tmp, "long", "losses.csv")) as fh:
            head = fh.readline().strip().split(",")
        assert head[-3:] == ["d_real_longitudinal_mmd", "d_fake_longitudinal_mmd", "g_longitudinal_mmd"], head
        with open(os.path.join(tmp, "tran", "losses.csv")) as fh:
            head = fh.readline().strip().split(",")
        assert head[-3:] == ["d_real_transverse_mmd", "d_fake_transverse_mmd", "g_transverse_mmd"], head

        def showers(name):
            with h5py.File(os.path.join(tmp, name, "gen-32.h5"), "r") as fh:
                return fh["ECAL"][...]
        assert not np.array_equal(showers("plain"), showers("mmd"))
        assert not np.array_equal(showers("mmd"), showers("both"))
        assert not np.array_equal(showers("both"), showers("long"))
        assert not np.array_equal(showers("long"), showers("tran"))
        # --like: one shower at each energy of another file, and the generator's weights
        like = sorted(glob.glob(os.path.join(data, "*.h5")))[0]
        assert tr.main(common + ["--like", like, "--out", os.path.join(tmp, "like")]) == 0
        with h5py.File(like, "r") as fh:
            want = np.asarray(fh["energy"]).reshape(-1)
        with h5py.File(os.path.join(tmp, "like", "like-32.h5"), "r") as fh:
            assert np.allclose(np.asarray(fh["energy"]).reshape(-1), want) and fh["ECAL"].shape[0] == want.size
        assert os.path.isfile(os.path.join(tmp, "like", "generator-32.pt"))
        try:
            tr.main(["--data-dir", data, "--hlf-mmd", "1", "--out", os.path.join(tmp, "bad")])
            assert False, "hlf_mmd without condition was accepted"
        except SystemExit as e:
            assert "needs model.condition" in str(e)


def test_noise_and_normalise():
    e = torch.tensor([[0.1], [1.0], [4.0]])
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    zn, zs = tr.latent(e, 64, False, g1), tr.latent(e, 64, True, g2)
    assert torch.allclose(zs.norm(dim=1), e[:, 0] * 8.0, rtol=1e-5)          # |z| = sqrt(64)
    assert torch.allclose(torch.nn.functional.cosine_similarity(zn, zs), torch.ones(3), atol=1e-6)
    assert not torch.allclose(zn.norm(dim=1), e[:, 0] * 8.0, rtol=1e-4)
    spec = gan3d.SPECS["3dgan-5"]
    s = {"loss_weights": [2.0, 0.1, 0.1], "label_flip": 0.05, "fake_energy": [0.1, 5.0], "xscale": 100.0,
         "ecal_fit": list(RUNG_FIT), "generator_passes": 2, "noise": "sphere", "normalise_energy": True,
         "power": 0.5}
    st = tr.RungStep(spec.make_g(), spec.make_d(), None, None, s)
    img = torch.rand(3, 1, 5, 5, 5)
    assert torch.allclose(st._scaled(img, e), img / e.view(-1, 1, 1, 1, 1).sqrt())
    # the D's ECAL head on the scaled image equals the scaled target: sum(c) / (E/100)
    ecal = img.pow(2).sum(dim=(2, 3, 4))
    assert torch.allclose(st.d(st._scaled(img, e))[2], st._ecal(ecal, e), rtol=1e-5)


def test_condition():
    """model.condition: E/100 as D's second channel; the ECAL head and G's gradient see the shower only."""
    spec = gan3d.SPECS["3dgan-5"]
    d = spec.make_d(condition=True)
    assert gan3d.n_params(d) == 25_730 + 27 * 32      # d_conv1 gains one input channel, as in mpigan
    d.eval()
    img = torch.rand(4, 1, 5, 5, 5, requires_grad=True)
    e = torch.tensor([[0.2], [1.0], [2.5], [4.0]])
    fake, _, ecal = d(img, e)
    assert torch.allclose(ecal, img.pow(2).sum(dim=(2, 3, 4)))
    fake2, _, ecal2 = d(img, 4.5 - e)
    assert (fake2 != fake).all() and torch.allclose(ecal2, ecal)
    ecal.sum().backward()
    assert torch.allclose(img.grad, 2 * img)
    s = {"loss_weights": [2.0, 0.1, 0.1], "label_flip": 0.05, "fake_energy": [0.1, 5.0], "xscale": 100.0,
         "ecal_fit": list(RUNG_FIT), "generator_passes": 2, "noise": "normal", "normalise_energy": False,
         "power": 0.5}
    g = spec.make_g()
    d = spec.make_d(condition=True)
    st = tr.RungStep(g, d, torch.optim.SGD(g.parameters(), lr=1e-3), torch.optim.SGD(d.parameters(), lr=1e-3), s)
    w0 = d.features[0].conv.weight.detach().clone()
    out = st.run(torch.rand(8, 1, 5, 5, 5), torch.rand(8, 1) * 4 + 0.2, torch.rand(8, 1) * 50 + 1)
    assert all(math.isfinite(v) for v in out.values() if isinstance(v, float))
    assert not torch.equal(w0, d.features[0].conv.weight)
    # the binned ECAL loss: mpigan's hand-checked case (bins of [0, 5]: means 1.0 and 1.1 -> 5; grads 0, 12.5)
    p = torch.tensor([[1.1], [0.9], [2.0], [2.4]], requires_grad=True)
    loss = gan3d.binned_mean_ratio(p, torch.tensor([[1.0], [1.0], [2.0], [2.0]]),
                                   torch.tensor([[0.2], [0.3], [4.0], [4.5]]), 2, 0.0, 5.0)
    loss.backward()
    assert abs(loss.item() - 5.0) < 1e-4
    assert torch.allclose(p.grad.view(-1), torch.tensor([0.0, 0.0, 12.5, 12.5]))


def test_hlf_head():
    """model.hlf_head: mpigan's hand-computed features (tests/unit/nn/test_layers.cpp), the head's
    size, its BCE in the step; autograd gives the gradient that mpigan checks by finite differences."""
    c = torch.zeros(1, 1, 5, 5, 3, dtype=torch.float64)
    c[0, 0, 2, 2, 0] = 4.0
    c[0, 0, 1, 2, 1] = c[0, 0, 3, 2, 1] = 1.0
    c[0, 0, 4, 1, 2] = 2.0
    f = gan3d.shower_features(c, torch.tensor([[0.5]], dtype=torch.float64))[0]
    eps, S = 1e-3, 8.001
    Dz = [4.001, 2.001, 2.001]
    assert abs(f[0] - math.log10(0.5)) < 1e-12
    assert abs(f[1] - 10 * (math.log10(S / 0.5) - 2.3)) < 1e-9
    for z in range(3):
        assert abs(f[2 + 5 * z] - 2 * (math.log10(Dz[z] / S) + 1)) < 1e-9
    assert abs(f[5] - (5 * 1e-3 - 2)) < 1e-9
    assert abs(f[10] - (5 * math.sqrt(2 / Dz[1] + 1e-6) - 2)) < 1e-9
    mx, my = 4 / Dz[2], -2 / Dz[2]
    assert abs(f[13] - 5 * mx) < 1e-9 and abs(f[14] - 5 * my) < 1e-9
    assert abs(f[15] - (5 * math.sqrt(8 / Dz[2] - mx * mx + 1e-6) - 2)) < 1e-9
    spec = gan3d.SPECS["3dgan-5"]
    d = spec.make_d(condition=True, hlf_head=True)
    assert gan3d.n_params(d) == 25_730 + 27 * 32 + 28 * 64 + 65 * 64 + 65
    gan3d.check_param_counts(spec, spec.make_g(), d)
    s = {"loss_weights": [2.0, 0.0, 0.1, 2.0], "label_flip": 0.05, "fake_energy": [0.1, 5.0], "xscale": 100.0,
         "ecal_fit": list(RUNG_FIT), "generator_passes": 2, "noise": "sphere", "normalise_energy": False,
         "power": 0.5}
    g = spec.make_g()
    st = tr.RungStep(g, d, torch.optim.SGD(g.parameters(), lr=1e-3), torch.optim.SGD(d.parameters(), lr=1e-3), s)
    w0 = d.hlf[4].weight.detach().clone()
    outs = d(torch.rand(8, 1, 5, 5, 5), torch.rand(8, 1) * 4 + 0.2)
    assert len(outs) == 4 and outs[3].shape == (8, 1)
    out = st.run(torch.rand(8, 1, 5, 5, 5), torch.rand(8, 1) * 4 + 0.2, torch.rand(8, 1) * 50 + 1)
    assert all(math.isfinite(v) for v in out.values() if isinstance(v, float))
    assert not torch.equal(w0, d.hlf[4].weight)


def test_input_concat():
    """model.input concat: [E/100, z], z of size n - 1 on the sphere of radius sqrt(n - 1)."""
    e = torch.tensor([[0.1], [1.0], [4.0]])
    x = tr.latent(e, 64, True, torch.Generator().manual_seed(3), concat=True)
    assert x.shape == (3, 64) and torch.equal(x[:, :1], e)
    assert torch.allclose(x[:, 1:].norm(dim=1), torch.full((3,), math.sqrt(63.0)))
    p = tr.latent(e, 64, True, torch.Generator().manual_seed(3))
    assert torch.allclose(p.norm(dim=1), e.view(-1) * 8.0)


def test_generator_width():
    """model.generator_width: every hidden layer w times wider, as mpigan's 85 504 w^2 + 56 896 w."""
    spec = gan3d.SPECS["3dgan-5"]
    d = spec.make_d()
    for w in (1, 2, 3):
        g = gan3d.Ecal5Generator(width=w)
        assert gan3d.n_params(g) == 85_504 * w * w + 56_896 * w
        gan3d.check_param_counts(spec, g, d)
        assert g(torch.randn(2, 64)).shape == (2, 1, 5, 5, 5)
    assert gan3d.Ecal5Generator(width=2).net[0].conv.weight.shape == (128, 64, 3, 3, 3)


def test_energy_standardiser():
    """gan3d.EnergyStandardiser on mpigan's hand case (test_loss_optimizer): pairs at the same x with
    f1 = 2 + 3u + 0.5u^2 +- s(x), s^2 = 0.04 + 0.02 (x - 1), f2 = 7, f3 = -x +- 0.3: every residual
    standardises to +-1, the constant column to 0 (sigma at the floor); autograd's gradient is 1/sigma."""
    xs = [1.0, 1.4, 1.9, 2.3, 2.7]
    x0 = sum(xs) / 5.0
    rows = []
    for x in xs:
        s = math.sqrt(0.04 + 0.02 * (x - 1.0))
        for sign in (1.0, -1.0):
            rows.append([x, 2.0 + 3.0 * (x - x0) + 0.5 * (x - x0) ** 2 + sign * s, 7.0, -x + sign * 0.3])
    ref = torch.tensor(rows, dtype=torch.float64, requires_grad=True)
    st = gan3d.EnergyStandardiser(ref)
    out = st.apply(ref)
    signs = torch.tensor([1.0, -1.0] * 5, dtype=torch.float64)
    assert torch.allclose(out[:, 0], ref[:, 0]) and torch.allclose(out[:, 1], signs, atol=1e-9)
    assert torch.allclose(out[:, 2], torch.zeros(10, dtype=torch.float64), atol=1e-9)
    assert torch.allclose(out[:, 3], signs, atol=1e-9)
    assert close(float(st.sigma(torch.tensor([2.7]))[0, 2]), 0.3) and close(float(st.sigma(torch.tensor([2.7]))[0, 1]), 0.05)
    out[:, 3].sum().backward()
    assert torch.allclose(ref.grad[:, 3], torch.full((10,), 1.0 / 0.3, dtype=torch.float64))


def test_binned_spread():
    """gan3d.binned_spread on mpigan's hand case (test_loss_optimizer): reference residuals +-1 below
    the median x and +-2 above, generated 2 at three x below and two above; with a fit of one
    parameter the reference's mean squares grow by 4/3; autograd's gradient against the C++'s
    closed form 2 r share half_log / sum; and a training step with --response-spread runs."""
    d = torch.float64
    xr, rr = torch.tensor([0.1, 0.2, 0.8, 0.9], dtype=d), torch.tensor([1.0, -1.0, 2.0, -2.0], dtype=d)
    xf = torch.tensor([0.15, 0.3, 0.85, 0.95, 0.5], dtype=d)
    rf = torch.tensor([2.0, 2.0, 2.0, 2.0, 0.0], dtype=d, requires_grad=True)
    loss = gan3d.binned_spread(xf, rf, xr, rr, bins=2, fitted=0)
    hl = 0.5 * math.log(8.0 / 3.0)
    assert close(float(loss), 0.6 * hl * hl, 1e-12)
    loss.backward()
    assert close(float(rf.grad[0]), 2.0 * 2.0 * 0.6 * hl / 8.0, 1e-12) and float(rf.grad[2]) == 0.0
    one = gan3d.binned_spread(xf, rf, xr, rr, bins=2, fitted=1)
    assert close(float(one), 0.6 * (0.5 * math.log(2.0)) ** 2 + 0.4 * (0.5 * math.log(0.75)) ** 2, 1e-12)
    with tempfile.TemporaryDirectory() as tmp:
        data = rung_files(tmp, np.random.default_rng(2))
        common = ["--data-dir", data, "--max-samples", "32", "--batch", "16", "--events", "20", "--optimizer",
                  "adam", "--condition", "--log-every", "100"]
        for name, extra in {"plain": [], "spread": ["--response-spread", "10"]}.items():
            assert tr.main(common + extra + ["--out", os.path.join(tmp, name)]) == 0

        def showers(name):
            with h5py.File(os.path.join(tmp, name, "gen-32.h5"), "r") as fh:
                return fh["ECAL"][...]
        assert not np.array_equal(showers("plain"), showers("spread"))
        # losses.csv: the per-head columns as mpigan names them; G's total is their weighted sum
        # (default weights 2 BCE, 0.1 energy, 0.1 ECAL; the spread at 10)
        with open(os.path.join(tmp, "spread", "losses.csv")) as f:
            rows = list(csv.DictReader(f))
        assert "g_response_spread" in rows[0] and "d_real_fake" in rows[0] and "g_hlf_mmd" not in rows[0]
        for r in rows:
            v = {k: float(x) for k, x in r.items()}
            want = 2.0 * v["g_fake"] + 0.1 * v["g_energy"] + 0.1 * v["g_ecal"] + 10.0 * v["g_response_spread"]
            assert close(v["g"], want, 1e-4), (v["g"], want)
            assert v["d_real_response_spread"] == 0.0 and v["g_response_spread"] > 0.0


if __name__ == "__main__":
    torch.set_num_threads(1)
    tests = [v for k, v in sorted(globals().items()) if k.startswith("test_") and callable(v)]
    for t in tests:
        t()
        print(f"ok {t.__name__}")
    print(f"all {len(tests)} checks passed")
