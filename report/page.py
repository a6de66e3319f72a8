"""The report's files: ``report.html`` (one self-contained page) and ``report_data/`` (every number).

The page inlines its style, the charting library (Vega-Lite, Vega and vega-embed: :mod:`.bundle`),
its script (:file:`assets/report.js`: tables, samples and clusters as HTML, each chart's Vega-Lite
spec handed to Vega, the weighting switch) and its data as JSON, so it opens from a laptop with no
network. ``report_data/`` holds the merged per-file summaries (``summary.json``), each section's
charts as the page draws them, their data and their Vega-Lite specs (``sections/<id>.json``), and
the runs read (``runs.json``), to re-plot or compare.
"""

from __future__ import annotations

import html
from importlib import resources
from typing import Any

import orjson

from dolma_pipe import storage
from report import bundle

PAGE = "report.html"
DATA_DIR = "report_data"


def _asset(name: str) -> str:
    return resources.files("report").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def _script_json(data: Any) -> str:
    # Inside <script>, "</" would end the element early; "<\/" is the same JSON string.
    return orjson.dumps(data).decode("utf-8").replace("</", "<\\/")


def _inline_script(js: str) -> str:
    # A "</script" inside the library's strings would end the element; "<\/script" is the same string.
    return js.replace("</script", "<\\/script")


# What the page needs of a chart Vega draws: its spec holds its data.
_DRAWN_KEYS = ("type", "title", "caption", "weighted", "vega")


def _drawn(page: dict[str, Any]) -> dict[str, Any]:
    """The page's data: a chart Vega draws carries its spec only (its data is inside)."""
    sections = []
    for s in page["sections"]:
        charts = [{k: c[k] for k in _DRAWN_KEYS if k in c} if "vega" in c else c for c in s["charts"]]
        sections.append({**s, "charts": charts})
    return {**page, "sections": sections}


def render(page: dict[str, Any]) -> str:
    title = html.escape(page["title"])
    meta = html.escape(page["subtitle"])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{_asset("report.css")}</style></head>
<body>
<header>
<div class="switch">weight by
<label><input type="radio" name="weight" value="docs" checked> documents</label>
<label><input type="radio" name="weight" value="chars"> characters</label>
<label><input type="radio" name="weight" value="tokens"> tokens</label></div>
<h1>{title}</h1><div class="meta">{meta}</div>
<nav id="nav"></nav>
</header>
<main id="sections"></main>
<script type="application/json" id="report-data">{_script_json(_drawn(page))}</script>
<script>{_inline_script(bundle.javascript())}</script>
<script>{_asset("report.js")}</script>
</body></html>
"""


def write(destination: str, page: dict[str, Any], summary: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, int]:
    """Writes the page and its data folder; the bytes of each file written (relative names)."""
    files = {
        f"{DATA_DIR}/summary.json": orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS),
        f"{DATA_DIR}/runs.json": orjson.dumps(runs, option=orjson.OPT_INDENT_2),
        **{f"{DATA_DIR}/sections/{s['id']}.json": orjson.dumps(s, option=orjson.OPT_INDENT_2) for s in page["sections"]},
        PAGE: render(page).encode("utf-8"),
    }
    for rel, data in files.items():  # the page last: it is what a reader opens
        storage.write_bytes(storage.join(destination, rel), data)
    return {rel: len(data) for rel, data in files.items()}
