"""A vectorised COCO keypoint AP engine with the semantics of xtcocotools' ``COCOeval``.

It reproduces ``COCOeval(iouType='keypoints', sigmas, use_area)`` followed by ``evaluate()``,
``accumulate()`` and ``summarize()``:

* detections without any keypoint of positive score are dropped; per image and category they
  are sorted by score (stable) and cut to ``max_dets`` (20);
* a GT is ignored when it is crowd or has no labelled keypoint; GT outside the area range is
  ignored for that range (area from ``area``, or ``0.53 * w * h`` of the box when ``use_area``
  is off); unmatched detections outside the range are ignored;
* greedy matching per image, IoU threshold and area range: each detection, best score first,
  takes the unmatched GT with the highest OKS >= threshold, non-ignored GT before ignored GT,
  ties to the later GT; crowd GT can absorb several detections;
* 101-point interpolated precision over the score-sorted detections of all images; -1 where a
  range holds no non-ignored GT.

Instead of Python loops over images and detections it computes OKS for all (det, GT) pairs at
once and runs the greedy matching for all images in lock-step, one detection rank at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evaluators.pose.oks import oks_pairs

STAT_NAMES = ("AP", "AP .5", "AP .75", "AP (M)", "AP (L)", "AR", "AR .5", "AR .75", "AR (M)", "AR (L)")
IOU_THRESHOLDS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)
RECALL_THRESHOLDS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
AREA_RANGES = {"all": (0.0, 1e5**2), "medium": (32.0**2, 96.0**2), "large": (96.0**2, 1e5**2)}
# (is AP, IoU threshold or None for the mean over thresholds, area range label)
_STAT_SPECS = (
    (True, None, "all"),
    (True, 0.5, "all"),
    (True, 0.75, "all"),
    (True, None, "medium"),
    (True, None, "large"),
    (False, None, "all"),
    (False, 0.5, "all"),
    (False, 0.75, "all"),
    (False, None, "medium"),
    (False, None, "large"),
)


@dataclass
class KeypointGroundTruth:
    """COCO ground truth as arrays (one row per annotation of an evaluated image).

    Attributes:
        image_ids: the evaluated image ids, sorted (COCOeval's ``params.imgIds``).
        category_ids: the evaluated category ids, sorted.
        image_index: G, position of each annotation's image in ``image_ids``.
        category: G category ids.
        keypoints: G x K x 3 (x, y, visibility), float64.
        area: G areas (NaN where the annotation has none).
        bbox: G x 4 boxes (x, y, w, h).
        iscrowd: G bools.
        num_keypoints: G ``num_keypoints`` fields as the file gives them (NaN where absent); only
            CrowdPose's official evaluation reads them (``ignore_counts``).
    """

    image_ids: list
    category_ids: list
    image_index: np.ndarray
    category: np.ndarray
    keypoints: np.ndarray
    area: np.ndarray
    bbox: np.ndarray
    iscrowd: np.ndarray
    num_keypoints: np.ndarray | None = None


@dataclass
class KeypointDetections:
    """Keypoint results as arrays, in result-file order.

    Attributes:
        image_index: D, position of each result's image in the GT's ``image_ids``.
        category: D category ids.
        keypoints: D x K x 3 (x, y, score), float64.
        score: D instance scores.
        area: D areas from result boxes, or None to use the box around the keypoints (what
            ``COCO.loadRes`` does for keypoint results without a ``bbox``).
    """

    image_index: np.ndarray
    category: np.ndarray
    keypoints: np.ndarray
    score: np.ndarray
    area: np.ndarray | None = None


@dataclass
class KeypointAPResult:
    """Output of :func:`evaluate_keypoints`.

    Attributes:
        stats: the ten official statistics by name.
        precision: T x R x C x A precision (-1 where undefined).
        recall: T x C x A recall (-1 where undefined).
        num_gt: non-ignored GT count per (category, area range).
    """

    stats: dict[str, float]
    precision: np.ndarray
    recall: np.ndarray
    num_gt: np.ndarray = field(default_factory=lambda: np.zeros(0))
    matches: dict = field(default_factory=dict)


@dataclass
class CategoryMatches:
    """Per-image matching outcome of one category in the ``all`` area range (for the bootstrap).

    Attributes:
        image: D kept detections' image positions (in ``image_ids``).
        rank: D ranks of the detections within their image (score order, < ``max_dets``).
        score: D detection scores.
        tp: T x D true positives (matched, not ignored) per OKS threshold.
        fp: T x D false positives (unmatched, not ignored).
        npig: per image of ``image_ids``, the number of non-ignored GT.
    """

    image: np.ndarray
    rank: np.ndarray
    score: np.ndarray
    tp: np.ndarray
    fp: np.ndarray
    npig: np.ndarray


def evaluate_keypoints(
    gt: KeypointGroundTruth,
    dets: KeypointDetections,
    sigmas: np.ndarray,
    keypoint_ids: list[int] | np.ndarray | None = None,
    max_dets: int = 20,
    use_area: bool = True,
    area_ranges: dict[str, tuple[float, float]] | None = None,
    area_keypoint_ids: list[int] | np.ndarray | None = None,
    keep_matches: bool = False,
    ignore_counts: np.ndarray | None = None,
) -> KeypointAPResult:
    """COCO keypoint AP/AR of ``dets`` against ``gt``.

    Args:
        gt: ground truth arrays.
        dets: detections (keypoint results) arrays, same keypoint count as ``gt``.
        sigmas: per-keypoint OKS sigmas of the full keypoint set.
        keypoint_ids: evaluate only these keypoints (a part); None: all.
        max_dets: detections kept per image and category.
        use_area: OKS scale and area ranges from the GT ``area`` (True) or from ``0.53 * w * h``.
        area_ranges: label -> (lo, hi); must contain ``all``, ``medium`` and ``large`` for the
            ten stats (default: COCO's keypoint ranges).
        area_keypoint_ids: when the results carry no boxes, each detection's area is the box around
            these keypoints (of the full set). None: around the evaluated keypoints, which is what
            xtcocotools does on a file holding only ``keypoint_ids``. The official whole-body
            convention passes the body ids for every part (see :func:`evaluate_parts`).
        keep_matches: also return, per category, the ``all``-range matching outcome per image
            (:class:`CategoryMatches`, in ``matches[category_id]``), from which
            :mod:`evaluators.pose.ap_bootstrap` recomputes AP on resampled images.
        ignore_counts: G per-GT counts that decide "no labelled keypoint" instead of the labelled
            keypoints: xtcocotools' ``keypoints_crowd`` reads CrowdPose's ``num_keypoints`` (which
            counts visible joints only). None: the labelled (v > 0) keypoints.

    Returns:
        A :class:`KeypointAPResult`.
    """
    ranges = dict(area_ranges or AREA_RANGES)
    sig = np.asarray(sigmas, dtype=np.float64)
    gk, dk = gt.keypoints, dets.keypoints
    if gk.shape[1] != dk.shape[1] or sig.shape[0] != gk.shape[1]:
        raise ValueError(
            f"keypoint counts disagree: GT {gk.shape[1]}, results {dk.shape[1]}, sigmas {sig.shape[0]}"
        )
    ids = None if keypoint_ids is None else np.asarray(keypoint_ids, dtype=np.int64)
    if ids is not None:
        sig = sig[ids]
    gx, gy, gv = _planes(gk, ids)
    dx, dy, ds = _planes(dk, ids)
    g_lab = gv > 0

    bbox_area = gt.bbox[:, 2] * gt.bbox[:, 3] * 0.53
    if use_area:
        if np.isnan(gt.area).any():
            raise ValueError("use_area=True needs an 'area' on every GT annotation")
        gt_scale = gt.area
    else:
        gt_scale = bbox_area
    gt_range_area = np.where(np.isnan(gt.area) | (not use_area), bbox_area, gt.area)
    has_kpts = g_lab.any(1) if ignore_counts is None else np.asarray(ignore_counts) > 0
    gt_ignore = gt.iscrowd.astype(bool) | ~has_kpts

    if dets.area is not None:
        det_area = dets.area
    else:
        ax, ay = (dx, dy) if area_keypoint_ids is None else _planes(dk, np.asarray(area_keypoint_ids))[:2]
        det_area = (ax.max(1) - ax.min(1)) * (ay.max(1) - ay.min(1)) if dk.shape[0] else np.zeros(0)

    labels = list(ranges)
    num_t, num_r = len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS)
    precision = -np.ones((num_t, num_r, len(gt.category_ids), len(labels)))
    recall = -np.ones((num_t, len(gt.category_ids), len(labels)))
    num_gt = np.zeros((len(gt.category_ids), len(labels)), dtype=np.int64)

    det_keep = (ds > 0).any(1) if dk.shape[0] else np.zeros(0, bool)
    matches = {}
    for ci, cat in enumerate(gt.category_ids):
        g_sel = np.nonzero(gt.category == cat)[0]
        d_sel = np.nonzero((dets.category == cat) & det_keep)[0]
        if g_sel.size == 0:
            continue  # no GT of this category: every range stays -1
        cat_data = _CategoryData.build(g_sel, d_sel, gt.image_index, dets.image_index, dets.score, max_dets)
        ious = cat_data.pair_oks((dx, dy), (gx, gy, g_lab), gt_scale, gt.bbox, sig)
        for ai, label in enumerate(labels):
            lo, hi = ranges[label]
            g_ig = (
                gt_ignore[cat_data.g_idx]
                | (gt_range_area[cat_data.g_idx] < lo)
                | (gt_range_area[cat_data.g_idx] > hi)
            )
            d_out = (det_area[cat_data.d_idx] < lo) | (det_area[cat_data.d_idx] > hi)
            matched, d_ig = cat_data.match(ious, g_ig, gt.iscrowd[cat_data.g_idx].astype(bool), d_out)
            npig = int((~g_ig).sum())
            num_gt[ci, ai] = npig
            if keep_matches and label == "all":
                matches[cat] = CategoryMatches(
                    image=dets.image_index[cat_data.d_idx],
                    rank=cat_data.d_rank,
                    score=dets.score[cat_data.d_idx],
                    tp=matched & ~d_ig,
                    fp=~matched & ~d_ig,
                    npig=np.bincount(gt.image_index[cat_data.g_idx[~g_ig]], minlength=len(gt.image_ids)),
                )
            if npig == 0:
                continue
            p, r = _accumulate(cat_data.order, matched, d_ig, npig)
            precision[:, :, ci, ai] = p
            recall[:, ci, ai] = r
    stats = summarize(precision, recall, labels)
    return KeypointAPResult(stats=stats, precision=precision, recall=recall, num_gt=num_gt, matches=matches)


def evaluate_parts(
    gt: KeypointGroundTruth,
    dets: KeypointDetections,
    meta,
    max_dets: int = 20,
    use_area: bool = True,
    detection_area: str = "body",
    parts: list[str] | None = None,
) -> dict[str, dict[str, float]]:
    """The ten statistics for the whole keypoint set and every part of ``meta`` (or only ``parts``).

    Args:
        gt: ground truth arrays.
        dets: detections.
        meta: :class:`evaluators.pose.metadata.KeypointMeta` (sigmas and parts).
        max_dets: detections kept per image and category.
        use_area: xtcocotools' ``use_area``.
        detection_area: ``"body"`` (official: one area per detection, the box around its body
            keypoints, for every part) or ``"part"`` (the box around the scored part's keypoints).
        parts: groups to evaluate (``wholebody`` and/or part names of ``meta``); None: all. Groups
            not asked for are not computed.

    Returns:
        ``{"wholebody": {stat: value}, "<part>": {...}, ...}`` in the metadata's order.

    Raises:
        ValueError: ``parts`` names a group the metadata does not define.
    """
    area_ids = meta.detection_area_ids(detection_area)
    groups = meta.groups()
    if parts is not None:
        unknown = [p for p in parts if p not in groups]
        if unknown or not parts:
            raise ValueError(f"parts {unknown or parts}: {meta.name} defines {list(groups)}")
        groups = {p: ids for p, ids in groups.items() if p in parts}
    return {
        part: evaluate_keypoints(
            gt, dets, meta.sigmas, ids, max_dets, use_area, area_keypoint_ids=area_ids
        ).stats
        for part, ids in groups.items()
    }


def _planes(kpts: np.ndarray, ids: np.ndarray | None) -> list[np.ndarray]:
    """Contiguous N x K' planes x, y, v (or score) of N x K x 3 keypoints, restricted to ``ids``."""
    planes = [kpts[..., c] if ids is None else kpts[..., c][:, ids] for c in range(3)]
    return [np.ascontiguousarray(p) for p in planes]


class _CategoryData:
    """Detections and GT of one category, grouped by image, with padded per-image layouts."""

    def __init__(self) -> None:
        self.g_idx = self.d_idx = self.order = np.zeros(0, np.int64)

    @classmethod
    def build(cls, g_sel, d_sel, g_image, d_image, d_score, max_dets):
        self = cls()
        # GT in (image, file order); detections in (image, score desc, file order), top max_dets.
        self.g_idx = g_sel[np.argsort(g_image[g_sel], kind="stable")]
        d_order = np.lexsort((d_sel, -d_score[d_sel], d_image[d_sel]))
        d_sorted = d_sel[d_order]
        d_img = d_image[d_sorted]
        first = np.r_[0, np.nonzero(np.diff(d_img))[0] + 1] if d_sorted.size else np.zeros(0, np.int64)
        starts = np.repeat(first, np.diff(np.r_[first, d_sorted.size]))
        rank = np.arange(d_sorted.size) - starts
        keep = rank < max_dets
        self.d_idx, self.d_rank = d_sorted[keep], rank[keep]
        self.d_img = d_img[keep]
        g_img = g_image[self.g_idx]

        # per-image slot of every GT; images that hold GT or detections
        images, g_inv = np.unique(g_img, return_inverse=True)
        self.images = images
        g_first = np.searchsorted(g_img, images)
        self.g_slot = np.arange(self.g_idx.size) - g_first[g_inv]
        self.g_count = np.bincount(g_inv, minlength=images.size)
        self.g_row = g_inv
        pos = np.searchsorted(images, self.d_img)
        has_gt = (pos < images.size) & (images[np.minimum(pos, images.size - 1)] == self.d_img)
        self.d_row = np.where(has_gt, pos, -1)
        self.num_dets_per_image = max_dets
        # global order of kept detections for accumulation: score desc, then image, then rank
        self.order = np.lexsort((self.d_rank, self.d_img, -d_score[self.d_idx]))
        return self

    def pair_oks(self, det_xy, gt_xyl, gt_scale, gt_bbox, sigmas) -> np.ndarray:
        """n_images x max_dets x max_gt OKS (-1 where there is no pair)."""
        n_img = self.images.size
        g_max = int(self.g_count.max()) if n_img else 0
        ious = -np.ones((n_img, self.num_dets_per_image, max(g_max, 1)))
        with_gt = np.nonzero(self.d_row >= 0)[0]
        if with_gt.size == 0:
            return ious
        counts = self.g_count[self.d_row[with_gt]]
        det_of_pair = np.repeat(with_gt, counts)
        offsets = np.cumsum(counts) - counts
        slot = np.arange(det_of_pair.size) - np.repeat(offsets, counts)
        g_start = np.cumsum(self.g_count) - self.g_count
        gt_of_pair = g_start[self.d_row[det_of_pair]] + slot
        gi = self.g_idx[gt_of_pair]
        di = self.d_idx[det_of_pair]
        vals = oks_pairs(di, gi, *det_xy, *gt_xyl, gt_scale, gt_bbox, sigmas)
        ious[self.d_row[det_of_pair], self.d_rank[det_of_pair], slot] = vals
        return ious

    def match(self, ious, g_ig_flat, crowd_flat, d_out_flat):
        """Greedy matching for all thresholds and images at once.

        Returns:
            (matched T x D, ignored T x D) for the kept detections (in ``d_idx`` order).
        """
        n_img, n_det, g_max = ious.shape
        num_t = len(IOU_THRESHOLDS)
        g_valid = np.zeros((n_img, g_max), bool)
        g_ig = np.zeros((n_img, g_max), bool)
        crowd = np.zeros((n_img, g_max), bool)
        g_valid[self.g_row, self.g_slot] = True
        g_ig[self.g_row, self.g_slot] = g_ig_flat
        crowd[self.g_row, self.g_slot] = crowd_flat

        d_match = np.full((num_t, self.d_idx.size), -1, np.int64)
        rows = self.d_row
        dets_by_rank = [np.nonzero((self.d_rank == r) & (rows >= 0))[0] for r in range(n_det)]
        taken = np.zeros((num_t, n_img, g_max), bool)
        thr = np.minimum(IOU_THRESHOLDS, 1 - 1e-10)[:, None, None]
        rev = slice(None, None, -1)
        for r, dsel in enumerate(dets_by_rank):
            if dsel.size == 0:
                continue
            img = rows[dsel]
            io = ious[img, r][None]  # 1 x n x G
            cand = (io >= thr) & g_valid[img][None] & (~taken[:, img] | crowd[img][None])
            best = np.full((num_t, dsel.size), -1, np.int64)
            for stage_mask in (cand & g_ig[img][None], cand & ~g_ig[img][None]):
                # later stage (non-ignored) overrides; ties go to the last GT
                vals = np.where(stage_mask, io, -np.inf)
                last = g_max - 1 - np.argmax(vals[..., rev], axis=-1)
                best = np.where(stage_mask.any(-1), last, best)
            hit_t, hit_d = np.nonzero(best >= 0)
            taken[hit_t, img[hit_d], best[hit_t, hit_d]] = True
            d_match[:, dsel] = best
        matched = d_match >= 0
        ig_of_match = np.zeros_like(matched)
        t_idx, d_idx = np.nonzero(matched)
        ig_of_match[t_idx, d_idx] = g_ig[rows[d_idx], d_match[t_idx, d_idx]]
        ignored = ig_of_match | (~matched & d_out_flat[None])
        return matched, ignored


def _accumulate(order, matched, ignored, npig):
    """101-point precision (T x R) and recall (T) from score-sorted matches."""
    num_t = matched.shape[0]
    tps = matched[:, order] & ~ignored[:, order]
    fps = ~matched[:, order] & ~ignored[:, order]
    tp = np.cumsum(tps, axis=1).astype(np.float64)
    fp = np.cumsum(fps, axis=1).astype(np.float64)
    nd = tp.shape[1]
    precision = np.zeros((num_t, len(RECALL_THRESHOLDS)))
    recall = np.zeros(num_t)
    if nd == 0:
        return precision, recall
    rc = tp / npig
    pr = tp / (fp + tp + np.spacing(1))
    pr = np.maximum.accumulate(pr[:, ::-1], axis=1)[:, ::-1]
    recall[:] = rc[:, -1]
    for t in range(num_t):
        inds = np.searchsorted(rc[t], RECALL_THRESHOLDS, side="left")
        ok = inds < nd
        precision[t, ok] = pr[t, inds[ok]]
    return precision, recall


def summarize(precision: np.ndarray, recall: np.ndarray, labels: list[str]) -> dict[str, float]:
    """The ten keypoint statistics from T x R x C x A precision and T x C x A recall."""
    stats = {}
    for name, (is_ap, iou, area) in zip(STAT_NAMES, _STAT_SPECS):
        if area not in labels:
            stats[name] = -1.0
            continue
        a = labels.index(area)
        s = precision[..., a] if is_ap else recall[..., a]
        if iou is not None:
            s = s[np.where(iou == IOU_THRESHOLDS)[0]]
        valid = s[s > -1]
        stats[name] = float(np.mean(valid)) if valid.size else -1.0
    return stats
