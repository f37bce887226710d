#!/usr/bin/python3
"""Where a generator's showers still differ from Monte Carlo on the classifier's features: per
energy range, each feature's univariate AUC (Mann-Whitney, generated vs Monte Carlo) and the ratio
of its spreads; the correlation between the layers of the barycentres, layer energies and widths;
and, with --groups, the AUC of a classifier trained on each group of features alone.

    /usr/bin/python3 scripts/feature_diagnosis.py MC.h5 GENERATED.h5 [--groups] [--seeds N]

Features (per shower, depth the last axis of ECAL, transverse coordinates in cells from the
centre): log10(E/Ep), per layer z log10(E_z/Ep), the barycentre (cx_z, cy_z) and width (wx_z,
wy_z) of the layer's energy, as the validation's high-level features (docs/physics.md). The group
classifier is the validation's design (Dense 64, LeakyReLU 0.2, twice, sigmoid; Adam 1e-3, batch
128, 60/20/20 split, early stop after 5 epochs) in PyTorch, on features standardised by Monte Carlo.
"""

import argparse

import h5py
import numpy as np

RANGES = [(10, 100), (100, 250), (250, 500)]


def load(path):
    with h5py.File(path, "r") as f:
        return f["ECAL"][:].astype(np.float64), f["energy"][:].astype(np.float64)


def features(x, ep):
    nz = x.shape[3]
    c = np.arange(x.shape[1]) - 0.5 * (x.shape[1] - 1)
    out = {"logE": np.log10(x.sum((1, 2, 3)) / ep)}
    for z in range(nz):
        layer = x[:, :, :, z]
        e = layer.sum((1, 2))
        out[f"lE{z}"] = np.log10((e + 1e-8) / ep)
        px, py, ee = layer.sum(2), layer.sum(1), e + 1e-12
        mx, my = (px * c).sum(1) / ee, (py * c).sum(1) / ee
        out[f"cx{z}"], out[f"cy{z}"] = mx, my
        out[f"wx{z}"] = np.sqrt(np.maximum((px * c * c).sum(1) / ee - mx ** 2, 0))
        out[f"wy{z}"] = np.sqrt(np.maximum((py * c * c).sum(1) / ee - my ** 2, 0))
    return out, nz


def auc(ref, gen):
    """P(gen > ref), ties counting 1/2."""
    from scipy.stats import rankdata  # noqa: PLC0415 (optional dependency, used only here)
    r = rankdata(np.concatenate([ref, gen]))
    n0, n1 = len(ref), len(gen)
    return (r[n0:].sum() - n1 * (n1 + 1) / 2) / (n0 * n1)


def classifier_auc(fa, fb, seed):
    import torch  # noqa: PLC0415
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x = np.concatenate([fa, fb])
    y = np.concatenate([np.zeros(len(fa)), np.ones(len(fb))])
    x = (x - fa.mean(0)) / (fa.std(0) + 1e-9)
    idx = rng.permutation(len(x))
    n = len(x)
    tr, va, te = idx[:int(.6 * n)], idx[int(.6 * n):int(.8 * n)], idx[int(.8 * n):]
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    m = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 64), torch.nn.LeakyReLU(.2), torch.nn.Linear(64, 64),
                            torch.nn.LeakyReLU(.2), torch.nn.Linear(64, 1))
    opt = torch.optim.Adam(m.parameters(), 1e-3)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    best, state, bad = 1e9, None, 0
    for _ in range(40):
        perm = tr[rng.permutation(len(tr))]
        for i in range(0, len(perm), 128):
            b = perm[i:i + 128]
            opt.zero_grad()
            bce(m(x[b]).squeeze(1), y[b]).backward()
            opt.step()
        with torch.no_grad():
            v = bce(m(x[va]).squeeze(1), y[va]).item()
        if v < best:
            best, state, bad = v, {k: t.clone() for k, t in m.state_dict().items()}, 0
        else:
            bad += 1
            if bad >= 5:
                break
    m.load_state_dict(state)
    with torch.no_grad():
        s = m(x[te]).squeeze(1).numpy()
    yt = y[te].numpy()
    return auc(s[yt == 0], s[yt == 1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reference")
    p.add_argument("generated")
    p.add_argument("--groups", action="store_true", help="also train a classifier on each group of features")
    p.add_argument("--seeds", type=int, default=1, help="classifier seeds per group")
    a = p.parse_args()
    xr, er = load(a.reference)
    xg, eg = load(a.generated)
    fr, nz = features(xr, er)
    fg, _ = features(xg, eg)
    sel = [((er >= lo) & (er < hi), (eg >= lo) & (eg < hi)) for lo, hi in RANGES]
    heads = "  ".join(f"{lo}-{hi} GeV" for lo, hi in RANGES)
    print(f"univariate AUC (generated vs Monte Carlo) and spread ratio gen/MC, per energy range: {heads}")
    rows, all_auc = [], []
    for k in fr:
        aucs = [auc(fr[k][mr], fg[k][mg]) for mr, mg in sel]
        sds = [fg[k][mg].std() / max(fr[k][mr].std(), 1e-12) for mr, mg in sel]
        all_auc += aucs
        rows.append((max(abs(v - 0.5) for v in aucs), k, aucs, sds))
    for _, k, aucs, sds in sorted(rows, reverse=True):
        print(f"  {k:6s} AUC " + " ".join(f"{v:.3f}" for v in aucs) + "   sd ratio " + " ".join(f"{v:.2f}" for v in sds))
    v = np.array(all_auc)
    print(f"  {len(v)} values in [{v.min():.2f}, {v.max():.2f}]; {100 * np.mean((v > 0.43) & (v < 0.57)):.0f} % "
          "within 0.43-0.57")
    np.set_printoptions(precision=2, suppress=True)
    for (lo, hi), (mr, mg) in zip(RANGES, sel):
        for name in ("cx", "cy", "lE", "wx"):
            ref = np.corrcoef(np.stack([fr[f"{name}{z}"][mr] for z in range(nz)]))
            gen = np.corrcoef(np.stack([fg[f"{name}{z}"][mg] for z in range(nz)]))
            print(f"correlation between layers of {name}, {lo}-{hi} GeV (Monte Carlo above the diagonal, "
                  "generated below):")
            print(np.triu(ref, 1) + np.tril(gen, -1))
        mid = nz // 2
        print(f"correlation of cx{mid} and cy{mid}, {lo}-{hi} GeV: Monte Carlo "
              f"{np.corrcoef(fr[f'cx{mid}'][mr], fr[f'cy{mid}'][mr])[0, 1]:+.2f}, generated "
              f"{np.corrcoef(fg[f'cx{mid}'][mg], fg[f'cy{mid}'][mg])[0, 1]:+.2f}")
    if a.groups:
        fr["logEp"], fg["logEp"] = np.log10(er), np.log10(eg)
        groups = {"all": ["logEp", "logE"] + [f"{p}{z}" for p in ("lE", "cx", "cy", "wx", "wy") for z in range(nz)],
                  "energies": ["logEp", "logE"] + [f"lE{z}" for z in range(nz)],
                  "barycentres": ["logEp"] + [f"c{ax}{z}" for ax in "xy" for z in range(nz)],
                  "widths": ["logEp"] + [f"w{ax}{z}" for ax in "xy" for z in range(nz)]}
        for g, keys in groups.items():
            fa = np.stack([fr[k] for k in keys], 1)
            fb = np.stack([fg[k] for k in keys], 1)
            print(f"classifier on {g}: AUC " + " ".join(f"{classifier_auc(fa, fb, s):.3f}" for s in range(a.seeds)),
                  flush=True)


if __name__ == "__main__":
    main()
