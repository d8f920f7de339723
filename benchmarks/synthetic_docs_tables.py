"""The generated tables of docs/synthetic_data.md (blocks of :mod:`benchmarks.docs_tables`).

``realism-mediapipe``: the realism measurement (MediaPipe on the realistic generator's scene mixes,
the same-pose capsule ablation and the procedural split); ``realistic-limits``: every seg class and
keypoint the realistic generator cannot produce, with the reason.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.results import read_measurement
from sapiens2.datasets.synth.realistic.limits import NEVER_PRODUCED_CLASSES, undefined_keypoints

ROOT = Path(__file__).resolve().parents[1]


REALISM_FILE = "benchmarks/results/references/mediapipe_realistic.json"


def _render_cell(render: dict | None) -> str:
    if render is None:
        return "procedural ray caster"
    return f"{render['mode']}, {render['spp']} spp" if render["mode"] == "path" else render["mode"]


def realism_table(rel: str = REALISM_FILE) -> str:
    """The realism measurement ``rel`` (relative to the repository): conditions, then misses by group."""
    rec = read_measurement(ROOT / rel)
    rows = rec["numbers"]["conditions"]
    lines = [f"Measured at commit {rec['commit']} ([`{rel}`](../{rel})); body AP with its 95 % "
             "bootstrap interval over the images:", "",
             "| condition | what the scenes hold | size | render | images | people | body AP [95 %] | "
             "PCK@0.1 | persons missed | detections of another person | images where nobody is found | "
             "person IoU (pose mask) | person IoU (selfie) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        wrong = row["detections_of_another_person"]
        lo, hi = row["body_AP_95"]
        what = row["label"].split(": ", 1)[-1]
        lines.append(
            f"| `{row['condition']}` | {what} | {row['size']} | {_render_cell(row['render'])} | "
            f"{row['n_images']} | {row['n_people']} | {row['body_AP']:.3f} [{lo:.3f}, {hi:.3f}] | "
            f"{row['PCK@0.1']:.3f} | {row['missed_people']} | "
            f"{wrong['wrong_person']} of {wrong['detected']} | "
            f"{row['images_nobody_found']} of {row['n_images']} | {row['pose_mask_person_IoU']:.3f} | "
            f"{row['selfie_mask_person_IoU']:.3f} |")
    groups = list(rows[0]["by_group"])
    lines += ["", "Persons missed of persons, and body AP, by group (`person_groups` in "
              "`benchmarks/analysis/realism_breakdown.py`):", "",
              "| condition | " + " | ".join(groups) + " |", "|---" * (len(groups) + 1) + "|"]
    for row in rows:
        cells = []
        for g in groups:
            d = row["by_group"][g]
            ap = "-" if d["body_AP"] is None else f"{d['body_AP']:.3f}"
            cells.append(f"{d['missed']} of {d['people']} missed, AP {ap}")
        lines.append(f"| `{row['condition']}` {row['size']} | " + " | ".join(cells) + " |")
    paired = rec["numbers"].get("paired_with_first") or []
    if paired:
        ref = f"`{paired[0]['reference']}` {rows[0]['size']}"
        lines += ["", f"The same scenes as {ref} rendered otherwise, or with other bodies: body AP minus "
                  f"{ref}'s, with its 95 % paired bootstrap interval (the same resampled images):", "",
                  "| condition | size | body AP difference [95 %] | images |", "|---|---|---|---|"]
        for p in paired:
            lo, hi = p["difference_95"]
            lines.append(f"| `{p['condition']}` | {p['size']} | {p['difference']:+.3f} "
                         f"[{lo:+.3f}, {hi:+.3f}] | {p['n_images']} |")
    return "\n".join(lines)


def realistic_limits() -> str:
    """Every seg class and keypoint the realistic generator cannot produce, with the reason."""
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
