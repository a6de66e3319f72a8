"""resiliparse, refined: its text of the whole page, each line kept or dropped by a small model.

resiliparse's main-content rules (Dolma's ``resiliparse`` linearizer) keep navigation, share
buttons, cookie notes and comment threads on some pages and drop real paragraphs on others. This
extractor (``resiliparse_refined``) parses the page once and linearizes it three times with
Dolma's settings: the whole page, its main content, and the whole page less the elements that
hold boilerplate more often than not (``nav``, ``header``, ``footer``, ``aside``, forms, and
elements whose class names comments, sharing, related items, sidebars, menus, cookies or
breadcrumbs). Each line of the whole page's text is kept when a boosted-tree model calls it
content. The model reads cheap facts of the line and its neighbours: whether the main content and
the boilerplate-less text have the same line, its words, word length, final punctuation, list
bullet and indentation, whether it is the page's title (``<h1>``/``<title>``), boilerplate words
(share, cookies, copyright, sign in, related, ...), repeats in the page, its place against the
main content's first and last lines, and some of these averaged over nearby lines. The features,
the trees and the kept text are computed in the Rust core (``dolma_pipe._rust.line_features``,
``LineFilter``; ``rust_bloom/src/line_filter/``): resiliparse's parse and its three
linearizations are most of the time left.

The model (``refine_model.json``) is fitted on WCXB's dev split alone (``bench/warc_refine.py
--fit``: a line is content when most of its word trigrams are in the page's ground truth; each
line weighs its share of the page's words, so that every page weighs the same, as in the metric).
Two numbers are chosen on dev pages held out of the fit (5 folds by page): the log-odds threshold,
and the share of resiliparse's main-content words under which a page gets that main content
instead of the kept lines (the model dropped most of it; 0.5). WCXB's test split and ScrapingHub
are held out (``bench/warc_refine.py --measure``).

Deep markup (``deep``): the main-content rules are quadratic in the nesting depth, so such a page
gets the whole page's text, unfiltered, as the ``resiliparse`` linearizer gives it.
"""

from __future__ import annotations

import html as htmllib
import json
import os
import re
from typing import TYPE_CHECKING, Any, NamedTuple

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

from dolma_pipe._rust import LINE_FEATURES, LineFilter, line_features

from .extractor import Extractor, resiliparse_text

if TYPE_CHECKING:
    # numpy only for fitting and probing (page_lines, log_odds): the extractor's process, which
    # only calls LineFilter.extract, starts without it (about 0.1 CPU-s a WARC file).
    import numpy as np

_HEADING = re.compile(r"<(?:h1|title)\b[^>]*>([^<]*)<", re.IGNORECASE)
_SPACE = re.compile(r"\s+")

# The model's columns, in order (the Rust core's, which computes them).
FEATURES: list[str] = list(LINE_FEATURES)

# extractor.resiliparse_text's settings (Dolma's) but main_content and skip_elements.
_SETTINGS: dict[str, Any] = dict(
    preserve_formatting=True, list_bullets=True, alt_texts=False, links=False, form_fields=False, noscript=False, comments=True
)

# Elements whose text is boilerplate more often than not: by tag, and by a class holding a word.
_BOILERPLATE_TAGS = ["nav", "header", "footer", "aside", "form", "button", "select"]
_BOILERPLATE_CLASSES = "comment share social related sidebar menu cookie breadcrumb".split()
# One selector list, not one selector each: resiliparse then matches each element once, the same
# elements (the same text on every benchmark page) in 5-10% less of the extractor's time.
_SKIP = [", ".join(_BOILERPLATE_TAGS + [f'[class*="{word}"]' for word in _BOILERPLATE_CLASSES])]


def _norm(text: str) -> str:
    if "&" in text:
        text = htmllib.unescape(text)
    return _SPACE.sub(" ", text).strip()


class _Texts(NamedTuple):
    """What the line filter reads of a page (the arguments of ``line_features`` and ``LineFilter.extract``)."""

    full: str  # resiliparse's text of the whole page
    full_lower: str  # its str.lower()
    main: str  # resiliparse's main content (the ``resiliparse`` linearizer's text)
    outside: str  # the whole page's text less the boilerplate elements (_SKIP)
    titles: list[str]  # the page's <h1> and <title> texts, entities decoded and spaces collapsed


def _texts(html: str, tree: HTMLTree) -> _Texts:
    full = resiliparse_text(tree, main_content=False)
    main = resiliparse_text(tree, main_content=True)
    outside = extract_plain_text(tree, main_content=False, skip_elements=_SKIP, **_SETTINGS)
    titles = {_norm(m) for m in _HEADING.findall(html)}
    titles.discard("")
    return _Texts(full, full.lower(), main, outside, sorted(titles))


class PageLines(NamedTuple):
    """A page's non-empty lines (resiliparse's text of the whole page) and their features."""

    lines: list[str]  # stripped
    raws: list[str]  # as resiliparse wrote them (list items indented), right-stripped
    blanks: list[bool]  # whether an empty line comes before (a new block)
    x: np.ndarray  # one row a line, in FEATURES' order (read-only)
    main: str  # resiliparse's main content (the ``resiliparse`` linearizer's text)


def page_lines(html: str, tree: HTMLTree | None = None) -> PageLines:
    """The page's lines and their features (:class:`PageLines`), for fitting and probing the model."""
    import numpy as np

    texts = _texts(html, tree if tree is not None else HTMLTree.parse(html))
    lines, raws, blanks, x = line_features(*texts)
    return PageLines(lines, raws, blanks, np.frombuffer(x).reshape(len(lines), len(FEATURES)), texts.main)


class LineModel:
    """Boosted trees over :data:`FEATURES` (``refine_model.json``, written by ``bench/warc_refine.py
    --fit``), each a complete tree of ``depth`` levels (a leaf above the last level is a split
    whose sides both hold its value; leaves hold their share of the log-odds, the learning rate
    applied), evaluated in the Rust core (:attr:`filter`); a line goes left where its feature is at
    most the split's threshold. A line is kept when its log-odds reach ``threshold``; when the kept
    lines have fewer words than ``fallback_share`` of resiliparse's main content, the main content
    is the page's text instead."""

    PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "refine_model.json")
    _cached: LineModel | None = None

    def __init__(self, spec: dict[str, Any], source: str = "<spec>"):
        if spec.get("features") != FEATURES:
            raise ValueError(f"{source}: 'features' differ from refine.FEATURES (refit with bench/warc_refine.py --fit)")
        self.threshold: float = spec["threshold"]
        self.fallback_share: float = spec["fallback_share"]
        try:
            self.filter = LineFilter(
                spec["depth"],
                spec["base"],
                spec["split_feature"],
                spec["split_threshold"],
                spec["leaf"],
                self.threshold,
                self.fallback_share,
            )
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from None

    @classmethod
    def load(cls) -> LineModel:
        if cls._cached is None:
            with open(cls.PATH, encoding="utf-8") as f:
                cls._cached = cls(json.load(f), cls.PATH)
        return cls._cached

    def log_odds(self, x: np.ndarray) -> np.ndarray:
        """Each row's log-odds of being content."""
        import numpy as np

        rows = np.ascontiguousarray(x, dtype=np.float64)
        return np.frombuffer(self.filter.log_odds(rows.tobytes()))


class ResiliparseRefined(Extractor):
    """resiliparse's text of the whole page, filtered line by line (:func:`page_lines`,
    :class:`LineModel`); Dolma's resiliparse settings otherwise."""

    name = "resiliparse_refined"
    depth_quadratic = True

    def __init__(self) -> None:
        self.model = LineModel.load()

    def extract(self, html: str, deep: bool = False, url: str | None = None) -> str:
        tree = HTMLTree.parse(html)
        if deep:
            return resiliparse_text(tree, main_content=False)
        return self.model.filter.extract(*_texts(html, tree))
