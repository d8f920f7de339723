"""Keypoint codecs (heatmap encoding/decoding) shared by the pose heads, probing and evaluation."""

from sapiens2.codecs.udp import flip_heatmaps, flip_permutation, fuse_flip, udp_decode, udp_encode

__all__ = ["udp_encode", "udp_decode", "flip_heatmaps", "flip_permutation", "fuse_flip"]
