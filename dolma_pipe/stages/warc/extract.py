"""HTML into text: the extractors behind one interface (``linearizer``), under a time cap.

``resiliparse`` is Dolma's linearizer with Dolma's settings (main content, formatting kept, list
bullets, comments kept; no alt texts, links, form fields or noscript), so its text is Dolma's text
for the same HTML string; ``trafilatura`` is Dolma's other linearizer, with its settings too.

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


class TooSlow(Exception):
    """An extraction ran past its time cap."""


class Extractor(ABC):
    name: str
    # Whether its time grows with the square of the markup's depth (then deep pages get `deep`).
    depth_quadratic: bool = False

    @abstractmethod
    def extract(self, html: str, deep: bool = False) -> str:
        """The page's text ("" when it has none); ``deep``: markup nested past the depth cap."""


class Resiliparse(Extractor):
    """Dolma's ``resiliparse`` linearizer, its defaults unchanged."""

    name = "resiliparse"
    depth_quadratic = True

    def extract(self, html: str, deep: bool = False) -> str:
        tree = HTMLTree.parse(html)
        return extract_plain_text(
            tree,
            preserve_formatting=True,
            main_content=not deep,
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

    def extract(self, html: str, deep: bool = False) -> str:
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


EXTRACTORS: dict[str, type[Extractor]] = {"resiliparse": Resiliparse, "trafilatura": Trafilatura}

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


def extract_capped(extractor: Extractor, html: str, max_seconds: float, deep: bool = False) -> str:
    """``extractor``'s text for ``html``; :class:`TooSlow` past ``max_seconds``."""
    start = time.perf_counter()
    with _alarm(max_seconds):
        text = extractor.extract(html, deep)
    if time.perf_counter() - start > max_seconds:
        raise TooSlow()
    return text
