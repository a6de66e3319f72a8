"""HTML into text: the extractors behind one interface (``linearizer``), under a time cap.

``resiliparse`` is Dolma's linearizer with Dolma's settings (main content, formatting kept, list
bullets, comments kept; no alt texts, links, form fields or noscript), so its text is Dolma's text
for the same HTML string.

The time cap is enforced in the process: an interval timer interrupts an extraction that runs past
``max_seconds`` where the interpreter can be interrupted (the worker's main thread, between
bytecodes), and an extraction that returns past the cap (a C call cannot be interrupted) is
dropped all the same. Either way the page is counted as ``too_slow``, never a dead task. A page
near the cap may land on either side on a loaded machine: keep the cap well above a page's usual
time (the default, 5 s, is ~1000 times resiliparse's median) so that reruns write the same pages.
"""

from __future__ import annotations

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

    @abstractmethod
    def extract(self, html: str) -> str:
        """The page's text ("" when it has none)."""


class Resiliparse(Extractor):
    """Dolma's ``resiliparse`` linearizer, its defaults unchanged."""

    name = "resiliparse"

    def extract(self, html: str) -> str:
        tree = HTMLTree.parse(html)
        return extract_plain_text(
            tree,
            preserve_formatting=True,
            main_content=True,
            list_bullets=True,
            alt_texts=False,
            links=False,
            form_fields=False,
            noscript=False,
            comments=True,
            skip_elements=None,
        )


EXTRACTORS: dict[str, type[Extractor]] = {"resiliparse": Resiliparse}


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


def extract_capped(extractor: Extractor, html: str, max_seconds: float) -> str:
    """``extractor``'s text for ``html``; :class:`TooSlow` past ``max_seconds``."""
    start = time.perf_counter()
    with _alarm(max_seconds):
        text = extractor.extract(html)
    if time.perf_counter() - start > max_seconds:
        raise TooSlow()
    return text
