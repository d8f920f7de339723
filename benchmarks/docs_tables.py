"""The tables of the docs that are generated from the code, and the check that they are current.

A generated table sits between two HTML comments in a Markdown file::

    <!-- generated: protocol-ids (python -m benchmarks.docs_tables --write) -->
    | ... |
    <!-- end generated: protocol-ids -->

``python -m benchmarks.docs_tables --write`` rewrites every such block from the code;
``python -m benchmarks.docs_tables`` (and ``tests/benchmarks/test_docs_tables.py``) fails, naming the file and
the block, when a block differs from what the code gives, so a changed id fails a test until the
docs say it.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from benchmarks.analysis.split_leaderboards import leaderboard_markdown
from benchmarks.cli.main import _subparsers, build_parser
from benchmarks.mainjob import DEFAULT_BACKBONES, QUICK_BACKBONES
from benchmarks.probe import config
from benchmarks.probe import protocol as proto
from benchmarks.reproduce import sources
from benchmarks.reproduce.table_rows import TABLE_TASKS
from benchmarks.results import read_measurement
from benchmarks.synthetic_docs_tables import realism_table, realistic_limits
from benchmarks.systems import mediapipe_system as mp
from sapiens2.reference import keypoints308

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"


def protocol_ids_table() -> str:
    """Each named protocol's id per task (``ProbeProtocol.protocol_id``)."""
    makers = [("`default_protocol()` (the main job, `probe`)", proto.default_protocol),
              ("`quick_protocol()` (`--quick`)", proto.quick_protocol),
              ("`body_protocol()` (the trained body: `--protocol FILE.json` setting every task's "
               "`decoder` to `pixelshuffle`)", proto.body_protocol)]
    tasks = list(makers[0][1]().tasks)
    lines = ["| protocol | " + " | ".join(tasks) + " |", "|---" * (len(tasks) + 1) + "|"]
    for label, make in makers:
        ids = make().protocol_ids()
        lines.append(f"| {label} | " + " | ".join(f"`{ids[t]}`" for t in tasks) + " |")
    return "\n".join(lines)


def results_index_table() -> str:
    """One row per measurement file under ``benchmarks/results/``: what, when, which commit."""
    lines = ["| file | what | date | commit |", "|---|---|---|---|"]
    for path in sorted(RESULTS_DIR.rglob("*.json")):
        rec = read_measurement(path)
        rel = path.relative_to(RESULTS_DIR).as_posix()
        commit = rec["commit"] + (" (documented)" if rec.get("commit_is") == "documented" else "")
        lines.append(f"| [`{rel}`]({rel}) | {rec['name']} | {rec['date']} | {commit} |")
    return "\n".join(lines)


def main_job_backbones() -> str:
    """The main job's default backbones and those of ``--quick``."""
    def names(backbones):
        return ", ".join(f"`{b}`" for b in backbones)

    return (f"- `sapiens2-bench run`: {names(DEFAULT_BACKBONES)}\n"
            f"- `sapiens2-bench run --quick`: {names(QUICK_BACKBONES)}")


def _rst_to_markdown(text: str) -> str:
    """A docstring's reST (``x``, :class:`~a.b.C`) as Markdown code spans, safe in a table cell."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`").replace("|", "\\|")


def docstring_args(cls: type) -> dict[str, str]:
    """The ``Args:`` section of ``cls``'s Google-style docstring: field name -> one-line text.

    A line ``a, b: text`` documents both ``a`` and ``b``; continuation lines are joined.
    """
    doc = inspect.getdoc(cls) or ""
    out: dict[str, str] = {}
    names: list[str] = []
    in_args = False
    for line in doc.splitlines():
        if line.strip() == "Args:":
            in_args = True
            continue
        if not in_args:
            continue
        if not line.strip() or not line.startswith("    "):
            break
        m = re.match(r"    ([\w, ]+):\s*(.*)", line)
        if m and not line.startswith("     "):
            names = [n.strip() for n in m.group(1).split(",")]
            for n in names:
                out[n] = m.group(2).strip()
        else:
            for n in names:
                out[n] += " " + line.strip()
    return {k: _rst_to_markdown(v) for k, v in out.items()}


def _meaning(meaning: dict[str, str], name: str) -> str:
    """``name``'s documented text, else a pointer to the field whose text names it (``lr``: optimizer)."""
    if name in meaning:
        return meaning[name]
    for other, text in meaning.items():
        if re.search(rf"`[^`]*\b{re.escape(name)}\b[^`]*`", text):
            return f"see `{other}`"
    return ""


def _value(value) -> str:
    """A default as a short code span (a long grid of numbers by its ends and length)."""
    if isinstance(value, tuple) and len(value) > 4:
        return f"`{value[0]:g}` ... `{value[-1]:g}` ({len(value)} values)"
    if isinstance(value, (dict, str)):
        return "`" + json.dumps(value) + "`"
    return f"`{value!r}`"


def _coverage(in_linear: bool, in_body: bool, default) -> str:
    if in_linear and in_body:
        return "every id"
    if in_body:
        return "the trained body's ids only"
    if in_linear:
        return "the linear read-out's ids only"
    return "the ids, when set (the default `\"\"` is left out)" if default == "" else "no id"


def protocol_fields_table() -> str:
    """Every ``ProbeProtocol`` field by group: default, which protocol ids cover it, what it does."""
    linear, body = proto.default_protocol(), proto.body_protocol()
    task = next(iter(linear.tasks))
    covered_linear, covered_body = linear.task_protocol(task), body.task_protocol(task)
    lines = ["| group | field | default | in the protocol id of | what |", "|---|---|---|---|---|"]
    lines.append("| - | `version` | `5` | every id | the protocol version: a new version changes every id |"
                 .replace("`5`", _value(linear.version)))
    for group, cls in config.GROUPS.items():
        meaning = docstring_args(cls)
        for f in dataclasses.fields(cls):
            default = getattr(getattr(linear, group), f.name)
            cover = _coverage(f.name in covered_linear, f.name in covered_body, default)
            text = _meaning(meaning, f.name)
            lines.append(f"| `{group}` | `{f.name}` | {_value(default)} | {cover} | {text} |")
    what = "per-task settings (the table below); each task's id holds its own entry alone"
    lines.append(f"| - | `tasks` | one entry per registered task | that task's id | {what} |")
    return "\n".join(lines)


def task_settings_table() -> str:
    """Every task setting: each task's default, which ids cover it, what it does."""
    linear, body = proto.default_protocol(), proto.body_protocol()
    tasks = list(linear.tasks)
    names: list[str] = []
    meaning: dict[str, str] = {}
    for t in tasks:
        cls = type(linear.tasks[t])
        for klass in reversed(cls.__mro__):
            if dataclasses.is_dataclass(klass):
                meaning.update(docstring_args(klass))
        names += [f.name for f in dataclasses.fields(cls) if f.name not in names]
    lines = ["| setting | " + " | ".join(tasks) + " | in the protocol id of | what |",
             "|---" * (len(tasks) + 3) + "|"]
    for name in names:
        cells, in_linear, in_body, default = [], False, False, None
        for t in tasks:
            settings = linear.tasks[t]
            if not hasattr(settings, name):
                cells.append("-")
                continue
            default = getattr(settings, name)
            cells.append(_value(default))
            in_linear |= name in linear.task_protocol(t)["tasks"][t]
            in_body |= name in body.task_protocol(t)["tasks"][t]
        cover = _coverage(in_linear, in_body, default)
        lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {cover} | {_meaning(meaning, name)} |")
    return "\n".join(lines)


def download_options_table() -> str:
    """The options of ``sapiens2-bench download`` with their defaults and help (its ``--help``)."""
    return _cli_options_table("download")


def probe_options_table() -> str:
    """The options of ``sapiens2-bench probe`` (its ``--help``)."""
    return _cli_options_table("probe")


def predict_options_table() -> str:
    """The options of ``sapiens2-bench predict`` (its ``--help``)."""
    return _cli_options_table("predict")


def _cli_options_table(command: str) -> str:
    parser = _subparsers(build_parser()).choices[command]
    lines = ["| option | default | meaning |", "|---|---|---|"]
    for action in parser._actions:
        if not action.option_strings or argparse.SUPPRESS in (action.help, action.default) \
                or "-h" in action.option_strings:
            continue
        opt = " / ".join(f"`{o}`" for o in action.option_strings)
        if action.required:
            default = "required"
        elif action.default is None or action.default is False or action.default == "":
            default = "-"
        else:
            default = f"`{action.default}`"
        meaning = action.help or ""
        if action.choices:
            meaning += ("; " if meaning else "") + "one of " + ", ".join(f"`{c}`" for c in action.choices)
        lines.append(f"| {opt} | {default} | {_rst_to_markdown(meaning)} |")
    return "\n".join(lines)


def checkpoint_repos_table() -> str:
    """The public Hugging Face repositories ``download`` knows and the ``reproduce`` table each serves."""
    def sizes(values):
        return "{" + ",".join(values) + "}"

    tables = {task: table for table, task in TABLE_TASKS.items()}
    lines = ["| what | repositories | `download` option | used by |", "|---|---|---|---|",
             f"| pretrained backbones | `facebook/sapiens2-pretrain-{sizes(sources.PRETRAIN_SIZES)}` | "
             "`--pretrain` | `reproduce table2`, `probe --weights` |"]
    for task in sources.HUB_TASKS:
        repo = sources.repo_for(task, sources.TASK_SIZES[0]).rsplit("-", 1)[0]
        lines.append(f"| {task} models | `{repo}-{sizes(sources.TASK_SIZES)}` | `--tasks {task}` | "
                     f"`reproduce {tables[task]}` |")
    lines.append(f"| person detector of the official pose demo | `{sources.DETECTOR_REPO}` | `--detector` | "
                 "nothing here (pose is top-down on ground-truth boxes) |")
    return "\n".join(lines)


def mediapipe_models_table() -> str:
    """The model files of the mediapipe wheel each reference system runs."""
    lines = ["| system | file in the wheel |", "|---|---|"]
    systems = ((mp.POSE_MODEL_NAME, mp.POSE_MODEL_FILES), (mp.SELFIE_MODEL_NAME, mp.SELFIE_MODEL_FILES))
    for name, files in systems:
        lines += [f"| {name} | `{f}` |" for f in files]
    return "\n".join(lines)


def mediapipe_landmarks_table() -> str:
    """MediaPipe's pose landmarks and the keypoints308 keypoint each is scored as."""
    ids = {k["name"]: k["id"] for k in keypoints308()["keypoints"]}
    lines = ["| MediaPipe landmark | keypoints308 name (id) | part |", "|---|---|---|"]
    lines += [f"| {index} {mp_name} | {ours} ({ids[ours]}) | {part} |"
              for index, mp_name, ours, part in mp.LANDMARK_MAP]
    return "\n".join(lines)


MEDIAPIPE_REAL = RESULTS_DIR / "references" / "mediapipe_real_fixtures.json"


def mediapipe_real_table() -> str:
    """MediaPipe on the real fixture photos (from its measurement): n, misses, AP, PCK per fixture."""
    rec = read_measurement(MEDIAPIPE_REAL)
    rel = MEDIAPIPE_REAL.relative_to(ROOT).as_posix()
    lines = [f"Measured at commit {rec['commit']} ([`{rel}`](../{rel})):", "",
             "| fixture | keypoints scored (protocol) | images | people | missed | AP [95 %] | PCK@0.1 |",
             "|---|---|---|---|---|---|---|"]
    for r in rec["numbers"]["fixtures"]:
        lines.append(f"| {r['fixture']} | {len(r['keypoints_scored'])} of {r['keypoint_set']} "
                     f"(`eval:{r['protocol_id']}`) | {r['n_images']} | {r['n_people']} | "
                     f"{r['missed_people']} | {r['AP']:.3f} [{r['AP_95'][0]:.3f}, {r['AP_95'][1]:.3f}] | "
                     f"{r['PCK@0.1']:.3f} |")
    return "\n".join(lines)


def mediapipe_left_out_table() -> str:
    """MediaPipe's landmarks with no keypoints308 counterpart, and why."""
    lines = ["| MediaPipe landmark | why |", "|---|---|"]
    lines += [f"| {name} | {why} |" for name, why in mp.LEFT_OUT.items()]
    return "\n".join(lines)
SPLIT_LEADERBOARDS = RESULTS_DIR / "mainjob" / "realistic_vs_procedural_leaderboard.json"


def split_leaderboards() -> str:
    """The main job's leaderboards on the realistic and the procedural split (from their measurement)."""
    return leaderboard_markdown(read_measurement(SPLIT_LEADERBOARDS))


# block name -> (file holding it, the function that makes its content)
BLOCKS: dict[str, tuple[Path, Callable[[], str]]] = {
    "protocol-ids": (ROOT / "docs" / "probing.md", protocol_ids_table),
    "probe-options": (ROOT / "docs" / "probing.md", probe_options_table),
    "protocol-fields": (ROOT / "docs" / "probing.md", protocol_fields_table),
    "task-settings": (ROOT / "docs" / "probing.md", task_settings_table),
    "results-index": (RESULTS_DIR / "README.md", results_index_table),
    "main-job-backbones": (ROOT / "docs" / "leaderboard.md", main_job_backbones),
    "checkpoint-repos": (ROOT / "docs" / "reproduction.md", checkpoint_repos_table),
    "download-options": (ROOT / "docs" / "reproduction.md", download_options_table),
    "predict-options": (ROOT / "docs" / "predict.md", predict_options_table),
    "mediapipe-models": (ROOT / "docs" / "reference_systems.md", mediapipe_models_table),
    "mediapipe-landmarks": (ROOT / "docs" / "reference_systems.md", mediapipe_landmarks_table),
    "mediapipe-left-out": (ROOT / "docs" / "reference_systems.md", mediapipe_left_out_table),
    "mediapipe-real": (ROOT / "docs" / "reference_systems.md", mediapipe_real_table),
    "realism-mediapipe": (ROOT / "docs" / "synthetic_data.md", realism_table),
    "realistic-limits": (ROOT / "docs" / "synthetic_data.md", realistic_limits),
    "split-leaderboards": (ROOT / "docs" / "realistic_leaderboard.md", split_leaderboards),
}


def _pattern(name: str) -> re.Pattern:
    key = re.escape(name)
    return re.compile(rf"(<!-- generated: {key}\b[^\n]*-->\n)(.*?)(<!-- end generated: {key} -->)", re.DOTALL)


def current_block(name: str) -> str:
    """The text of block ``name`` as it stands in its file (a missing block is an error)."""
    path, _ = BLOCKS[name]
    m = _pattern(name).search(path.read_text(encoding="utf-8"))
    if m is None:
        raise ValueError(f"{path}: no generated block {name!r} "
                         f"(<!-- generated: {name} ... --> ... <!-- end generated: {name} -->)")
    return m.group(2)


def expected_block(name: str) -> str:
    """What the code gives for block ``name`` (with its trailing newline)."""
    return BLOCKS[name][1]().rstrip("\n") + "\n"


def write_block(name: str) -> bool:
    """Rewrite block ``name`` from the code; return whether the file changed."""
    path, _ = BLOCKS[name]
    text = path.read_text(encoding="utf-8")
    current_block(name)  # raises, naming the file, when the markers are missing
    new = _pattern(name).sub(lambda m: m.group(1) + expected_block(name) + m.group(3), text, count=1)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def stale_blocks() -> list[str]:
    """The names of the blocks whose text differs from what the code gives."""
    return [name for name in BLOCKS if current_block(name) != expected_block(name)]


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the generated blocks from the code")
    args = ap.parse_args(argv)
    if args.write:
        for name in BLOCKS:
            changed = write_block(name)
            print(f"{_shown(BLOCKS[name][0])}: {name} {'rewritten' if changed else 'unchanged'}")
        return 0
    stale = stale_blocks()
    for name in stale:
        print(f"{_shown(BLOCKS[name][0])}: generated block {name!r} is out of date; "
              "run python -m benchmarks.docs_tables --write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
