"""The probe protocol is honest: every hashed field is read, the optimiser, schedule and losses are
built from their names, task knobs nest per task, and the probe's modules import in one direction."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _probe_toy import make_toy_data  # noqa: E402

from benchmarks.probe.config import GROUPS  # noqa: E402
from benchmarks.probe.protocol import ProbeProtocol, quick_protocol  # noqa: E402
from benchmarks.probe.tasks import task_classes  # noqa: E402
from sapiens2.errors import UnknownNameError  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
PROBE = ROOT / "benchmarks" / "probe"


# protocol.py functions that only validate, copy or hash the fields (reading there does not count)
BOOKKEEPING = {
    "__post_init__",
    "to_dict",
    "protocol_id",
    "replace",
    "from_dict",
    "task_settings",
    "task_protocol",
    "protocol_ids",
    "settings_class",
    "default_task_settings",
    "_check_field_names",
    "__init__",
    "__getattr__",
}


def _attributes_read() -> set[str]:
    names = set()
    for path in PROBE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        roots = [tree]
        if path.name == "protocol.py":
            roots = [
                n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name not in BOOKKEEPING
            ]
        for root in roots:
            for node in ast.walk(root):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                    names.add(node.attr)
    return names


def test_every_hashed_field_is_read():
    """Each field of the protocol and of every task's settings is read by the probe's code."""
    read = _attributes_read()
    # version: the id's prefix; augmentation: validated to be "none", the one policy implemented
    exempt = {"version", "augmentation", "tasks"}
    fields = {f.name for g in GROUPS.values() for f in dataclasses.fields(g)} - exempt
    for cls in {t.settings_class for t in task_classes().values()}:
        fields |= {f.name for f in dataclasses.fields(cls)}
    assert sorted(fields - read) == []


def test_no_task_knob_at_the_top_level():
    top = {f.name for g in GROUPS.values() for f in dataclasses.fields(g)} | {"version", "tasks"}
    assert not top & {"seg_logit_margin", "pose_sigma", "pose_blur_kernel", "canonical_focal_length"}
    p = ProbeProtocol()
    assert p.task("pose").sigma == 2.0 and p.task("pose").blur_kernel == 11
    assert p.task("seg").logit_margin == 10.0 and p.task("pointmap").canonical_focal_length == 768.0
    with pytest.raises(
        UnknownNameError, match=r"unknown protocol.tasks\['seg'\] key 'sigma'; known: .*logit_margin"
    ):
        p.replace(tasks={"seg": {"sigma": 3.0}})


def test_task_knobs_change_what_the_task_computes():
    from benchmarks.probe.tasks import build_task

    p = quick_protocol()
    data = make_toy_data()

    def targets(name, protocol):
        task = build_task(name, protocol)
        return task, task.targets(data.load(name, "train", protocol))

    _, a = targets("pose", p)
    _, b = targets("pose", p.replace(tasks={"pose": {"sigma": 3.0}}))
    assert not torch.equal(a["heatmaps"], b["heatmaps"])
    seg, t = targets("seg", p)
    seg5 = build_task("seg", p.replace(tasks={"seg": {"logit_margin": 5.0}}))
    assert float(seg.linear_targets(t).max()) == 10.0 and float(seg5.linear_targets(t).max()) == 5.0
    _, a = targets("pointmap", p)
    _, b = targets("pointmap", p.replace(tasks={"pointmap": {"canonical_focal_length": 384.0}}))
    torch.testing.assert_close(b["log_scale"], a["log_scale"] + torch.log(torch.tensor(0.5)))


def test_losses_are_looked_up_by_name_and_weighted_by_term():
    from benchmarks.probe.tasks import build_task

    p = quick_protocol()
    with pytest.raises(UnknownNameError, match="unknown seg loss 'focal'; known: cross_entropy_dice"):
        build_task("seg", p.replace(tasks={"seg": {"loss": "focal"}}))
    with pytest.raises(UnknownNameError, match="term of the seg loss .* 'lovasz'; known: ce, dice"):
        build_task("seg", p.replace(tasks={"seg": {"loss_weights": {"lovasz": 1.0}}}))
    data = make_toy_data(tasks=("seg",))
    task = build_task("seg", p)
    tgt = task.targets(data.load("seg", "train", p))
    maps = torch.randn(tgt["label"].shape[0], 29, *tgt["label"].shape[-2:])
    total, terms = task.loss(maps, None, tgt)
    assert total.item() == pytest.approx(terms["ce"] + 0.5 * terms["dice"], rel=1e-6)
    ce_only = build_task("seg", p.replace(tasks={"seg": {"loss_weights": {"ce": 1.0, "dice": 0.0}}}))
    assert ce_only.loss(maps, None, tgt)[0].item() == pytest.approx(terms["ce"], rel=1e-6)


def test_optimizer_and_schedule_are_built_from_their_names():
    from benchmarks.probe.backbones import build_probe_backbone
    from benchmarks.probe.data.source import stack_images
    from benchmarks.probe.features.store import FeatureStore
    from benchmarks.probe.tasks import build_task
    from benchmarks.probe.train.loop import train_decoder
    from benchmarks.probe.train.optim import lr_factor

    p = quick_protocol().replace(iterations=6, warmup_iters=2, weight_decay=0.5, shortcut="none")
    assert lr_factor(4, p) < 1.0 == lr_factor(4, p.replace(schedule="warmup_constant"))
    with pytest.raises(UnknownNameError, match="unknown protocol schedule 'step'; known: warmup_cosine"):
        lr_factor(0, p.replace(schedule="step"))
    data = make_toy_data(tasks=("albedo",))
    samples = data.load("albedo", "train", p)
    feats = FeatureStore(build_probe_backbone("pixels"), [0], p).compute(
        stack_images(samples, p.input_size, "t")
    )

    def trained(protocol):
        task = build_task("albedo", protocol)
        dec, _ = train_decoder(task, feats, task.targets(samples), protocol, seed=0)
        return torch.cat([v.flatten() for v in dec.state_dict().values()])

    adamw = trained(p)
    assert torch.equal(adamw, trained(p))
    assert not torch.equal(adamw, trained(p.replace(optimizer="adam")))
    assert not torch.equal(adamw, trained(p.replace(schedule="warmup_constant")))
    with pytest.raises(UnknownNameError, match="unknown protocol optimizer 'sgd'; known: adamw, adam"):
        trained(p.replace(optimizer="sgd"))


def test_unknown_optimizer_fails_before_any_work(tmp_path):
    from benchmarks.probe.api import run_probe

    with pytest.raises(UnknownNameError, match="optimizer 'lion'"):
        run_probe(
            "pixels",
            ["seg"],
            make_toy_data(tasks=("seg",)),
            tmp_path,
            protocol=quick_protocol().replace(optimizer="lion"),
        )
    assert not list(tmp_path.rglob("*"))


def test_replace_takes_json_overrides_like_the_cli(tmp_path, capsys):
    import json

    from benchmarks.cli.main import main

    overrides = {"betas": [0.9, 0.99], "tasks": {"seg": {"logit_margin": 5.0}}}
    want = quick_protocol().replace(betas=(0.9, 0.99), tasks={"seg": {"logit_margin": 5.0}})
    assert quick_protocol().replace(**overrides) == want
    (tmp_path / "p.json").write_text(json.dumps(overrides))
    assert main(["probe", "--quick", "--protocol", str(tmp_path / "p.json"), "--show-protocol"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["protocol"] == want.to_dict() and shown["protocol"]["tasks"]["pose"]["sigma"] == 2.0
    assert {t: v["protocol_id"] for t, v in shown["per_task"].items()} == want.protocol_ids()
    seg = shown["per_task"]["seg"]["covers"]
    assert seg == want.task_protocol("seg") and list(seg["tasks"]) == ["seg"]
    assert seg["tasks"]["seg"]["logit_margin"] == 5.0 and seg["betas"] == [0.9, 0.99]  # quick: a trained body
    (tmp_path / "bad.json").write_text(json.dumps({"pose_sigma": 3.0}))
    assert main(["probe", "--quick", "--protocol", str(tmp_path / "bad.json"), "--show-protocol"]) == 1
    assert "unknown probe protocol key 'pose_sigma'" in capsys.readouterr().err


def test_shortcut_imports_without_train():
    """The shortcut <-> train import circle is gone: the shortcut module stands on its own."""
    code = (
        "import sys; import benchmarks.probe.readout.shortcut; "
        "assert 'benchmarks.probe.train.loop' not in sys.modules, 'shortcut pulls in train'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_in_function_imports_only_defer_heavy_optional_packages():
    allowed = {"transformers", "safetensors.torch"}
    found = []
    for path in PROBE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Import):
                        found += [(path.name, a.name) for a in sub.names if a.name not in allowed]
                    elif isinstance(sub, ast.ImportFrom) and sub.module not in allowed:
                        found.append((path.name, sub.module))
    assert found == []
