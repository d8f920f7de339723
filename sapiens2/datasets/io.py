"""The one set of file readers: the dataset readers and ``sapiens2-bench eval`` both use these.

This module is their one import path: it defines nothing and re-exports the file decoders
(:mod:`sapiens2.datasets.decoders`) and the map readers built on them (:mod:`sapiens2.datasets.map_files`).

Every error is a :class:`DatasetError` naming the file (and the manifest record, when there is one).
The format rules (suffixes, channel layouts, value ranges, masks) are documented once, in
``sapiens2/datasets/README.md`` ("File formats"); in short:

* ``.npy``: values are taken as they are (never rescaled). Float maps (normals, pointmaps,
  albedo) must be float arrays, H x W x 3 or 3 x H x W; an integer ``.npy`` map is an error (its
  scale would be a guess). Label maps are integer arrays. The header is checked against the file
  size before anything is allocated.
* ``.png``: integers whose bit depth defines the scale: labels as they are; normals
  ``v / vmax * 2 - 1``; albedo ``v / vmax`` (vmax = 255 or 65535); pointmaps cannot be PNGs. A
  16-bit map whose values all fit in 8 bits is an error unless the scale is given (``png_max``).
* images are read upright: the EXIF Orientation tag is applied (as ``cv2.imread`` does).
* image size: checked from the header before decoding (``sapiens2.datasets.image_size``): over
  Pillow's decompression-bomb limit (89.5 megapixels; ``$SAPIENS2_MAX_IMAGE_PIXELS`` sets it) or
  over the available memory is an error naming the file, its size and the limit.
* ``.exr``: float RGB (normals, pointmaps, albedo), channels R, G, B = x, y, z.
* masks: PNG non-zero = valid; ``.npy`` bool or only 0/1 values; a colour mask must be grey.

Example:
    >>> import numpy as np, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> np.save(d / "a.npy", np.zeros((3, 4, 5), np.float32))
    >>> read_map(d / "a.npy", "normal").shape
    (4, 5, 3)
    >>> np.save(d / "u8.npy", np.zeros((4, 5, 3), np.uint8))
    >>> read_map(d / "u8.npy", "unit")
    Traceback (most recent call last):
    ...
    sapiens2.errors.DatasetError: .../u8.npy: an albedo .npy must hold floats in [0, 1], got uint8 ...
"""

from __future__ import annotations

from sapiens2.datasets.decoders import exr_supported, read_exr, read_npy, read_png, read_rgb
from sapiens2.datasets.map_files import (
    MAP_SUFFIXES,
    check_pair_range,
    check_same_size,
    pair_files,
    read_label,
    read_map,
    read_mask,
    read_seg_prediction,
    value_range,
)
from sapiens2.errors import DatasetError, where

__all__ = ["MAP_SUFFIXES", "DatasetError", "check_pair_range", "check_same_size", "exr_supported",
           "pair_files", "read_exr", "read_label", "read_map", "read_mask", "read_npy", "read_png",
           "read_rgb", "read_seg_prediction", "value_range", "where"]
