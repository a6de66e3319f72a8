"""One input file through a stream's rules: its lines and its attribute files' rows, in lockstep.

Files are read as blocks of complete lines (:mod:`dolma_pipe.lineblocks`: the rule engine does
the per-document work); ``compression.input`` overrides what a file's name says.

Lines go to the rule engine in batches; the engine pairs each good document with the next row
of every attribute file (a bad document line, quarantined with its file and line, takes no row,
as the taggers skip it too). Rows that do not line up (another id, a file that ends early or runs
longer) stop the file with both files and lines named: a missing attribute value is not something
to guess. A rule that fails on a document (a jq error) stops it too, naming the rule, the file
and the line, as Dolma's mixer fails there.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from dolma_pipe import paths
from dolma_pipe.attributes import AttributeMismatchError
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.filters import BatchResult, MixCounts
from dolma_pipe.lineblocks import AttributeRows, line_blocks
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.read_errors import READ_ERRORS, quarantine_if_empty, quarantine_read_error
from mixers.rules import StreamRules


class MixRuleError(DolmaPipeError, ValueError):
    """A rule failed on a document (e.g. a jq error); the message names the rule, file and line."""


def mix_file(
    rules: StreamRules,
    doc_path: str,
    quarantine: Quarantine,
    sink: Callable[[BatchResult], None],
    *,
    batch_size: int = 512,
    compression: str | None = None,
    collect: bool = False,
    write: bool = True,
) -> MixCounts:
    """Run ``rules`` over one document file; each batch's result goes to ``sink``; the file's counts
    (without ``write``, the rules' decisions and counts only: no output lines)."""
    mixer = rules.mixer(collect, write)
    attr_paths = [paths.attribute_path(doc_path, name) for name in rules.attribute_sets]
    rows = [AttributeRows(p, compression) for p in attr_paths]
    file_name = os.path.basename(doc_path.rstrip("/"))
    counts = MixCounts(
        files=1,
        removed_exclude=[0] * len(rules.exclude),
        matched_include=[0] * len(rules.include),
        matched_exclude=[0] * len(rules.exclude),
        failed_include=[0] * len(rules.include),
        failed_exclude=[0] * len(rules.exclude),
    )

    def flush(numbers: list[int], lines: list[bytes]) -> None:
        for r in rows:
            r.top_up(len(lines))
        result = mixer.process(lines, numbers, [r.lines for r in rows], file_name)
        for index, kind, message in result.bad:
            quarantine.add(doc_path, numbers[index], kind, message, lines[index])
        if result.error is not None:
            raise _batch_error(result.error, numbers, rows, doc_path)
        for doc_id in result.ids:  # the runner's duplicate-id check, as read_documents feeds it
            quarantine.saw_document(doc_id)
        if result.bad:
            skipped = {index for index, _, _ in result.bad}
            result.lines = [n for i, n in enumerate(numbers) if i not in skipped]
        else:
            result.lines = numbers
        sink(result)
        counts.add(result.counts)
        for r, used in zip(rows, result.consumed):
            r.take(used)

    numbers: list[int] = []
    lines: list[bytes] = []
    records = 0
    last = 0
    try:
        for block_numbers, block_lines in line_blocks(doc_path, compression, quarantine.notes):
            records += len(block_lines)
            last = block_numbers[-1]
            numbers += block_numbers
            lines += block_lines
            while len(lines) >= batch_size:
                flush(numbers[:batch_size], lines[:batch_size])
                del numbers[:batch_size], lines[:batch_size]
    except READ_ERRORS as exc:
        quarantine_read_error(quarantine, doc_path, exc, last + 1)
    if lines:
        flush(numbers, lines)
    quarantine_if_empty(quarantine, doc_path, records)
    if quarantine.has_file_error(doc_path):
        return counts  # the attribute files' rows past the readable part are not comparable
    for r in rows:
        r.top_up(1)
        if r.lines:
            raise AttributeMismatchError(
                f"{r.path}:{r.numbers[0]}: has more rows than {doc_path} (attribute files must have one row per document)"
            )
    return counts


def _batch_error(error: tuple[str, int, int, int, str], numbers: list[int], rows: list[AttributeRows], doc_path: str) -> DolmaPipeError:
    kind, doc, set_index, row, message = error
    doc_line = numbers[doc] if doc < len(numbers) else 0
    if kind == "rule":
        return MixRuleError(f"{doc_path}:{doc_line}: {message}")
    r = rows[set_index] if set_index < len(rows) else None
    attr_path = r.path if r is not None else "?"
    attr_line = r.numbers[row] if r is not None and row < len(r.numbers) else 0
    if kind == "mismatch":
        return AttributeMismatchError(f"{attr_path}:{attr_line}: {message} at {doc_path}:{doc_line}")
    if kind == "ended":
        return AttributeMismatchError(f"{attr_path}: ends before {doc_path} ({message} at line {doc_line})")
    return AttributeMismatchError(f"{attr_path}:{attr_line}: bad attribute row: {message}")
