"""Anny bodies: the model (loaded once per process), shape sampling and posing.

Anny's own frame is z up with the person facing -y and the person's left at +x. Everything this
package hands on is in the y-up world of the renderer: ``world = ANNY_TO_WORLD @ anny``, which keeps
the person's left at +x and turns the face toward +z.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

# anny (x, y, z) -> world (x, z, -y): a proper rotation (det +1), so handedness and left/right keep.
ANNY_TO_WORLD = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])

# Anny's phenotype parameters, in its own order ("all" phenotypes: cup size, firmness and the three
# ethnicity weights too). Each is in [0, 1] except age, whose anchors run from -1/3 (newborn) through
# 0 (baby), 1/3 (child), 2/3 (young adult) to 1 (old).
PHENOTYPES = ("gender", "age", "muscle", "weight", "height", "proportions", "cupsize", "firmness",
              "african", "asian", "caucasian")
AGE_ANCHORS = {"newborn": -1 / 3, "baby": 0.0, "child": 1 / 3, "young": 2 / 3, "old": 1.0}


_MODEL_ARGS = {"phenotypes": "all", "skinning_method": "lbs"}
CACHE_HINT = ("python -c 'import anny; anny.Anny(phenotypes=\"all\")' builds it once (minutes, about 3 GB "
              "of memory; it writes about 0.9 GB to anny's cache folder, of which only the 111 MB compacted "
              "file is needed afterwards)")


def anny_cache_file():
    """The path of the compacted model-data file :func:`anny_model` loads (anny's own cache key)."""
    import hashlib
    import json

    from anny.models import build_compact_model_data
    from anny.models.model_data import CURRENT_DATA_VERSION, RigConfig, TopologyConfig, _get_builder_metadata
    from anny.paths import get_anny_cache_path

    metadata = _get_builder_metadata(
        build_compact_model_data.__wrapped__, rig=RigConfig.from_string("anny"),
        topology=TopologyConfig.from_string("anny"), local_changes="none", facial_actions="none",
        phenotypes=_MODEL_ARGS["phenotypes"], rank=None)
    key = hashlib.sha256(json.dumps(metadata, sort_keys=True).encode()).hexdigest()[:32]
    return get_anny_cache_path() / f"v{CURRENT_DATA_VERSION}" / f"build_compact_model_data_{key}.safetensors"


def anny_problem(require_cache: bool = True) -> str | None:
    """Why anny cannot be used here (a sentence), or None when it imports (and its cache is built)."""
    try:
        import anny  # noqa: F401
    except Exception as e:  # ImportError when absent; anything else when its dependencies break
        return f"cannot import anny ({type(e).__name__}: {e}); pip install anny==0.6.2"
    if require_cache:
        try:
            path = anny_cache_file()
        except Exception as e:  # another anny version: its private cache-key helpers moved
            return f"cannot locate anny's model cache ({type(e).__name__}: {e}); anny 0.6.2 is expected"
        if not path.exists():
            return f"anny's model cache {path} is not built; {CACHE_HINT}"
    return None


@functools.cache
def anny_model():
    """The shared Anny model: all phenotypes (ethnicity, cup size and firmness too), compacted blend
    shapes (exact up to round-off), torch linear-blend skinning (no warp kernels).

    It loads anny's 111 MB compacted cache file in about a second. Without that file anny would build
    it (minutes, about 3 GB of memory, about 0.9 GB written): that is refused here, see ``CACHE_HINT``.

    Raises:
        RuntimeError: anny is not importable or its cache is not built (the reason and the fix).
    """
    problem = anny_problem()
    if problem is not None:
        raise RuntimeError(f"the realistic synthetic generator needs anny: {problem}")
    import anny

    model = anny.Anny(**_MODEL_ARGS)
    # Its outputs are data, never trained: no graphs. Per model, not torch's process-wide grad mode,
    # which would stop every later training in the same process (pretraining, the probe's body).
    model.requires_grad_(False)
    return model


@functools.cache
def bone_index() -> dict[str, int]:
    """Bone label -> index in the model's rig."""
    return {name: i for i, name in enumerate(anny_model().bone_labels)}


@functools.cache
def faces() -> np.ndarray:
    """(F, 3) int64 triangles of the body mesh (anny's topology is triangles already)."""
    f = anny_model().faces.detach().cpu().numpy().astype(np.int64)
    if f.ndim != 2 or f.shape[1] != 3:
        raise RuntimeError(f"anny faces have shape {f.shape}, expected (F, 3) triangles")
    return f


@functools.cache
def dominant_bone() -> np.ndarray:
    """(V,) index of the bone with the largest skinning weight at each vertex."""
    m = anny_model()
    weights = m.vertex_bone_weights.detach().cpu().numpy()
    indices = m.vertex_bone_indices.detach().cpu().numpy()
    return indices[np.arange(len(indices)), weights.argmax(axis=1)].astype(np.int64)


@dataclass(frozen=True)
class BodyShape:
    """One body's anny phenotype values (see :data:`PHENOTYPES`)."""

    values: tuple[float, ...]

    def as_dict(self) -> dict[str, float]:
        return dict(zip(PHENOTYPES, self.values))


def sample_shape(rng: np.random.Generator, age_range: tuple[float, float] = (1 / 6, 1.0)) -> BodyShape:
    """A body shape over anny's full parameter ranges.

    Gender, muscle, weight, height, proportions, cup size and firmness are uniform on [0, 1]; the
    ethnicity weights (african, asian, caucasian) are a Dirichlet(0.6) mix, so both pure and mixed
    ancestries occur; age is uniform on ``age_range`` (default from a toddler, half way between baby
    and child, to old: infants cannot hold the pose set's standing poses).
    """
    lo, hi = age_range
    if not AGE_ANCHORS["newborn"] <= lo <= hi <= AGE_ANCHORS["old"]:
        raise ValueError(f"age_range {age_range} must lie within anny's [-1/3, 1] and be ordered")
    u = rng.uniform(0.0, 1.0, size=7)
    age = rng.uniform(lo, hi)
    ethnic = rng.dirichlet([0.6, 0.6, 0.6])
    values = (u[0], age, u[1], u[2], u[3], u[4], u[5], u[6], *ethnic)
    return BodyShape(tuple(float(v) for v in values))


@dataclass(frozen=True)
class PosedBody:
    """A skinned body in the y-up world frame (before placement: centred by the caller).

    A point rigidly attached to bone b moves from its rest position x to
    ``bone_rotations[b] @ (x - rest_bone_heads[b]) + bone_heads[b]``.
    """

    vertices: np.ndarray  # (V, 3) float64, posed
    rest_vertices: np.ndarray  # (V, 3) float64, the same body in anny's rest pose (world axes)
    bone_heads: np.ndarray  # (B, 3) float64, posed joint centres
    rest_bone_heads: np.ndarray  # (B, 3) float64, the joint centres in the rest pose (world axes)
    bone_rotations: np.ndarray  # (B, 3, 3) world rotation of each bone relative to its rest pose


def pose_body(shape: BodyShape, rotations: np.ndarray) -> PosedBody:
    """Skin ``shape`` with one rotation per bone.

    Args:
        shape: the phenotype values.
        rotations: (B, 3, 3) rotation of each bone about its head, relative to its parent, in axes
            aligned with anny's rest frame (anny's ``local-ref`` parameterization); the identity
            everywhere is anny's rest A-pose.

    Returns:
        The posed body, rotated into the world frame (y up, facing +z, left at +x).
    """
    import torch

    m = anny_model()
    n_bones = len(m.bone_labels)
    rotations = np.asarray(rotations, dtype=np.float64)
    if rotations.shape != (n_bones, 3, 3):
        raise ValueError(f"rotations have shape {rotations.shape}, expected ({n_bones}, 3, 3) (one per bone)")
    delta = np.tile(np.eye(4), (1, n_bones, 1, 1))
    delta[0, :, :3, :3] = rotations
    pheno = torch.tensor([shape.values], dtype=m.dtype)
    out = m(pose_parameters=torch.from_numpy(delta).to(m.dtype), phenotype_kwargs=pheno)
    rest_poses = out["rest_bone_poses"][0].numpy()
    poses = out["bone_poses"][0].numpy()
    relative = poses[:, :3, :3] @ np.transpose(rest_poses[:, :3, :3], (0, 2, 1))
    return PosedBody(
        vertices=out["vertices"][0].numpy() @ ANNY_TO_WORLD.T,
        rest_vertices=out["rest_vertices"][0].numpy() @ ANNY_TO_WORLD.T,
        bone_heads=poses[:, :3, 3] @ ANNY_TO_WORLD.T,
        rest_bone_heads=rest_poses[:, :3, 3] @ ANNY_TO_WORLD.T,
        bone_rotations=ANNY_TO_WORLD @ relative @ ANNY_TO_WORLD.T,
    )
