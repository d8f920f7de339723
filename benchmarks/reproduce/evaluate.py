"""Feeding official task models' predictions on reader samples into the project's evaluators.

Dense tasks: the image (3 x H x W in [0, 1]) is resized bilinearly to the model input, normalised
with the ImageNet mean/std in 0-255, and the prediction goes to the evaluator, which resizes it to
the ground truth. Pose: the reader's top-down crop is already at the model input; the estimator
decodes UDP heatmaps with flip test and maps keypoints back to image pixels through the crop
affine; instances are scored against the GT of their own annotation (GT boxes, bbox score 1).
Pointmaps are compared in canonical coordinates (focal length 768), as the official evaluator does.

A split in another vocabulary (an imported COCO-17 / COCO-WholeBody pose split, a person-mask or
Pascal-Person-Part seg split) is scored in the split's vocabulary: the 308 keypoints are mapped by
name (:func:`sapiens2.vocab_mapping.keypoint_mapping`), and the 29-class logits are resized to the
GT, arg-maxed and mapped by the split's declared many-to-one map (:func:`vocabulary_adapter`).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from evaluators.runner import Update, sample_update
from sapiens2.tasks import get_task
from sapiens2.vocab_mapping import keypoint_mapping, label_mapping, map_keypoints, remap_labels


def _inputs(samples, mean, std, input_size, device) -> torch.Tensor:
    imgs = []
    for s in samples:
        img = torch.as_tensor(s["image"], dtype=torch.float32, device=device)[None]
        if tuple(img.shape[-2:]) != tuple(input_size):
            img = F.interpolate(img, size=tuple(input_size), mode="bilinear", align_corners=False)
        imgs.append(img)
    return (torch.cat(imgs) * 255.0 - mean) / std


def _dense_prediction(task: str, raw, j: int) -> torch.Tensor:
    """Sample ``j``'s prediction as the evaluator takes it (pointmap: scale applied; albedo: clamped)."""
    if task == "pointmap":
        pointmap, scale = raw
        return (pointmap[j:j + 1].float() * scale[j:j + 1].float().reshape(1, 1, 1, 1)).cpu()
    pred = raw[j:j + 1].float()
    return (pred.clamp(0, 1) if task == "albedo" else pred).cpu()


def vocabulary_adapter(task: str, dataset):
    """(evaluator kwargs, prediction map or None) for a split whose vocabulary is not the model's.

    Raises:
        ValueError: no declared map from the model's vocabulary to the split's.
    """
    if task == "pose":
        ks = getattr(dataset, "keypoint_set", None)
        if ks is None or ks.name == "keypoints308":
            return {}, None
        mapping = keypoint_mapping("keypoints308", ks)
        if not mapping.mapped.any():
            raise ValueError(f"no keypoint of the split's set {ks.name} has a counterpart in the 308 set")
        return {"meta": ks}, mapping
    if task == "seg":
        ls = getattr(dataset, "label_set", None)
        if ls is None or ls.name == "sapiens2_29":
            return {}, None
        return {"label_set": ls}, label_mapping("sapiens2_29", ls)
    return {}, None


def _mapped_labels(logits: torch.Tensor, gt_hw, mapping) -> torch.Tensor:
    """1 x C x h x w 29-class logits -> 1 x H x W labels of the split's set (bilinear to GT, argmax, map)."""
    up = F.interpolate(logits, size=tuple(gt_hw), mode="bilinear", align_corners=False)
    return torch.from_numpy(remap_labels(up.argmax(1).numpy(), mapping))


@torch.inference_mode()
def updates(task: str, model, samples: list[dict], mean, std, input_size, device,
            pred_map=None) -> list[Update]:
    """Run ``model`` on ``samples``; the evaluator updates of its predictions (one per dense sample).

    Dense tasks feed the GT and mask keys the task table names (``TaskSpec.feed``). ``pred_map``
    (from :func:`vocabulary_adapter`) maps the predictions into the split's vocabulary.
    """
    x = _inputs(samples, mean, std, input_size, device)
    if get_task(task).dense:
        raw = model(x)
        if task == "seg" and pred_map is not None:
            return [sample_update(task, _mapped_labels(_dense_prediction(task, raw, j), s["label"].shape[-2:],
                                                       pred_map), [s], pred_is_labels=True)
                    for j, s in enumerate(samples)]
        return [sample_update(task, _dense_prediction(task, raw, j), [s]) for j, s in enumerate(samples)]
    index = [int(s["index"]) for s in samples]
    affine = np.stack([np.asarray(s["crop"]["affine"], np.float64) for s in samples])
    out = model.predict(x, flip_test=True, crop=affine)
    gt = np.stack([np.concatenate([np.asarray(s["keypoints_image"], np.float64),
                                   np.asarray(s["visibility"], np.float64)[:, None]], 1)
                   for s in samples])
    boxes = np.stack([np.asarray(s["bbox"], np.float64) for s in samples])
    kps, scores = out["keypoints"].cpu().numpy(), out["scores"].cpu().numpy()
    if pred_map is not None:
        kps, scores = map_keypoints(kps, scores, pred_map)
    return [Update((kps, scores,
                    [s["image_id"] for s in samples]),
                   dict(index=index, bbox_scores=[float(s.get("bbox_score", 1.0)) for s in samples],
                        gt_head_sizes=([float(s["head_size"]) for s in samples]
                                       if all("head_size" in s for s in samples) else None),
                        gt_keypoints=gt, gt_bboxes=boxes, gt_areas=[float(s["area"]) for s in samples]))]
