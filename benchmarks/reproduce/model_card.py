"""The model card: the paper's Table 1 plus the README's 0.1B and 1B-4K rows, recomputed
(``sapiens2-bench model-card`` prints it; ``reproduce table1`` stores it).

Exact parameter counts and FLOPs of every official Sapiens2 backbone, counted on the meta device (no
weights are allocated: 10-20 s and 350 MB peak RSS on the 2-core development VM, 2026-11-30), side by
side with the printed values and the difference, and a note on why the FLOPs differ (with the measured
difference per model). FLOPs convention: see ``sapiens2.models.flops.CARD_CONVENTION``; the JSON also
carries the total with attention (2 FLOPs per MAC) so every convention can be compared.
"""

from __future__ import annotations

import textwrap

from sapiens2.models import flops
from sapiens2.models.flops import CARD_CONVENTION
from sapiens2.reference import official_archs
from sapiens2.utils_io import write_json_atomic, write_text_atomic

CARD_SOURCES = {"sapiens2_0.1b": "README model card", "sapiens2_1b_4k": "README model card"}
CARD_UNITS = {"params": "count", "flops": "MACs (card convention)",
              "flops_total_2x_macs": "FLOPs, 2 per MAC, attention included"}
CSV_COLUMNS = [
    "arch", "source", "img_size", "params", "params_paper_b", "params_diff_pct", "flops", "flops_paper_t",
    "flops_diff_pct", "flops_total_2x_macs", "macs_linear", "macs_conv", "macs_attention",
]


def _pct(ours: float, paper: float | None) -> float | None:
    if paper in (None, 0):
        return None
    return round(100.0 * (ours - paper) / paper, 3)


def compute_rows(archs: list[str] | None = None) -> list[dict]:
    """One row per official Sapiens2 arch: our counts, the printed values and the differences.

    Args:
        archs: subset of arch names (as in ``official_backbones.json``); None for all.

    Returns:
        Rows with the keys of :data:`CSV_COLUMNS` (``flops_paper_t`` is None where nothing is printed).
    """
    table = official_archs()["archs"]
    names = archs or list(table)
    unknown = [a for a in names if a not in table]
    if unknown:
        raise KeyError(f"unknown arch {', '.join(unknown)}; known archs: {', '.join(table)}")
    rows = []
    for name in names:
        entry = table[name]
        got = flops.backbone_complexity(name)  # looked up on the module: tests replace it
        paper_p, paper_f = entry.get("params_b_card"), entry.get("tflops_card")
        rows.append({
            "arch": name,
            "source": CARD_SOURCES.get(name, "paper Table 1"),
            "img_size": "x".join(str(v) for v in got["img_size"]),
            "params": got["params"],
            "params_official": entry.get("num_params"),
            "params_paper_b": paper_p,
            "params_diff_pct": _pct(got["params"] / 1e9, paper_p),
            "flops": got["flops"],
            "flops_paper_t": paper_f,
            "flops_diff_pct": _pct(got["flops"] / 1e12, paper_f),
            "flops_total_2x_macs": got["flops_total_2x_macs"],
            "macs_linear": got["macs_linear"],
            "macs_conv": got["macs_conv"],
            "macs_attention": got["macs_attention"],
        })
    return rows


def _fmt(v, scale: float = 1.0, digits: int = 3) -> str:
    if v is None:
        return "-"
    return f"{v / scale:.{digits}f}"


def format_table(rows: list[dict]) -> str:
    """Plain-text table of the rows (params in B, FLOPs in T, differences in %)."""
    head = ["arch", "size", "params B", "paper B", "diff %", "TFLOPs", "paper T", "diff %", "2xMAC+attn T"]
    lines = [head]
    for r in rows:
        lines.append([
            r["arch"], r["img_size"], _fmt(r["params"], 1e9, 4), _fmt(r["params_paper_b"]),
            _fmt(r["params_diff_pct"], digits=2), _fmt(r["flops"], 1e12), _fmt(r["flops_paper_t"]),
            _fmt(r["flops_diff_pct"], digits=2), _fmt(r["flops_total_2x_macs"], 1e12),
        ])
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in
                               enumerate(zip(line, widths))) for line in lines)


def flops_note(rows: list[dict]) -> str:
    """Why our FLOPs differ from the printed card, with the differences measured on ``rows``.

    Example:
        >>> rows = [{"arch": "a", "flops": 96e10, "flops_paper_t": 1.0, "flops_diff_pct": -4.0,
        ...          "macs_attention": 4e11}]
        >>> print(flops_note(rows).splitlines()[1])
          a: -4.00% (card convention), +36.00% with the attention matmuls counted
    """
    rows = [r for r in rows if r.get("flops_paper_t")]
    if not rows:
        return "FLOPs note: none of these archs has a printed FLOPs value to compare with."
    lines = ["FLOPs note: our count vs the printed card, per model:"]
    for r in rows:
        with_attn = _pct((r["flops"] + r["macs_attention"]) / 1e12, r["flops_paper_t"])
        lines.append(f"  {r['arch']}: {r['flops_diff_pct']:+.2f}% (card convention), "
                     f"{with_attn:+.2f}% with the attention matmuls counted")
    diffs = [r["flops_diff_pct"] for r in rows]
    change = "size and sign" if min(diffs) < 0 < max(diffs) else "size"
    lines.append(textwrap.fill(
        f"The differences range from {min(diffs):+.2f}% to {max(diffs):+.2f}% and change in {change} "
        "from model to model. We count the MACs of every linear and convolution layer, leaving out "
        "the attention matmuls (QK^T, AV) and element-wise ops (RMSNorm, RoPE, softmax, the SwiGLU "
        "product); the parameter counts equal the official implementation's exactly, so the model is the "
        "same and only the counting differs. Counting the attention matmuls overshoots every printed value "
        "by far; where our count is above the card, counting more ops moves it further off, and where it "
        "is below, counting fewer does. We found no choice of counted ops that matches every printed "
        "value: they most likely come from a counter or setup the official repository does not publish.",
        width=100, initial_indent="  ", subsequent_indent="  "))
    return "\n".join(lines)


def card_text(rows: list[dict]) -> str:
    """The printed model card: the table, the FLOPs convention and the note on the differences."""
    return "\n".join([
        format_table(rows), "", f"FLOPs convention: {CARD_CONVENTION}.",
        "params: exact count of our implementation (official num_params); paper values as printed.",
        flops_note(rows)])


def print_model_card(archs: list[str] | None = None, json_path=None, csv_path=None) -> int:
    """Compute and print the model card of ``archs`` (default: all); optionally write JSON / CSV."""
    import csv
    import io
    import resource
    import time

    start = time.perf_counter()
    rows = compute_rows(archs)
    seconds = time.perf_counter() - start
    print(card_text(rows))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"computed in {seconds:.1f} s on the meta device, peak RSS {peak_mb:.0f} MB")
    if json_path:
        write_json_atomic(json_path, {"rows": rows, "convention": CARD_CONVENTION, "units": CARD_UNITS})
        print(f"wrote {json_path}")
    if csv_path:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        write_text_atomic(csv_path, buf.getvalue())
        print(f"wrote {csv_path}")
    return 0
