"""What ``sapiens2-bench reproduce TABLE --help`` says about one table: what runs, which checkpoints
it needs and whether they are public, what data, and which options apply.

Example:
    >>> "no public" in table_description("table4") and "1b-4k" in table_description("table4")
    True
"""

from __future__ import annotations

from benchmarks.reproduce.sources import HUB_TASKS, IN_HOUSE_DATA, PRETRAIN_SIZES
from benchmarks.reproduce.table_rows import OFFICIAL_INPUT, SIZE_4K, SIZES, TABLE_TASKS, TASKS_4K, table_sizes

_NAMES = {"pose": "308-keypoint pose", "seg": "29-class body-part segmentation", "pointmap": "pointmaps",
          "normal": "surface normals", "albedo": "albedo"}


def _table1() -> str:
    return ("Table 1, the model card: parameters and FLOPs of every Sapiens2 size at "
            f"{OFFICIAL_INPUT[0]}x{OFFICIAL_INPUT[1]}, counted on the meta device (no checkpoint, no data, "
            "offline). Written to OUT/table1/model_card.json and reused while its inputs (reference data, "
            "counting code, torch version) are unchanged. Options that apply: --out, --json, --force.")


def _table2() -> str:
    return ("Table 2, dense probing of the pretrained Sapiens2 backbones "
            f"({', '.join(SIZES)}) on all five tasks under this project's probing protocol (the "
            "paper's decoder and schedule are unpublished: its printed numbers are context, never a "
            "target). Needs CHECKPOINT_ROOT/pretrain/sapiens2_{size}_pretrain.safetensors; public on the "
            f"Hugging Face Hub as facebook/sapiens2-pretrain-{{{','.join(PRETRAIN_SIZES)}}} "
            "(sapiens2-bench download --pretrain --sizes ...). --data-root: default the embedded synthetic "
            "split. Data of the reported numbers: " + IN_HOUSE_DATA["table2"] + ". Options that apply: "
            "--checkpoint-root, --data-root, --sizes, --quick, --out, --no-site, --device.")


def _task_table(table: str) -> str:
    task = TABLE_TASKS[table]
    sizes = [s for s in table_sizes(task) if s != SIZE_4K]
    if task in HUB_TASKS:
        public = (f"public on the Hugging Face Hub as facebook/sapiens2-{task}-{{{','.join(sizes)}}} "
                  f"(sapiens2-bench download --tasks {task} --sizes ...)")
    else:
        public = f"no {task} checkpoint is public: place the files by hand"
    number = table[len("table"):]
    text = (f"Table {number}, {_NAMES[task]}: the official {task} models ({', '.join(sizes)}) at "
            f"{OFFICIAL_INPUT[0]}x{OFFICIAL_INPUT[1]}, evaluated with the official protocol on --data-root "
            f"(a split in the reader layout). Needs "
            f"CHECKPOINT_ROOT/{task}/sapiens2_{{size}}_{task}.safetensors; {public}.")
    if task in TASKS_4K:
        text += (f" The {SIZE_4K} row (--sizes {SIZE_4K}, input 4096x3072) has no public task checkpoint "
                 f"(only the pretrained backbone facebook/sapiens2-pretrain-{SIZE_4K} is public): place "
                 f"CHECKPOINT_ROOT/{task}/sapiens2_1b_4k_{task}.safetensors by hand.")
    return (text + " Data of the reported numbers: " + IN_HOUSE_DATA[table] + ". Options that apply: "
            "--checkpoint-root, --data-root, --sizes, --input-size, --max-samples, --batch-size, --out, "
            "--no-site, --device.")


def table_description(table: str) -> str:
    """The ``--help`` text of ``reproduce TABLE`` (``table1`` ... ``table7``).

    Raises:
        KeyError: an unknown table name.
    """
    if table == "table1":
        return _table1()
    if table == "table2":
        return _table2()
    if table not in TABLE_TASKS:
        raise KeyError(f"unknown table {table!r}; known: table1, table2, {', '.join(TABLE_TASKS)}")
    return _task_table(table)
