"""Dataset readers of the five tasks (registered in ``sapiens2.registry.DATASETS``) and the synthetic data.

See ``README.md`` in this folder for the on-disk layouts and the sample dict of each reader.
"""

from .base import ManifestDataset, collate
from .dense import AlbedoDataset, NormalDataset, PointmapDataset, SegDataset
from .io import DatasetError
from .pose import PoseTopdownDataset, TopdownAffineUDP
from .split import available_tasks, data_tasks, open_split, split_info

__all__ = [
    "AlbedoDataset",
    "DatasetError",
    "ManifestDataset",
    "NormalDataset",
    "PointmapDataset",
    "PoseTopdownDataset",
    "SegDataset",
    "TopdownAffineUDP",
    "available_tasks",
    "data_tasks",
    "collate",
    "open_split",
    "split_info",
]
