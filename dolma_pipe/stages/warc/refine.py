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
main content's first and last lines, and some of these averaged over nearby lines.

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
import math
import os
import re
from collections import Counter
from typing import Any, NamedTuple

import numpy as np
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

from .extractor import Extractor, resiliparse_text

_HEADING = re.compile(r"<(?:h1|title)\b[^>]*>([^<]*)<", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
# Words of boilerplate lines (share buttons, cookie notes, footers, menus, comment threads), matched
# as whole lower-cased words of lines of up to 80 characters.
_BOILERPLATE_WORDS = frozenset(
    "share shares tweet facebook twitter linkedin pinterest whatsapp instagram youtube email e-mail print "
    "cookie cookies privacy terms copyright reserved sign login logout log register subscribe newsletter "
    "follow menu home search related recommended trending popular advertisement sponsored comment comments "
    "reply replies posted tag tags category categories previous next skip contact accept download click "
    "powered loading".split()
)
# A boilerplate word as a whole word of a lower-cased line: between whitespace or these punctuation
# marks (no hyphen: "e-mail" is one word), found by one scan of all short lines together.
_SEPARATORS = "\\s" + re.escape("!\"#$%&'()*+,./:;<=>?@[\\]^_`{|}~\u00a9\u00b7\u00bb\u2022\u2013\u2014\u2019\u201c\u201d")
_BOILERPLATE = re.compile(
    f"(?<![^{_SEPARATORS}])(?:{'|'.join(sorted(map(re.escape, _BOILERPLATE_WORDS), key=len, reverse=True))})(?![^{_SEPARATORS}])"
)
_TERMINAL = frozenset(".!?:;\"'\u201d\u2019)")

FEATURES = [
    "in_main",
    "log_words",
    "chars_per_word",
    "terminal_punct",
    "bullet",
    "indent",
    "title",
    "boilerplate",
    "repeated",
    "position",
    "before_main",
    "after_main",
    "main_near",
    "main_wide",
    "log_words_near",
    "punct_near",
    "bullet_near",
    "prev_in_main",
    "next_in_main",
    "blank_before",
    "page_main_share",
    "page_log_main_words",
    "page_log_lines",
    "outside_boilerplate",
    "outside_boilerplate_wide",
]

_COLUMN = {name: i for i, name in enumerate(FEATURES)}

# Features that are other features' means over the 2 (near) or 8 (wide) lines either side.
_NEAR = {"main_near": "in_main", "log_words_near": "log_words", "punct_near": "terminal_punct", "bullet_near": "bullet"}
_WIDE = {"main_wide": "in_main", "outside_boilerplate_wide": "outside_boilerplate"}
_NEAR_TO, _NEAR_FROM = [_COLUMN[k] for k in _NEAR], [_COLUMN[v] for v in _NEAR.values()]
_WIDE_TO, _WIDE_FROM = [_COLUMN[k] for k in _WIDE], [_COLUMN[v] for v in _WIDE.values()]

# extractor.resiliparse_text's settings (Dolma's) but main_content and skip_elements.
_SETTINGS: dict[str, Any] = dict(
    preserve_formatting=True, list_bullets=True, alt_texts=False, links=False, form_fields=False, noscript=False, comments=True
)

# Elements whose text is boilerplate more often than not: by tag, and by a class holding a word.
_BOILERPLATE_TAGS = ["nav", "header", "footer", "aside", "form", "button", "select"]
_BOILERPLATE_CLASSES = "comment share social related sidebar menu cookie breadcrumb".split()
_SKIP = _BOILERPLATE_TAGS + [f'[class*="{word}"]' for word in _BOILERPLATE_CLASSES]


def _norm(text: str) -> str:
    if "&" in text:
        text = htmllib.unescape(text)
    return _SPACE.sub(" ", text).strip()


def _window_mean(values: np.ndarray, radius: int) -> np.ndarray:
    """Mean of each column of ``values`` over each row's neighbours within ``radius`` (itself included)."""
    n = len(values)
    csum = np.concatenate((np.zeros((1, values.shape[1])), np.cumsum(values, axis=0)))
    idx = np.arange(n)
    lo, hi = np.maximum(idx - radius, 0), np.minimum(idx + radius + 1, n)
    return (csum[hi] - csum[lo]) / (hi - lo)[:, None]


class PageLines(NamedTuple):
    """A page's non-empty lines (resiliparse's text of the whole page) and their features."""

    lines: list[str]  # stripped
    raws: list[str]  # as resiliparse wrote them (list items indented), right-stripped
    blanks: list[bool]  # whether an empty line comes before (a new block)
    x: np.ndarray  # one row a line, in FEATURES' order
    main: str  # resiliparse's main content (the ``resiliparse`` linearizer's text)


def page_lines(html: str, tree: HTMLTree | None = None) -> PageLines:
    """The page's lines and their features (:class:`PageLines`)."""
    tree = tree if tree is not None else HTMLTree.parse(html)
    full = resiliparse_text(tree, main_content=False)
    main = resiliparse_text(tree, main_content=True)
    main_lines = {line.strip() for line in main.split("\n")}
    main_lines.discard("")
    outside = _line_set(extract_plain_text(tree, main_content=False, skip_elements=_SKIP, **_SETTINGS))
    titles = {_norm(m) for m in _HEADING.findall(html)}
    titles.discard("")
    rows = full.split("\n")
    stripped = [raw.strip() for raw in rows]
    nonempty = [i for i, line in enumerate(stripped) if line]
    lines = [stripped[i] for i in nonempty]
    raws = [rows[i].rstrip() for i in nonempty]
    blanks = [i == 0 or not stripped[i - 1] for i in nonempty]  # an empty line (or the start) before it
    n = len(lines)
    if not n:
        return PageLines(lines, raws, blanks, np.zeros((0, len(FEATURES))), main)
    bodies = [line[1:].lstrip() if line[0] == "\u2022" else line for line in lines]
    words = np.array([len(b.split()) for b in bodies], dtype=np.float64)
    w = np.maximum(words, 1.0)
    chars = np.fromiter(map(len, bodies), dtype=np.float64, count=n)
    seen = Counter(bodies)
    x = np.zeros((n, len(FEATURES)))
    col = _COLUMN

    def put(name: str, values: Any) -> None:
        x[:, col[name]] = values

    in_main = np.array([line in main_lines for line in lines], dtype=np.float64)
    put("in_main", in_main)
    put("log_words", np.log1p(words))
    put("chars_per_word", chars / w)
    put("terminal_punct", [b[-1:] in _TERMINAL for b in bodies])
    put("bullet", [line is not b for line, b in zip(lines, bodies)])
    indented = [i for i, raw in enumerate(raws) if raw[0] == " "]
    x[indented, col["indent"]] = [min(len(raws[i]) - len(raws[i].lstrip(" ")), 16) / 16 for i in indented]
    put("title", [b in titles for b in bodies])
    short = [i for i, b in enumerate(bodies) if len(b) <= 80]
    if short:
        folded = "\n".join([bodies[i] for i in short]).lower()  # no line holds "\n"
        found = [m.start() for m in _BOILERPLATE.finditer(folded)]
        if found:
            starts = np.cumsum([0] + [len(f) + 1 for f in folded.split("\n")])
            x[np.array(short)[np.searchsorted(starts, found, side="right") - 1], col["boilerplate"]] = 1.0
    put("repeated", [seen[b] > 1 for b in bodies])
    put("blank_before", blanks)
    put("outside_boilerplate", [line in outside for line in lines])
    put("position", np.arange(n) / n)
    hits = np.flatnonzero(in_main)
    first, last = (hits[0], hits[-1]) if len(hits) else (n, -1)
    put("before_main", np.arange(n) < first)
    put("after_main", np.arange(n) > last)
    x[1:, col["prev_in_main"]] = in_main[:-1]
    x[:-1, col["next_in_main"]] = in_main[1:]
    put("page_main_share", in_main.mean())
    put("page_log_main_words", math.log1p(len(main.split())))
    put("page_log_lines", math.log1p(n))
    x[:, _NEAR_TO] = _window_mean(x[:, _NEAR_FROM], 2)
    x[:, _WIDE_TO] = _window_mean(x[:, _WIDE_FROM], 8)
    return PageLines(lines, raws, blanks, x, main)


def _line_set(text: str) -> set[str]:
    lines = {line.strip() for line in text.split("\n")}
    lines.discard("")
    return lines


class LineModel:
    """Boosted trees over :data:`FEATURES` (``refine_model.json``, written by ``bench/warc_refine.py
    --fit``), each a complete tree of ``depth`` levels (a leaf above the last level is a split
    whose sides both hold its value; leaves hold their share of the log-odds, the learning rate
    applied), evaluated for every line and tree at once; a line goes left where its feature is at
    most the split's threshold. A line is kept when its log-odds reach ``threshold``; when the kept
    lines have fewer words than ``fallback_share`` of resiliparse's main content, the main content
    is the page's text instead."""

    PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "refine_model.json")
    _cached: LineModel | None = None

    def __init__(self, spec: dict[str, Any], source: str = "<spec>"):
        if spec.get("features") != FEATURES:
            raise ValueError(f"{source}: 'features' differ from refine.FEATURES (refit with bench/warc_refine.py --fit)")
        self.depth: int = spec["depth"]
        self.base: float = spec["base"]
        self.threshold: float = spec["threshold"]
        self.fallback_share: float = spec["fallback_share"]
        self.split_feature = np.array(spec["split_feature"], dtype=np.intp)
        self.split_threshold = np.array(spec["split_threshold"], dtype=np.float64)
        self.leaf = np.array(spec["leaf"], dtype=np.float64)
        n = len(self.split_feature)
        if self.split_feature.shape != (n, 2**self.depth - 1) or self.leaf.shape != (n, 2**self.depth):
            raise ValueError(f"{source}: 'split_feature'/'leaf' are not complete trees of depth {self.depth}")

    @classmethod
    def load(cls) -> LineModel:
        if cls._cached is None:
            with open(cls.PATH, encoding="utf-8") as f:
                cls._cached = cls(json.load(f), cls.PATH)
        return cls._cached

    def log_odds(self, x: np.ndarray) -> np.ndarray:
        """Each row's log-odds of being content."""
        trees, splits = self.split_feature.shape
        # every split of every tree compared at once (rows x trees x splits), then each row's leaf
        right = x[:, self.split_feature] > self.split_threshold
        leaf = self._leaf_depth3(right) if self.depth == 3 else self._leaf_walk(right)
        leaves = self.leaf.ravel()[(np.arange(trees) * (splits + 1))[None, :] + leaf]
        return self.base + leaves.sum(axis=1)

    @staticmethod
    def _leaf_depth3(right: np.ndarray) -> np.ndarray:
        """Each row's leaf in each tree of depth 3 (the shipped model's), by selection."""
        r0 = right[:, :, 0]
        r1 = np.where(r0, right[:, :, 2], right[:, :, 1])
        r2 = np.where(r0, np.where(r1, right[:, :, 6], right[:, :, 5]), np.where(r1, right[:, :, 4], right[:, :, 3]))
        return 4 * r0.astype(np.intp) + 2 * r1 + r2

    def _leaf_walk(self, right: np.ndarray) -> np.ndarray:
        """Each row's leaf in each tree, any depth: the row walks down through its comparisons."""
        n, trees, splits = right.shape
        flat = right.reshape(n, trees * splits)
        rows, first = np.arange(n)[:, None], (np.arange(trees) * splits)[None, :]
        node = np.zeros((n, trees), dtype=np.intp)
        for _ in range(self.depth):
            node = 2 * node + 1 + flat[rows, first + node]
        return node - splits


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
        page = page_lines(html, tree)
        if not page.lines:
            return ""
        keep = self.model.log_odds(page.x) >= self.model.threshold
        out: list[str] = []
        for raw, blank, k in zip(page.raws, page.blanks, keep):
            if k:
                out.append(("\n\n" if blank else "\n") + raw if out else raw)
        text = "".join(out)
        if len(text.split()) < self.model.fallback_share * len(page.main.split()):
            return page.main  # the model dropped most of what resiliparse calls main content
        return text
