"""The page's charts as Vega-Lite specs: what :mod:`.sections` says a chart holds, drawn by Vega.

Vega picks the ticks and lays the labels out (nice numbers, labels that fit, none clipped); the
rules here are what a corpus report needs on top:

- counts (documents, characters, tokens, clusters) have integer ticks (``tickMinStep: 1``) in SI
  form (2k, 1.5M);
- a histogram is drawn on its bins' real edges: a linear axis for values in [0, 1] (scores,
  fractions), else a symmetric-log axis (lengths and counts span decades; zero and negative
  values still have a place) with a tick at every power of ten;
- long category names lie along a horizontal bar's axis instead of being turned and cut;
- a weighted chart holds documents, characters and tokens per bar and a ``weight`` parameter picks
  one (the page's switch sets it), its axis title following.

Every chart's data is inline (``data.values``), so ``report_data/sections/<id>.json`` holds each
chart as drawn, to re-plot or compare.
"""

from __future__ import annotations

import math
from typing import Any

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
WEIGHTS = ("docs", "chars", "tokens")
WEIGHT_PARAM = {"name": "weight", "value": "docs"}
WEIGHT_TITLE = {"expr": "weight === 'docs' ? 'documents' : weight === 'chars' ? 'characters' : 'tokens'"}
# A category name longer than this lies along a horizontal bar's axis.
LONG_LABEL = 10
WIDTH, HEIGHT = 520, 220
PANEL_WIDTH, PANEL_HEIGHT = 250, 140


# Vega's own "~s" takes its precision from the ticks' span (0 would read 0M, 1 read 0k): one value at a time.
SI_LABEL = "format(datum.value, '~s')"
# Steps are whole: a tick between two (a run of one or two steps) has no label.
STEP_LABEL = "datum.value % 1 ? '' : format(datum.value, '~s')"


def _count_axis(title: Any) -> dict[str, Any]:
    return {"title": title, "tickMinStep": 1, "labelExpr": SI_LABEL}


# A count axis spans at least 0 to 3: Vega's tickMinStep still steps by 0.5 over a domain of 1 or 2.
COUNT_SCALE = {"domain": {"unionWith": [0, 3]}}


def _measure(c: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The measure's encoding (axis and scale) and the transform that makes ``value`` of a row:
    the weight picked (a weighted chart) or the row's own."""
    enc: dict[str, Any] = {"field": "value", "type": "quantitative"}
    if c.get("weighted"):
        return enc | {"axis": _count_axis(WEIGHT_TITLE), "scale": COUNT_SCALE}, [{"calculate": "datum[weight]", "as": "value"}]
    title = c.get("ylabel", "")
    if c.get("counts", True):
        return enc | {"axis": _count_axis(title), "scale": COUNT_SCALE}, []
    return enc | {"axis": {"title": title}, "scale": {"zero": False}}, []


def _base(c: dict[str, Any], rows: list[dict[str, Any]], transform: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"$schema": SCHEMA, "data": {"values": rows}}
    if c.get("weighted"):
        out["params"] = [dict(WEIGHT_PARAM)]
    if transform:
        out["transform"] = transform
    out["config"] = {"axis": {"labelFontSize": 11, "titleFontSize": 12}, "legend": {"labelLimit": 260}}
    return out


def _cells(values: Any, i: int, weighted: bool) -> dict[str, Any]:
    if weighted:
        return {w: values.get(w, [None] * (i + 1))[i] if values.get(w) else None for w in WEIGHTS}
    return {"value": values[i]}


def _series_rows(c: dict[str, Any], keys: list[Any], key: str) -> list[dict[str, Any]]:
    rows = []
    for s in c["series"]:
        for i, k in enumerate(keys):
            cell = _cells(s["values"], i, bool(c.get("weighted")))
            if any(v for v in cell.values()):
                rows.append({key: k, "series": s["name"], **cell})
    return rows


def _color(c: dict[str, Any], title: str = "") -> dict[str, Any]:
    names = [s["name"] for s in c["series"]]
    legend: dict[str, Any] | None = {"title": title or None, "orient": "bottom", "columns": 3} if len(names) > 1 else None
    return {"field": "series", "type": "nominal", "sort": names, "legend": legend}


def bars(c: dict[str, Any]) -> dict[str, Any]:
    """Categories by series, stacked or side by side; horizontal when a category's name is long."""
    categories = [str(x) for x in c["categories"]]
    rows = _series_rows(c, categories, "category")
    measure, transform = _measure(c)
    horizontal = any(len(x) > LONG_LABEL for x in categories)
    stacked = c.get("stacked", True)
    cat = {
        "field": "category",
        "type": "ordinal" if c.get("ordered") else "nominal",
        "sort": categories,
        "title": c.get("xlabel") or None,
        "axis": {"labelLimit": 320, "labelAngle": 0, "labelOverlap": "greedy"},
    }
    measure["stack"] = "zero" if stacked else None
    enc: dict[str, Any] = {"color": _color(c), "tooltip": [{"field": "category"}, {"field": "series"}, {"field": "value", "format": ","}]}
    if horizontal:
        enc |= {"y": cat, "x": measure}
        if not stacked and len(c["series"]) > 1:
            enc["yOffset"] = {"field": "series", "sort": [s["name"] for s in c["series"]]}
        size = {"width": WIDTH, "height": {"step": 22 if stacked else 10 * max(2, len(c["series"]))}}
    else:
        enc |= {"x": cat, "y": measure}
        if not stacked and len(c["series"]) > 1:
            enc["xOffset"] = {"field": "series", "sort": [s["name"] for s in c["series"]]}
        size = {
            "width": max(WIDTH // 2, min(WIDTH * 2, 26 * len(categories) * (1 if stacked else max(1, len(c["series"]))))),
            "height": HEIGHT,
        }
    return {**_base(c, rows, transform), **size, "mark": {"type": "bar"}, "encoding": enc}


def decade_ticks(lo: float, hi: float) -> list[float]:
    """0 and every power of ten (either sign) from ``lo`` to ``hi``: a symmetric-log axis's ticks."""
    ticks: list[float] = [0.0] if lo <= 0 <= hi else []
    for sign in (1, -1):
        top = max(hi, 0) if sign > 0 else max(-lo, 0)
        k = 0
        while 10.0**k <= top * 1.0001:
            ticks.append(sign * 10.0**k)
            k += 1
    return sorted(ticks)


def _hist_x(edges: list[tuple[float, float]], title: str) -> dict[str, Any]:
    lo, hi = min(e[0] for e in edges), max(e[1] for e in edges)
    x: dict[str, Any] = {"field": "lo", "type": "quantitative", "bin": {"binned": True}, "title": title}
    if lo >= 0 and hi <= 1:
        x["scale"] = {"domain": [0, 1]}
        x["axis"] = {"tickCount": 5, "format": "~g"}
    elif lo > 0 and hi <= 10 * lo or lo < 0 and hi < 0 and -lo <= -10 * hi:
        # Within a decade: a plain axis, Vega's own ticks.
        x["scale"] = {"domain": [lo, hi], "zero": False, "nice": False}
        x["axis"] = {"labelExpr": SI_LABEL, "labelOverlap": "greedy"}
    else:
        ticks = decade_ticks(lo, hi)
        x["scale"] = {"type": "symlog", "domain": [lo, hi], "nice": False}
        x["axis"] = {"values": ticks, "labelExpr": SI_LABEL, "labelOverlap": "greedy"}
    return x


def finite_edges(c: dict[str, Any]) -> list[tuple[int, float, float]]:
    """(index, low, high) of a histogram's bins that have a place on an axis (not NaN or infinite)."""
    return [(i, lo, hi) for i, (lo, hi) in enumerate(c["edges"]) if math.isfinite(lo) and math.isfinite(hi)]


def histogram(c: dict[str, Any], panel: bool = False) -> dict[str, Any]:
    """Bins (on their edges) by series, stacked."""
    drawn = finite_edges(c)
    weighted = bool(c.get("weighted"))
    rows = []
    for s in c["series"]:
        for i, lo, hi in drawn:
            cell = _cells(s["values"], i, weighted)
            if any(v for v in cell.values()):
                rows.append({"lo": lo, "hi": hi, "series": s["name"], **cell})
    measure, transform = _measure(c)
    edges = [(lo, hi) for _, lo, hi in drawn] or [(0.0, 1.0)]
    enc = {
        "x": _hist_x(edges, c.get("xlabel", "")),
        "x2": {"field": "hi"},
        "y": measure | {"stack": "zero"},
        "color": _color(c),
        "tooltip": [
            {"field": "lo", "title": "from", "format": ",.4~g"},
            {"field": "hi", "title": "to", "format": ",.4~g"},
            {"field": "series"},
            {"field": "value", "format": ","},
        ],
    }
    size = {"width": PANEL_WIDTH, "height": PANEL_HEIGHT} if panel else {"width": WIDTH, "height": HEIGHT}
    return {**_base(c, rows, transform), **size, "mark": {"type": "bar", "binSpacing": 0}, "encoding": enc}


def lines(c: dict[str, Any]) -> dict[str, Any]:
    """y against x (the step), a line per series."""
    rows = [
        {"x": x, "y": y, "series": s["name"]} for s in c["series"] for x, y in zip(s["x"], s["y"]) if y is not None and math.isfinite(y)
    ]
    enc = {
        "x": {"field": "x", "type": "quantitative", "title": c.get("xlabel", ""), "axis": {"tickMinStep": 1, "labelExpr": STEP_LABEL}},
        "y": {"field": "y", "type": "quantitative", "title": c.get("ylabel", ""), "scale": {"zero": False}},
        "color": _color(c),
        "tooltip": [{"field": "series"}, {"field": "x", "title": c.get("xlabel", "x")}, {"field": "y", "format": ",.4~g"}],
    }
    return {**_base(c, rows, []), "width": WIDTH, "height": HEIGHT, "mark": {"type": "line", "point": len(rows) < 40}, "encoding": enc}


def flags(c: dict[str, Any]) -> dict[str, Any]:
    """The share of documents (characters, tokens) each 0/1 attribute flags, per source."""
    rows = []
    for f in c["flags"]:
        for src, (on, everyone) in sorted(f["by_source"].items()):
            rows.append(
                {"flag": f["name"], "series": src, **{f"{w}_on": on[w] for w in WEIGHTS}, **{f"{w}_all": everyone[w] for w in WEIGHTS}}
            )
    transform = [{"calculate": "datum[weight + '_all'] ? datum[weight + '_on'] / datum[weight + '_all'] : 0", "as": "share"}]
    names = sorted({r["series"] for r in rows})
    enc: dict[str, Any] = {
        "y": {"field": "flag", "type": "nominal", "sort": [f["name"] for f in c["flags"]], "title": None, "axis": {"labelLimit": 360}},
        "x": {
            "field": "share",
            "type": "quantitative",
            "axis": {"format": "~%", "title": {"expr": f"'share of ' + ({WEIGHT_TITLE['expr']})"}},
        },
        "color": {
            "field": "series",
            "type": "nominal",
            "sort": names,
            "legend": {"title": None, "orient": "bottom"} if len(names) > 1 else None,
        },
        "tooltip": [{"field": "flag"}, {"field": "series"}, {"field": "share", "format": ".2%"}],
    }
    if len(names) > 1:
        enc["yOffset"] = {"field": "series", "sort": names}
    spec = {**_base({"weighted": True}, rows, transform), "width": WIDTH, "height": {"step": 8 * max(2, len(names))}}
    return {**spec, "mark": {"type": "bar"}, "encoding": enc}


def family(c: dict[str, Any]) -> dict[str, Any]:
    """One attribute family (a tagger's fields): a small histogram per field, three to a row."""
    panels = []
    for p in c["panels"]:
        sub = histogram({**p, "weighted": c.get("weighted")}, panel=True)
        panels.append({k: v for k, v in sub.items() if k not in ("$schema", "params", "config")} | {"title": p["title"]})
    out: dict[str, Any] = {"$schema": SCHEMA, "columns": 3, "concat": panels, "resolve": {"scale": {"color": "shared"}}}
    if c.get("weighted"):
        out["params"] = [dict(WEIGHT_PARAM)]
    out["config"] = {"axis": {"labelFontSize": 10, "titleFontSize": 11}, "title": {"fontSize": 11, "limit": PANEL_WIDTH + 60}}
    return out


DRAW = {"bars": bars, "hist": histogram, "lines": lines, "flags": flags, "family": family}


def spec(c: dict[str, Any]) -> dict[str, Any] | None:
    """The Vega-Lite spec of a chart of :mod:`.sections`, or None for what is not a chart (tables,
    samples, clusters: the page writes those as HTML)."""
    draw = DRAW.get(c["type"])
    return draw(c) if draw else None
