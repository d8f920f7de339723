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
    >>> pred.array.shape, pred.array.dtype, pred.picture.shape
    ((100, 80), dtype('uint8'), (100, 164, 3))
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from sapiens2.tasks import get_task

MEAN = (123.675, 116.28, 103.53)  # ImageNet RGB mean/std in 0-255, as the official pipelines
STD = (58.395, 57.12, 57.375)


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
    from sapiens2.models.builder import official_config
    from sapiens2.reference import official_archs, official_task_configs

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
        known = list(official_archs()["archs"])
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
        from sapiens2.models.hf_config import infer_official_config

        cfg = infer_official_config(state, task)
    else:
        raise ValueError("--random-weights needs --arch or --config to know which model to build")
    if cfg.get("type") != estimator:
        raise ValueError(f"config type {cfg.get('type')!r} does not match --task {task} "
                         f"(expected {estimator})")
    return cfg


def load_model(task: str, checkpoint: str | os.PathLike | None = None, config: str | None = None,
               arch: str | None = None, input_size_hw: tuple[int, int] | None = None,
               random_weights: bool = False, seed: int = 0):
    """Build the task model (and load its checkpoint).

    Args:
        task: task name.
        checkpoint: official-layout task checkpoint (.safetensors or .pth).
        config: official config name or JSON file (see :func:`resolve_config`).
        arch: official backbone arch.
        input_size_hw: model input (H, W) (default: the config's ``img_size``).
        random_weights: build without a checkpoint (outputs must then be labelled).
        seed: torch seed of the random initialisation.

    Returns:
        (model in eval mode, config dict).
    """
    from sapiens2.models.builder import build_model
    from sapiens2.models.checkpoint import load_checkpoint, load_state_dict_file

    if not checkpoint and not random_weights:
        raise ValueError("no --checkpoint given: pass a task checkpoint, or --random-weights to run a "
                         "randomly initialised model (its outputs are labelled as such)")
    if checkpoint and random_weights:
        raise ValueError("give either --checkpoint or --random-weights, not both")
    state = load_state_dict_file(checkpoint) if checkpoint else None
    cfg = resolve_config(task, config, arch, state)
    if input_size_hw:
        cfg["backbone"]["img_size"] = [int(v) for v in input_size_hw]
    torch.manual_seed(seed)
    model = build_model(cfg).eval()
    if state is not None:
        load_checkpoint(model, state, strict=True)
    model.backbone.valid_input_size(*(int(v) for v in model.backbone.img_size))
    return model, cfg


def to_tensor(rgb: np.ndarray) -> torch.Tensor:
    """Normalised 1 x 3 x H x W float tensor of an RGB image with values in 0-255."""
    x = (rgb.astype(np.float32) - np.array(MEAN, np.float32)) / np.array(STD, np.float32)
    return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))[None]


def pose_crop(rgb: np.ndarray, bbox_xyxy, padding: float, size_hw: tuple[int, int]):
    """The pose reader's UDP crop of a person box: (H_in x W_in x 3 float crop in 0-255, 2 x 3 affine).

    The box is widened to the input's aspect ratio and multiplied by ``padding``; its extent maps to
    [0, size - 1] crop pixels (pixel centres at integers), bilinear sampling, zero outside.
    """
    from sapiens2.datasets.pose import TopdownAffineUDP

    x1, y1, x2, y2 = (float(v) for v in bbox_xyxy)
    h_in, w_in = size_hw
    res = TopdownAffineUDP((w_in, h_in), padding)({"img": rgb.astype(np.float32),
                                                    "bbox": (x1, y1, x2 - x1, y2 - y1)})
    return res["img"], res["crop"]["affine"]


def predict_array(model, rgb: np.ndarray, task: str, bbox_xyxy=None, bbox_padding: float = 1.25,
                  flip_test: bool = True) -> Prediction:
    """Run ``model`` on one RGB uint8 image.

    Args:
        model: the task estimator (eval mode).
        rgb: H x W x 3 uint8 image.
        task: task name.
        bbox_xyxy: pose only: person box (default: the whole image, no padding).
        bbox_padding: pose only: box enlargement when a box is given.
        flip_test: pose only: fuse the heatmaps of the mirrored crop.

    Returns:
        The :class:`Prediction`.
    """
    from sapiens2.models import visualize as vis

    spec = get_task(task)
    size_hw = tuple(int(v) for v in model.backbone.img_size)
    h, w = rgb.shape[:2]
    meta: dict = {"image_size_hw": [h, w], "input_size_hw": list(size_hw)}
    if not spec.dense:
        box = (0.0, 0.0, float(w), float(h)) if bbox_xyxy is None else tuple(float(v) for v in bbox_xyxy)
        crop, mat = pose_crop(rgb, box, bbox_padding if bbox_xyxy is not None else 1.0, size_hw)
        out = model.predict(to_tensor(crop), flip_test=flip_test, crop={"affine": mat})
        kpts, scores = out[spec.prediction_key][0].numpy(), out["scores"][0].numpy()
        array = np.concatenate([kpts, scores[:, None]], axis=1).astype(np.float32)
        meta.update(bbox_xyxy=list(bbox_xyxy or box), crop_affine=mat.tolist(), keypoints=array.tolist())
        return Prediction(array, vis.draw_pose(rgb, kpts, scores, bbox=box), meta)
    import cv2

    x = to_tensor(cv2.resize(rgb, (size_hw[1], size_hw[0]), interpolation=cv2.INTER_LINEAR))
    with torch.inference_mode():
        out = model.predict(x, size=(h, w))
    array = out[spec.prediction_key][0].numpy()
    array = array.astype(np.uint8) if spec.value_kind == "labels" else array.astype(np.float32)
    if task == "pointmap":
        meta["scale"] = float(out["scale"].reshape(-1)[0])
        meta["units"] = "canonical camera (focal length 768 px at the model input), scale applied"
    return Prediction(array, getattr(vis, spec.visualiser)(rgb, array), meta)


def predict_file(image: str | os.PathLike, task: str, out_dir: str | os.PathLike = "predictions", *,
                 checkpoint=None, config=None, arch=None, input_size_hw=None, bbox_xyxy=None,
                 bbox_padding: float = 1.25, flip_test: bool = True, random_weights: bool = False,
                 seed: int = 0) -> Path:
    """Predict one image file and write ``<stem>_<task>.npy``, ``.json`` and ``.png`` under ``out_dir``.

    Model arguments as :func:`load_model`, prediction arguments as :func:`predict_array`; without a
    checkpoint (``random_weights=True``) the files are named and labelled ``random-weights``.

    Returns:
        The output path without suffix (``out_dir/<stem>_<task>[_random-weights]``).
    """
    from sapiens2.datasets.io import read_rgb
    from sapiens2.models import visualize as vis
    from sapiens2.utils_io import atomic_write, write_json_atomic

    image = Path(image)
    rgb = read_rgb(image)
    model, cfg = load_model(task, checkpoint, config, arch, input_size_hw, random_weights, seed)
    pred = predict_array(model, rgb, task, bbox_xyxy, bbox_padding, flip_test)
    picture = vis.label_random(pred.picture) if random_weights else pred.picture
    meta = {"image": str(image), "task": task, "checkpoint": None if checkpoint is None else str(checkpoint),
            "random_weights": random_weights, "arch": cfg["backbone"]["arch"], **pred.meta,
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
