"""One self-contained static HTML page from Jinja2 templates: inline CSS and JS, figures as base64 PNG.

The templates (``leaderboard/templates/``: ``page.html``, ``macros.html``, ``report.css``,
``report.js``) ship as package data and are rendered with autoescape on, so every user-supplied
string (model names, datasets, protocol ids, notes, paths) is HTML-escaped. The script carries no
data at all: sort keys live in ``data-v`` attributes and model names in ``data-model``, so no user
string ever reaches JavaScript source. A Content-Security-Policy forbids any fetch.

Sorting: click a column header (again to reverse); missing values stay last; the oracle's ceiling
row stays on top. The page also sorts at load from the URL fragment
``#sort=<table id>:<column index>:<asc|desc>``. The filter box hides rows whose model name does
not contain the typed text, in every table.
"""

from __future__ import annotations

import base64
from functools import lru_cache

from leaderboard.report_md import neutralise_controls

CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
       "base-uri 'none'; form-action 'none'")


@lru_cache(maxsize=1)
def environment():
    """The Jinja2 environment: package templates, autoescape on, undefined names are errors."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("leaderboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["b64"] = lambda data: base64.b64encode(data).decode("ascii")
    return env


def build_html(page: dict) -> str:
    """The whole page.

    Args:
        page: ``{"title", "generated_utc", "n_records", "inputs", "banner", "summaries", "sections":
            [{"task", "tables": [TableView]}], "paper": [TableView], "protocols": [ProtocolInfo]}``
            (``leaderboard.build``).

    Returns:
        HTML text (UTF-8), fully self-contained.
    """
    # autoescape leaves control and bidi characters as they are: they are shown as [U+XXXX]
    return neutralise_controls(environment().get_template("page.html").render(csp=CSP, **page))
