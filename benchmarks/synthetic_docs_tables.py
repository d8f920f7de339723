"""The generated tables of docs/synthetic_data.md (blocks of :mod:`benchmarks.docs_tables`).

``realism-mediapipe``: the realism measurement (MediaPipe on the realistic split, the same-pose
capsule ablation and the procedural split); ``realistic-limits``: every seg class and keypoint the
realistic generator cannot produce, with the reason.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


REALISM_FILE = "benchmarks/results/references/mediapipe_realistic.json"


def realism_table(rel: str = REALISM_FILE) -> str:
    """The realism measurement ``rel`` (relative to the repository): conditions, then misses by group."""
    from benchmarks.results import read_measurement

    rec = read_measurement(ROOT / rel)
    rows = rec["numbers"]["conditions"]
    lines = [f"Measured at commit {rec['commit']} ([`{rel}`](../{rel})):", "",
             "| condition | size | render | images | people | body AP | PCK@0.1 | persons missed | "
             "detections of another person | images where nobody is found | person IoU (pose mask) | "
             "person IoU (selfie) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        render = row["render"]
        wrong = row.get("detections_of_another_person")
        other = "-" if wrong is None else f"{wrong['wrong_person']} of {wrong['detected']}"
        shown = "procedural ray caster" if render is None else (
            f"{render['mode']}, {render['spp']} spp" if render["mode"] == "path" else render["mode"])
        lines.append(
            f"| {row['label']} | {row['size']} | {shown} | {row['n_images']} | {row['n_people']} | "
            f"{row['body_AP']:.3f} | {row['PCK@0.1']:.3f} | {row['missed_people']} | {other} | "
            f"{row['images_nobody_found']} of {row['n_images']} | {row['pose_mask_person_IoU']:.3f} | "
            f"{row['selfie_mask_person_IoU']:.3f} |")
    groups = list(rows[0]["by_group"])
    lines += ["", "Persons missed of persons, and body AP, by group (`person_groups` in the script):", "",
              "| condition | " + " | ".join(groups) + " |", "|---" * (len(groups) + 1) + "|"]
    for row in rows:
        cells = []
        for g in groups:
            d = row["by_group"][g]
            ap = "-" if d["body_AP"] is None else f"{d['body_AP']:.3f}"
            cells.append(f"{d['missed']} of {d['people']} missed, AP {ap}")
        name = f"{row['condition']} {row['size']}, {row['n_images']} images"
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    prev = rec["numbers"].get("previous")
    if prev:
        lines += ["", f"With the generator's earlier defaults (measured at commit "
                  f"{prev['commit']}; changed since: {prev['what_changed']}):", "",
                  "| condition | size | images | people | body AP | PCK@0.1 | persons missed | "
                  "images where nobody is found |", "|---|---|---|---|---|---|---|---|"]
        for r in prev["conditions"]:
            lines.append(f"| {r['condition']} | {r['size']} | {r['n_images']} | {r['n_people']} | "
                         f"{r['body_AP']:.3f} | {r['PCK@0.1']:.3f} | {r['missed_people']} | "
                         f"{r['images_nobody_found']} of {r['n_images']} |")
    return "\n".join(lines)


def realistic_limits() -> str:
    """Every seg class and keypoint the realistic generator cannot produce, with the reason."""
    from sapiens2.datasets.synth.realistic.limits import NEVER_PRODUCED_CLASSES, undefined_keypoints

    lines = ["| class | why it never occurs |", "|---|---|"]
    lines += [f"| `{name}` | {why} |" for name, why in NEVER_PRODUCED_CLASSES.items()]
    points = undefined_keypoints()
    by_reason: dict[str, list[str]] = {}
    for idx, name, why in points:
        by_reason.setdefault(why, []).append(f"`{name}` ({idx})")
    lines += ["", f"{len(points)} keypoints are never labelled (v = 0 in every image):", "",
              "| keypoints (id) | why |", "|---|---|"]
    lines += [f"| {', '.join(names)} | {why} |" for why, names in by_reason.items()]
    return "\n".join(lines)
