"""Where the official Sapiens2 checkpoints and test sets come from (facts, as data).

Checkpoints are Hugging Face model repositories of the ``facebook`` organisation:

- ``facebook/sapiens2-pretrain-{0.1b,0.4b,0.8b,1b,1b-4k,5b}``: pretrained backbones (Table 2 probing);
- ``facebook/sapiens2-{pose,seg,normal,pointmap}-{0.4b,0.8b,1b,5b}``: task models (Tables 3-6);
- ``facebook/sapiens-pose-bbox-detector``: the person detector of the official pose demo (an
  mmdetection RTMDet ``.pth``; nothing in sapiens2-bench runs it).

No public albedo checkpoint (Table 7) and no 1B-4K task checkpoint (the 1B-4K rows of Tables 4 and 6)
is known: those files are placed by hand. The model cards of ``facebook/sapiens2-pretrain-{0.1b,1b,5b}``
name their file ``sapiens2_{size}_pretrain.safetensors`` (and ``facebook/sapiens2-matting-1b`` names
``sapiens2_1b_matting.safetensors``), so ``sapiens2_{size}_{task}.safetensors`` is the name looked for
first; where a repository holds another name, :func:`choose_file` picks its single safetensors file.

Example:
    >>> repo_for("seg", "0.4b"), repo_for("pretrain", "1b-4k")
    ('facebook/sapiens2-seg-0.4b', 'facebook/sapiens2-pretrain-1b-4k')
    >>> choose_file(["README.md", "sapiens2_0.4b_seg.safetensors", "model.safetensors"], "seg", "0.4b")
    'sapiens2_0.4b_seg.safetensors'
"""

from __future__ import annotations

from sapiens2.errors import BenchError

HUB = "https://huggingface.co"
PRETRAIN_SIZES = ("0.1b", "0.4b", "0.8b", "1b", "1b-4k", "5b")
TASK_SIZES = ("0.4b", "0.8b", "1b", "5b")
HUB_TASKS = ("pose", "seg", "normal", "pointmap")
DETECTOR_REPO = "facebook/sapiens-pose-bbox-detector"
# The copy that the transformers port loads (renamed keys, its own config.json); not the official layout.
TRANSFORMERS_FILE = "model.safetensors"

# What each table's reported numbers were measured on (paper Sec. 6 and App. A.2; all in-house).
IN_HOUSE_DATA = {
    "table2": "the paper's Table 2 probes on the Sapiens2 task test sets below (in-house, not public)",
    "table3": "pose: 11K in-the-wild images with 308 keypoints (in-house, not public; the released pose "
              "config validates on a 1K subset, person_keypoints_test2025_1k.json, which is not "
              "distributed with the code either as far as we know)",
    "table4": "segmentation: 5K in-the-wild images, 29 classes (in-house, not public)",
    "table5": "pointmap: 10K synthetic images rendered from the authors' photorealistic assets (in-house, "
              "not public)",
    "table6": "normals: 10K synthetic whole-body renders with 4K ground truth (in-house, not public)",
    "table7": "albedo: 10K synthetic renders (in-house, not public)",
}


def data_statement(table: str) -> str | None:
    """The honest note on ``table``'s test data, or None when the table needs no data (Table 1).

    Example:
        >>> data_statement("table1") is None
        True
        >>> "in-house" in data_statement("table4")
        True
    """
    what = IN_HOUSE_DATA.get(table)
    if what is None:
        return None
    return (f"data: the reported numbers of {table} were measured on {what}. Without that set, a run "
            "measures the official models on the data you pass (--data-root): a different test set, so "
            "a difference to the reported number is not a reproduction error.")


def repo_for(task: str, size: str) -> str:
    """The Hugging Face repository of ``task`` (``pretrain``, a hub task or ``detector``) and ``size``.

    Raises:
        BenchError: no public repository is known for this task / size.
    """
    size = size.lower().replace("_", "-")
    if task == "detector":
        return DETECTOR_REPO
    if task == "pretrain":
        if size not in PRETRAIN_SIZES:
            raise BenchError(f"no public Sapiens2 pretrained backbone of size {size!r}; "
                             f"known: {', '.join(PRETRAIN_SIZES)}")
        return f"facebook/sapiens2-pretrain-{size}"
    if task not in HUB_TASKS:
        raise BenchError(f"no public Sapiens2 {task!r} checkpoints are known (public task repositories: "
                         f"{', '.join(HUB_TASKS)}); place {task} checkpoints by hand")
    if size not in TASK_SIZES:
        raise BenchError(f"no public Sapiens2 {task} checkpoint of size {size!r} is known; "
                         f"known: {', '.join(TASK_SIZES)}")
    return f"facebook/sapiens2-{task}-{size}"


def expected_filename(task: str, size: str) -> str:
    """The file name the model cards use (``sapiens2_{size}_{task}.safetensors``)."""
    return f"sapiens2_{size.lower()}_{task}.safetensors"


def choose_file(files: list[str], task: str, size: str) -> str:
    """Pick the checkpoint file of a repository listing.

    Order: the documented name; else the only ``.safetensors`` file other than the transformers
    copy (``model.safetensors``); for the detector, the only ``.pth`` file.

    Raises:
        BenchError: nothing fits, or several files fit (the message lists them).
    """
    suffix = ".pth" if task == "detector" else ".safetensors"
    if task != "detector" and expected_filename(task, size) in files:
        return expected_filename(task, size)
    candidates = sorted(f for f in files if f.endswith(suffix) and f.split("/")[-1] != TRANSFORMERS_FILE)
    if len(candidates) == 1:
        return candidates[0]
    what = f"{task} {size}" if task != "detector" else "detector"
    if not candidates:
        listing = ", ".join(sorted(files)) or "(empty)"
        hint = (f" (only the transformers copy {TRANSFORMERS_FILE}; convert it with `sapiens2-bench convert "
                "--to official`)" if TRANSFORMERS_FILE in files else "")
        raise BenchError(f"{what}: the repository has no {suffix} checkpoint{hint}; files: {listing}")
    raise BenchError(f"{what}: several {suffix} files could be the checkpoint: {', '.join(candidates)}; "
                     "pass --file NAME to choose one")
