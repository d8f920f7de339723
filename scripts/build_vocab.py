"""Write the built-in keypoint vocabularies (``sapiens2/data/vocab/*.json``) from dataset descriptions.

The facts (names, OKS sigmas, flip partners, skeleton links, joint weights) come from mmpose's
dataset descriptions (``../shared/real/meta/*.py``, copies of the datasets' published values);
this script only reads them (a literal-only evaluator: no code runs) and adds the part split of
each set, which the datasets define by index range.

Usage: ``python scripts/build_vocab.py [META_DIR] [OUT_DIR]``.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

# name in this project -> (description file, whole-set label, display name, parts by index range)
SETS = {
    "coco17": ("coco.py", "body", "COCO-17", {}),
    "coco_wholebody133": (
        "coco_wholebody.py",
        "wholebody",
        "COCO-WholeBody-133",
        {
            "body": (0, 17),
            "foot": (17, 23),
            "face": (23, 91),
            "left_hand": (91, 112),
            "right_hand": (112, 133),
        },
    ),
    "mpii16": ("mpii.py", "body", "MPII-16", {}),
    "crowdpose14": ("crowdpose.py", "body", "CrowdPose-14", {}),
    "ochuman17": ("ochuman.py", "body", "OCHuman-17", {}),
    "halpe136": (
        "halpe.py",
        "wholebody",
        "Halpe-136",
        {
            "body": (0, 20),
            "foot": (20, 26),
            "face": (26, 94),
            "left_hand": (94, 115),
            "right_hand": (115, 136),
        },
    ),
}


# names the datasets' released annotation files use for a keypoint where mmpose's description differs
ALIASES = {"crowdpose14": {"top_head": ["head"]}}


def literal(node: ast.AST):
    """Value of a literal expression that may use ``dict(...)`` and ``[x] * n`` (nothing is executed)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        if node.args:
            raise ValueError("dict() with positional arguments")
        return {kw.arg: literal(kw.value) for kw in node.keywords}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return literal(node.left) * literal(node.right)
    if isinstance(node, ast.Dict):
        return {literal(k): literal(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal(e) for e in node.elts]
    return ast.literal_eval(node)


def read_description(path: Path) -> dict:
    """The ``dataset_info`` dict of one description file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and getattr(stmt.targets[0], "id", "") == "dataset_info":
            return literal(stmt.value)
    raise ValueError(f"{path}: no dataset_info assignment")


def build(name: str, meta_dir: Path) -> dict:
    """One vocabulary dict in the format of ``keypoints308.json``."""
    fname, whole, display, ranges = SETS[name]
    info = read_description(meta_dir / fname)
    kinfo = [info["keypoint_info"][i] for i in sorted(info["keypoint_info"])]
    names = [k["name"] for k in kinfo]
    if [k["id"] for k in kinfo] != list(range(len(kinfo))) or len(set(names)) != len(names):
        raise ValueError(f"{fname}: keypoint ids must be 0..K-1 with unique names")
    index = {n: i for i, n in enumerate(names)}
    flip = [[i, index[k["swap"]]] for i, k in enumerate(kinfo) if k.get("swap")]
    skeleton = [
        {"link": [index[a], index[b]], "color": s.get("color")}
        for s in (info["skeleton_info"][j] for j in sorted(info["skeleton_info"]))
        for a, b in [s["link"]]
    ]
    sigmas = [float(s) for s in info["sigmas"]]
    if len(sigmas) != len(names) or len(info["joint_weights"]) != len(names):
        raise ValueError(f"{fname}: sigmas / joint_weights do not have one value per keypoint")
    return {
        "dataset_name": name,
        "display_name": display,
        "whole_name": whole,
        "num_keypoints": len(names),
        "keypoints": [
            {
                "id": i,
                "name": k["name"],
                "swap": k.get("swap", ""),
                "color": k.get("color"),
                "type": k.get("type", ""),
            }
            for i, k in enumerate(kinfo)
        ],
        "sigmas": sigmas,
        "joint_weights": [float(w) for w in info["joint_weights"]],
        "parts": {p: list(range(a, b)) for p, (a, b) in ranges.items()},
        "skeleton": skeleton,
        "flip_pairs": flip,
        "aliases": ALIASES.get(name, {}),
        "source": f"mmpose configs/_base_/datasets/{fname} (dataset_info of {info['dataset_name']}); "
        f"paper: {info.get('paper_info', {}).get('title', '?')}",
    }


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent.parent
    meta_dir = Path(argv[0]) if argv else here.parent / "shared" / "real" / "meta"
    out_dir = Path(argv[1]) if len(argv) > 1 else here / "sapiens2" / "data" / "vocab"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in SETS:
        (out_dir / f"{name}.json").write_text(
            json.dumps(build(name, meta_dir), indent=1) + "\n", encoding="utf-8"
        )
        print(f"wrote {out_dir / (name + '.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
