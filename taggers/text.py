"""Text helpers shared by taggers: paragraph and line spans with character offsets."""

from __future__ import annotations

import re
from collections.abc import Iterator

NON_EMPTY_LINE = re.compile(r"[^\n]*\S[^\n]*")
# A block runs from non-space text up to a blank line (a newline followed by spaces then another newline).
_BLOCK = re.compile(r"\S(?:[^\n]|\n(?![^\S\n]*(?:\n|$)))*")


def line_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every line holding non-space text, newline excluded.

    Dolma's taggers call these paragraphs (``text.split("\\n")``), so paragraph-level
    attributes computed over them line up with Dolma's.
    """
    for m in NON_EMPTY_LINE.finditer(text):
        yield m.start(), m.end()


def block_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of blank-line-separated blocks, trimmed of surrounding space."""
    for m in _BLOCK.finditer(text):
        start, end = m.start(), m.end()
        while end > start and text[end - 1].isspace():
            end -= 1
        yield start, end
