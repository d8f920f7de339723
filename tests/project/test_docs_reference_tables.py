"""The hand-written tables of the reference docs say what the code does.

Each test reads one table of ``docs/*.md`` and compares its ids, names and numbers with the code
they describe (recipe configs, the record schema, the paper-number loader, the evaluators, the CLI),
so a changed id or number fails here until the docs say it. Tables generated from the code are
checked by ``tests/benchmarks/test_docs_tables.py``.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def table_after(path: Path, header: str) -> list[list[str]]:
    """The body rows (cells stripped) of the table whose header line starts with ``header``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    if start is None:
        raise AssertionError(f"{path.name}: no table with header {header!r}")
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows


def code_spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_table_after_reads_a_table_and_names_a_missing_one(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("x\n\n| a | b |\n|---|---|\n| `1` | two |\n| 3 | `4` |\n\nafter\n")
    assert table_after(doc, "| a |") == [["`1`", "two"], ["3", "`4`"]]
    with pytest.raises(AssertionError, match=r"d\.md: no table with header"):
        table_after(doc, "| c |")


# --- docs/pretraining.md ---------------------------------------------------------------------------

def _e(x: float) -> str:
    """``x`` as the docs write a power of ten: 1e-4, 5e5."""
    return f"{x:.0e}".replace("e-0", "e-").replace("e+0", "e")


def _recipe_phrases(name: str) -> list[str]:
    """What the recipe table must say of recipe ``name``, built from its resolved config."""
    from sapiens2.pretrain.recipes import get_recipe

    cfg = get_recipe(name)
    model, crops, optim = cfg["model"], cfg["crops"], cfg["optim"]
    weights = model["loss_weights"]
    if name == "paper_1b":
        h, w = crops["global_size"]
        lh, lw = crops["local_size"]
        return [f"{h}x{w}", f"lr {_e(optim['lr'])}", f"{_e(cfg['steps'])} steps",
                f"{_e(optim['warmup_steps'])} warm-up", f"min lr {_e(optim['min_lr'])}",
                f"clip {optim['clip_grad']:g}", cfg["precision"], f"{lh}x{lw}"]
    arch = model["backbone"]["arch"]
    patch = model["backbone"]["patch_size"]
    h, w = model["backbone"]["img_size"]
    phrases = [f"{arch['embed_dims']}-wide", f"{arch['num_layers']}-block", f"patch {patch}",
               f"({h // patch}x{w // patch} tokens)", f"{h}x{w}"]
    if name == "smoke_tiny":
        return [*phrases, f"{cfg['steps']} steps"]
    if name == "cpu_small":
        return [*phrases, f"{cfg['steps']} steps x {cfg['batch_size']} images"]
    return ["{" + ", ".join(f"{k}: {v:g}" for k, v in weights.items()) + "}"]


def test_pretraining_recipe_table_lists_every_recipe_with_its_numbers():
    from sapiens2.pretrain.recipes import RECIPES

    rows = table_after(DOCS / "pretraining.md", "| recipe | what |")
    listed = {code_spans(r[0])[0]: r[1] for r in rows}
    assert sorted(listed) == sorted(RECIPES)
    for name, text in listed.items():
        for phrase in _recipe_phrases(name):
            assert phrase in text, (name, phrase)


def test_pretraining_objective_table_numbers_are_the_defaults():
    from sapiens2.pretrain.recipes import DEFAULTS

    rows = {r[0]: r for r in table_after(DOCS / "pretraining.md", "| term | what | where |")}
    model, optim = DEFAULTS["model"], DEFAULTS["optim"]
    masking = model["masking"]
    expect = {
        "masking": [f"ratio {masking['ratio']:g}", f"probability {masking['block_prob']:g}"],
        "MAE": [f"{model['decoder']['num_layers']} layers, width {model['decoder']['embed_dims']}"],
        "L_CL": [f"momentum {model['teacher_momentum']:g}", f"momentum {model['center_momentum']:g}",
                 "from {:g} to {:g}".format(*model["teacher_temp"]),
                 f"temperature {model['student_temp']:g}"],
        "optimiser": ["betas ({:g}, {:g})".format(*optim["betas"]),
                      f"weight decay {optim['weight_decay']:g}"],
    }
    for term, phrases in expect.items():
        for phrase in phrases:
            assert phrase in rows[term][1], (term, phrase)
    for term, row in rows.items():
        for file in code_spans(row[2]):
            assert (ROOT / "sapiens2" / "pretrain" / file).is_file(), (term, file)


def test_pretraining_cpu_small_table_numbers_are_the_recipe():
    from sapiens2.pretrain.recipes import get_recipe

    cfg = get_recipe("cpu_small")
    model, crops, optim, data = cfg["model"], cfg["crops"], cfg["optim"], cfg["data"]
    arch = model["backbone"]["arch"]
    rows = {r[0]: r[1] for r in table_after(DOCS / "pretraining.md", "| | `cpu_small` |")}
    expect = {
        "backbone": [f"width {arch['embed_dims']}", f"{arch['num_layers']} blocks",
                     f"{arch['num_heads']} heads",
                     f"SwiGLU {arch['feedforward_channels']}", f"patch {model['backbone']['patch_size']}"],
        "views": ["{} global crops {}x{}".format(model["n_global"], *crops["global_size"]),
                  "{} local crops {}x{}".format(crops["n_local"], *crops["local_size"])],
        "MAE decoder": [f"{model['decoder']['num_layers']} blocks", f"width {model['decoder']['embed_dims']}",
                        f"{model['decoder']['num_heads']} heads"],
        "head": [f"{model['head']['out_dim']} prototypes", f"hidden {model['head']['hidden_dim']}",
                 f"bottleneck {model['head']['bottleneck_dim']}"],
        "objective": ["L_MAE + {cl:g} L_CL + {koleo:g} KoLeo".format(**model["loss_weights"]),
                      f"mask ratio {model['masking']['ratio']:g}", f"EMA {model['teacher_momentum']:g}",
                      "{:g} -> {:g} over {} steps".format(*model["teacher_temp"],
                                                          model["teacher_temp_warmup_steps"])],
        "optimiser": [f"lr {_e(optim['lr'])}", f"{optim['warmup_steps']} warm-up steps",
                      f"cosine to {_e(optim['min_lr'])}", f"clip {optim['clip_grad']:g}",
                      f"batch {cfg['batch_size']}", cfg["precision"], f"seed {cfg['seed']}"],
        "data": [f"seed {data['seed']}", "{} images at {}x{}".format(data["n"], *data["size"]),
                 f"{cfg['steps']} steps x {cfg['batch_size']}"],
    }
    for row, phrases in expect.items():
        for phrase in phrases:
            assert phrase in rows[row], (row, phrase)


def test_pretraining_output_table_names_the_files_the_pretrainer_writes():
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "sapiens2" / "pretrain").glob("*.py"))
    rows = table_after(DOCS / "pretraining.md", "| file | what |")
    files = [code_spans(r[0])[0].removeprefix("OUT/") for r in rows]
    assert len(files) >= 5
    for name in files:
        assert f'"{name}"' in source, name
    log_row = next(r[1] for r in rows if "log.jsonl" in r[0])
    for key in code_spans(log_row):
        assert f'"{key}"' in source, key


# --- docs/predict.md -------------------------------------------------------------------------------

def test_predict_picture_table_covers_every_task_and_its_numbers():
    from sapiens2.models import visualize
    from sapiens2.tasks.spec import model_task_names

    rows = {r[0]: r[1] for r in table_after(DOCS / "predict.md", "| task | picture |")}
    assert sorted(rows) == sorted(model_task_names())
    threshold = inspect.signature(visualize.draw_pose).parameters["score_thr"].default
    assert f"score >= {threshold:g}" in rows["pose"]
    assert f"the {len(visualize.seg_palette())} classes" in rows["seg"]
    assert "2nd-98th percentile" in rows["pointmap"] and "[2, 98]" in inspect.getsource(visualize.draw_depth)


# --- docs/reproduction.md --------------------------------------------------------------------------

def test_reproduction_test_set_table_matches_the_code():
    from benchmarks.reproduce.sources import IN_HOUSE_DATA

    rows = table_after(DOCS / "reproduction.md", "| table | task | the paper's test set |")
    listed = {"table" + r[0].removeprefix("Table "): r for r in rows}
    assert sorted(listed) == sorted(IN_HOUSE_DATA)
    for table, row in listed.items():
        for number in re.findall(r"\d+K\b|\b\d+ classes|\b\d+ keypoints|[\w.]+\.json", " ".join(row)):
            assert number in IN_HOUSE_DATA[table], (table, number)


def test_reproduction_checkpoint_layout_names_the_code_sizes():
    from benchmarks.reproduce.sources import PRETRAIN_SIZES, TASK_SIZES

    text = (DOCS / "reproduction.md").read_text(encoding="utf-8")
    layout = text.split("## The layout `--checkpoint-root` expects", 1)[1].split("```", 2)[1]
    pretrain = re.search(r"pretrain/sapiens2_\{([^}]+)\}_pretrain", layout).group(1).split(",")
    assert pretrain == [s.replace("-", "_") for s in PRETRAIN_SIZES]
    assert f"with `size` in `{', '.join(TASK_SIZES)}`" in text


# --- docs/leaderboard.md ---------------------------------------------------------------------------

def test_leaderboard_record_field_table_lists_exactly_the_schema_fields():
    from sapiens2.records.schema import result_schema

    rows = table_after(DOCS / "leaderboard.md", "| field | content |")
    listed = {name for r in rows for name in code_spans(r[0])}
    assert listed == set(result_schema()["properties"])


_FACTORS = {"as printed": {1.0}, "percent -> fraction": {0.01}, "× 0.01": {0.01}}


def test_leaderboard_paper_table_maps_the_metrics_the_loader_gives():
    from leaderboard.paper import load_paper_results

    data = load_paper_results()
    rows = table_after(DOCS / "leaderboard.md", "| paper | our task / metric | conversion |")
    assert len(rows) >= 8
    for paper, ours, conversion in rows:
        tables = {f"Table {n}" for n in re.findall(r"Table (\d)", paper)}
        sel = data[data["table"].str.extract(r"^(Table \d)")[0].isin(tables)]
        assert len(sel), paper
        metrics = [m for m in code_spans(ours) if m != "..."]
        assert metrics and set(metrics) <= set(sel["metric"]), (paper, metrics)
        factor = next((f for text, f in _FACTORS.items() if conversion.startswith(text)), None)
        if factor is not None:
            assert set(sel[sel["metric"].isin(metrics)]["factor"]) == factor, (paper, conversion)


# --- docs/evaluators.md ----------------------------------------------------------------------------

def test_evaluator_bootstrap_table_keys_are_bootstrap_keys():
    from evaluators.registry import build_evaluator

    rows = table_after(DOCS / "evaluators.md", "| evaluator | per-image rows | bootstrap keys |")
    assert sorted(r[0] for r in rows) == sorted(["seg", "normal", "pointmap", "albedo", "pose"])
    checked = 0
    for task, _, keys in rows:
        have = set(build_evaluator(task).bootstrap_keys)
        for span in code_spans(keys):
            for key in span.split():
                if "*" in key or "<" in key or key.startswith("normal_median_exact"):
                    continue
                assert key in have, (task, key)
                checked += 1
    assert checked >= 15


def test_evaluator_pose_key_table_names_pose_keys():
    from evaluators.registry import build_evaluator

    have = set(build_evaluator("pose").bootstrap_keys) | {"pck_degenerate_boxes"}
    rows = table_after(DOCS / "evaluators.md", "| key | definition |")
    keys = [k for r in rows for k in code_spans(r[0]) if "<" not in k]
    assert len(keys) >= 6 and [k for k in keys if k not in have] == []
    declared = {d.key for d in build_evaluator("pose").declared_metrics()}
    assert "pck_degenerate_boxes" in declared or "pck_degenerate_boxes" in inspect.getsource(
        type(build_evaluator("pose")))


# --- README.md -------------------------------------------------------------------------------------

def test_readme_output_table_names_files_the_main_job_writes():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    if "| path | what |" not in text:
        pytest.fail("README.md: the main job's output table ('| path | what |') is gone")
    rows = table_after(ROOT / "README.md", "| path | what |")
    source = "\n".join(p.read_text(encoding="utf-8") for p in
                       [ROOT / "benchmarks" / "mainjob.py", *(ROOT / "leaderboard").rglob("*.py")])
    for row in rows:
        for name in re.findall(r"[\w.]+\.(?:html|md|json)", code_spans(row[0])[0]):
            name = "seed" if name.startswith("seed") else name
            assert name in source, name
