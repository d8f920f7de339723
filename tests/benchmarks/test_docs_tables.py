"""The docs' tables of ids, commands and measurements agree with the code (benchmarks/docs_tables.py).

A changed protocol id, a new subcommand or a new measurement file fails here until the docs say it
(`python -m benchmarks.docs_tables --write` regenerates the generated blocks). Every relative link
of the README, the changelog and the docs leads to a file that exists.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks import docs_tables
from benchmarks.results import MeasurementError, read_measurement, start_measurement, write_measurement

ROOT = Path(__file__).resolve().parents[2]
MARKDOWN = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "results" / "README.md",
            *sorted((ROOT / "docs").rglob("*.md"))]


def test_generated_blocks_match_the_code():
    assert docs_tables.stale_blocks() == [], "run: python -m benchmarks.docs_tables --write"


def test_a_changed_protocol_id_makes_the_block_stale(tmp_path, monkeypatch):
    path, make = docs_tables.BLOCKS["protocol-ids"]
    text = path.read_text(encoding="utf-8")
    some_id = re.search(r"probe-v\d+-[0-9a-f]{12}", docs_tables.current_block("protocol-ids")).group(0)
    copy = tmp_path / "probing.md"
    changed = some_id[:-1] + ("0" if some_id[-1] != "0" else "1")
    copy.write_text(text.replace(some_id, changed), encoding="utf-8")
    monkeypatch.setitem(docs_tables.BLOCKS, "protocol-ids", (copy, make))
    assert docs_tables.stale_blocks() == ["protocol-ids"]
    assert docs_tables.main([]) == 1
    assert docs_tables.write_block("protocol-ids") is True
    assert docs_tables.stale_blocks() == []


def test_the_protocol_id_table_lists_every_task_and_protocol_the_code_has():
    from benchmarks.probe.protocol import body_protocol, default_protocol, quick_protocol

    block = docs_tables.current_block("protocol-ids")
    for make in (default_protocol, quick_protocol, body_protocol):
        for task, pid in make().protocol_ids().items():
            assert f"`{pid}`" in block, (make.__name__, task)


def test_a_missing_block_is_an_error_naming_the_file(tmp_path, monkeypatch):
    copy = tmp_path / "x.md"
    copy.write_text("no markers here\n")
    monkeypatch.setitem(docs_tables.BLOCKS, "protocol-ids", (copy, docs_tables.protocol_ids_table))
    with pytest.raises(ValueError, match=r"x\.md: no generated block 'protocol-ids'"):
        docs_tables.current_block("protocol-ids")


def _cli_commands() -> set[str]:
    from benchmarks.cli.main import _subparsers, build_parser

    return set(_subparsers(build_parser()).choices)


def test_readme_command_table_lists_exactly_the_cli_subcommands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `sapiens2-bench ([a-z-]+)", text, flags=re.MULTILINE))
    assert listed == _cli_commands()


def test_readme_terminal_example_shows_the_default_protocol_ids():
    """The README's terminal example is a real run's output: its ids are the ones the code gives now."""
    from benchmarks.probe.protocol import default_protocol

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.startswith("protocol ids: ")]
    assert len(lines) == 1, "README.md: the terminal example's 'protocol ids:' line is gone"
    shown = dict(part.split(" ") for part in lines[0].removeprefix("protocol ids: ").split(", "))
    p = default_protocol()
    assert shown == {task: p.protocol_id(task) for task in p.tasks}


def test_every_measurement_file_reads_and_names_its_provenance():
    files = sorted((ROOT / "benchmarks" / "results").rglob("*.json"))
    assert files
    for path in files:
        rec = read_measurement(path)
        assert rec["commit_is"] in ("measured", "documented"), path
        assert rec["name"] and rec["command"] and rec["date"] and rec["machine"], path


def test_write_measurement_fills_in_provenance_and_reads_back(tmp_path):
    started = start_measurement()
    path = write_measurement(tmp_path / "a" / "m.json", "toy", {"seconds": [1.5, 2.0]}, started=started,
                             notes="caveat")
    rec = read_measurement(path)
    assert rec["numbers"] == {"seconds": [1.5, 2.0]} and rec["notes"] == "caveat"
    assert rec["commit_is"] == "measured" and rec["date"] == started["date"]
    assert set(rec["load"]) == {"before", "after"} and len(rec["load"]["before"]) == 3
    assert "logical CPUs" in rec["machine"] and rec["command"].strip()
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_measurement_file_missing_a_field_is_named(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "sapiens2-bench/measurement-1", "name": "x"}))
    with pytest.raises(MeasurementError, match=r"bad\.json: missing field\(s\) command, commit"):
        read_measurement(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(MeasurementError, match="one JSON object"):
        read_measurement(bad)


@pytest.mark.parametrize("doc", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_existing_files(doc):
    text = doc.read_text(encoding="utf-8")
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (doc.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert broken == []


def test_reference_docs_hold_no_dated_measurement():
    dated = re.compile(r"20\d\d-\d\d-\d\d|\bload (about )?\d")
    hits = [f"{p.name}:{i}" for p in sorted((ROOT / "docs").rglob("*.md"))
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if dated.search(line)]
    assert hits == [], "dated measurements belong in benchmarks/results/ (docs link to them)"


def test_protocol_tables_list_every_field_and_task_setting():
    import dataclasses

    from benchmarks.probe.config import GROUPS
    from benchmarks.probe.protocol import ProbeProtocol, default_protocol

    fields = docs_tables.current_block("protocol-fields")
    for f in dataclasses.fields(ProbeProtocol):  # the groups, version and tasks
        assert f"| `{f.name}` |" in fields, f.name
    for group, cls in GROUPS.items():
        for f in dataclasses.fields(cls):
            assert f"| `{group}` | `{f.name}` |" in fields, (group, f.name)
    settings = docs_tables.current_block("task-settings")
    for task, value in default_protocol().tasks.items():
        for f in dataclasses.fields(value):
            assert f"| `{f.name}` |" in settings, (task, f.name)


def test_a_changed_default_or_coverage_makes_the_protocol_tables_stale(monkeypatch):
    from benchmarks.probe import protocol as proto

    real = proto.default_protocol
    monkeypatch.setattr(proto, "default_protocol", lambda: real().replace(interval_level=0.9))
    assert "protocol-fields" in docs_tables.stale_blocks()
    monkeypatch.setattr(proto, "default_protocol", lambda: real().replace(tasks={"pose": {"sigma": 3.0}}))
    assert "task-settings" in docs_tables.stale_blocks()


def test_docstring_args_reads_shared_and_continued_entries():
    class Example:
        """Summary.

        Args:
            a, b: the ``first`` pair, see :class:`~x.y.Z`;
                continued here.
            c: a | pipe.

        Returns:
            nothing.
        """

    args = docs_tables.docstring_args(Example)
    assert args == {"a": "the `first` pair, see `x.y.Z`; continued here.",
                    "b": "the `first` pair, see `x.y.Z`; continued here.", "c": "a \\| pipe."}


def test_cli_option_tables_list_every_option_of_the_command():
    from benchmarks.cli.main import _subparsers, build_parser

    for command, block in (("probe", "probe-options"), ("predict", "predict-options"),
                           ("download", "download-options")):
        parser = _subparsers(build_parser()).choices[command]
        text = docs_tables.current_block(block)
        for action in parser._actions:
            shown = action.default != "==SUPPRESS==" and "-h" not in action.option_strings
            if action.option_strings and shown:
                assert f"`{action.option_strings[0]}`" in text, (command, action.option_strings)


def _paragraphs(text: str) -> list[str]:
    """The prose paragraphs of a Markdown text (no code blocks, tables, comments or list items)."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    out = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line.strip()]
        if lines and not lines[0].startswith(("|", "<!--", "#", "- ", "* ")):
            out.append(" ".join(lines))
    return out


def test_probing_doc_is_a_reference_page():
    """Short paragraphs, no protocol history, and no file paths inside the probe package (they move:
    the code map in benchmarks/probe/README.md names them)."""
    text = (ROOT / "docs" / "probing.md").read_text(encoding="utf-8")
    long = [p[:60] for p in _paragraphs(text) if len(p) > 800]
    assert long == []
    # source paths only: a test's path (tests/benchmarks/probe/...) may be named
    assert re.findall(r"(?<![\w/])benchmarks/probe/(?!README\.md)\S+", text) == []
    prose = re.sub(r"<!-- generated: .*?<!-- end generated: [\w-]+ -->", "", text, flags=re.DOTALL)
    assert re.findall(r"\bv[1-5]'s\b|protocol v[1-5]|since v[1-5]", prose) == []


def test_readme_extras_table_lists_exactly_the_declared_extras():
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("| extra | installs | needed for |", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"^\| `([\w-]+)` \|", section, flags=re.MULTILINE)) == extras


def test_leaderboard_doc_lists_exactly_the_reproducible_tables():
    from benchmarks.reproduce.table_rows import TABLES

    rows = [line for line in (ROOT / "docs" / "leaderboard.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `table")]
    listed = sorted(t for line in rows for t in re.findall(r"`(table\d)`", line.split(" | ")[0]))
    assert listed == list(TABLES)


def test_probing_backbone_table_names_backbones_the_probe_knows():
    from benchmarks.probe.backbones import backbone_table

    known = {r["name"] for r in backbone_table()}
    text = (ROOT / "docs" / "probing.md").read_text(encoding="utf-8")
    section = text.split("\n## Backbones\n", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in section.splitlines()
                   if line.startswith("| `") and not line.startswith("| `package")]
    names = []
    for cell in first_cells:
        found = re.findall(r"`([\w.-]+)`", cell)
        plain = [n for n in found if not n.startswith("_")]
        names += plain + [n + s for s in found if s.startswith("_") for n in plain]  # "(+ `_tiny`)"
    assert len(names) >= 10 and [n for n in names if n not in known] == []


def _expand_braces(key: str) -> list[str]:
    m = re.search(r"\{([^}]*)\}", key)
    if m is None:
        return [key]
    head, tail = key[:m.start()], key[m.end():]
    return [k for part in m.group(1).split(",") for k in _expand_braces(head + part + tail)]


def test_evaluator_metric_table_lists_metrics_the_evaluators_compute():
    """Every key of docs/evaluators.md's metric table (its first `...` list per task, braces expanded,
    `*` patterns aside) is a metric the task's default evaluator declares."""
    from evaluators.registry import build_evaluator

    text = (ROOT / "docs" / "evaluators.md").read_text(encoding="utf-8")
    section = text.split("## Metric definitions", 1)[1].split("\n\n", 1)[0]
    checked = 0
    for line in section.splitlines()[3:]:
        task, keys = (c.strip() for c in line.strip("|").split("|")[:2])
        declared = {d.key for d in build_evaluator(task).declared_metrics()}
        listed = re.search(r"`([^`]+)`", keys).group(1).split()  # the first group: the key list
        for key in listed:
            if "*" in key:
                continue
            for k in _expand_braces(key):
                assert k in declared, (task, k)
                checked += 1
    assert checked >= 30


def test_probing_split_and_small_n_numbers_are_the_code_constants():
    from benchmarks.job_defaults import DEFAULT_SPLIT_IMAGES, QUICK_SPLIT_IMAGES
    from benchmarks.probe.api import MIN_INTERVAL_IMAGES
    from benchmarks.probe.protocol import default_protocol

    text = " ".join((ROOT / "docs" / "probing.md").read_text(encoding="utf-8").split())
    every = default_protocol().holdout_every
    test = DEFAULT_SPLIT_IMAGES // every
    assert f"The embedded synthetic split has {DEFAULT_SPLIT_IMAGES} scenes" in text
    train = DEFAULT_SPLIT_IMAGES - test
    assert f"every {every}th scene is a test scene: {train} train, {test} test scenes" in text
    assert f"`--quick` uses {QUICK_SPLIT_IMAGES} scenes" in text
    assert f"fewer than {MIN_INTERVAL_IMAGES} test images (`MIN_INTERVAL_IMAGES`)" in text
