"""Feeding official task models' predictions on reader samples into the project's evaluators.

Dense tasks: the image (3 x H x W in [0, 1]) is resized bilinearly to the model input, normalised
with the ImageNet mean/std in 0-255, and the prediction goes to the evaluator, which resizes it to
the ground truth. Pose: the reader's top-down crop is already at the model input; the estimator
decodes UDP heatmaps with flip test and maps keypoints back to image pixels through the crop
affine; instances are scored against the GT of their own annotation (GT boxes, bbox score 1).
Pointmaps are compared in canonical coordinates (focal length 768), as the official evaluator does.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from evaluators.runner import Update, sample_update
from sapiens2.tasks import get_task


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


@torch.inference_mode()
def updates(task: str, model, samples: list[dict], mean, std, input_size, device) -> list[Update]:
    """Run ``model`` on ``samples``; the evaluator updates of its predictions (one per dense sample).

    Dense tasks feed the GT and mask keys the task table names (``TaskSpec.feed``).
    """
    x = _inputs(samples, mean, std, input_size, device)
    if get_task(task).dense:
        raw = model(x)
        return [sample_update(task, _dense_prediction(task, raw, j), [s]) for j, s in enumerate(samples)]
    index = [int(s["index"]) for s in samples]
    affine = np.stack([np.asarray(s["crop"]["affine"], np.float64) for s in samples])
    out = model.predict(x, flip_test=True, crop=affine)
    gt = np.stack([np.concatenate([np.asarray(s["keypoints_image"], np.float64),
                                   np.asarray(s["visibility"], np.float64)[:, None]], 1)
                   for s in samples])
    boxes = np.stack([np.asarray(s["bbox"], np.float64) for s in samples])
    return [Update((out["keypoints"].cpu().numpy(), out["scores"].cpu().numpy(),
                    [s["image_id"] for s in samples]),
                   dict(index=index, bbox_scores=[float(s.get("bbox_score", 1.0)) for s in samples],
                        gt_keypoints=gt, gt_bboxes=boxes, gt_areas=[float(s["area"]) for s in samples]))]
