"""A picture of the realism measurement's conditions: the first images of each condition's split.

One row per condition (its name, body AP and interval from the measurement file on the left), the
first ``--images`` images of its split, so a reader sees what "default", "simple_facing" or
"capsule" scenes look like beside the numbers.

Usage::
    python -m benchmarks.analysis.scene_mix_sheet --work WORK --measurement M.json \\
        --out docs/img/scene_mixes.jpg
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchmarks.analysis.realism_mediapipe import split_folder  # noqa: E402
from benchmarks.results import read_measurement  # noqa: E402
from sapiens2.datasets.io import read_rgb  # noqa: E402
from sapiens2.utils_io import atomic_write  # noqa: E402


def sheet(work: Path, measurement: Path, out: Path, images: int = 5, seed: int = 0) -> Path:
    """Draw the sheet of every condition of ``measurement`` (splits under ``work``) into ``out``."""
    rows = read_measurement(measurement)["numbers"]["conditions"]
    fig, axes = plt.subplots(len(rows), images, figsize=(1.6 * images + 2.2, 2.1 * len(rows)), squeeze=False)
    for r, row in enumerate(rows):
        split = split_folder(work, row["condition"], row["size"], row["n_images"], seed)
        files = sorted((split / "images").glob("*.png"))[:images]
        if len(files) < images:
            raise FileNotFoundError(f"{split}: expected at least {images} images under images/, "
                                    f"found {len(files)} (render it with realism_mediapipe first)")
        for c, ax in enumerate(axes[r]):
            ax.imshow(read_rgb(files[c]))
            ax.set_xticks([])
            ax.set_yticks([])
        lo, hi = row["body_AP_95"]
        axes[r][0].set_ylabel(f"{row['condition']}\n{row['size']}\nbody AP {row['body_AP']:.2f}\n"
                              f"[{lo:.2f}, {hi:.2f}]", rotation=0, ha="right", va="center", fontsize=8)
    fig.suptitle(f"MediaPipe body AP per condition ({measurement.name}; first {images} images of each split)",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    # JPEG for .jpg/.jpeg: path-traced grain makes a PNG of this sheet several MB
    jpeg = out.suffix.lower() in (".jpg", ".jpeg")
    kw = {"format": "jpeg", "pil_kwargs": {"quality": 85}} if jpeg else {"format": "png"}
    try:
        return atomic_write(out, lambda tmp: fig.savefig(tmp, dpi=72, **kw))
    finally:
        plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", required=True, help="the folder realism_mediapipe rendered the splits into")
    p.add_argument("--measurement", required=True, help="realism_mediapipe's measurement file")
    p.add_argument("--out", required=True, help="image to write (.png, or .jpg for a small file)")
    p.add_argument("--images", type=int, default=5, help="images per condition (default 5)")
    p.add_argument("--seed", type=int, default=0, help="the splits' seed (default 0)")
    args = p.parse_args(argv)
    print(sheet(Path(args.work), Path(args.measurement), Path(args.out), args.images, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
