"""Task heads of the official Sapiens2 models, registered in ``sapiens2.registry.MODELS``."""

from sapiens2.models.heads.common import RMSNorm2d
from sapiens2.models.heads.dense import AlbedoHead, NormalHead, PixelShuffleHead
from sapiens2.models.heads.pointmap import PointmapHead
from sapiens2.models.heads.pose import PoseHeatmapHead
from sapiens2.models.heads.seg import SegHead

__all__ = ["AlbedoHead", "NormalHead", "PixelShuffleHead", "PointmapHead", "PoseHeatmapHead", "RMSNorm2d",
           "SegHead"]
