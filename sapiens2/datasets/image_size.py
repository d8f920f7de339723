"""The image size check of the readers (``sapiens2.datasets.io``): refuse before decoding.

An image is checked from its header, before any pixel is decoded: over the pixel limit (Pillow's
decompression-bomb limit ``PIL.Image.MAX_IMAGE_PIXELS``, 89.5 megapixels, or
``$SAPIENS2_MAX_IMAGE_PIXELS``), or needing more memory to decode than this process has
(:func:`sapiens2.memory.available_memory`), it is a :class:`~sapiens2.errors.DatasetError` naming
the file, its size and the limit.

Example:
    >>> check_image_size(20000, 20000, 3, 1, "big.png")
    Traceback (most recent call last):
    ...
    sapiens2.errors.DatasetError: big.png: image 20000x20000 (400.0 megapixels) is over the limit ...
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from sapiens2.errors import DatasetError, where
from sapiens2.memory import available_memory_for, format_bytes

_PIXELS_ENV = "SAPIENS2_MAX_IMAGE_PIXELS"
# Bytes per decoded pixel and channel beyond the samples themselves: the decoder's buffer, the array
# copy, and the float32 copy every caller makes.
_DECODE_OVERHEAD = 4


def max_image_pixels() -> int:
    """The reader's pixel limit: ``$SAPIENS2_MAX_IMAGE_PIXELS`` (then also Pillow's) or Pillow's own."""
    from PIL import Image

    text = os.environ.get(_PIXELS_ENV)
    if text is None:
        return int(Image.MAX_IMAGE_PIXELS or 89_478_485)
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if limit < 1:
        raise DatasetError(f"{_PIXELS_ENV}={text!r}: expected a positive number of pixels")
    Image.MAX_IMAGE_PIXELS = limit  # Pillow refuses above 2x its limit in Image.open
    return limit


def check_image_size(width: int, height: int, channels: int, sample_bytes: int, path, record=None) -> None:
    """Refuse to decode a ``width`` x ``height`` image over the pixel limit or the available memory.

    Raises:
        DatasetError: naming the file, its size and the limit it breaks.
    """
    pixels, limit = int(width) * int(height), max_image_pixels()
    size = f"image {width}x{height} ({pixels / 1e6:.1f} megapixels)"
    if pixels > limit:
        raise DatasetError(f"{where(path, record)}: {size} is over the limit of {limit / 1e6:.1f} megapixels "
                           f"(a decompression bomb?); set {_PIXELS_ENV} to raise it")
    need = pixels * channels * (sample_bytes + _DECODE_OVERHEAD)
    free = available_memory_for(need)
    if free is not None and need > free:
        raise DatasetError(f"{where(path, record)}: {size} needs about {format_bytes(need)} to decode, "
                           f"but only {format_bytes(free)} of memory is available")


def open_image(path: Path, record, min_channels: int = 1):
    """``Image.open`` with the size checked (:func:`check_image_size`) before any pixel is decoded.

    Args:
        path: the image file.
        record: the manifest record (for messages) or ``None``.
        min_channels: channels the caller converts to (3 for RGB), when more than the file's.
    """
    from PIL import Image

    limit = max_image_pixels()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # refused below instead
        try:
            im = Image.open(path)
        except Image.DecompressionBombError as e:
            raise DatasetError(f"{where(path, record)}: image over the limit of {limit / 1e6:.1f} megapixels "
                               f"(a decompression bomb?; {e}); set {_PIXELS_ENV} to raise it") from None
    try:
        sample = 2 if im.mode.startswith("I;16") else 4 if im.mode in ("I", "F") else 1
        check_image_size(im.width, im.height, max(min_channels, len(im.getbands())), sample, path, record)
    except BaseException:
        im.close()
        raise
    return im
