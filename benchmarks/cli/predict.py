"""``sapiens2-bench predict IMAGE --task T --checkpoint FILE``: run one Sapiens2 task model on one image.

Writes, under ``--out`` (default ``predictions/``), ``<image>_<task>.npy`` (the prediction at image
resolution: labels H x W, normals / points / albedo 3 x H x W; pose: keypoints K x 3 = x, y, score), a
``.json`` with the metadata (and the keypoints), and a ``.png`` picture. The model comes from
``--config`` (an official config name or a JSON file with an official-style config; ``arch`` may be a
settings dict), else ``--arch`` (an official arch with a released config for the task), else the
checkpoint's tensor shapes. Dense tasks resize the whole image to the model input; pose is top-down on
``--bbox`` (default: the whole image) with an affine crop. Without a checkpoint the command refuses
unless ``--random-weights`` is given; then every output is labelled ``random-weights``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

TASKS = ("pose", "seg", "normal", "pointmap", "albedo")
TASK_TYPES = {"pose": "PoseTopdownEstimator", "seg": "SegEstimator", "normal": "NormalEstimator",
              "pointmap": "PointmapEstimator", "albedo": "AlbedoEstimator"}
MEAN = (123.675, 116.28, 103.53)  # ImageNet RGB mean/std in 0-255, as the official pipelines
STD = (58.395, 57.12, 57.375)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``predict`` subcommand."""
    p = sub.add_parser("predict", help="run a task model on an image and write the prediction and a picture",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("image", help="input image (any format OpenCV reads)")
    p.add_argument("--task", required=True, choices=TASKS)
    p.add_argument("--checkpoint", help="official-layout task checkpoint (.safetensors or .pth)")
    p.add_argument("--arch", help="official backbone arch, e.g. sapiens2_0.4b (its released task config)")
    p.add_argument("--config", help="official config name or JSON file with an estimator config")
    p.add_argument("--input-size", help="HxW model input (default: the config's img_size)")
    p.add_argument("--bbox", help="pose: person box x1,y1,x2,y2 in image pixels (default: whole image)")
    p.add_argument("--bbox-padding", type=float, default=1.25, help="pose: box enlargement (default 1.25)")
    p.add_argument("--no-flip-test", action="store_true", help="pose: skip flip-test heatmap fusion")
    p.add_argument("--random-weights", action="store_true",
                   help="allow running without a checkpoint (randomly initialised; outputs are labelled)")
    p.add_argument("--seed", type=int, default=0, help="seed for --random-weights")
    p.add_argument("--out", default="predictions", help="output folder (default predictions/)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=run)


def resolve_config(args: argparse.Namespace, state: dict | None) -> dict:
    """The estimator config from --config, --arch or the checkpoint shapes (see the module docstring)."""
    import json

    from sapiens2.models.builder import official_config
    from sapiens2.reference import official_archs, official_task_configs

    if args.config:
        path = Path(args.config)
        if path.suffix == ".json" or path.is_file():
            if not path.is_file():
                raise FileNotFoundError(f"{path}: config file not found")
            try:
                cfg = json.loads(path.read_text())
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: malformed JSON ({e})") from e
            cfg = cfg.get("model", cfg)
        else:
            cfg = official_config(args.config)
    elif args.arch:
        known = list(official_archs()["archs"])
        if args.arch not in known:
            raise KeyError(f"unknown arch {args.arch!r}; known archs: {', '.join(known)}")
        models = [c["model"] for c in official_task_configs().values()
                  if c["model"]["type"] == TASK_TYPES[args.task]]
        found = [m for m in models if m["backbone"]["arch"] == args.arch]
        if not found:
            with_task = sorted({m["backbone"]["arch"] for m in models})
            raise KeyError(f"no released {args.task} config for arch {args.arch!r}; archs with one: "
                           f"{', '.join(with_task)}")
        cfg = found[0]
    elif state is not None:
        from sapiens2.models.hf_config import infer_official_config

        cfg = infer_official_config(state, args.task)
    else:
        raise ValueError("--random-weights needs --arch or --config to know which model to build")
    if cfg.get("type") != TASK_TYPES[args.task]:
        raise ValueError(f"config type {cfg.get('type')!r} does not match --task {args.task} "
                         f"(expected {TASK_TYPES[args.task]})")
    return cfg


def read_image(path: str | Path):
    """RGB uint8 H x W x 3; a missing or unreadable file raises an error naming it."""
    import cv2

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: image not found")
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f"{path}: not a readable image")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def to_tensor(rgb):
    """Normalised 1 x 3 x H x W float tensor of an RGB uint8 image."""
    import numpy as np
    import torch

    x = (rgb.astype(np.float32) - np.array(MEAN, np.float32)) / np.array(STD, np.float32)
    return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))[None]


def pose_crop(rgb, bbox, padding: float, size_hw: tuple[int, int]):
    """Affine crop of the (padded, aspect-fixed) box to the model input; returns (crop, 2 x 3 matrix)."""
    import cv2
    import numpy as np

    h_in, w_in = size_hw
    x1, y1, x2, y2 = bbox
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    bw, bh = (x2 - x1) * padding, (y2 - y1) * padding
    if bw / bh > w_in / h_in:  # widen the short side so the box has the input's aspect ratio
        bh = bw * h_in / w_in
    else:
        bw = bh * w_in / h_in
    s = w_in / bw
    mat = np.array([[s, 0, w_in / 2 - s * cx], [0, s, h_in / 2 - s * cy]], np.float64)
    crop = cv2.warpAffine(rgb, mat, (w_in, h_in), flags=cv2.INTER_LINEAR, borderValue=(0, 0, 0))
    return crop, mat


def _parse_bbox(text: str | None, w: int, h: int) -> tuple[float, float, float, float]:
    if text is None:
        return (0.0, 0.0, float(w), float(h))
    try:
        x1, y1, x2, y2 = (float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"--bbox {text!r}: expected x1,y1,x2,y2") from None
    if not (x2 > x1 and y2 > y1):
        raise ValueError(f"--bbox {text!r}: needs x2 > x1 and y2 > y1")
    return (x1, y1, x2, y2)


def run(args: argparse.Namespace) -> int:
    """Predict and write the outputs; returns the exit code."""
    import numpy as np
    import torch

    from benchmarks.cli.convert import parse_hw
    from sapiens2.models import visualize as vis
    from sapiens2.models.builder import build_model
    from sapiens2.models.checkpoint import load_checkpoint, load_state_dict_file
    from sapiens2.utils_io import atomic_write, write_json_atomic

    if not args.checkpoint and not args.random_weights:
        raise ValueError("no --checkpoint given: pass a task checkpoint, or --random-weights to run a "
                         "randomly initialised model (its outputs are labelled as such)")
    if args.checkpoint and args.random_weights:
        raise ValueError("give either --checkpoint or --random-weights, not both")
    image_path = Path(args.image)
    rgb = read_image(image_path)
    state = load_state_dict_file(args.checkpoint) if args.checkpoint else None
    cfg = resolve_config(args, state)
    if args.input_size:
        cfg["backbone"]["img_size"] = list(parse_hw(args.input_size))
    torch.manual_seed(args.seed)
    model = build_model(cfg).eval()
    if state is not None:
        load_checkpoint(model, state, strict=True)
    size_hw = tuple(int(v) for v in model.backbone.img_size)
    model.backbone.valid_input_size(*size_hw)

    h, w = rgb.shape[:2]
    meta = {"image": str(image_path), "task": args.task, "image_size_hw": [h, w],
            "input_size_hw": list(size_hw), "checkpoint": args.checkpoint,
            "random_weights": args.random_weights, "arch": cfg["backbone"]["arch"]}
    if args.task == "pose":
        bbox = _parse_bbox(args.bbox, w, h)
        crop, mat = pose_crop(rgb, bbox, args.bbox_padding if args.bbox else 1.0, size_hw)
        out = model.predict(to_tensor(crop), flip_test=not args.no_flip_test, crop={"affine": mat})
        kpts, scores = out["keypoints"][0].numpy(), out["scores"][0].numpy()
        array = np.concatenate([kpts, scores[:, None]], axis=1).astype(np.float32)
        picture = vis.draw_pose(rgb, kpts, scores, bbox=bbox)
        meta.update(bbox_xyxy=list(bbox), crop_affine=mat.tolist(), keypoints=array.tolist())
    else:
        import cv2

        x = to_tensor(cv2.resize(rgb, (size_hw[1], size_hw[0]), interpolation=cv2.INTER_LINEAR))
        with torch.inference_mode():
            out = model.predict(x, size=(h, w))
        if args.task == "seg":
            array = out["labels"][0].numpy().astype(np.uint8)
            picture = vis.draw_seg(rgb, array)
        elif args.task == "normal":
            array = out["normals"][0].numpy().astype(np.float32)
            picture = vis.draw_normal(rgb, array)
        elif args.task == "pointmap":
            array = out["pointmap_canonical"][0].numpy().astype(np.float32)
            picture = vis.draw_depth(rgb, array)
            meta["scale"] = float(out["scale"].reshape(-1)[0])
            meta["units"] = "canonical camera (focal length 768 px at the model input), scale applied"
        else:
            array = out["albedo"][0].numpy().astype(np.float32)
            picture = vis.draw_albedo(rgb, array)
    if args.random_weights:
        picture = vis.label_random(picture)
    stem = f"{image_path.stem}_{args.task}" + ("_random-weights" if args.random_weights else "")
    out_dir = Path(args.out)
    meta["prediction_shape"] = list(array.shape)
    atomic_write(out_dir / f"{stem}.npy", lambda tmp: _save_npy(tmp, array))
    write_json_atomic(out_dir / f"{stem}.json", meta)
    atomic_write(out_dir / f"{stem}.png", lambda tmp: _save_png(tmp, picture))
    label = " (RANDOM WEIGHTS: not a real prediction)" if args.random_weights else ""
    print(f"wrote {out_dir / stem}.npy, .json and .png{label}")
    return 0


def _save_npy(tmp: str, array) -> None:
    import numpy as np

    with open(tmp, "wb") as f:
        np.save(f, array)


def _save_png(tmp: str, picture) -> None:
    import cv2

    ok, buf = cv2.imencode(".png", cv2.cvtColor(picture, cv2.COLOR_RGB2BGR))
    if not ok:
        raise RuntimeError("PNG encoding failed")
    with open(tmp, "wb") as f:
        f.write(buf.tobytes())
