"""What every linearizer is: the :class:`Extractor` interface, and resiliparse's text of a parsed
page with Dolma's settings (:func:`resiliparse_text`), which the ``resiliparse``, ``combined`` and
``resiliparse_refined`` linearizers share. The linearizers live in :mod:`.extract` and
:mod:`.refine`; this module imports neither, so that both can import it."""

from __future__ import annotations

from abc import ABC, abstractmethod

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree


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
        name, or for ``combined`` the extractor whose text was kept."""
        return self.extract(html, deep, url), self.name


def resiliparse_text(tree: HTMLTree, main_content: bool) -> str:
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
