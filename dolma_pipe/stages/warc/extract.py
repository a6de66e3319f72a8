"""HTML into text: the extractors behind one interface (``linearizer``), under a time cap.

``resiliparse`` is Dolma's linearizer with Dolma's settings (main content, formatting kept, list
bullets, comments kept; no alt texts, links, form fields or noscript), so its text is Dolma's text
for the same HTML string; ``trafilatura`` is Dolma's other linearizer, with its settings too.
``rs_trafilatura`` is trafilatura ported to Rust with a page-type classifier (the crate
rs-trafilatura in our Rust core, its defaults); ``combined`` runs resiliparse on every page and
sends the pages that cheap signals call hard to rs-trafilatura (:class:`Combined`).

Deep markup: resiliparse's main-content rules take time quadratic in the nesting depth (measured:
5,000 nested elements 1.5 s, 10,000 7.5 s, 100,000 never ends), in C where no timer can stop
them. So a page nested deeper than ``max_depth`` (counted on the HTML with a regular expression,
only for pages with more tags than that; elements HTML closes by itself and void elements left
out) is extracted without the main-content rules, which are linear: its text is kept, and the
stage counts it as ``deep_markup``.

With ``isolate`` (the default) extraction runs in a child process and the time cap is the
sandbox's (:mod:`.sandbox`: the child is killed). Without it, the cap is enforced in the process: an interval timer interrupts an extraction that runs past
``max_seconds`` where the interpreter can be interrupted (the worker's main thread, between
bytecodes), and an extraction that returns past the cap (a C call cannot be interrupted) is
dropped all the same. Either way the page is counted as ``too_slow``, never a dead task. A page
near the cap may land on either side on a loaded machine: keep the cap well above a page's usual
time (the default, 5 s, is ~1000 times resiliparse's median) so that reruns write the same pages.
"""

from __future__ import annotations

import math
import re
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

from dolma_pipe._rust import rs_trafilatura_extract


class TooSlow(Exception):
    """An extraction ran past its time cap."""


class Extractor(ABC):
    name: str
    # Whether its time grows with the square of the markup's depth (then deep pages get `deep`).
    depth_quadratic: bool = False

    @abstractmethod
    def extract(self, html: str, deep: bool = False, url: str | None = None) -> str:
        """The page's text ("" when it has none); ``deep``: markup nested past the depth cap;
        ``url``: the page's address (the record's target URI), for extractors that look at it."""

    def extract_by(self, html: str, deep: bool = False, url: str | None = None) -> tuple[str, str]:
        """The page's text and what made it (the documents' ``extractor``): the linearizer's
        name, or for :class:`Combined` the extractor whose text was kept."""
        return self.extract(html, deep, url), self.name


class Resiliparse(Extractor):
    """Dolma's ``resiliparse`` linearizer, its defaults unchanged."""

    name = "resiliparse"
    depth_quadratic = True

    def extract(self, html: str, deep: bool = False, url: str | None = None) -> str:
        return _linearize(HTMLTree.parse(html), main_content=not deep)


def _linearize(tree: HTMLTree, main_content: bool) -> str:
    """resiliparse's text of a parsed page with Dolma's settings."""
    return extract_plain_text(
        tree,
        preserve_formatting=True,
        main_content=main_content,
        list_bullets=True,
        alt_texts=False,
        links=False,
        form_fields=False,
        noscript=False,
        comments=True,
        skip_elements=None,
    )


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
            return _linearize(HTMLTree.parse(html), main_content=False)
        return rs_trafilatura_extract(html, url)[0]


class Combined(Extractor):
    """resiliparse on every page; rs-trafilatura on the pages where it is likely to do much better.

    The page is parsed once and linearized twice by resiliparse: its main content (the
    ``resiliparse`` linearizer's text) and all of its text. A linear score of seven cheap signals
    estimates how much rs-trafilatura's word F1 would beat resiliparse's (:meth:`score`: the two
    texts' word counts in logs, their lengths against the HTML's, whether the page has an
    ``<article>``, the share of bulleted lines and of links per word); at or above
    :data:`THRESHOLD` the page goes to rs-trafilatura, whose text is kept unless it is under a
    fifth of resiliparse's (then resiliparse's is: rs-trafilatura dropped the content). The
    weights are a least-squares fit of that F1 difference on WCXB's dev split (1,497 pages) and
    the threshold its 75th percentile there, so about a quarter of the pages take the slow path;
    nothing was tuned on WCXB's test split or ScrapingHub (``bench/warc.py`` reports both).

    A page rs-trafilatura fails on keeps resiliparse's text; deep markup gets resiliparse's text
    without the main-content rules, as in the ``resiliparse`` linearizer.
    """

    name = "combined"
    depth_quadratic = True
    # (signal, weight) of score(); fitted on WCXB dev (bench/warc_quality.py's pages).
    WEIGHTS = (
        ("log_main_words", -0.09638),
        ("log_all_words", 0.12142),
        ("all_chars_per_html_char", 0.3837),
        ("main_chars_per_html_char", -0.38854),
        ("has_article", 0.03398),
        ("bullets_per_main_line", -0.02814),
        ("links_per_word", 0.02309),
    )
    INTERCEPT = -0.23452
    THRESHOLD = 0.069
    KEEP_SHORTER = 0.2  # rs-trafilatura's text under this share of resiliparse's length: resiliparse's kept

    def __init__(self) -> None:
        self.fast = Resiliparse()
        self.slow = RsTrafilatura()
        self.routed = 0  # pages sent to rs-trafilatura (a diagnostic for benchmarks)

    @classmethod
    def signals(cls, html: str, main: str, everything: str) -> dict[str, float]:
        main_words, all_words = len(main.split()), len(everything.split())
        return {
            "log_main_words": math.log1p(main_words),
            "log_all_words": math.log1p(all_words),
            "all_chars_per_html_char": len(everything) / max(len(html), 1),
            "main_chars_per_html_char": len(main) / max(len(html), 1),
            "has_article": float("<article" in html),
            "bullets_per_main_line": main.count("\u2022") / (main.count("\n") + 1),
            "links_per_word": html.count("<a ") / max(all_words, 1),
        }

    @classmethod
    def score(cls, html: str, main: str, everything: str) -> float:
        """The estimated gain in word F1 from rs-trafilatura over resiliparse's ``main`` text."""
        signals = cls.signals(html, main, everything)
        return cls.INTERCEPT + sum(weight * signals[key] for key, weight in cls.WEIGHTS)

    def extract(self, html: str, deep: bool = False, url: str | None = None) -> str:
        return self.extract_by(html, deep, url)[0]

    def extract_by(self, html: str, deep: bool = False, url: str | None = None) -> tuple[str, str]:
        fast, slow = f"{self.name}:{self.fast.name}", f"{self.name}:{self.slow.name}"
        tree = HTMLTree.parse(html)
        main = _linearize(tree, main_content=not deep)
        if deep or self.score(html, main, _linearize(tree, main_content=False)) < self.THRESHOLD:
            return main, fast
        self.routed += 1
        try:
            text = rs_trafilatura_extract(html, url)[0]
        except (ValueError, RuntimeError):
            return main, fast
        return (text, slow) if len(text) >= self.KEEP_SHORTER * len(main) else (main, fast)


EXTRACTORS: dict[str, type[Extractor]] = {
    "resiliparse": Resiliparse,
    "trafilatura": Trafilatura,
    "rs_trafilatura": RsTrafilatura,
    "combined": Combined,
}

_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)[^>]*>")
# Elements that never nest (void) or that HTML closes by itself when a sibling starts.
_FLAT = frozenset(
    "area base br col embed hr img input link meta param source track wbr p li td tr th dt dd option optgroup tbody thead tfoot colgroup rb rt rp".split()
)


def nested_deeper(html: str, limit: int) -> bool:
    """Whether ``html`` nests elements deeper than ``limit`` (no scan when it has fewer tags)."""
    if html.count("<") <= limit:
        return False
    depth = 0
    for match in _TAG.finditer(html):
        if match.group(2).lower() in _FLAT:
            continue
        if match.group(1):
            depth = max(depth - 1, 0)
        else:
            depth += 1
            if depth > limit:
                return True
    return False


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
