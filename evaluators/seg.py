"""Body-part segmentation metrics (official ``seg_evaluator``/mmseg ``IoUMetric`` definitions).

Everything comes from one dataset-level confusion matrix ``C x (C + 1)`` (rows: GT class, columns:
predicted class, last column: pixels whose logits were NaN/Inf and so have no prediction), built
with one ``bincount`` per batch. Per class: intersect = diagonal, GT area = row sum, predicted area
= column sum, union = pred + GT - intersect. A class absent from both prediction and GT has a 0/0
IoU: NaN, skipped by the means (``nan_to_num`` replaces NaNs per class before the means, as mmseg).

Example:
    >>> import torch
    >>> gt = torch.tensor([[[0, 1], [1, 255]]])
    >>> logits = torch.tensor([[[[5., 0.], [0., 0.]], [[0., 5.], [5., 0.]]]])  # 1 x 2 x 2 x 2
    >>> ev = SegEvaluator(num_classes=2)
    >>> ev.update(logits, gt, index=[0])
    >>> r = ev.compute()
    >>> r["mIoU"], r["aAcc"]
    (100.0, 100.0)
"""

from __future__ import annotations

import math

import numpy as np
import torch

from evaluators.base import Evaluator
from evaluators.dense_common import as_tensor, check_bchw, masked_bincount, resize_to
from evaluators.metric_decl import MetricDecl, count_decl
from evaluators.registry import EVALUATORS
from sapiens2.reference import seg_classes29
from sapiens2.vocab import label_set as _label_set

PER_CLASS_METRICS = ("IoU", "Acc", "Dice", "Fscore", "Precision", "Recall")


def fast_argmax(x: torch.Tensor) -> torch.Tensor:
    """First index of the maximum along dim 1 of B x C x H x W (``argmax(1)``, ties to the lowest).

    PyTorch's CPU ``argmax`` over a strided dimension is several times slower than a plain
    reduction; this takes ``amax`` and then the lowest class equal to it, with uint8 planes.
    NaN-free input is assumed (NaN pixels give C).

    Example:
        >>> fast_argmax(torch.tensor([[[[1.0]], [[3.0]], [[3.0]]]])).item()
        1
    """
    c = x.shape[1]
    if c > 255 or x.device.type != "cpu":
        return x.argmax(1)
    best = x.amax(1, keepdim=True)
    rank = torch.arange(c, 0, -1, dtype=torch.uint8, device=x.device).view(1, c, 1, 1)  # C..1
    hit = (x == best).to(torch.uint8).mul_(rank)
    return c - hit.amax(1).to(torch.int64)


def seg_labels_from_logits(
    logits: torch.Tensor, size: tuple[int, int], binary_threshold: float = 0.3
) -> tuple[torch.Tensor, torch.Tensor]:
    """Resize logits bilinearly (align_corners=False) to ``size`` and take the argmax.

    A one-channel map is a binary model's logit (mmseg's convention): label 1 where
    ``sigmoid(logit) > binary_threshold``.

    Args:
        logits: B x C x h x w class scores (C >= 2), or B x 1 x h x w binary logits.
        size: GT size (H, W).
        binary_threshold: probability threshold of one-channel logits (mmseg's default 0.3).

    Returns:
        (labels B x H x W int64 with -1 where any logit is NaN/Inf, nonfinite B x H x W bool).

    Example:
        >>> lab, bad = seg_labels_from_logits(torch.randn(2, 4, 3, 3), (6, 6))
        >>> tuple(lab.shape), int(bad.sum())
        ((2, 6, 6), 0)
    """
    up = resize_to(logits, size)
    if up.shape[1] == 1:
        labels = (torch.sigmoid(up[:, 0]) > binary_threshold).to(torch.int64)
        bad = ~torch.isfinite(up[:, 0])
    else:
        lo, hi = up.amin(1), up.amax(1)
        bad = ~(torch.isfinite(lo) & torch.isfinite(hi))
        labels = fast_argmax(up)
    if bool(bad.any()):
        labels = labels.masked_fill(bad, -1)
    return labels, bad


def seg_confusion(
    pred: torch.Tensor, gt: torch.Tensor, num_classes: int, ignore_index: int = 255
) -> torch.Tensor:
    """Per-sample confusion matrices ``B x C x (C + 1)`` (last column: no valid prediction).

    Args:
        pred: B x H x W predicted labels in [0, C) or -1 (no prediction).
        gt: B x H x W GT labels in [0, C) or ``ignore_index``.
        num_classes: C.
        ignore_index: GT label of pixels that are not scored.

    Returns:
        int64 tensor B x C x (C + 1).

    Raises:
        ValueError: a GT label is outside [0, C) and is not ``ignore_index``.

    Example:
        >>> seg_confusion(torch.tensor([[[0, 1]]]), torch.tensor([[[0, 0]]]), 2)[0].tolist()
        [[1, 1, 0], [0, 0, 0]]
    """
    c = num_classes
    keep = gt != ignore_index
    outside = keep & ((gt < 0) | (gt >= c))
    if bool(outside.any()):
        vals = gt[outside].unique()[:10].tolist()
        raise ValueError(f"gt_seg: labels {vals} are outside [0, {c}) and not ignore_index {ignore_index}")
    b = gt.shape[0]
    cell = gt * (c + 1) + torch.where(pred < 0, c, pred)  # GT row, predicted column (C: none)
    return masked_bincount(cell, keep, c * (c + 1)).view(b, c, c + 1)


def seg_metrics_from_confusion(
    conf: torch.Tensor, beta: float = 1.0, nan_to_num: float | None = None
) -> dict:
    """Per-class metrics and their means from a (dataset-level) confusion matrix C x (C + 1).

    Args:
        conf: C x (C + 1) counts (rows GT, columns prediction, last column no prediction).
        beta: F-score beta.
        nan_to_num: replace per-class NaNs by this value before the means (None: keep NaN, skipped).

    Returns:
        dict with ``aAcc`` (fraction) and per-class float64 tensors ``IoU``, ``Acc``, ``Dice``,
        ``Fscore``, ``Precision``, ``Recall`` (fractions, NaN for 0/0) and ``area_*`` totals.

    Example:
        >>> m = seg_metrics_from_confusion(torch.tensor([[3, 1, 0], [0, 4, 0]]))
        >>> [round(v, 4) for v in m["IoU"].tolist()]
        [0.75, 0.8]
    """
    conf = conf.to(torch.float64)
    c = conf.shape[0]
    intersect = conf.diagonal()
    area_label = conf.sum(1)
    area_pred = conf[:, :c].sum(0)
    union = area_pred + area_label - intersect
    precision = intersect / area_pred
    recall = intersect / area_label
    out = {
        "aAcc": float(intersect.sum() / area_label.sum()),
        "IoU": intersect / union,
        "Acc": recall.clone(),
        "Dice": 2 * intersect / (area_pred + area_label),
        "Fscore": (1 + beta**2) * precision * recall / (beta**2 * precision + recall),
        "Precision": precision,
        "Recall": recall,
        "area_intersect": intersect,
        "area_union": union,
        "area_pred_label": area_pred,
        "area_label": area_label,
    }
    if nan_to_num is not None:
        for k in PER_CLASS_METRICS:
            out[k] = torch.nan_to_num(out[k], nan=nan_to_num)
    return out


def _nanmean(x: torch.Tensor) -> float:
    v = x[~torch.isnan(x)]
    return float(v.mean()) if v.numel() else math.nan


@EVALUATORS.register_module()
class SegEvaluator(Evaluator):
    """Streaming body-part segmentation evaluator (29 classes by default).

    Args:
        num_classes: number of classes C.
        ignore_index: GT label that is not scored (255).
        nan_to_num: per-class NaN replacement before the means (None: NaN classes are skipped;
            the official config uses 0.0).
        beta: F-score beta.
        class_names: names for the per-class table (default: the 29 Sapiens2 classes when C == 29).
        binary_threshold: with ``num_classes=2``, one-channel logits give label 1 where
            ``sigmoid(logit) > binary_threshold`` (mmseg's default 0.3).
        label_set: the GT's label set (:func:`sapiens2.vocab.label_set`: a built-in name, JSON or
            name list); sets the class names and ignore index and must agree with ``num_classes``
            unless that is left at 29. Recorded as ``conventions["label_set"]``.
    """

    task = "seg"
    bootstrap_states = ("confusion",)
    metrics = (
        MetricDecl("mIoU", "mIoU %", True, "%", bootstrapped=True, interval=True, headline_ok=True),
        MetricDecl("mAcc", "mAcc %", True, "%", bootstrapped=True, interval=True, headline_ok=True),
        MetricDecl("aAcc", "aAcc %", True, "%", bootstrapped=True, interval=True,
                   note="aAcc is pixel accuracy over all classes: dominated by the background."),
        MetricDecl("mDice", "mDice %", True, "%", bootstrapped=True, note=(
            "mDice counts a class present in the ground truth but never predicted as 0, unlike mFscore "
            "(which skips it): the gap between the two columns is the classes a model never predicts.")),
        MetricDecl("mFscore", "mFscore %", True, "%", bootstrapped=True, note=(
            "mFscore is the mean F-score over the classes where it is defined (mmseg skips NaN classes): a "
            "class that is never predicted has precision 0/0, so its F-score is NaN and left out of the "
            "mean. A model that predicts only background scores its background F-score (easily above 90 "
            "%). F-score equals Dice on every predicted class; compare models by mIoU or mDice, which "
            "count a missed class as 0.")),
        MetricDecl("mPrecision", "mPrecision %", True, "%", bootstrapped=True, shown=False),
        MetricDecl("mRecall", "mRecall %", True, "%", bootstrapped=True, shown=False),
        count_decl("nonfinite_pred_pixels"),
    )

    def __init__(
        self,
        num_classes: int = 29,
        ignore_index: int = 255,
        nan_to_num: float | None = None,
        beta: float = 1.0,
        class_names: list[str] | None = None,
        binary_threshold: float = 0.3,
        label_set=None,
    ) -> None:
        super().__init__()
        if label_set is not None:
            ls = _label_set(label_set)
            if num_classes not in (29, ls.num_classes):
                raise ValueError(
                    f"num_classes={num_classes} disagrees with label set {ls.name} ({ls.num_classes})"
                )
            num_classes, ignore_index, class_names = ls.num_classes, ls.ignore_index, list(ls.names)
            label_set = ls.name
        self.binary_threshold = float(binary_threshold)
        self.num_classes, self.ignore_index, self.nan_to_num, self.beta = (
            num_classes,
            ignore_index,
            nan_to_num,
            beta,
        )
        set_name = label_set or ("sapiens2_29" if num_classes == 29 and class_names is None else "custom")
        if class_names is None:
            class_names = [str(i) for i in range(num_classes)]
            if num_classes == 29:
                class_names = [c["name"] for c in seg_classes29()["classes"]]
        if len(class_names) != num_classes:
            raise ValueError(f"class_names: expected {num_classes} names, got {len(class_names)}")
        self.class_names = list(class_names)
        self.add_state("confusion", torch.zeros(num_classes, num_classes + 1, dtype=torch.int64))
        self.add_state("nonfinite_pred_pixels", torch.zeros((), dtype=torch.int64))
        self.conventions = {
            "pooling": "dataset-level per-class intersection/union totals (confusion matrix)",
            "ignore_index": ignore_index,
            "num_classes": num_classes,
            "nan_policy": "classes with 0/0 are NaN and skipped by the means"
            + (f"; nan_to_num={nan_to_num} per class before the means" if nan_to_num is not None else ""),
            "nonfinite_predictions": "pixels with NaN/Inf logits count as 'no prediction' (a miss for the GT "
            "class, no predicted class), reported as nonfinite_pred_pixels",
            "resize": "logits bilinear (align_corners=False) to GT size, then argmax (one-channel logits "
            f"with 2 classes: sigmoid > {binary_threshold})",
            "units": "summary metrics in percent, unrounded (the official evaluator prints 2 decimals); "
            "per-class values are fractions",
            "fscore_beta": beta,
            "label_set": set_name,
        }

    def batch_stats(self, pred, gt, pred_is_labels: bool | None = None) -> dict[str, torch.Tensor]:
        """Per-sample confusion matrices.

        Args:
            pred: B x C x h x w logits (B x 1 x h x w: a binary model's logits), or B x H x W
                integer labels at the GT size (-1: no prediction). One unbatched sample (C x h x w
                logits or H x W labels) is accepted with an H x W GT.
            gt: B x H x W (or B x 1 x H x W) integer GT labels (``ignore_index`` allowed).
            pred_is_labels: None (default): integer tensors are labels, floating ones logits;
                True/False force the reading.
        """
        gt = as_tensor(gt, "gt_seg")
        pred = as_tensor(pred, "pred_seg")
        if gt.dim() == 2:  # one sample
            gt = gt.unsqueeze(0)
            pred = pred.unsqueeze(0)
        if gt.dim() == 4 and gt.shape[1] == 1:
            gt = gt[:, 0]
        if gt.dim() != 3 or gt.is_floating_point():
            raise ValueError(
                f"gt_seg: expected integer labels B x H x W (one sample: H x W), "
                f"got {tuple(gt.shape)} {gt.dtype}"
            )
        gt = gt.to(torch.int64)
        if pred_is_labels is None:
            pred_is_labels = not pred.is_floating_point()
        if pred_is_labels:
            labels = pred[:, 0] if pred.dim() == 4 and pred.shape[1] == 1 else pred
            if tuple(labels.shape) != tuple(gt.shape) or labels.is_floating_point():
                raise ValueError(
                    f"pred_labels: expected integer labels of the GT shape {tuple(gt.shape)}, "
                    f"got {tuple(labels.shape)} {labels.dtype}"
                )
            labels = labels.to(torch.int64).to(gt.device)
            if bool(((labels < -1) | (labels >= self.num_classes)).any()):
                raise ValueError(f"pred_labels: labels outside [0, {self.num_classes})")
            bad = labels < 0
        else:
            if pred.dim() != 4:
                raise ValueError(
                    f"pred_seg: expected B x {self.num_classes} x h x w float logits or B x H x W integer "
                    f"labels (one sample: {self.num_classes} x h x w or H x W), got {tuple(pred.shape)} "
                    f"{pred.dtype}"
                )
            binary = self.num_classes == 2 and pred.shape[1] == 1
            logits = check_bchw(pred, "pred_logits", channels=None if binary else self.num_classes)
            if logits.shape[0] != gt.shape[0]:
                raise ValueError(f"pred_logits has batch {logits.shape[0]} but gt_seg has {gt.shape[0]}")
            labels, bad = seg_labels_from_logits(logits, tuple(gt.shape[-2:]), self.binary_threshold)
            gt = gt.to(labels.device)
        conf = seg_confusion(labels, gt, self.num_classes, self.ignore_index)
        scored = gt != self.ignore_index
        return {"confusion": conf, "nonfinite_pred_pixels": (bad & scored).flatten(1).sum(1)}

    def compute_from_state(self, state: dict[str, torch.Tensor]) -> dict:
        conf = state["confusion"]
        if int(conf.sum()) == 0:
            raise ValueError(
                "SegEvaluator: no scored pixel (every GT pixel is ignore_index or no sample seen)"
            )
        m = seg_metrics_from_confusion(conf, beta=self.beta, nan_to_num=self.nan_to_num)
        out = {"aAcc": 100.0 * m["aAcc"]}
        for k in PER_CLASS_METRICS:
            out["m" + k] = 100.0 * _nanmean(m[k])
        out["nonfinite_pred_pixels"] = float(state["nonfinite_pred_pixels"])
        out["per_class"] = {
            k: {name: float(v) for name, v in zip(self.class_names, m[k].tolist())} for k in PER_CLASS_METRICS
        }
        return out

    def _bootstrap_values(self, s: dict[str, np.ndarray], keys: list[str]) -> dict[str, np.ndarray]:
        """The summary metrics of ``R x C x (C + 1)`` resampled confusion matrices (percent)."""
        conf = s["confusion"]
        c = conf.shape[1]
        with np.errstate(divide="ignore", invalid="ignore"):
            inter = np.diagonal(conf[:, :, :c], axis1=1, axis2=2)
            area_label = conf.sum(2)
            area_pred = conf[:, :, :c].sum(1)
            precision, recall = inter / area_pred, inter / area_label
            b2 = self.beta**2
            per_class = {
                "IoU": inter / (area_pred + area_label - inter),
                "Acc": recall,
                "Dice": 2 * inter / (area_pred + area_label),
                "Fscore": (1 + b2) * precision * recall / (b2 * precision + recall),
                "Precision": precision,
                "Recall": recall,
            }
            out = {"aAcc": 100.0 * inter.sum(1) / area_label.sum(1)}
            for k, v in per_class.items():
                if self.nan_to_num is not None:
                    v = np.nan_to_num(v, nan=self.nan_to_num)
                valid = ~np.isnan(v)
                cnt = valid.sum(1)
                mean = np.where(valid, v, 0.0).sum(1) / np.maximum(cnt, 1)
                out["m" + k] = np.where(cnt > 0, 100.0 * mean, np.nan)
        return {k: out[k] for k in keys}
