"""The read-out's per-batch products, side by side: ``x^T x`` as ``x.T @ x`` against BLAS syrk
(``products.add_gram``), ``x^T y`` dense against block-sparse (``products.add_cross``, which takes the dense
product itself where its cost rule expects no gain).

By default one image of ``sapiens2_1b``'s shape at 1024x768 (64 x 48 tokens, 4 x 1536 tapped
channels); ``--small`` the main job's shape instead (8 images at 256x192, 384-3072 channels). The
targets: the 29-class one-hot at stride 1 (16 x 16 sub-pixels per token), 308 UDP heatmaps at
stride 4 (4 x 4 per token) and a masked 3-channel map at stride 1 (a person covering about a third of
the image), laid out on the token grid as the probe lays them (``shortcut.to_grid``). Prints seconds
per batch, their ratio and the largest difference from the dense float64 product of the same rows.
``--dtype float32``: the rows and targets in float32 (``ridge_product_dtype: "float32"``), the sums
still float64.

    python benchmarks/speed/cross_products.py [--small] [--repeat 3] [--dtype float32]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from benchmarks.probe.readout.products import add_cross, add_gram, symmetrize_
from benchmarks.probe.readout.shortcut import _rows, to_grid
from benchmarks.results import start_measurement, write_measurement
from sapiens2.codecs.udp import udp_encode

PATCH = 16


def _person(gen: torch.Generator, H: int, W: int) -> torch.Tensor:  # noqa: N803
    """H x W bool: an upright ellipse about a third of the image."""
    yy, xx = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
    cy, cx = H / 2 + torch.randn((), generator=gen) * 40, W / 2 + torch.randn((), generator=gen) * 30
    return ((yy - cy) / (0.42 * H)) ** 2 + ((xx - cx) / (0.26 * W)) ** 2 < 1


def targets(gen: torch.Generator, H: int = 1024, W: int = 768) -> dict:  # noqa: N803
    """``{name: (rows x outputs float64, block)}`` for one image."""
    grid = (H // PATCH, W // PATCH)
    person = _person(gen, H, W)
    # parts: horizontal bands of the silhouette, background class 0
    label = torch.where(person, 1 + (torch.arange(H)[:, None] * 28 // H).expand(H, W), 0)
    onehot = torch.zeros(1, 29, H, W).scatter_(1, label[None, None], 1.0)
    seg = _rows(to_grid(onehot, grid, 16, (H, W), (1.0, 1.0)))
    ys, xs = torch.nonzero(person, as_tuple=True)
    pick = torch.randint(0, len(ys), (308,), generator=gen)
    kpts = torch.stack([xs[pick], ys[pick]], 1).numpy().astype(np.float32)
    hm, _ = udp_encode(kpts, None, input_size=(W, H), heatmap_size=(W // 4, H // 4), sigma=2.0)
    pose = _rows(to_grid(torch.from_numpy(hm)[None], grid, 4, (H // 4, W // 4), (1.0, 1.0)))
    maps = torch.randn(1, 3, H, W, generator=gen) * person
    masked = _rows(to_grid(maps, grid, 16, (H, W), (1.0, 1.0)))
    return {"seg": (seg.double(), 256), "pose": (pose.double(), 16), "masked": (masked.double(), 256)}


def _seconds(fn, repeat: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def _row(name: str, outputs: int, nonzero: float, t_old: float, t_new: float, diff: float) -> dict:
    """Print one product's line; return it as a dict."""
    print(f"{name:8s} {outputs:8d} {nonzero:9.3f} {t_old:8.3f} {t_new:8.3f} {t_old / t_new:6.1f} "
          f"{diff:11.2e}")
    return {"product": name, "outputs": outputs, "non_zero": nonzero, "old_s": t_old, "new_s": t_new,
            "max_abs_diff": diff}


def compare(x: torch.Tensor, tgts: dict, repeat: int) -> list[dict]:
    """Print (and return) the Gram's and each target's row for the rows ``x``."""
    c = x.shape[1]
    full, syrk = (torch.zeros(c, c, dtype=torch.float64) for _ in range(2))
    t_full = _seconds(lambda: full.__iadd__(x.T @ x), repeat)
    t_syrk = _seconds(lambda: add_gram(syrk, x), repeat)
    x64 = x.double()
    ref, got = x64.T @ x64, torch.zeros_like(full)
    add_gram(got, x)
    symmetrize_(got)
    rows = [_row(f"gram {c}", c, 1.0, t_full, t_syrk, (got - ref).abs().max().item())]
    for name, (y, block) in tgts.items():
        y = y.to(x.dtype)
        acc = torch.zeros(c, y.shape[1], dtype=torch.float64)
        t_dense = _seconds(lambda a=acc, y=y: a.__iadd__(x.T @ y), repeat)
        t_block = _seconds(lambda a=acc, y=y, b=block: add_cross(a, x, y, b), repeat)
        ref, got = x64.T @ y.double(), torch.zeros_like(acc)
        add_cross(got, x, y, block)
        nz = y.reshape(len(y), -1, block).ne(0).any(-1).double().mean().item()
        rows.append(_row(name, y.shape[1], nz, t_dense, t_block, (got - ref).abs().max().item()))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="the main job's shape (8 images, 256x192)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dtype", default="float64", choices=("float64", "float32"), help="of the products")
    ap.add_argument("--json", default=None, help="write the timings here (a measurement file)")
    args = ap.parse_args()

    started = start_measurement()
    gen = torch.Generator().manual_seed(0)
    if args.small:
        parts = [targets(gen, 256, 192) for _ in range(8)]
        tgts = {k: (torch.cat([p[k][0] for p in parts]), parts[0][k][1]) for k in parts[0]}
        widths = (384, 768, 1536, 3072)
    else:
        tgts, widths = targets(gen), (6144,)
    rows = len(tgts["seg"][0])
    print(f"per batch of {rows} rows ({args.dtype}), torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; old: x.T @ x and x.T @ y, added")
    print(f"{'product':8s} {'outputs':>8s} {'non-zero':>9s} {'old s':>8s} {'new s':>8s} {'ratio':>6s} "
          f"{'max |diff|':>11s}")
    results = []
    for c in widths:
        x = torch.randn(rows, c, generator=gen, dtype=torch.float64)
        results.append({"channels": c, "rows": compare(x.to(getattr(torch, args.dtype)), tgts, args.repeat)})
    if args.json:
        write_measurement(args.json, f"syrk Gram and block-sparse x^T y, plain products ({args.dtype})",
                          {"rows_per_batch": rows, "dtype": args.dtype, "widths": results}, started=started)


if __name__ == "__main__":
    main()
