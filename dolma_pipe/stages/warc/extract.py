"""HTML into text: the extractors behind one interface (``linearizer``), under a time cap.

``resiliparse`` is Dolma's linearizer with Dolma's settings (main content, formatting kept, list
bullets, comments kept; no alt texts, links, form fields or noscript), so its text is Dolma's text
for the same HTML string; ``trafilatura`` is Dolma's other linearizer, with its settings too.
``rs_trafilatura`` is trafilatura ported to Rust with a page-type classifier (the crate
rs-trafilatura in our Rust core, its defaults, given the page's URL); ``combined`` runs
resiliparse on every page and sends the pages that cheap signals call hard to rs-trafilatura
(:class:`Combined`); ``resiliparse_refined`` keeps or drops each line of resiliparse's text of
the whole page by a small model (:mod:`.refine`).

Deep markup: resiliparse's main-content rules take time quadratic in the nesting depth (measured:
5,000 nested elements 1.5 s, 10,000 7.5 s, 100,000 never ends), in C where no timer can stop
them. So a page nested deeper than ``max_depth`` (its tags counted on its UTF-8 bytes in one pass
in the Rust core, ``dolma_pipe._rust.html_nested_deeper``, only for pages with more ``<`` than
that; elements HTML closes by itself and void elements, ``HTML_FLAT_ELEMENTS``, left out) is
extracted without the main-content rules, which are linear: its text is kept, and the stage
counts it as ``deep_markup``.

With ``isolate`` (the default) extraction runs in a child process and the time cap is the
sandbox's (:mod:`.sandbox`: the child is killed). Without it, the cap is enforced in the process: an interval timer interrupts an extraction that runs past
``max_seconds`` where the interpreter can be interrupted (the worker's main thread, between
bytecodes), and an extraction that returns past the cap (a C call cannot be interrupted) is
dropped all the same. Either way the page is counted as ``too_slow``, never a dead task. A page
near the cap may land on either side on a loaded machine: keep the cap well above a page's usual
time (the default, 5 s, is ~1000 times resiliparse's median) so that reruns write the same pages.
"""

from __future__ import annotations

import json
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from resiliparse.parse.html import HTMLTree

from dolma_pipe._rust import html_tag_counts, rs_trafilatura_extract

from .extractor import Extractor, resiliparse_text


class TooSlow(Exception):
    """An extraction ran past its time cap."""


class Resiliparse(Extractor):
    """Dolma's ``resiliparse`` linearizer, its defaults unchanged."""

    name = "resiliparse"
    depth_quadratic = True

    def extract(self, html: str, deep: bool = False, url: str | None = None) -> str:
        return resiliparse_text(HTMLTree.parse(html), main_content=not deep)


class Trafilatura(Extractor):
    """Dolma's ``trafilatura`` linearizer, its defaults unchanged (plain text; no comments, links,
    tables or formatting; the fallback extractors on). Slower than resiliparse (10-20x), better
    on articles; trafilatura's caches are reset every 10,000 pages, as Dolma does, so memory stays
    flat. Deep markup changes nothing here (lxml's parser has no quadratic rule)."""

    name = "trafilatura"
    FLUSH_AFTER = 10_000

    def __init__(self) -> None:
        import logging

        logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
        self.pages = 0

    def extract(self, html: str, deep: bool = False, url: str | None = None) -> str:
        import trafilatura
        import trafilatura.meta

        text = trafilatura.extract(
            html,
            output_format="txt",
            include_comments=False,
            include_links=False,
            include_tables=False,
            no_fallback=False,
            favor_precision=False,
            favor_recall=False,
            include_formatting=False,
        )
        self.pages += 1
        if self.pages >= self.FLUSH_AFTER:
            trafilatura.meta.reset_caches()
            self.pages = 0
        return text or ""


class RsTrafilatura(Extractor):
    """rs-trafilatura (crates.io, in our Rust core: ``dolma_pipe._rust.rs_trafilatura_extract``)
    with its defaults: trafilatura's rules ported to Rust plus a page-type classifier (article,
    forum, product, ...) choosing per-type rules; tables kept, comments, images and links left out.
    The GIL is released while it runs. A page it fails on raises ``ValueError``, a panic inside it
    (caught in Rust) ``RuntimeError``: the stage quarantines the page as ``extractor_error``.

    Its time grows faster than the square of the markup's nesting depth (measured: 1,000 nested
    elements 0.4 s, 10,000 27 s), so a page nested past ``max_depth`` gets resiliparse's text
    without the main-content rules (linear), as the ``resiliparse`` linearizer does.
    """

    name = "rs_trafilatura"
    depth_quadratic = True

    def extract(self, html: str, deep: bool = False, url: str | None = None) -> str:
        if deep:
            return resiliparse_text(HTMLTree.parse(html), main_content=False)
        return rs_trafilatura_extract(html, url)[0]


class Combined(Extractor):
    """resiliparse on every page; rs-trafilatura on the pages where it is likely to do much better
    for its cost.

    The page is parsed and linearized by resiliparse (the ``resiliparse`` linearizer's text).
    :meth:`signals` reads cheap facts of that text, the HTML and the URL (word and line counts,
    short and bulleted lines, the text's length against the HTML's, ``<article>``/``<main>``
    elements, a JSON-LD ``articleBody``, links, paragraphs, cells and list items per kB of HTML,
    the URL path's depth); a small boosted-tree model (:class:`Router`, ``combined_router.json``)
    turns them into the word F1 rs-trafilatura is expected to add, and :meth:`score` divides that
    by rs-trafilatura's expected time on the page (from its count of tags). At or above the
    model's threshold the page goes to rs-trafilatura, whose text is kept unless it is under
    ``keep_shorter`` of resiliparse's length (then resiliparse's is: rs-trafilatura dropped the
    content). Model, time fit and threshold come from WCXB's dev split alone
    (``bench/warc_quality.py --fit-combined``): the threshold is the one with the best dev F1
    whose routed pages cost at most rs-trafilatura's time on all pages over ``speedup``, less
    resiliparse's; nothing was tuned on WCXB's test split or ScrapingHub (``bench/warc.py``
    reports both).

    A page rs-trafilatura fails on keeps resiliparse's text; deep markup gets resiliparse's text
    without the main-content rules, as in the ``resiliparse`` linearizer. :meth:`extract_by` names
    whose text was kept: ``combined:resiliparse`` or ``combined:rs_trafilatura``.
    """

    name = "combined"
    depth_quadratic = True

    def __init__(self) -> None:
        self.fast = Resiliparse()
        self.slow = RsTrafilatura()
        self.router = Router.load()
        self.routed = 0  # pages sent to rs-trafilatura (a diagnostic for benchmarks)

    @staticmethod
    def signals(html: str, main: str, url: str | None) -> dict[str, float]:
        """The router's inputs: resiliparse's main-content text ``main``, the HTML (its tags
        counted in one pass in Rust, ``html_tag_counts``) and the URL."""
        tags, links, paragraphs, cells, list_items, article, main_element, article_body = html_tag_counts(html)
        words = len(main.split())
        lines = [line for line in main.split("\n") if line.strip()]
        n_lines = max(len(lines), 1)
        kb = max(len(html), 1) / 1000
        return {
            "log_main_words": math.log1p(words),
            "main_chars_per_html_char": len(main) / max(len(html), 1),
            "has_article": float(article),
            "bullets_per_main_line": main.count("\u2022") / (main.count("\n") + 1),
            "short_lines": sum(1 for line in lines if len(line.split()) < 5) / n_lines,
            "log_words_per_line": math.log1p(words / n_lines),
            "has_main": float(main_element),
            "article_body": float(article_body),
            "log_html_chars": math.log1p(len(html)),
            "path_depth": min(urlsplit(url or "").path.count("/"), 8) / 8,
            "few_main_words": float(words < 20),
            "links_per_kb": links / kb,
            "paragraphs_per_kb": paragraphs / kb,
            "cells_per_kb": cells / kb,
            "list_items_per_kb": list_items / kb,
            "log_tags": math.log1p(tags),
        }

    def score(self, html: str, main: str, url: str | None = None) -> float:
        """rs-trafilatura's expected gain in word F1 over ``main`` per expected second of its time."""
        signals = self.signals(html, main, url)
        return self.router.gain(signals) / self.router.seconds(signals["log_tags"])

    def extract(self, html: str, deep: bool = False, url: str | None = None) -> str:
        return self.extract_by(html, deep, url)[0]

    def extract_by(self, html: str, deep: bool = False, url: str | None = None) -> tuple[str, str]:
        fast, slow = f"{self.name}:{self.fast.name}", f"{self.name}:{self.slow.name}"
        main = resiliparse_text(HTMLTree.parse(html), main_content=not deep)
        if deep or self.score(html, main, url) < self.router.threshold:
            return main, fast
        self.routed += 1
        try:
            text = rs_trafilatura_extract(html, url)[0]
        except (ValueError, RuntimeError):
            return main, fast
        return (text, slow) if len(text) >= self.router.keep_shorter * len(main) else (main, fast)


class Router:
    """The combined linearizer's model (``combined_router.json``, written by
    ``bench/warc_quality.py --fit-combined``): gradient-boosted regression trees, each stored as a
    complete tree of ``depth`` levels (a leaf above the last level is a split both of whose sides
    hold its value), evaluated for all trees at once; a page goes left where its signal, as a
    float32 (as the fitting library compares), is at most the split's threshold."""

    PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "combined_router.json")
    _cached: Router | None = None

    def __init__(self, spec: dict[str, Any]):
        import numpy as np  # here, not at the module's import: the other linearizers' processes start without it

        self.np = np
        self.features: list[str] = spec["features"]
        self.depth: int = spec["depth"]
        self.base: float = spec["base"]
        self.rate: float = spec["learning_rate"]
        self.split_feature = np.array(spec["split_feature"], dtype=np.intp)  # trees x (2^depth - 1)
        self.split_threshold = np.array(spec["split_threshold"], dtype=np.float64)
        self.leaf = np.array(spec["leaf"], dtype=np.float64)  # trees x 2^depth
        self.time_intercept: float = spec["time_intercept"]  # log seconds = a + b log(1 + tags)
        self.time_slope: float = spec["time_slope"]
        self.threshold: float = spec["threshold"]
        self.keep_shorter: float = spec["keep_shorter"]
        n = len(self.split_feature)
        if self.split_feature.shape != (n, 2**self.depth - 1) or self.leaf.shape != (n, 2**self.depth):
            raise ValueError(f"{self.PATH}: trees are not complete trees of depth {self.depth}")
        self._trees = np.arange(n)

    @classmethod
    def load(cls) -> Router:
        if cls._cached is None:
            with open(cls.PATH, encoding="utf-8") as f:
                cls._cached = cls(json.load(f))
        return cls._cached

    def gain(self, signals: dict[str, float]) -> float:
        np = self.np
        x = np.array([signals[k] for k in self.features], dtype=np.float32).astype(np.float64)
        node = np.zeros(len(self._trees), dtype=np.intp)
        for _ in range(self.depth):
            right = x[self.split_feature[self._trees, node]] > self.split_threshold[self._trees, node]
            node = 2 * node + 1 + right
        leaves = self.leaf[self._trees, node - (2**self.depth - 1)]
        return float(self.base + self.rate * leaves.sum())

    def seconds(self, log_tags: float) -> float:
        """rs-trafilatura's expected CPU seconds on a page with ``exp(log_tags) - 1`` tags."""
        return math.exp(self.time_intercept + self.time_slope * log_tags)


def _resiliparse_refined() -> Extractor:
    # Imported when chosen: its module subclasses Extractor (so it imports this one) and loads
    # numpy and its model, which the other linearizers' processes start without.
    from .refine import ResiliparseRefined

    return ResiliparseRefined()


# The linearizers by name: each entry makes one (a class, or a function that imports its module).
EXTRACTORS: dict[str, Callable[[], Extractor]] = {
    "resiliparse": Resiliparse,
    "trafilatura": Trafilatura,
    "rs_trafilatura": RsTrafilatura,
    "combined": Combined,
    "resiliparse_refined": _resiliparse_refined,
}


def _raise_too_slow(signum: int, frame: FrameType | None) -> None:
    raise TooSlow()


@contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """SIGALRM after ``seconds`` where signals can be used (the main thread); else nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, _raise_too_slow)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def extract_capped(extractor: Extractor, html: str, max_seconds: float, deep: bool = False, url: str | None = None) -> tuple[str, str]:
    """``extractor``'s text for ``html`` and what made it (:meth:`Extractor.extract_by`);
    :class:`TooSlow` past ``max_seconds``."""
    start = time.perf_counter()
    with _alarm(max_seconds):
        result = extractor.extract_by(html, deep, url)
    if time.perf_counter() - start > max_seconds:
        raise TooSlow()
    return result
