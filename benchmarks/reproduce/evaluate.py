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


def make_evaluator(task: str):
    """The project's evaluator of ``task`` with the official settings."""
    if task == "pose":
        from evaluators.pose.evaluator import PoseEvaluator

        return PoseEvaluator()
    if task == "seg":
        from evaluators.seg import SegEvaluator

        return SegEvaluator()
    if task == "normal":
        from evaluators.normal import NormalEvaluator

        return NormalEvaluator()
    if task == "pointmap":
        from evaluators.pointmap import PointmapEvaluator

        return PointmapEvaluator()
    if task == "albedo":
        from evaluators.albedo import AlbedoEvaluator

        return AlbedoEvaluator()
    raise KeyError(f"unknown task {task!r}")


def _inputs(samples, mean, std, input_size, device) -> torch.Tensor:
    imgs = []
    for s in samples:
        img = torch.as_tensor(s["image"], dtype=torch.float32, device=device)[None]
        if tuple(img.shape[-2:]) != tuple(input_size):
            img = F.interpolate(img, size=tuple(input_size), mode="bilinear", align_corners=False)
        imgs.append(img)
    return (torch.cat(imgs) * 255.0 - mean) / std


@torch.inference_mode()
def update_evaluator(task: str, model, evaluator, samples: list[dict], mean, std, input_size, device) -> None:
    """Run ``model`` on ``samples`` and add its predictions to ``evaluator``."""
    x = _inputs(samples, mean, std, input_size, device)
    index = [int(s["index"]) for s in samples]
    if task == "pose":
        affine = np.stack([np.asarray(s["crop"]["affine"], np.float64) for s in samples])
        out = model.predict(x, flip_test=True, crop=affine)
        gt = np.stack([np.concatenate([np.asarray(s["keypoints_image"], np.float64),
                                       np.asarray(s["visibility"], np.float64)[:, None]], 1)
                       for s in samples])
        boxes = np.stack([np.asarray(s["bbox"], np.float64) for s in samples])
        evaluator.update(out["keypoints"].cpu().numpy(), out["scores"].cpu().numpy(),
                         [s["image_id"] for s in samples], index=index,
                         bbox_scores=[float(s.get("bbox_score", 1.0)) for s in samples],
                         gt_keypoints=gt, gt_bboxes=boxes,
                         gt_areas=[float(s["area"]) for s in samples])
        return
    raw = model(x)
    for j, s in enumerate(samples):
        one = [index[j]]
        if task == "seg":
            evaluator.update(raw[j:j + 1].float().cpu(), torch.as_tensor(s["label"])[None], index=one)
        elif task == "normal":
            evaluator.update(raw[j:j + 1].float().cpu(), torch.as_tensor(s["normal"])[None],
                             torch.as_tensor(s["mask"])[None], index=one)
        elif task == "pointmap":
            pointmap, scale = raw
            pred = pointmap[j:j + 1].float() * scale[j:j + 1].float().reshape(1, 1, 1, 1)
            evaluator.update(pred.cpu(), torch.as_tensor(s["pointmap_canonical"])[None],
                             torch.as_tensor(s["mask"])[None], index=one)
        elif task == "albedo":
            pred = raw[j:j + 1].float().clamp(0, 1)
            evaluator.update(pred.cpu(), torch.as_tensor(s["albedo"])[None], torch.as_tensor(s["mask"])[None],
                             index=one)
        else:
            raise KeyError(f"unknown task {task!r}")
