"""Where an importer finds an annotation's image (shared by the COCO-style and MPII importers)."""

from __future__ import annotations

from pathlib import Path

from sapiens2.errors import DatasetError


def image_path(images_dir: Path, file_name: str, where: str) -> Path:
    """The image ``file_name`` names, relative to ``images_dir`` unless absolute.

    Raises:
        DatasetError: the file does not exist (naming ``where`` and the path).
    """
    p = Path(file_name)
    p = p if p.is_absolute() else images_dir / p
    if not p.is_file():
        raise DatasetError(f"{where}: image file {p} not found (pass --images DIR, the folder of the images)")
    return p.resolve()
