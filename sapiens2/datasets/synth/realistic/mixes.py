"""Scene mixes of the realistic generator: what the scenes of each ``scenes`` name hold.

``default`` is the benchmark's mix; the others exist to measure what the default's difficulty costs
a real pretrained model (``benchmarks/analysis/realism_mediapipe.py``, ``docs/synthetic_data.md``).
Each control changes the mix above it in one respect, so the measured differences can be read as
the cost of that respect:

======================  ===================================================================
name                    what changes
======================  ===================================================================
``default``             every pose equally often, people facing any way, anywhere around the
                        first, every framing (full body to head close-up), 0-2 occluders
``photo``               pose frequencies of photos (lying rare), most people facing the
                        camera, standing beside rather than behind one another
``photo_one_object``    ``photo`` with at most one occluder, covering at most 30 % of the box
``photo_full_body``     ``photo`` framed full body, no occluders
``procedural_settings`` the procedural generator's scene settings (its pose families and their
                        frequencies, 65 % facing the camera, full body, 0-2 occluders): the
                        realistic people under the procedural split's scene difficulty
``upright``             standing or walking people, ``photo``'s facing and placement, every
                        framing, no occluders
``simple``              standing or walking, facing any way, full body, no occluders
``simple_facing``       ``simple`` with ``photo``'s facing and placement (the easiest mix)
======================  ===================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from .occluders import MAX_COVER
from .people import PeopleSettings
from .poses import PHOTO_POSE_WEIGHTS, POSES

UPRIGHT_POSES = ("stand", "walk")
# People in the "photo" scenes stand more beside than behind one another (the placement disc's depth
# extent relative to its width), so they overlap in the image less often.
PHOTO_DEPTH_RATIO = 0.35
# Share of people in the "photo" scenes turned towards the camera (yaw within about +-40 degrees of
# it), as most people in photos are.
FACING_SHARE = 0.75
# The procedural generator's pose families (sapiens2/datasets/synth/skeleton.py: stand 0.25, walk
# 0.25, raise 0.2, crouch 0.1, free 0.2) on the named poses: "raise" is shared by the three arm-raising
# poses, "free" by the two free-arm ones; it has no sitting, kneeling or lying.
PROCEDURAL_POSE_WEIGHTS: dict[str, float] = {
    "stand": 0.25, "walk": 0.25, "arms_up": 0.2 / 3, "wave": 0.2 / 3, "reach": 0.2 / 3, "crouch": 0.1,
    "point": 0.1, "hands_on_hips": 0.1, "sit_floor": 0.0, "kneel": 0.0, "lie": 0.0, "lie_side": 0.0,
}
PROCEDURAL_FACING_SHARE = 0.65  # its people face the camera within +-60 degrees 65 % of the time


@dataclass(frozen=True)
class SceneMix:
    """What the scenes of one ``scenes`` name hold.

    Attributes:
        pose_names: the named poses people take (:data:`poses.POSES`).
        pose_weights: relative frequency by pose name (None: all equally often).
        facing_share: share of people turned towards the camera (the rest face any direction).
        depth_ratio: placement disc depth over width (below 1: people beside rather than behind
            one another).
        framing: one camera framing (:data:`camera.FRAMINGS`) for every image, or None for the
            sampled mix.
        max_objects: at most this many occluding objects per image.
        max_cover: the largest share of the framed person's image box one object may cover.
        summary: what the mix holds, in a few words (for tables).
    """

    pose_names: tuple[str, ...] = tuple(POSES)
    pose_weights: dict[str, float] | None = None
    facing_share: float = 0.0
    depth_ratio: float = 1.0
    framing: str | None = None
    max_objects: int = 2
    max_cover: float = MAX_COVER
    summary: str = ""

    def people_settings(self) -> PeopleSettings:
        """How :func:`~.people.sample_people` draws the people of this mix."""
        weights = None if self.pose_weights is None else tuple(self.pose_weights[k] for k in self.pose_names)
        return PeopleSettings(pose_names=self.pose_names, pose_weights=weights,
                              facing_share=self.facing_share, depth_ratio=self.depth_ratio)


_PHOTO = {"pose_weights": PHOTO_POSE_WEIGHTS, "facing_share": FACING_SHARE, "depth_ratio": PHOTO_DEPTH_RATIO}
_FACING = {"facing_share": FACING_SHARE, "depth_ratio": PHOTO_DEPTH_RATIO}
SCENE_MIXES: dict[str, SceneMix] = {
    "default": SceneMix(summary="every pose, facing any way, every framing, 0-2 occluders"),
    "photo": SceneMix(**_PHOTO, summary="photo pose frequencies, most people facing the camera, "
                                        "side by side"),
    "photo_one_object": SceneMix(**_PHOTO, max_objects=1, max_cover=0.3,
                                 summary="photo, at most one occluder covering at most 30 %"),
    "photo_full_body": SceneMix(**_PHOTO, framing="full_body", max_objects=0,
                                summary="photo, full body, no occluders"),
    "procedural_settings": SceneMix(pose_weights=PROCEDURAL_POSE_WEIGHTS,
                                    facing_share=PROCEDURAL_FACING_SHARE, framing="full_body",
                                    summary="the procedural generator's poses, facing, framing and "
                                            "occluders"),
    "upright": SceneMix(pose_names=UPRIGHT_POSES, **_FACING, max_objects=0,
                        summary="standing or walking, photo facing and placement, every framing, "
                                "no occluders"),
    "simple": SceneMix(pose_names=UPRIGHT_POSES, framing="full_body", max_objects=0,
                       summary="standing or walking, facing any way, full body, no occluders"),
    "simple_facing": SceneMix(pose_names=UPRIGHT_POSES, **_FACING, framing="full_body", max_objects=0,
                              summary="simple, photo facing and placement"),
}
SCENES = tuple(SCENE_MIXES)
