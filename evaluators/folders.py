"""Evaluate a folder of prediction files against a folder of GT files (the library behind ``eval``).

Files are matched by stem and read with the one reader layer (``sapiens2.datasets.io``; format
rules in ``sapiens2/datasets/README.md``). Consecutive files of equal shape are batched, and the
batches go through the one evaluation loop (:func:`evaluators.runner.run_evaluation`).

Example:
    >>> import numpy as np, tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for d in ("pred", "gt"):
    ...     (root / d).mkdir()
    ...     np.save(root / d / "0001.npy", np.full((4, 5, 3), 0.25, np.float32))
    >>> res = evaluate_folders("albedo", root / "pred", root / "gt")
    >>> res["num_files"], res["metrics"]["mae"]
    (1, 0.0)
"""

from __future__ import annotations

from pathlib import Path

import torch

from evaluators.registry import build_evaluator
from evaluators.runner import dense_update, run_evaluation
from sapiens2.datasets import io
from sapiens2.tasks import get_task
from sapiens2.vocab import VocabError, label_set
from sapiens2.vocab_mapping import label_mapping, remap_labels


def default_mask(task: str, gt: torch.Tensor) -> torch.Tensor:
    """Valid pixels without a mask file: finite GT (direction maps, normals: also of non-zero length)."""
    ok = torch.isfinite(gt).all(0)
    if get_task(task).value_kind == "normal":
        ok &= gt.norm(dim=0) > 0
    return ok


# A prediction of another size is resized to its GT only at the same aspect ratio, within this.
ASPECT_TOLERANCE = 0.01


def check_aspect(pred_hw, pred_p, gt_hw, gt_p) -> None:
    """Refuse a prediction whose aspect ratio differs from its GT's (resizing it would stretch it).

    Raises:
        DatasetError: ``(w_pred / h_pred) / (w_gt / h_gt)`` is not within :data:`ASPECT_TOLERANCE` of 1;
            names both files and both sizes.
    """
    (ph, pw), (gh, gw) = (int(v) for v in pred_hw), (int(v) for v in gt_hw)
    if (ph, pw) == (gh, gw):
        return
    if abs((pw * gh) / (ph * gw) - 1.0) > ASPECT_TOLERANCE:
        raise io.DatasetError(
            f"{pred_p}: prediction {ph}x{pw} (H x W) has another aspect ratio than its GT {gt_p} {gh}x{gw}; "
            f"resizing it would stretch it (a prediction is resized only within {ASPECT_TOLERANCE:.0%} of "
            "the GT's aspect ratio): save it at the GT's size or aspect ratio"
        )


def load_pair(task: str, item, num_classes: int | None = None, ignore_index: int | None = None,
              pred_map=None, *, png_max: int | None = None, allow_empty_masks: bool = False):
    """Read one (stem, pred, gt, mask) file set.

    Args:
        task: the dense task.
        item: ``(stem, pred_path, gt_path, mask_path or None)``.
        num_classes: seg classes.
        ignore_index: seg ignore label.
        pred_map: ``(LabelMapping, unmapped policy)`` when seg predictions are in another label set
            (e.g. Sapiens2's 29 classes scored on person/background GT): label-map predictions are
            remapped by :func:`sapiens2.vocab_mapping.remap_labels`; logits are refused.
        png_max: full-scale value of integer map files (see :func:`sapiens2.datasets.io.read_map`).
        allow_empty_masks: accept a file without any scored pixel (else an error naming it).

    Returns:
        (pred, gt, mask or None, pred_is_labels) tensors; dense maps are 3 x H x W.

    Raises:
        DatasetError: an unreadable file, a size or aspect mismatch, or an empty mask; names the files.
    """
    _, pred_p, gt_p, mask_p = item
    spec = get_task(task)
    if spec.feed.kind == "labels":
        if pred_map is not None:
            mapping, unmapped = pred_map
            src = label_set(mapping.source)
            pred, is_labels = io.read_seg_prediction(pred_p, src.num_classes, src.ignore_index)
            if not is_labels:
                raise io.DatasetError(
                    f"{pred_p}: logits in {mapping.source}'s classes cannot be remapped to {mapping.target} "
                    "(merging scores is not a label map); save argmax label maps to score them this way"
                )
            try:
                pred = remap_labels(pred, mapping, unmapped)
            except VocabError as e:
                raise io.DatasetError(f"{pred_p}: {e}") from None
        else:
            pred, is_labels = io.read_seg_prediction(pred_p, num_classes, ignore_index)
        gt = torch.from_numpy(io.read_label(gt_p, num_classes, ignore_index, what="GT label map"))
        if is_labels and pred.shape != tuple(gt.shape):
            raise io.DatasetError(
                f"{pred_p}: label map {pred.shape} does not match GT {gt_p} {tuple(gt.shape)}"
            )
        check_aspect(pred.shape[-2:], pred_p, gt.shape[-2:], gt_p)
        return torch.from_numpy(pred), gt, None, is_labels
    pred = io.read_map(pred_p, spec.value_kind, check_range=False, png_max=png_max)
    gt = io.read_map(gt_p, spec.value_kind, check_range=False, png_max=png_max)
    io.check_pair_range(spec.value_kind, pred, pred_p, gt, gt_p)
    check_aspect(pred.shape[:2], pred_p, gt.shape[:2], gt_p)
    pred = torch.from_numpy(pred).permute(2, 0, 1).contiguous()
    gt = torch.from_numpy(gt).permute(2, 0, 1).contiguous()
    if mask_p is not None:
        mask = torch.from_numpy(io.read_mask(mask_p))
        if tuple(mask.shape) != tuple(gt.shape[-2:]):
            raise io.DatasetError(
                f"{mask_p}: mask {tuple(mask.shape)} does not match GT {gt_p} {tuple(gt.shape[-2:])}"
            )
    else:
        mask = default_mask(task, gt)
    if not allow_empty_masks and not bool((mask.bool() & torch.isfinite(gt).all(0)).any()):
        where = f"mask {mask_p}" if mask_p is not None else f"GT {gt_p} (no finite, non-zero pixel)"
        raise io.DatasetError(
            f"{where}: no pixel to score for {pred_p}; fix the file, or pass --allow-empty-masks "
            "(allow_empty_masks=True) to skip such files"
        )
    return pred, gt, mask, False


def _batches(task: str, items, batch_size: int, device, num_classes, ignore_index, read_kw):
    """Updates of consecutive equal-shape files, at most ``batch_size`` per update."""
    batch: list = []
    stems: list[tuple[int, str]] = []

    def flush():
        preds, gts, masks, labels = zip(*batch)
        try:
            p = torch.stack(preds).to(device)
            g = torch.stack(gts).to(device)
        except RuntimeError as e:
            raise io.DatasetError(f"files {stems[0][1]}..{stems[-1][1]}: shapes differ ({e})") from e
        m = None if masks[0] is None else torch.stack(masks).to(device)
        up = dense_update(task, p, g, m, index=[i for i, _ in stems], pred_is_labels=labels[0])
        batch.clear()
        stems.clear()
        return up

    for i, item in enumerate(items):
        sample = load_pair(task, item, num_classes, ignore_index, **read_kw)
        if batch and (sample[0].shape != batch[0][0].shape or sample[1].shape != batch[0][1].shape
                      or sample[3] != batch[0][3]):
            yield flush()
        batch.append(sample)
        stems.append((i, item[0]))
        if len(batch) >= batch_size:
            yield flush()
    if batch:
        yield flush()


def evaluate_folders(task: str, pred_dir, gt_dir, mask_dir=None, *, batch_size: int = 8,
                     device: str = "cpu", progress: bool = False, pred_label_set=None, unmapped=None,
                     png_max: int | None = None, allow_empty_masks: bool = False,
                     **evaluator_kwargs) -> dict:
    """Metrics of the prediction files in ``pred_dir`` against the GT files in ``gt_dir``.

    Args:
        task: a dense task (``seg``, ``normal``, ``pointmap``, ``albedo``).
        pred_dir: folder of predictions (``.npy``/``.png``/``.exr``, matched to GT by stem).
        gt_dir: folder of ground truth.
        mask_dir: optional folder of masks (default: every finite GT pixel).
        batch_size: files per evaluator update.
        device: torch device of the metric computation.
        progress: show a progress bar.
        pred_label_set: seg only: the predictions' label set when it is not the GT's (``label_set=``
            of the evaluator, default Sapiens2's 29); label maps are remapped by the GT set's
            declared many-to-one map (:mod:`sapiens2.vocab_mapping`).
        unmapped: policy for predicted classes without a target class (None: error; ``"ignore"``;
            or a target class name).
        png_max: full-scale value of integer map files (default: by bit depth, 255 or 65535).
        allow_empty_masks: skip files without a scored pixel (default: an error naming the file).
        **evaluator_kwargs: evaluator settings (seg: ``num_classes``, ``ignore_index``, ``nan_to_num``).

    Returns:
        ``{"task", "pred_dir", "gt_dir", "mask_dir", "num_files", "metrics", "conventions"}`` and, for
        seg, ``"per_class"``: the JSON that ``sapiens2-bench eval --json`` writes.

    Raises:
        sapiens2.datasets.DatasetError: a missing or unreadable file, or mismatched shapes or ranges.
    """
    spec = get_task(task)
    if not spec.dense:
        raise ValueError(f"evaluate_folders: {task} is not a per-pixel task")
    items = io.pair_files(Path(pred_dir), Path(gt_dir), Path(mask_dir) if mask_dir else None)
    if allow_empty_masks and spec.feed.kind != "labels":
        evaluator_kwargs["allow_empty_masks"] = True
    ev = build_evaluator(task, **evaluator_kwargs).to(device)
    num_classes = getattr(ev, "num_classes", None)
    ignore_index = getattr(ev, "ignore_index", None)
    pred_map = None
    if pred_label_set is not None:
        target = evaluator_kwargs.get("label_set") or "sapiens2_29"
        pred_map = (label_mapping(pred_label_set, target), unmapped)
        ev.conventions["pred_label_set"] = f"{pred_map[0].source} -> {pred_map[0].target} (declared map)"
    read_kw = {"pred_map": pred_map, "png_max": png_max, "allow_empty_masks": allow_empty_masks}
    res = run_evaluation(ev, _batches(task, items, batch_size, device, num_classes, ignore_index, read_kw),
                         progress=progress and len(items) >= 50, desc=f"eval {task}").metrics
    conventions = res.pop("conventions")
    per_class = res.pop("per_class", None)
    out = {"task": task, "pred_dir": str(pred_dir), "gt_dir": str(gt_dir),
           "mask_dir": None if mask_dir is None else str(mask_dir), "num_files": len(items),
           "metrics": res, "conventions": conventions}
    if per_class is not None:
        out["per_class"] = per_class
    return out
