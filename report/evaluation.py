"""Beside each sampled contaminated paragraph, the evaluation document it shares words with: the
decontamination's evaluation files (as each dedup run's config names them) read on the driver, and
the first word n-gram a paragraph shares with one of them."""

from __future__ import annotations

import re
from typing import Any

from dolma_pipe import storage
from dolma_pipe.documents import read_documents
from dolma_pipe.quarantine import Quarantine
from report.discover import RunSet

_WORD = re.compile(r"\w+")


def match_evaluation(found: RunSet, contaminated: dict[str, list[Any]]) -> None:
    """Adds ``match`` (the evaluation document's id, file, text around the span, and the span) to
    each sampled record of ``contaminated`` that shares an n-gram with an evaluation document."""
    if not contaminated:
        return
    evaluation = []
    for run in found.of("dedup"):
        section = run.manifest.config.get("decontamination")
        if not section:
            continue
        n = int(section.get("ngram_length") or 13)
        for pattern in section.get("evaluation") or []:
            for path in storage.glob(pattern):
                for _, doc in read_documents(path, Quarantine()):
                    evaluation.append((path, str(doc.get("id")), doc["text"], n))
    for rows in contaminated.values():
        for _, record in rows:
            words = [w.lower() for w in _WORD.findall(record["paragraph"])]
            for path, doc_id, text, n in evaluation:
                hit = shared_ngram(words, text, n)
                if hit is not None:
                    start, end = hit
                    lo = max(0, start - 200)
                    record["match"] = {"id": doc_id, "file": path, "text": text[lo : end + 200], "spans": [[start - lo, end - lo]]}
                    break


def shared_ngram(words: list[str], text: str, n: int) -> tuple[int, int] | None:
    """Character span in ``text`` of the first word n-gram it shares with ``words`` (lowercase words)."""
    matches = list(_WORD.finditer(text))
    if len(words) < n or len(matches) < n:
        n = min(len(words), len(matches))
        if n == 0:
            return None
    grams = {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
    lowered = [m.group(0).lower() for m in matches]
    for i in range(len(lowered) - n + 1):
        if tuple(lowered[i : i + n]) in grams:
            return matches[i].start(), matches[i + n - 1].end()
    return None
