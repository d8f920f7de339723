"""Run a Sapiens2 task model on an image: the library behind ``sapiens2-bench predict``.

Dense tasks resize the whole image to the model input (bilinear) and resize the prediction back to
the image; pose is top-down on a person box with the UDP crop of the pose reader
(:class:`sapiens2.datasets.pose.TopdownAffineUDP`), and keypoints are mapped back to image pixels
through the crop affine. Images are normalised with the ImageNet mean/std in 0-255, as the official
pipelines. What each task writes (output key, visualiser) comes from the task table.

Example:
    >>> import numpy as np, torch
    >>> from sapiens2.models.builder import build_model
    >>> arch = {"embed_dims": 32, "num_layers": 2, "num_heads": 2, "feedforward_channels": 64}
    >>> head = {"type": "SegHead", "in_channels": 32, "deconv_out_channels": [16, 8, 8, 8],
    ...         "deconv_kernel_sizes": [4] * 4, "conv_out_channels": [8], "conv_kernel_sizes": [1],
    ...         "num_classes": 29}
    >>> _ = torch.manual_seed(0)
    >>> model = build_model({"type": "SegEstimator", "decode_head": head,
    ...                      "backbone": {"type": "Sapiens2", "arch": arch, "img_size": [64, 48]}}).eval()
    >>> rgb = np.random.default_rng(0).integers(0, 256, (100, 80, 3), dtype=np.uint8)
    >>> pred = predict_array(model, rgb, "seg")
    >>> pred.array.shape, pred.array.dtype, pred.picture.shape[0]
    ((100, 80), dtype('uint8'), 100)
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from sapiens2.datasets.io import read_rgb
from sapiens2.datasets.pose import TopdownAffineUDP
from sapiens2.image_norm import MEAN, STD
from sapiens2.models import visualize as vis
from sapiens2.models.builder import build_model, official_config
from sapiens2.models.checkpoint import load_checkpoint, load_state_dict_file
from sapiens2.models.hf_config import infer_official_config
from sapiens2.models.variants import variants
from sapiens2.reference import official_task_configs
from sapiens2.runtime import StageBar, device_line, resolve_dtype, with_precision
from sapiens2.tasks import get_task
from sapiens2.utils_io import atomic_write, write_json_atomic


@dataclass
class Prediction:
    """One image's prediction.

    Attributes:
        array: labels H x W (uint8), maps 3 x H x W (float32) at image resolution, or pose
            keypoints K x 3 (x, y, score in image pixels).
        picture: H x W' x 3 uint8 RGB visualisation.
        meta: metadata (sizes, box, crop affine, units).
    """

    array: np.ndarray
    picture: np.ndarray
    meta: dict = field(default_factory=dict)


def resolve_config(task: str, config: str | None = None, arch: str | None = None,
                   state: dict | None = None) -> dict:
    """The estimator config of ``task`` from a config (name or JSON file), an arch, or checkpoint shapes.

    Args:
        task: task name.
        config: an official config name, or a JSON file holding an official-style config.
        arch: an official backbone arch with a released config for the task.
        state: a checkpoint state dict (its tensor shapes give the config).

    Raises:
        ValueError / KeyError: nothing to build from, an unknown arch, or a config of another task.
    """
    get_task(task).require_model("building its task model")
    estimator = get_task(task).estimator
    if config:
        path = Path(config)
        if path.suffix == ".json" or path.is_file():
            if not path.is_file():
                raise FileNotFoundError(f"{path}: config file not found")
            try:
                cfg = json.loads(path.read_text())
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: malformed JSON ({e})") from e
            cfg = cfg.get("model", cfg)
        else:
            cfg = official_config(config)
    elif arch:
        known = [v.name for v in variants("sapiens2", official=True)]
        if arch not in known:
            raise KeyError(f"unknown arch {arch!r}; known archs: {', '.join(known)}")
        models = [c["model"] for c in official_task_configs().values() if c["model"]["type"] == estimator]
        found = [m for m in models if m["backbone"]["arch"] == arch]
        if not found:
            with_task = sorted({m["backbone"]["arch"] for m in models})
            raise KeyError(f"no released {task} config for arch {arch!r}; archs with one: "
                           f"{', '.join(with_task)}")
        cfg = found[0]
    elif state is not None:
        cfg = infer_official_config(state, task)
    else:
        raise ValueError("--random-weights needs --arch or --config to know which model to build")
    if cfg.get("type") != estimator:
        raise ValueError(f"config type {cfg.get('type')!r} does not match --task {task} "
                         f"(expected {estimator})")
    return cfg


def load_model(task: str, checkpoint: str | os.PathLike | None = None, config: str | None = None,
               arch: str | None = None, input_size_hw: tuple[int, int] | None = None,
               random_weights: bool = False, seed: int = 0, device: str = "cpu", dtype: str = "fp32",
               bar=None):
    """Build the task model (and load its checkpoint) on ``device`` in ``dtype``.

    Args:
        task: task name.
        checkpoint: official-layout task checkpoint (.safetensors or .pth).
        config: official config name or JSON file (see :func:`resolve_config`).
        arch: official backbone arch.
        input_size_hw: model input (H, W) (default: the config's ``img_size``). A pointmap model
            run at another size than its config's resizes the feature map of its scale branch to
            the grid it was built for (see :class:`sapiens2.models.heads.pointmap.PointmapHead`).
        random_weights: build without a checkpoint (outputs must then be labelled).
        seed: torch seed of the random initialisation.
        device: torch device string (already resolved, see :func:`sapiens2.device.resolve_device`).
        dtype: ``fp32`` or ``bf16`` (autocast, see :func:`sapiens2.runtime.with_precision`).
        bar: optional :class:`sapiens2.runtime.StageBar` (stages "read checkpoint", "build model").

    Returns:
        (model in eval mode, config dict).
    """
    if not checkpoint and not random_weights:
        raise ValueError("no --checkpoint given: pass a task checkpoint, or --random-weights to run a "
                         "randomly initialised model (its outputs are labelled as such)")
    if checkpoint and random_weights:
        raise ValueError("give either --checkpoint or --random-weights, not both")
    stage = bar.stage if bar is not None else (lambda name: contextlib.nullcontext())
    state = None
    if checkpoint:
        with stage("read checkpoint"):
            state = load_state_dict_file(checkpoint)
    with stage("build model" + (" + load weights" if state is not None else "")):
        cfg = resolve_config(task, config, arch, state)
        native_hw = [int(v) for v in cfg["backbone"].get("img_size", [])]
        if input_size_hw:
            cfg["backbone"]["img_size"] = [int(v) for v in input_size_hw]
        torch.manual_seed(seed)
        model = build_model(cfg).eval()
        if state is not None:
            load_checkpoint(model, state, strict=True)
        model.backbone.valid_input_size(*(int(v) for v in model.backbone.img_size))
        _fit_scale_branch(model, native_hw)
        with_precision(model, device, dtype)
    return model, cfg


def _fit_scale_branch(model, native_hw: list[int]) -> None:
    """Pointmap heads: check the scale MLP's input size now (not after a long forward) and, when the
    model runs at another input size than its config's, resize its scale-branch features to the
    config's grid."""
    head = model.decode_head
    if not hasattr(head, "check_scale_grid"):
        return
    run_grid = model.backbone.valid_input_size(*(int(v) for v in model.backbone.img_size))
    native_grid = model.backbone.valid_input_size(*native_hw) if len(native_hw) == 2 else run_grid
    head.check_scale_grid(native_grid)
    head.scale_feature_hw = tuple(native_grid) if tuple(native_grid) != tuple(run_grid) else None


def to_tensor(rgb: np.ndarray) -> torch.Tensor:
    """Normalised 1 x 3 x H x W float tensor of an RGB image with values in 0-255."""
    x = (rgb.astype(np.float32) - np.array(MEAN, np.float32)) / np.array(STD, np.float32)
    return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))[None]


# a person box may reach this far past the image (in image sizes) before it is taken for an error
BOX_REACH = 10.0


def check_person_box(box, image_hw: tuple[int, int], where: str) -> None:
    """Raise unless ``box`` (x1, y1, x2, y2) is finite, positive-sized, overlaps the image and stays within
    ``BOX_REACH`` image sizes of it (a 1e300 box crops nothing and overflows the crop scale).

    Raises:
        ValueError: naming ``where`` (the image), the box and what was expected.
    """
    try:
        x1, y1, x2, y2 = (float(v) for v in box)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: person box {box!r}: expected 4 numbers x1, y1, x2, y2") from None
    h, w = image_hw
    reach = BOX_REACH * max(h, w)
    if not all(np.isfinite(v) for v in (x1, y1, x2, y2)) or not (x2 > x1 and y2 > y1):
        raise ValueError(f"{where}: person box {list(box)}: needs finite x2 > x1 and y2 > y1")
    if x2 <= 0 or y2 <= 0 or x1 >= w or y1 >= h or max(abs(x1), abs(y1), abs(x2), abs(y2)) > reach:
        raise ValueError(
            f"{where}: person box {[x1, y1, x2, y2]} does not fit the {w} x {h} image (it must overlap it "
            f"and stay within {BOX_REACH:g} image sizes of it)"
        )


def pose_crop(rgb: np.ndarray, bbox_xyxy, padding: float, size_hw: tuple[int, int]):
    """The pose reader's UDP crop of a person box: (H_in x W_in x 3 float crop in 0-255, 2 x 3 affine).

    The box is widened to the input's aspect ratio and multiplied by ``padding``; its extent maps to
    [0, size - 1] crop pixels (pixel centres at integers), bilinear sampling, zero outside.
    """
    x1, y1, x2, y2 = (float(v) for v in bbox_xyxy)
    h_in, w_in = size_hw
    res = TopdownAffineUDP((w_in, h_in), padding)({"img": rgb.astype(np.float32),
                                                    "bbox": (x1, y1, x2 - x1, y2 - y1)})
    return res["img"], res["crop"]["affine"]


def predict_array(model, rgb: np.ndarray, task: str, bbox_xyxy=None, bbox_padding: float = 1.25,
                  flip_test: bool = True) -> Prediction:
    """Run ``model`` on one RGB uint8 image.

    Args:
        model: the task estimator (eval mode), on any device.
        rgb: H x W x 3 uint8 image.
        task: task name.
        bbox_xyxy: pose only: person box (default: the whole image, no padding).
        bbox_padding: pose only: box enlargement when a box is given.
        flip_test: pose only: fuse the heatmaps of the mirrored crop.

    Returns:
        The :class:`Prediction`.
    """
    spec = get_task(task)
    size_hw = tuple(int(v) for v in model.backbone.img_size)
    device = next(model.parameters()).device
    h, w = rgb.shape[:2]
    meta: dict = {"image_size_hw": [h, w], "input_size_hw": list(size_hw)}
    if not spec.dense:
        box = (0.0, 0.0, float(w), float(h)) if bbox_xyxy is None else tuple(float(v) for v in bbox_xyxy)
        crop, mat = pose_crop(rgb, box, bbox_padding if bbox_xyxy is not None else 1.0, size_hw)
        out = model.predict(to_tensor(crop).to(device), flip_test=flip_test, crop={"affine": mat})
        kpts, scores = out[spec.prediction_key][0].cpu().numpy(), out["scores"][0].cpu().numpy()
        array = np.concatenate([kpts, scores[:, None]], axis=1).astype(np.float32)
        meta.update(bbox_xyxy=[float(v) for v in box], bbox_source="given" if bbox_xyxy else "whole image",
                    crop_affine=mat.tolist(), keypoints=array.tolist())
        return Prediction(array, vis.draw_pose(rgb, kpts, scores, bbox=box), meta)
    import cv2

    x = to_tensor(cv2.resize(rgb, (size_hw[1], size_hw[0]), interpolation=cv2.INTER_LINEAR)).to(device)
    with torch.inference_mode():
        out = model.predict(x, size=(h, w))
    array = out[spec.prediction_key][0].float().cpu().numpy()
    array = array.astype(np.uint8) if spec.value_kind == "labels" else array.astype(np.float32)
    if task == "pointmap":
        meta["scale"] = float(out["scale"].reshape(-1)[0])
        meta["units"] = "canonical camera (focal length 768 px at the model input), scale applied"
        if getattr(model.decode_head, "scale_feature_hw", None) is not None:
            meta["scale_branch"] = (f"features resized to the {list(model.decode_head.scale_feature_hw)} "
                                    "grid of the config's input size (the scale MLP has a fixed input)")
    return Prediction(array, getattr(vis, spec.visualiser)(rgb, array), meta)


def predict_file(image: str | os.PathLike, task: str, out_dir: str | os.PathLike = "predictions",
                 **kwargs) -> Path:
    """Predict one image file: :func:`predict_files` with one image; returns its output stem."""
    return predict_files([image], task, out_dir, **kwargs)[0]


def predict_files(images, task: str, out_dir: str | os.PathLike = "predictions", *, checkpoint=None,
                  config=None, arch=None, input_size_hw=None, bbox_xyxy=None, bbox_padding: float = 1.25,
                  flip_test: bool = True, random_weights: bool = False, seed: int = 0, device: str = "cpu",
                  dtype: str = "fp32", progress: bool = False, boxes_of=None) -> list[Path]:
    """Load the model once, predict each image and write ``<stem>_<task>.npy``, ``.json``, ``.png``.

    Model arguments as :func:`load_model`, prediction arguments as :func:`predict_array`; without a
    checkpoint (``random_weights=True``) the files are named and labelled ``random-weights``.

    Args:
        images: image paths (their stems must differ: outputs are named after them).
        task: task name.
        out_dir: output folder.
        bbox_xyxy: pose: one box for every image, or a callable ``rgb -> box`` (e.g. a detector);
            None: the whole image.
        boxes_of: pose: a callable ``(image path, rgb) -> (boxes, source)`` giving each image several
            person boxes (x1, y1, x2, y2), e.g. an annotation file's people; each is predicted, the
            ``.npy`` is N x K x 3 and the ``.json`` lists the boxes under ``instances``.
        progress: show a stage bar (read checkpoint, build model, per image: read, each forward,
            write) on stderr and the device line on stdout.
        **others: see :func:`load_model` and :func:`predict_array`.

    Returns:
        The output paths without suffix (``out_dir/<stem>_<task>[_random-weights]``), in order.
    """
    images = [Path(i) for i in images]
    for i in images:
        if not i.is_file():
            raise FileNotFoundError(2, "image not found", str(i))
    stems = [i.stem for i in images]
    if len(set(stems)) != len(stems):
        raise ValueError(f"images with the same file name stem would write the same outputs: {stems}")
    dtype = resolve_dtype(dtype)
    forwards = 2 if task == "pose" and flip_test else 1
    if progress:
        print(f"predict {task}: {len(images)} image(s); {device_line(device, dtype)}", flush=True)
    bar = StageBar(bool(checkpoint) + 1 + len(images) * (2 + forwards), enabled=progress)
    try:
        model, cfg = load_model(task, checkpoint, config, arch, input_size_hw, random_weights, seed, device,
                                dtype, bar)
        if progress:
            size = "x".join(str(int(v)) for v in model.backbone.img_size)
            params = sum(p.numel() for p in model.parameters())
            arch_name = cfg["backbone"]["arch"] if isinstance(cfg["backbone"]["arch"], str) else "custom arch"
            bar.write(f"model {arch_name} ({params / 1e6:.1f} M parameters), input {size}")
        stems_out = []
        for n, image in enumerate(images, 1):
            where = f"image {n}/{len(images)}" if len(images) > 1 else "image"
            with bar.stage(f"{where}: read {image.name}"):
                rgb = read_rgb(image)
                box = bbox_xyxy(rgb) if callable(bbox_xyxy) else bbox_xyxy
                people = boxes_of(image, rgb) if boxes_of is not None else None
                if task == "pose":
                    for b in (people[0] if people else [] if box is None else [box]):
                        check_person_box(b, rgb.shape[:2], str(image))
            n_forwards = forwards * (len(people[0]) if people else 1)
            bar.bar.total += n_forwards - forwards  # one stage per forward of every person box
            pre = model.register_forward_pre_hook(_ForwardStage(bar, where, n_forwards))
            post = model.register_forward_hook(lambda *_: bar.end())
            try:
                if people is not None:
                    pred = _predict_people(model, rgb, task, *people, bbox_padding, flip_test)
                else:
                    pred = predict_array(model, rgb, task, box, bbox_padding, flip_test)
                if callable(bbox_xyxy) and task == "pose":
                    pred.meta["bbox_source"] = getattr(bbox_xyxy, "source", "detector")
            finally:
                pre.remove()
                post.remove()
            with bar.stage(f"{where}: write"):
                forward_s = [v for k, v in bar.seconds.items() if k.startswith(f"{where}: forward")]
                stems_out.append(_write(out_dir, image, task, pred, cfg, checkpoint, random_weights,
                                        {"device": device, "dtype": dtype, "forward_s": forward_s}))
    finally:
        bar.close()
    return stems_out


def _predict_people(model, rgb, task: str, boxes, source: str, padding: float, flip_test: bool) -> Prediction:
    """Pose on every box of one image: N x K x 3 keypoints, one picture with every person drawn."""
    if task != "pose" or not boxes:
        raise ValueError(f"several person boxes are for --task pose (got {task} and {len(boxes)} boxes)")
    preds = [predict_array(model, rgb, task, box, padding, flip_test) for box in boxes]
    picture = rgb
    for p in preds:
        picture = vis.draw_pose(picture, p.array[:, :2], p.array[:, 2], bbox=p.meta["bbox_xyxy"],
                                legend=False)
    picture = vis.with_pose_legend(picture, [p.array[:, 2] for p in preds], 0.3, True)
    array = np.stack([p.array for p in preds])
    meta = {k: preds[0].meta[k] for k in ("image_size_hw", "input_size_hw")}
    meta.update(bbox_source=source, bbox_padding=padding, keypoints=array.tolist(),
                instances=[{k: p.meta[k] for k in ("bbox_xyxy", "crop_affine")} for p in preds])
    return Prediction(array, picture, meta)


class _ForwardStage:
    """Forward pre-hook: starts the stage "<image>: forward k/n" of the bar."""

    def __init__(self, bar, where: str, forwards: int) -> None:
        self.bar, self.where, self.forwards, self.count = bar, where, forwards, 0

    def __call__(self, *_) -> None:
        self.count += 1
        self.bar.begin(f"{self.where}: forward {min(self.count, self.forwards)}/{self.forwards}")


def _write(out_dir, image: Path, task: str, pred: Prediction, cfg: dict, checkpoint, random_weights: bool,
           run: dict) -> Path:
    picture = vis.label_random(pred.picture) if random_weights else pred.picture
    meta = {"image": str(image), "task": task, "checkpoint": None if checkpoint is None else str(checkpoint),
            "random_weights": random_weights, "arch": cfg["backbone"]["arch"], **run, **pred.meta,
            "prediction_shape": list(pred.array.shape)}
    stem = Path(out_dir) / (f"{image.stem}_{task}" + ("_random-weights" if random_weights else ""))
    atomic_write(stem.with_name(stem.name + ".npy"), lambda tmp: _save_npy(tmp, pred.array))
    write_json_atomic(stem.with_name(stem.name + ".json"), meta)
    atomic_write(stem.with_name(stem.name + ".png"), lambda tmp: _save_png(tmp, picture))
    return stem


def _save_npy(tmp: str, array: np.ndarray) -> None:
    with open(tmp, "wb") as f:
        np.save(f, array)


def _save_png(tmp: str, picture: np.ndarray) -> None:
    import cv2

    ok, buf = cv2.imencode(".png", cv2.cvtColor(picture, cv2.COLOR_RGB2BGR))
    if not ok:
        raise RuntimeError("PNG encoding failed")
    with open(tmp, "wb") as f:
        f.write(buf.tobytes())
