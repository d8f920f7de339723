"""``sapiens2-bench model-card``: the paper's Table 1 plus the README's 0.1B and 1B-4K rows, recomputed.

Exact parameter counts and FLOPs of every official Sapiens2 backbone, counted on the meta device (no
weights are allocated; the whole table takes seconds and a few hundred MB), side by side with the printed
values and the difference. FLOPs convention: see ``sapiens2.models.flops.CARD_CONVENTION``; the JSON also
carries the total with attention (2 FLOPs per MAC) so every convention can be compared.
"""

from __future__ import annotations

import argparse

CARD_SOURCES = {"sapiens2_0.1b": "README model card", "sapiens2_1b_4k": "README model card"}
CSV_COLUMNS = [
    "arch", "source", "img_size", "params", "params_paper_b", "params_diff_pct", "flops", "flops_paper_t",
    "flops_diff_pct", "flops_total_2x_macs", "macs_linear", "macs_conv", "macs_attention",
]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``model-card`` subcommand."""
    p = sub.add_parser("model-card", help="recompute the model card (params, FLOPs) of every official arch",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", metavar="OUT", help="write {'rows': [...], 'convention': ...} to OUT")
    p.add_argument("--csv", metavar="OUT", help="write the table as CSV to OUT")
    p.add_argument("--arch", action="append", help="only these archs (repeatable; default: all)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=run)


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
    from sapiens2.models.flops import backbone_complexity
    from sapiens2.reference import official_archs

    table = official_archs()["archs"]
    names = archs or list(table)
    unknown = [a for a in names if a not in table]
    if unknown:
        raise KeyError(f"unknown arch {', '.join(unknown)}; known archs: {', '.join(table)}")
    rows = []
    for name in names:
        entry = table[name]
        got = backbone_complexity(name)
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


def run(args: argparse.Namespace) -> int:
    """Compute, print and optionally write the model card; returns the exit code."""
    return print_model_card(args.arch, args.json, args.csv)


def print_model_card(archs: list[str] | None = None, json_path=None, csv_path=None) -> int:
    """Compute and print the model card of ``archs`` (default: all); optionally write JSON / CSV."""
    import csv
    import io
    import resource
    import time

    from sapiens2.models.flops import CARD_CONVENTION
    from sapiens2.utils_io import write_json_atomic, write_text_atomic

    start = time.perf_counter()
    rows = compute_rows(archs)
    seconds = time.perf_counter() - start
    print(format_table(rows))
    print(f"\nFLOPs convention: {CARD_CONVENTION}.")
    print("params: exact count of our implementation (official num_params); paper values as printed.")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"computed in {seconds:.1f} s on the meta device, peak RSS {peak_mb:.0f} MB")
    if json_path:
        units = {"params": "count", "flops": "MACs (card convention)",
                 "flops_total_2x_macs": "FLOPs, 2 per MAC, attention included"}
        write_json_atomic(json_path, {"rows": rows, "convention": CARD_CONVENTION, "units": units})
        print(f"wrote {json_path}")
    if csv_path:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        write_text_atomic(csv_path, buf.getvalue())
        print(f"wrote {csv_path}")
    return 0
