"""Pose probe on top-down crops: UDP heatmaps (weighted MSE), UDP decoding, COCO AP.

One heatmap per keypoint of the split's keypoint set (``keypoints308`` by default; the reader's
``keypoint_set``, e.g. COCO-17 or COCO-WholeBody-133 from ``data import``), scored with that set's OKS
sigmas and per-part AP / PCK / EPE over its declared parts.

Heatmaps are at stride ``output_stride`` (4) of the crop; keypoints are decoded with
``sapiens2.codecs.udp.udp_decode`` into crop pixels (with its ``"bounded"`` sub-pixel refinement,
the ``refine`` setting: the official step is unbounded on degenerate predicted heatmaps) and scored
with the COCO keypoint AP engine in crop coordinates (one crop = one image; the OKS area is the GT
area scaled into the crop). The GT area is the split's (``data import`` writes the source's
``area``, or ``w * h * 0.53`` of the box for sets without one; the record's
``conventions["gt_area"]`` says which). PCK / EPE are normalised by
the annotation box mapped into the crop (mmpose's convention); only a sample without a box (or
without its crop affine) falls back to the extent of its labelled keypoints, and
``conventions["pck_box"]`` says which was used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch

from benchmarks.probe.settings import TaskSettings
from benchmarks.probe.tasks.base import ProbeTask, VocabularySpec, register_probe_task
from benchmarks.probe.train.losses import register_loss
from evaluators.pose.evaluator import PoseEvaluator
from sapiens2.codecs.udp import REFINE_RULES, udp_decode, udp_encode
from sapiens2.vocab import keypoint_set

if TYPE_CHECKING:
    from benchmarks.probe.settings import ProtocolView

DEFAULT_KEYPOINT_SET = "keypoints308"


@dataclass(frozen=True)
class PoseSettings(TaskSettings):
    """Pose settings: heatmaps at stride 4, the UDP heatmap codec.

    Args:
        sigma: UDP Gaussian sigma in heatmap pixels.
        blur_kernel: UDP decoding blur kernel.
        refine: the decoder's sub-pixel refinement rule (``sapiens2.codecs.udp.udp_decode``):
            ``"bounded"`` (the default: the official Newton step where it stays in the argmax's pixel
            cell, or where the log-heatmap's Hessian is negative definite and the step within the
            blur's reach; otherwise the argmax: a read-out's predicted heatmaps are at times a
            saddle or a near-flat ridge at their maximum, where the official step is unbounded) or
            ``"official"`` (always the step, as the official decoder and ``predict``).
        keypoint_set: the keypoint set (built-in name, or the id a record names; "": the data's, or
            ``keypoints308`` for data that names none); the probe fills it in from the data.
    """

    loss: str = "heatmap_mse"
    loss_weights: dict = field(default_factory=lambda: {"mse": 1000.0})
    sigma: float = 2.0
    blur_kernel: int = 11
    refine: str = "bounded"
    keypoint_set: str = ""

    VOCABULARY_FIELD: ClassVar[str] = "keypoint_set"

    def __post_init__(self) -> None:
        if self.refine not in REFINE_RULES:
            raise ValueError(
                f"protocol.tasks['pose'].refine: expected one of {REFINE_RULES}, got {self.refine!r}"
            )


@register_probe_task
class PoseTask(ProbeTask):
    """Top-down heatmap regression of the keypoints of the split's keypoint set."""

    name = "pose"
    settings_class = PoseSettings
    crops = True
    out_channels = 308
    required_keys = ("keypoints", "visibility")
    vocabulary_kind = "keypoint_set"
    default_vocabulary = DEFAULT_KEYPOINT_SET

    def __init__(self, protocol: ProtocolView):
        super().__init__(protocol)
        self.use_vocabulary(None)

    def use_vocabulary(self, vocab: VocabularySpec = None) -> None:
        """One heatmap per keypoint of ``vocab`` (a KeypointSet, name or JSON; None: the settings')."""
        self.keypoint_set = self._resolve_vocabulary(vocab, keypoint_set)
        self.out_channels = self.keypoint_set.num_keypoints

    def heatmap_size(self, image_size: tuple[int, int]) -> tuple[int, int]:
        s = self.settings.output_stride
        return image_size[0] // s, image_size[1] // s

    def output_size(self, image_size: tuple[int, int], stride: int) -> tuple[int, int]:
        return self.heatmap_size(image_size)

    def targets(self, samples: list[dict]) -> dict[str, torch.Tensor]:
        h, w = self.protocol.input_size
        hh, hw = self.heatmap_size((h, w))
        heatmaps, weights, kpts, vis, areas, boxes = [], [], [], [], [], []
        for s in samples:
            k = np.asarray(s["keypoints"], np.float32).reshape(-1, 2)
            v = (np.asarray(s["visibility"], np.float32).reshape(-1) > 0).astype(np.float32)
            if k.shape[0] != self.out_channels:
                raise ValueError(
                    f"pose sample {s.get('id', s.get('index'))}: {k.shape[0]} keypoints, "
                    f"expected {self.out_channels} (keypoint set {self.keypoint_set.name})"
                )
            hm, wt = udp_encode(k, v, input_size=(w, h), heatmap_size=(hw, hh), sigma=self.settings.sigma)
            heatmaps.append(torch.from_numpy(hm))
            weights.append(torch.from_numpy(wt))
            kpts.append(torch.from_numpy(k))
            vis.append(torch.from_numpy(v))
            areas.append(_area_in_crop(s, k, v))
            boxes.append(_box_in_crop(s))
        # where each area comes from, as a number: targets may be made in loader worker processes
        from_box = [float("0.53" in str(s.get("area_source") or "")) for s in samples]
        return {
            "area_from_box": torch.tensor(from_box, dtype=torch.float64),
            "box": torch.tensor([b if b is not None else [np.nan] * 4 for b in boxes], dtype=torch.float64),
            "heatmaps": torch.stack(heatmaps),
            "weights": torch.stack(weights),
            "keypoints": torch.stack(kpts),
            "visibility": torch.stack(vis),
            "area": torch.tensor(areas, dtype=torch.float64),
        }

    def decode(self, maps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, w = self.protocol.input_size
        return udp_decode(
            maps.float(),
            input_size=(w, h),
            heatmap_size=(maps.shape[-1], maps.shape[-2]),
            blur_kernel_size=self.settings.blur_kernel,
            refine=self.settings.refine,
        )

    def make_evaluator(self) -> PoseEvaluator:
        return PoseEvaluator(meta=self.keypoint_set)

    def update_evaluator(self, evaluator: PoseEvaluator, maps: torch.Tensor, glob: torch.Tensor | None,
                         tgt: dict, index: torch.Tensor) -> None:
        """One crop = one image = one instance, scored in crop pixels against its GT."""
        kpts, scores = self.decode(maps)
        gt_xy = torch.as_tensor(tgt["keypoints"]).float().cpu()
        vis = torch.as_tensor(tgt["visibility"]).float().cpu() > 0
        gt_xyv = torch.cat([gt_xy, vis[..., None].float() * 2.0], -1)
        far = torch.full_like(gt_xy, float("inf"))
        lo = torch.where(vis[..., None], gt_xy, far).amin(1)
        hi = torch.where(vis[..., None], gt_xy, -far).amax(1)
        extent = torch.where(vis.any(1, keepdim=True), torch.cat([lo, hi - lo], 1), torch.zeros(len(vis), 4))
        nan = torch.full_like(extent, float("nan"))
        box = torch.as_tensor(tgt["box"]).float().cpu() if "box" in tgt else nan
        boxes = torch.where(torch.isfinite(box).all(1, keepdim=True), box, extent)
        finite = torch.isfinite(box).all(1)
        sources = {
            "pck_box": {PCK_BOX_ANNOTATION if bool(f) else PCK_BOX_EXTENT for f in finite},
            "gt_area": {AREA_FROM_BOX if float(v) == 1.0 else AREA_FROM_FILE
                        for v in torch.as_tensor(tgt.get("area_from_box", torch.zeros(len(finite))))},
        }  # fmt: skip
        for key, values in sources.items():
            seen = set(evaluator.conventions.get(key, "").split(" | ")) - {""}
            evaluator.conventions[key] = " | ".join(sorted(seen | values))
        ids = torch.as_tensor(index).tolist()
        evaluator.update(
            kpts,
            scores,
            image_ids=ids,
            index=ids,
            gt_keypoints=gt_xyv,
            gt_bboxes=boxes,
            gt_areas=torch.as_tensor(tgt["area"]).float().cpu(),
        )

    def linear_targets(self, tgt: dict) -> torch.Tensor:
        return tgt["heatmaps"]

    @property
    def oracle_patch(self) -> int:
        return self.settings.output_stride


AREA_FROM_FILE = "the split's 'area' (the source's own)"
AREA_FROM_BOX = "w * h * 0.53 of the box (the source has no 'area'; xtcocotools use_area=False)"
PCK_BOX_ANNOTATION = "the annotation box mapped into the crop (mmpose's PCK / EPE normaliser)"
PCK_BOX_EXTENT = "the extent of the labelled keypoints (the sample has no annotation box or crop affine)"


def _box_in_crop(s: dict) -> list[float] | None:
    """The sample's annotation box (x, y, w, h) in crop pixels: its corners through the crop affine."""
    crop = s.get("crop") or {}
    if s.get("bbox") is None or crop.get("affine") is None:
        return None
    x, y, w, h = (float(v) for v in np.asarray(s["bbox"], np.float64).reshape(4))
    a = np.asarray(crop["affine"], np.float64).reshape(2, 3)
    corners = np.array([[x, y, 1.0], [x + w, y, 1.0], [x, y + h, 1.0], [x + w, y + h, 1.0]]) @ a.T
    lo, hi = corners.min(0), corners.max(0)
    return [float(lo[0]), float(lo[1]), float(hi[0] - lo[0]), float(hi[1] - lo[1])]


def _area_in_crop(s: dict, k: np.ndarray, v: np.ndarray) -> float:
    """The GT instance area in crop pixels: COCO ``area`` times the crop affine's area scale."""
    crop = s.get("crop") or {}
    if s.get("area") is not None and crop.get("affine") is not None:
        a = np.asarray(crop["affine"], np.float64).reshape(2, 3)[:, :2]
        return float(s["area"]) * abs(float(np.linalg.det(a)))
    return _visible_box_area(k, v)


def _visible_box_area(k: np.ndarray, v: np.ndarray) -> float:
    sel = v > 0
    if not sel.any():
        return 1.0
    span = k[sel].max(0) - k[sel].min(0)
    return float(max(span[0] * span[1], 1.0))


@register_loss("heatmap_mse", task="pose", default_weights={"mse": 1.0})
def heatmap_mse(task: PoseTask, maps: torch.Tensor, glob: torch.Tensor | None, tgt: dict) -> dict:
    """Keypoint-weighted MSE of the UDP heatmaps."""
    err = ((maps - tgt["heatmaps"]) ** 2).flatten(2).mean(2)  # B x K
    return {"mse": (err * tgt["weights"]).mean()}
