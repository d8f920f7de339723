"""The task spec type and the task table (one registered :class:`TaskSpec` per task).

Everything that differs between the tasks is one field of the spec, so code that handles "every
task" loops over :func:`task_names` / :func:`get_task` instead of listing the tasks. Things that
live in upper layers (the evaluators) are named by their registered type name, never by module
path: ``evaluator="SegEvaluator"`` is looked up in ``evaluators.registry.EVALUATORS``.

Adding a task = one module in this folder that calls :func:`register_task` and sets ``ORDER`` (the
package imports every module of the folder), or a call of :func:`register_task` from anywhere (a
plug-in).

Example:
    >>> from sapiens2.tasks import get_task, task_names
    >>> task_names()
    ('pose', 'seg', 'normal', 'pointmap', 'albedo')
    >>> spec = get_task("normal")
    >>> spec.evaluator, spec.headline
    ('NormalEvaluator', 'normal_mae')
    >>> spec.feed.gt_key, spec.feed.mask_key
    ('normal', 'mask')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from sapiens2.errors import UnknownNameError

FEED_KINDS = ("dense", "labels", "keypoints")
VALUE_KINDS = ("labels", "normal", "unit", "float", "keypoints")
DENSE_FORMATS = {"pred": (".npy", ".png", ".exr"), "gt": (".npy", ".png", ".exr"), "mask": (".npy", ".png")}


@dataclass(frozen=True)
class Feed:
    """How a batch of predictions and a reader's samples feed the task's evaluator.

    Attributes:
        kind: ``"dense"`` (``update(pred, gt, mask, index=)``), ``"labels"``
            (``update(pred, gt, pred_is_labels=..., index=)``: segmentation) or ``"keypoints"``
            (pose: keypoints, scores and COCO ground truth; see ``evaluators.runner``).
        gt_key: the reader sample key holding the ground truth the evaluator compares with.
        mask_key: the sample key of the valid-pixel mask, or None.
    """

    kind: str
    gt_key: str
    mask_key: str | None = None


@dataclass(frozen=True)
class TaskSpec:
    """Everything the code base needs to know about one task.

    Attributes:
        name: task name (CLI choice, record ``task``, split manifest key).
        dataset: registered ``sapiens2.registry.DATASETS`` type of the reader.
        estimator: registered ``MODELS`` type of the task model ("": the task has none, e.g. a probe-only
            plug-in task: ``predict``, ``convert`` and ``parity`` refuse it, the probe and ``eval`` run it).
        head: registered ``MODELS`` type of its decode head ("": none).
        head_predictor: name of the head's final layer in the official checkpoints (default
            ``conv_<name>``).
        official_config_task: the task word in the official config names
            (``sapiens2_0.4b_<word>_...``; default: the name).
        evaluator: registered ``evaluators.registry.EVALUATORS`` type.
        evaluator_kwargs: keyword arguments of the evaluator under the official protocol.
        feed: how predictions and samples feed the evaluator.
        prediction_key: the key of ``estimator.predict(...)`` that ``predict`` writes ("": no task model).
        headline: the one metric heading the task (a ``compute()`` key its evaluator declares
            ``headline_ok``): it ranks the task's tables, is its summary column and the probe's
            headline, and is the default bootstrap metric. Its label, unit and direction are the
            evaluator's declaration (``evaluators.metric_decl``; ``leaderboard.catalog.headline_metric``).
        visualiser: function of ``sapiens2.models.visualize`` drawing a prediction ("": none).
        write_ground_truth: the task's ground-truth writer for a split that does not have it yet
            (``None``: none): ``write_ground_truth(scene, root, sid) -> manifest record``, given one
            scene's ground truth of the other tasks as arrays (a rendered synthetic scene, or a sample
            of an imported split: ``sapiens2.datasets.derive``), the split folder and the scene id; it
            writes the task's files under ``root`` and returns its manifest record (paths relative to
            ``root``). ``data synth`` calls it for every scene it renders, ``data derive`` for a split
            made before.
        value_kind: how a file of this task's maps is read (rules in ``sapiens2/datasets/README.md``):
            ``labels`` (integer label maps), ``normal`` (direction vectors; integer PNG
            ``v / vmax * 2 - 1``), ``unit`` (values in [0, 1]; integer PNG ``v / vmax``), ``float``
            (real units; floats only) or ``keypoints`` (COCO JSON).
        file_formats: suffixes accepted for prediction and GT files (``pred``/``gt``/``mask`` keys;
            default :data:`DENSE_FORMATS`).
        hf_class: the Hugging Face ``transformers`` class of the released checkpoints, or None.
    """

    name: str
    dataset: str
    evaluator: str
    feed: Feed
    headline: str
    value_kind: str
    estimator: str = ""
    head: str = ""
    prediction_key: str = ""
    visualiser: str = ""
    head_predictor: str = ""
    official_config_task: str = ""
    file_formats: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(DENSE_FORMATS))
    evaluator_kwargs: Mapping[str, object] = field(default_factory=dict)
    hf_class: str | None = None
    write_ground_truth: Callable[[dict, Path, str], dict] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "head_predictor", self.head_predictor or f"conv_{self.name}")
        object.__setattr__(self, "official_config_task", self.official_config_task or self.name)
        if self.feed.kind not in FEED_KINDS:
            raise ValueError(f"task {self.name!r}: feed kind {self.feed.kind!r} not in {FEED_KINDS}")
        if self.value_kind not in VALUE_KINDS:
            raise ValueError(f"task {self.name!r}: value_kind {self.value_kind!r} not in {VALUE_KINDS}")
        object.__setattr__(self, "evaluator_kwargs", MappingProxyType(dict(self.evaluator_kwargs)))
        object.__setattr__(self, "file_formats", MappingProxyType(dict(self.file_formats)))

    @property
    def has_model(self) -> bool:
        """True when the task has a task model (an estimator and its head), False for a probe-only task."""
        return bool(self.estimator and self.head)

    def require_model(self, what: str) -> None:
        """Raise when ``what`` (a command) needs the task model a probe-only task does not have.

        Raises:
            ValueError: naming the task and ``what``.
        """
        if not self.has_model:
            raise ValueError(f"task {self.name!r} has no task model (no estimator and head in its TaskSpec: "
                             f"a probe-only task), so {what} cannot run it; probe it, or evaluate files")

    @property
    def dense(self) -> bool:
        """True for the per-pixel tasks (evaluated from folders of maps)."""
        return self.feed.kind != "keypoints"


_TABLE: dict[str, TaskSpec] = {}


def register_task(spec: TaskSpec, *, replace: bool = False) -> TaskSpec:
    """Add ``spec`` to the task table (in registration order).

    Args:
        spec: the task spec.
        replace: allow replacing a registered task of the same name.

    Returns:
        ``spec`` (so a module can write ``SPEC = register_task(TaskSpec(...))``).

    Raises:
        ValueError: a task of that name is registered already (and ``replace`` is False).
    """
    if spec.name in _TABLE and not replace and _TABLE[spec.name] != spec:
        raise ValueError(f"task {spec.name!r} is registered already")
    _TABLE[spec.name] = spec
    return spec


def unregister_task(name: str) -> None:
    """Remove a task from the table (tests that register a toy task clean up with this)."""
    _TABLE.pop(name, None)


def sort_tasks(key) -> None:
    """Reorder the table by ``key(name)`` (stable): the package sets its modules' display order."""
    items = sorted(_TABLE.items(), key=lambda item: key(item[0]))
    _TABLE.clear()
    _TABLE.update(items)


def task_names(dense: bool | None = None) -> tuple[str, ...]:
    """Names of the registered tasks, in registration order.

    Args:
        dense: True: only the per-pixel tasks; False: only the others; None: all.
    """
    return tuple(n for n, s in _TABLE.items() if dense is None or s.dense == dense)


def model_task_names() -> tuple[str, ...]:
    """Names of the registered tasks with a task model (``predict`` and ``convert`` run those alone)."""
    return tuple(n for n, s in _TABLE.items() if s.has_model)


def get_task(name: str) -> TaskSpec:
    """The spec of task ``name``.

    Raises:
        UnknownNameError: not registered (the message lists the registered tasks).
    """
    try:
        return _TABLE[name]
    except (KeyError, TypeError):
        raise UnknownNameError("task", name, task_names()) from None


def all_tasks() -> tuple[TaskSpec, ...]:
    """Every registered spec, in registration order."""
    return tuple(_TABLE.values())
