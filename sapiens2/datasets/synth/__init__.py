"""Procedural synthetic people with exact ground truth for all five tasks (the embedded default data).

``generate_split`` renders a split in the reader formats; ``ensure_default_split`` returns a cached
one, rendering it on first use; ``synth_sample`` renders one scene to in-memory arrays.
"""

from .scene import render_scene, sample_scene, synth_sample
from .writer import (
    GENERATOR_VERSION,
    TASK_MANIFESTS,
    default_cache_root,
    ensure_default_split,
    generate_split,
    split_content_hash,
)

__all__ = [
    "GENERATOR_VERSION",
    "TASK_MANIFESTS",
    "default_cache_root",
    "ensure_default_split",
    "generate_split",
    "render_scene",
    "sample_scene",
    "split_content_hash",
    "synth_sample",
]
