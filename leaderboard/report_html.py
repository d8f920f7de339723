"""One self-contained static HTML page: inline CSS and JS, plots as base64 PNG, no network access.

Every user-supplied string (model names, datasets, protocol ids, notes, paths) goes through
``html.escape``. The script carries no data at all: sort keys live in ``data-v`` attributes, so
no user string ever reaches JavaScript source. A Content-Security-Policy forbids any fetch.

Sorting: click a column header (again to reverse); missing values stay last. The page also sorts
at load from the URL fragment ``#sort=<table id>:<column index>:<asc|desc>``.
"""

from __future__ import annotations

import base64
import html
import math

from leaderboard.plots import Figure
from leaderboard.report_md import fmt, fmt_params
from leaderboard.tables import GroupTable

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:24px auto;max-width:1280px;
color:#1d2330;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 6px;border-bottom:2px solid #dde3ec}
h3{font-size:15px;margin:18px 0 4px}.meta,.note,.ds{color:#566072;font-size:12.5px;margin:2px 0}
.note{color:#8a5a00}code{background:#f1f4f8;padding:1px 4px;border-radius:3px}
table.lb{border-collapse:collapse;margin:8px 0 6px;font-size:12.5px;font-variant-numeric:tabular-nums}
table.lb th,table.lb td{border:1px solid #dfe4ec;padding:3px 7px;text-align:right;white-space:nowrap}
table.lb td.t,table.lb th.t{text-align:left}
table.lb th{background:#f3f6fa;cursor:pointer;user-select:none;position:relative;padding-right:16px}
table.lb th:hover{background:#e6edf7}
table.lb th[aria-sort=ascending]::after{content:'\\25B2';position:absolute;right:4px;font-size:9px}
table.lb th[aria-sort=descending]::after{content:'\\25BC';position:absolute;right:4px;font-size:9px}
tr.reported td{background:#fafafa;color:#4b5563}tr.reproduced td.t:first-child{color:#1f6fd1;font-weight:600}
td.pos{color:#0a7d32}td.neg{color:#b42318}td.best{font-weight:700}
.figs{display:flex;flex-wrap:wrap;gap:12px}.figs figure{margin:6px 0}.figs img{max-width:100%;
border:1px solid #e4e8ef}figcaption{font-size:11.5px;color:#566072}
nav ul{columns:2;font-size:13px}
"""

_JS = """
(function(){
 function key(td){var v=td.getAttribute('data-v');if(v===null||v===''){return null;}
  var n=parseFloat(v);return isNaN(n)?v.toLowerCase():n;}
 function sortTable(table,col,dir){
  var tb=table.tBodies[0];var rows=Array.prototype.slice.call(tb.rows);
  rows.sort(function(a,b){var x=key(a.cells[col]),y=key(b.cells[col]);
   if(x===null&&y===null)return 0;if(x===null)return 1;if(y===null)return -1;
   var c=(typeof x==='number'&&typeof y==='number')?x-y:(String(x)<String(y)?-1:String(x)>String(y)?1:0);
   return dir==='asc'?c:-c;});
  rows.forEach(function(r){tb.appendChild(r);});
  var ths=table.tHead.rows[0].cells;
  for(var i=0;i<ths.length;i++){ths[i].removeAttribute('aria-sort');}
  ths[col].setAttribute('aria-sort',dir==='asc'?'ascending':'descending');
  table.setAttribute('data-sorted',col+':'+dir);}
 window.lbSort=sortTable;
 document.querySelectorAll('table.lb').forEach(function(table){
  var ths=table.tHead.rows[0].cells;
  Array.prototype.forEach.call(ths,function(th,i){th.addEventListener('click',function(){
   var cur=th.getAttribute('aria-sort');var dir=cur==='descending'?'asc':(cur==='ascending'?'desc':
    (th.getAttribute('data-hib')==='0'?'asc':'desc'));sortTable(table,i,dir);});});});
 var m=/^#sort=([A-Za-z0-9_-]+):(\\d+):(asc|desc)$/.exec(location.hash);
 if(m){var t=document.getElementById(m[1]);if(t&&t.tHead&&+m[2]<t.tHead.rows[0].cells.length){
  sortTable(t,+m[2],m[3]);}}
})();
"""

_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
        "base-uri 'none'; form-action 'none'")


def esc(text) -> str:
    """``html.escape`` with quotes, for text and attribute values."""
    return html.escape(str(text), quote=True)


def _num_attr(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return repr(float(v))


def table_html(t: GroupTable) -> str:
    """One sortable table with its heading, datasets and notes."""
    metric_labels = [(label, hib) for _, label, hib in t.metric_columns]
    deltas = [d for d, _ in t.delta_columns]
    head = [("source", "t", None), ("model", "t", None), ("params", "", None), ("dataset", "t", None),
            ("seeds", "t", None)]
    head += [(label, "", hib) for label, hib in metric_labels] + [(d, "", None) for d in deltas]
    ths = "".join(
        f'<th class="{cls}" scope="col"' + ("" if hib is None else f' data-hib="{int(hib)}"')
        + f">{esc(h)}</th>"
        for h, cls, hib in head
    )
    best = {}
    for label, hib in metric_labels:
        col = t.rows[label]
        if col.notna().any():
            best[label] = col.max() if hib else col.min()
    body = []
    for i, r in t.rows.iterrows():
        src = r["source"] + (f" ({r['table']})" if r["table"] else "")
        title = f' title="{esc(r["run_ids"])}"' if r["run_ids"] else ""
        cells = [f'<td class="t" data-v="{esc(r["source"])}">{esc(src)}</td>',
                 f'<td class="t" data-v="{esc(r["model"])}"{title}>{esc(r["model"])}</td>',
                 f'<td data-v="{_num_attr(r["params"])}">{fmt_params(r["params"])}</td>',
                 f'<td class="t" data-v="{esc(r["dataset"])}">{esc(r["dataset"])}</td>',
                 f'<td class="t" data-v="{esc(r["seeds"])}">{esc(r["seeds"] or "-")}</td>']
        for label, _ in metric_labels:
            v = r[label]
            sd = t.std.at[i, label] if label in t.std else float("nan")
            text = fmt(v) + ("" if math.isnan(sd) else f" ± {fmt(sd)}")
            cls = ' class="best"' if label in best and not math.isnan(v) and v == best[label] else ""
            cells.append(f'<td{cls} data-v="{_num_attr(v)}">{esc(text)}</td>')
        for d in deltas:
            v = r[d]
            cls = "" if math.isnan(v) else (' class="pos"' if v > 0 else ' class="neg"' if v < 0 else "")
            cells.append(f'<td{cls} data-v="{_num_attr(v)}">{esc(fmt(v, signed=True))}</td>')
        body.append(f'<tr class="{esc(r["source"])}">' + "".join(cells) + "</tr>")
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in t.notes)
    return (
        f'<section id="s-{esc(t.table_id)}"><h3>{esc(t.task)} — protocol '
        f"<code>{esc(t.protocol_key)}</code></h3>"
        f'<p class="ds">Datasets: {esc(", ".join(t.datasets))}</p>{notes}'
        f'<table class="lb" id="{esc(t.table_id)}"><thead><tr>{ths}</tr></thead><tbody>'
        + "".join(body) + "</tbody></table></section>"
    )


def figures_html(figs: list[Figure]) -> str:
    """Figures as inline base64 PNG images."""
    if not figs:
        return ""
    items = "".join(
        f'<figure><img alt="{esc(f.title)}" '
        f'src="data:image/png;base64,{base64.b64encode(f.png).decode("ascii")}">'
        f"<figcaption>{esc(f.title)}</figcaption></figure>"
        for f in figs
    )
    return f'<div class="figs">{items}</div>'


def build_html(tables: list[GroupTable], figures: dict[str, list[Figure]], meta: dict) -> str:
    """The whole page.

    Args:
        tables: leaderboard tables.
        figures: table id -> figures of that table.
        meta: ``{"title", "generated_utc", "n_records", "inputs", "include_paper"}``.

    Returns:
        HTML text (UTF-8), fully self-contained.
    """
    title = meta.get("title", "sapiens2-bench leaderboard")
    toc = "".join(f'<li><a href="#s-{esc(t.table_id)}">{esc(t.task)} — {esc(t.protocol_key)}</a></li>'
                  for t in tables)
    sections, current = [], None
    for t in tables:
        if t.task != current:
            sections.append(f"<h2>{esc(t.task)}</h2>")
            current = t.task
        sections.append(table_html(t) + figures_html(figures.get(t.table_id, [])))
    inputs = ", ".join(meta.get("inputs", []))
    paper = " Paper numbers are included and marked <em>reported</em>." if meta.get("include_paper") else ""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(_CSP)}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{esc(title)}</h1>"
        f'<p class="meta">Generated {esc(meta.get("generated_utc", ""))} from '
        f'{int(meta.get("n_records", 0))} '
        f"result record(s) ({esc(inputs)}).{paper}</p>"
        '<p class="meta">One table per task and protocol: results made under different protocols are never '
        "ranked together. Δ = reproduced − reported for the same model, in the displayed units. Click a "
        "column header to sort.</p>"
        f"<nav><ul>{toc}</ul></nav>" + "".join(sections)
        + ("<p>No results.</p>" if not tables else "")
        + f"<script>{_JS}</script></body></html>\n"
    )
