"""``sapiens2-bench eval`` on folders of .npy/.png/.exr files: table, atomic JSON, clear errors."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
import torch

from benchmarks.cli.main import main


def _eval(task: str, root, *extra: str) -> int:
    """Exit code of ``sapiens2-bench eval TASK --pred ROOT/pred --gt ROOT/gt EXTRA...``."""
    return main(["eval", task, "--pred", str(root / "pred"), "--gt", str(root / "gt"), *extra])


def _write_normal_set(root, n=3, h=16, w=12, png16=False):
    rng = np.random.default_rng(0)
    for d in ("pred", "gt", "mask"):
        (root / d).mkdir(parents=True, exist_ok=True)
    gts, preds, masks = [], [], []
    for i in range(n):
        g = rng.normal(size=(3, h, w)).astype(np.float32)
        g /= np.linalg.norm(g, axis=0, keepdims=True)
        p = g + 0.2 * rng.normal(size=g.shape).astype(np.float32)
        m = rng.random((h, w)) > 0.3
        np.save(root / "gt" / f"{i:04d}.npy", g)
        if png16:  # 16-bit RGB PNG encoding n = v / 65535 * 2 - 1
            p = np.clip(p, -1, 1)
            enc = np.round((p.transpose(1, 2, 0) + 1) / 2 * 65535).astype(np.uint16)
            cv2.imwrite(str(root / "pred" / f"{i:04d}.png"), enc[..., ::-1])
            p = enc.transpose(2, 0, 1).astype(np.float64) / 65535 * 2 - 1
        else:
            np.save(root / "pred" / f"{i:04d}.npy", p.transpose(1, 2, 0))  # H x W x 3 is accepted too
        cv2.imwrite(str(root / "mask" / f"{i:04d}.png"), m.astype(np.uint8) * 255)
        gts.append(g)
        preds.append(np.asarray(p, np.float32))
        masks.append(m)
    return torch.tensor(np.stack(preds)), torch.tensor(np.stack(gts)), torch.tensor(np.stack(masks))


@pytest.mark.parametrize("png16", [False, True])
def test_eval_normal_folder_matches_evaluator(tmp_path, capsys, png16):
    from evaluators import NormalEvaluator

    pred, gt, mask = _write_normal_set(tmp_path, png16=png16)
    out = tmp_path / "res" / "normal.json"
    code = _eval(
        "normal", tmp_path, "--mask", str(tmp_path / "mask"), "--json", str(out), "--batch-size", "2"
    )
    assert code == 0
    assert "normal_mae" in capsys.readouterr().out
    res = json.loads(out.read_text())
    ref = NormalEvaluator()
    ref.update(pred, gt, mask)
    assert res["metrics"]["normal_mae"] == pytest.approx(ref.compute()["normal_mae"], rel=1e-6)
    assert res["num_files"] == 3 and "pooling" in res["conventions"]


def test_eval_seg_png_labels_and_npy_logits(tmp_path):
    rng = np.random.default_rng(1)
    for d in ("pred", "gt"):
        (tmp_path / d).mkdir()
    for i in range(2):
        lab = rng.integers(0, 29, (8, 6)).astype(np.uint8)
        cv2.imwrite(str(tmp_path / "gt" / f"{i}.png"), lab)
        logits = np.eye(29, dtype=np.float32)[lab].transpose(2, 0, 1) * 5
        np.save(tmp_path / "pred" / f"{i}.npy", logits)
    out = tmp_path / "seg.json"
    assert _eval("seg", tmp_path, "--json", str(out)) == 0
    res = json.loads(out.read_text())
    assert res["metrics"]["aAcc"] == 100.0 and "per_class" in res


@pytest.mark.exr
def test_eval_exr_pointmap(tmp_path):
    import os

    os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")
    for d in ("pred", "gt"):
        (tmp_path / d).mkdir()
    g = np.random.default_rng(2).normal(size=(8, 6, 3)).astype(np.float32) + 2
    assert cv2.imwrite(str(tmp_path / "gt" / "a.exr"), g[..., ::-1])
    np.save(tmp_path / "pred" / "a.npy", g.transpose(2, 0, 1))
    out = tmp_path / "pm.json"
    assert _eval("pointmap", tmp_path, "--json", str(out)) == 0
    assert json.loads(out.read_text())["metrics"]["l2_mean"] < 1e-6


def test_eval_errors_name_the_file(tmp_path, capsys):
    _write_normal_set(tmp_path)
    (tmp_path / "pred" / "0001.npy").unlink()
    code = _eval("normal", tmp_path)
    assert code == 1
    assert "0001" in capsys.readouterr().err
    np.save(tmp_path / "pred" / "0001.npy", np.zeros((4, 4, 4), np.float32))
    assert _eval("normal", tmp_path) == 1
    assert "0001.npy" in capsys.readouterr().err
    assert main(["eval", "albedo", "--pred", str(tmp_path / "nope"), "--gt", str(tmp_path / "gt")]) == 1
    assert "nope" in capsys.readouterr().err
