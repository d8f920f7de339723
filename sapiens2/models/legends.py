"""Legend panels drawn with matplotlib (Agg, no pyplot): class swatches, a colour bar, the normal key.

Each function returns an RGB uint8 panel of a given pixel height, to place beside a picture, so
the picture's own pixels are never resampled.

Example:
    >>> panel = legend_panel([("Background", (0, 0, 0)), ("Hair", (255, 0, 0))], height=120)
    >>> panel.shape[0], panel.dtype.name
    (120, 'uint8')
    >>> colorbar_panel(0.5, 2.0, "depth z (m)", height=200).shape[0]
    200
"""

from __future__ import annotations

import math

import numpy as np

DPI = 100
DEPTH_CMAP = "turbo_r"  # near = red, far = blue, in pictures and contact sheets alike


def _render(fig) -> np.ndarray:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def _trim_right(panel: np.ndarray, margin: int = 6) -> np.ndarray:
    """Drop the white columns on the right (the figure is drawn wider than needed)."""
    used = np.flatnonzero((panel < 250).any(axis=(0, 2)))
    return panel if used.size == 0 else panel[:, : min(panel.shape[1], used[-1] + 1 + margin)]


def _font_px(height: int) -> float:
    return float(np.clip(height / 40, 7, 12))


def legend_panel(entries, height: int, title: str | None = None, font_px: float | None = None) -> np.ndarray:
    """Colour swatches with names, in as many columns as ``height`` needs.

    Args:
        entries: (name, (r, g, b) in 0-255) pairs.
        height: panel height in pixels.
        title: optional title above the swatches.
        font_px: font size in pixels (default: from ``height``, 7-12 px).

    Returns:
        height x W x 3 uint8 RGB.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    entries = list(entries)
    fs = font_px or _font_px(height)
    rows = max(1, int((height - (2.5 * fs if title else 0)) / (fs * 1.75)))
    ncol = max(1, math.ceil(len(entries) / rows))
    longest = max((len(n) for n, _ in entries), default=1)
    width = int(ncol * (longest * fs * 0.62 + 3.2 * fs) + 2 * fs) + 40
    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI, facecolor="white")
    handles = [Patch(facecolor=np.asarray(c, float) / 255, edgecolor="black", linewidth=0.4, label=n)
               for n, c in entries]
    pt = fs * 72 / DPI
    fig.legend(handles=handles, loc="upper left", ncol=ncol, frameon=False, fontsize=pt, title=title,
               title_fontsize=pt, handlelength=1.2, handleheight=1.0, columnspacing=0.8,
               borderaxespad=0.2, labelspacing=0.45, alignment="left")
    return _trim_right(_render(fig))


def colorbar_panel(lo: float, hi: float, label: str, height: int, cmap: str = DEPTH_CMAP) -> np.ndarray:
    """A vertical colour bar from ``lo`` (bottom) to ``hi`` (top) with ticks and ``label``.

    Returns:
        height x W x 3 uint8 RGB.
    """
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    fs = _font_px(height)
    longest = max(len(line) for line in label.split("\n"))
    label_px = min(fs, 0.9 * height / (0.62 * longest))
    width = int(fs * 6 + label_px * 1.4 * (label.count("\n") + 1)) + 30
    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI, facecolor="white")
    bar_w = 1.2 * fs / width
    ax = fig.add_axes((0.08, 0.06, bar_w, 0.88))
    if not hi > lo:
        hi = lo + 1e-6
    cb = fig.colorbar(ScalarMappable(Normalize(lo, hi), colormaps[cmap]), cax=ax)
    cb.ax.tick_params(labelsize=fs * 72 / DPI, length=2)
    cb.set_label(label, fontsize=label_px * 72 / DPI)
    return _trim_right(_render(fig))


def normal_key_panel(height: int, font_px: float | None = None) -> np.ndarray:
    """Swatches of the six axis directions in the ``(n + 1) / 2`` colouring (camera frame)."""
    axes = [("+x", (1, 0, 0)), ("-x", (-1, 0, 0)), ("+y", (0, 1, 0)), ("-y", (0, -1, 0)),
            ("+z", (0, 0, 1)), ("-z", (0, 0, -1))]
    entries = [(f"n = {name}", tuple((np.asarray(v, float) + 1) * 127.5)) for name, v in axes]
    return legend_panel(entries, height, title="RGB = (n + 1) / 2\n(camera frame)", font_px=font_px)


def depth_rgb(z: np.ndarray, lo: float, hi: float, valid: np.ndarray | None = None) -> np.ndarray:
    """Depth colours (:data:`DEPTH_CMAP` between ``lo`` and ``hi``); black where not ``valid``."""
    from matplotlib import colormaps

    z = np.asarray(z, dtype=np.float64)
    valid = np.isfinite(z) if valid is None else (valid & np.isfinite(z))
    t = np.clip((np.where(valid, z, lo) - lo) / max(hi - lo, 1e-12), 0, 1)
    rgb = (colormaps[DEPTH_CMAP](t)[..., :3] * 255).astype(np.uint8)
    rgb[~valid] = 0
    return rgb


def beside(picture: np.ndarray, panel: np.ndarray) -> np.ndarray:
    """``panel`` to the right of ``picture`` (padded with white to the same height)."""
    h = max(picture.shape[0], panel.shape[0])
    pad = [np.pad(a, ((0, h - a.shape[0]), (0, 0), (0, 0)), constant_values=255) for a in (picture, panel)]
    return np.concatenate(pad, axis=1)
