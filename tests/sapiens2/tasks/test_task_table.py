"""Contract of the task table (``sapiens2.tasks``): every registered task, evaluator and probe backbone.

Each task's spec names things of several layers by registered type name; these tests check that
every name resolves, that the readers' samples carry the keys the feed names, that the evaluator
reports the headline metric in the direction the leaderboard shows, and that a new task is one spec
plus its registration.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evaluators.registry import EVALUATORS, build_evaluator, evaluator_class
from evaluators.runner import run_evaluation, sample_update
from sapiens2.errors import UnknownNameError
from sapiens2.registry import DATASETS, MODELS
from sapiens2.tasks import Feed, TaskSpec, all_tasks, get_task, register_task, task_names, unregister_task

EVALUATORS.import_from_location()  # the evaluator modules register themselves on import

TASKS = [s.name for s in all_tasks()]


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    from sapiens2.datasets.synth import ensure_default_split

    return ensure_default_split("tasks", n=2, size=(64, 48), seed=5, root=tmp_path_factory.mktemp("synth"),
                                progress=False)


def test_table_holds_the_five_tasks_in_display_order():
    assert task_names() == ("pose", "seg", "normal", "pointmap", "albedo")
    assert task_names(dense=True) == ("seg", "normal", "pointmap", "albedo")
    with pytest.raises(UnknownNameError, match="unknown task 'depth'; known: pose, seg"):
        get_task("depth")


@pytest.mark.parametrize("name", TASKS)
def test_spec_names_resolve_in_every_layer(name):
    from sapiens2.models import visualize

    spec = get_task(name)
    DATASETS.import_from_location()
    MODELS.import_from_location()
    assert DATASETS.get(spec.dataset) is not None, spec.dataset
    assert MODELS.get(spec.estimator) is not None, spec.estimator
    assert MODELS.get(spec.head) is not None, spec.head
    assert EVALUATORS.get(spec.evaluator) is evaluator_class(name)
    assert callable(getattr(visualize, spec.visualiser))
    assert MODELS.get(spec.estimator).task == name


@pytest.mark.parametrize("name", TASKS)
def test_reader_samples_carry_the_feed_keys(split, name):
    from sapiens2.datasets import open_split

    spec = get_task(name)
    kwargs = {"input_size": (48, 64)} if name == "pose" else {}
    sample = open_split(split, name, **kwargs)[0]
    assert spec.feed.gt_key in sample
    if spec.feed.mask_key:
        assert sample[spec.feed.mask_key].dtype == torch.bool


@pytest.mark.parametrize("name", task_names(dense=True))
def test_headline_metric_from_the_runner_matches_the_leaderboard(split, name):
    """GT fed as the prediction through the one loop: perfect headline score, in the catalog's direction."""
    from leaderboard.catalog import canonical_metric, headline_metric, headline_ok_metrics
    from sapiens2.datasets import open_split

    spec = get_task(name)
    ds = open_split(split, name)
    samples = [ds[i] for i in range(len(ds))]
    pred = torch.stack([torch.as_tensor(s[spec.feed.gt_key]) for s in samples])
    labels = spec.feed.kind == "labels"
    res = run_evaluation(build_evaluator(name), [sample_update(name, pred.float() if not labels else pred,
                                                               samples, pred_is_labels=labels)])
    value = res.metrics[spec.headline]
    perfect = {"seg": 100.0, "normal": 0.0, "pointmap": 0.0, "albedo": 0.0}[name]
    assert value == pytest.approx(perfect, abs=1e-3)
    head = headline_metric(name)  # direction from the evaluator's declaration: perfect is seg's max, else 0
    assert head.higher_is_better == (perfect > 0)
    key, _ = canonical_metric(name, spec.headline)
    assert key == head.key and head in headline_ok_metrics(name)


def test_pose_headline_is_shown_by_the_leaderboard():
    from leaderboard.catalog import canonical_metric, headline_metric, headline_ok_metrics

    spec = get_task("pose")
    key, _ = canonical_metric("pose", spec.headline)
    assert key == headline_metric("pose").key == "EPE" and headline_ok_metrics("pose")[0].key == key


@pytest.mark.parametrize("type_name", sorted(EVALUATORS.module_dict))
def test_every_registered_evaluator_is_some_tasks_and_merges(type_name):
    cls = EVALUATORS.get(type_name)
    assert type_name in {s.evaluator for s in all_tasks()}, f"{type_name} belongs to no task"
    ev = cls()
    for method in ("update", "compute", "merge", "sync", "reset", "to"):
        assert callable(getattr(ev, method))


def test_every_task_has_a_probe_task_catalog_metrics_and_a_schema_entry():
    from benchmarks.probe.tasks import task_classes
    from leaderboard.catalog import TASK_METRICS
    from sapiens2.records.schema import result_schema

    assert tuple(task_classes()) == task_names()
    assert tuple(TASK_METRICS) == task_names()
    # the published schema's task enum is the task table's
    assert tuple(result_schema()["properties"]["task"]["enum"]) == task_names()


@pytest.mark.hf
def test_every_probe_backbone_type_builds_from_a_tiny_preset():
    from benchmarks.probe.backbones.presets import build_probe_backbone, list_presets, resolve_backbone_cfg
    from benchmarks.probe.registry import PROBE_BACKBONES

    PROBE_BACKBONES.import_from_location()
    built = {}
    for preset in (p for p in list_presets() if p.endswith("_tiny") or p == "pixels"):
        kind = resolve_backbone_cfg(preset)["type"]
        if kind in built:
            continue
        bb = build_probe_backbone(preset, img_size=(32, 32))
        feats, _ = bb.extract(torch.rand(1, 3, 32, 32), [0])  # checks the declared feature shapes
        assert feats[0].dim() == 4 and feats[0].shape[1] > 0, preset
        built[kind] = preset
    # Types the package registers (test files register their own plug-in examples too).
    ours = {k for k, cls in PROBE_BACKBONES.module_dict.items() if cls.__module__.startswith("benchmarks.")}
    assert set(built) == ours, f"types without a tiny preset: {ours - set(built)}"


def test_a_new_task_is_one_spec_and_its_registration(tmp_path):
    """A toy 'greyness' task reusing the albedo reader and evaluator runs through the shared code."""
    from evaluators.folders import evaluate_folders

    spec = TaskSpec(
        name="toy_albedo", dataset="AlbedoDataset", estimator="AlbedoEstimator", head="AlbedoHead",
        evaluator="AlbedoEvaluator",
        feed=Feed("dense", gt_key="albedo", mask_key="mask"), prediction_key="albedo", headline="mae",
        visualiser="draw_albedo", value_kind="unit",
        file_formats={"pred": (".npy",), "gt": (".npy",)},
    )
    register_task(spec)
    try:
        assert task_names()[-1] == "toy_albedo" and "toy_albedo" in task_names(dense=True)
        assert type(build_evaluator("toy_albedo")).__name__ == "AlbedoEvaluator"
        for d, v in (("pred", 0.5), ("gt", 0.25)):
            (tmp_path / d).mkdir()
            np.save(tmp_path / d / "a.npy", np.full((6, 5, 3), v, np.float32))
        res = evaluate_folders("toy_albedo", tmp_path / "pred", tmp_path / "gt")
        assert res["metrics"]["mae"] == pytest.approx(0.25)
        with pytest.raises(ValueError, match="registered already"):
            register_task(TaskSpec(**{**spec.__dict__, "headline": "psnr"}))
    finally:
        unregister_task("toy_albedo")
    assert "toy_albedo" not in task_names()
