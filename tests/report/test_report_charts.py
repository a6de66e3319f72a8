"""The report's charts as Vega draws them (vl-convert runs the same Vega-Lite the page inlines):
counts have integer ticks whatever the numbers, histograms are drawn on their bins' edges with
readable tick labels (never ``1.45e+03``), category names are neither turned nor cut, every
weighting gives a chart, and the library the page inlines is the one vl-convert ships."""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET

import pytest

from report import bundle, charts, sections
from report.bins import length_edges, length_key

vl_convert = pytest.importorskip("vl_convert")

SVG = "{http://www.w3.org/2000/svg}"
SI = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}


def axes(svg: str) -> list[tuple[str, list[str], list[str]]]:
    """(X or Y, its tick labels, their transforms) of every axis drawn."""
    out = []
    for g in ET.fromstring(svg).iter(f"{SVG}g"):
        label = g.get("aria-label") or ""
        if g.get("aria-roledescription") == "axis" and label[:1] in "XY":
            texts = [t for sub in g.iter(f"{SVG}g") if "role-axis-label" in (sub.get("class") or "") for t in sub.iter(f"{SVG}text")]
            out.append((label[0], [t.text or "" for t in texts], [t.get("transform") or "" for t in texts]))
    return out


def draw(chart: dict, weight: str | None = None) -> list[tuple[str, list[str], list[str]]]:
    spec = charts.spec(chart)
    assert spec is not None
    if weight:
        spec = copy.deepcopy(spec)
        spec["params"][0]["value"] = weight
    return axes(vl_convert.vegalite_to_svg(spec))


def si(label: str) -> float:
    m = re.fullmatch(r"(−?-?[0-9.]+)([kMG]?)", label)
    assert m, f"tick label {label!r} is not a number"
    return float(m.group(1).replace("−", "-")) * SI[m.group(2)]


def test_counts_have_integer_ticks_at_any_size():
    for top in (1, 2, 3, 7, 2278, 10**6 + 3):
        c = {"type": "bars", "categories": ["a", "b"], "series": [{"name": "s", "values": [top, max(0, top // 3)]}], "weighted": False}
        ((_, y, _),) = [a for a in draw(c) if a[0] == "Y"]
        assert y and all(si(v) == int(si(v)) for v in y), (top, y)


def _length_hist(per_length: dict[int, int]) -> dict:
    keys = sorted({length_key(int(2 * __import__("math").log2(n)) if n else -1): None for n in per_length})
    edges = [list(length_edges(k)) for k in keys]
    values = {"docs": [0] * len(keys), "chars": [0] * len(keys), "tokens": [0] * len(keys)}
    for n, docs in per_length.items():
        i = keys.index(length_key(int(2 * __import__("math").log2(n)) if n else -1))
        values["docs"][i] += docs
        values["chars"][i] += docs * n
        values["tokens"][i] += docs * n / 4.3
    return {"type": "hist", "edges": edges, "series": [{"name": "s", "values": values}], "weighted": True, "xlabel": "characters"}


def test_histograms_are_drawn_on_their_edges_with_readable_ticks():
    # Lengths over decades (and a length 0): a tick at 0 and every power of ten, in SI form.
    c = _length_hist({0: 1, 3: 2, 40: 1, 1500: 1, 1800: 1, 2047: 1, 250_000: 1})
    for weight in ("docs", "chars", "tokens"):
        got = draw(c, weight)
        (x,) = [labels for a, labels, _ in got if a == "X"]
        ((_, y, _),) = [a for a in got if a[0] == "Y"]
        assert x == ["0", "1", "10", "100", "1k", "10k", "100k"], x
        assert all(si(v) == int(si(v)) for v in y), (weight, y)
    # Scores in [0, 1]: a linear axis from 0 to 1.
    unit = {"type": "hist", "edges": [[0.05 * i, 0.05 * (i + 1)] for i in range(20)], "weighted": False}
    unit["series"] = [{"name": "s", "values": [1] * 20}]
    ((_, x, _),) = [a for a in draw(unit) if a[0] == "X"]
    assert x[0] == "0" and x[-1] == "1" and all(0 <= float(v) <= 1 for v in x)
    # The data keep a label per bin, as numbers read.
    assert sections._fmt(2 ** (42 / 4)) == "1.4k" and sections._fmt(2048) == "2k" and sections._fmt(0.25) == "0.25"


def test_category_names_are_neither_turned_nor_cut():
    long = ["include (none matched)", "exclude 0: gopher__keep == 0", "exclude 1: bff_duplicate_docs", "min_text_length"]
    c = {"type": "bars", "categories": long, "series": [{"name": "s", "values": {"docs": [3, 2, 1, 4], "chars": [9, 9, 9, 9]}}]}
    c["weighted"] = True
    got = draw(c)
    (names,) = [labels for a, labels, _ in got if a == "Y"]  # horizontal bars: the names along the Y axis
    assert names == long
    sizes = {"type": "bars", "categories": [str(n) for n in range(2, 40)], "weighted": False, "ordered": True}
    sizes["series"] = [{"name": "clusters", "values": list(range(38, 0, -1))}]
    (x,) = [(labels, where) for a, labels, where in draw(sizes) if a == "X"]
    assert "2" in x[0] and not any("rotate" in t for t in x[1])


def test_a_flag_chart_shows_each_flags_share():
    c = {
        "type": "flags",
        "flags": [
            {
                "name": "c4__has_curly_brace",
                "by_source": {"s": [{"docs": 1, "chars": 10, "tokens": 2}, {"docs": 4, "chars": 40, "tokens": 9}]},
            },
            {
                "name": "c4__has_javascript",
                "by_source": {"s": [{"docs": 3, "chars": 5, "tokens": 1}, {"docs": 4, "chars": 40, "tokens": 9}]},
            },
        ],
    }
    got = draw(c)
    (names,) = [labels for a, labels, _ in got if a == "Y"]
    (shares,) = [labels for a, labels, _ in got if a == "X"]
    assert names == ["c4__has_curly_brace", "c4__has_javascript"] and shares[-1].endswith("%")
    values = {r["flag"]: r for r in charts.spec(c)["data"]["values"]}  # type: ignore[index]
    assert values["c4__has_javascript"]["docs_on"] / values["c4__has_javascript"]["docs_all"] == 0.75


def test_the_page_inlines_vl_convert_s_library():
    js = bundle.javascript()
    assert js.rstrip().endswith(bundle.ENDS_WITH) and "vegaEmbed" in js
    assert charts.SCHEMA.endswith(f"v{vl_convert.get_vegalite_versions()[-1].split('.')[0].lstrip('v')}.json")
