"""Asking an index (``dolma-pipe index``'s folder): counts, documents holding a string, and
tracing a text to the training documents it repeats, as OLMoTrace defines it.

:class:`Index` opens a folder (or an index on S3, through a checked local copy), checks every
source is the file it was built from (size and xxh3; a changed shard is refused: its array no
longer describes it) and every part's files are the ones its build wrote (xxh3; a damaged part is
refused, naming it: :mod:`.checked`), and answers over all its parts: a count is their sum,
matches are searched in each. A search that meets a damaged array anyway raises
:class:`IndexQueryError`, never a panic.

- :meth:`Index.count`: occurrences of an n-gram (token ids, or text tokenized with the index's
  tokenizer; bytes of text for a document index);
- :meth:`Index.find`: documents holding it (id, src, loc, a snippet);
- :meth:`Index.trace`: the maximal spans of a text found verbatim in the corpus (every position's
  longest match; a span kept when at least ``min_length`` long and not inside a longer one),
  ranked by the span's unigram probability (the product of its tokens' frequencies in the
  corpus, as a log10: the least likely first, OLMoTrace's order), each with its count and up to
  ``docs`` documents.
"""

from __future__ import annotations

import bisect
import gzip
import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import orjson

from dolma_pipe import storage, suffix
from dolma_pipe import tokenizer as toks
from train.shards import read_sidecar

from .checked import IndexQueryError, local_files
from .format import DOCUMENT_PART_FILES, INFO, TOKEN_PART_FILES, IndexInfo, Part

SYMBOL_BYTES = suffix.SYMBOL_BYTES


@dataclass
class Hit:
    """One occurrence: the document holding it and where."""

    id: str
    src: str
    loc: int  # the document's line in its source file (1-based)
    offset: int  # symbols from the document's start
    snippet: str


@dataclass
class Span:
    """A maximal span of a traced text found verbatim in the corpus."""

    start: int  # in the text's tokens (bytes for a document index)
    end: int
    text: str
    count: int
    # log10 of the product of its tokens' frequencies in the corpus (a probability of a long span
    # is below the smallest float): the lower, the less likely the span is by chance.
    unigram_log10_probability: float
    documents: list[Hit] = field(default_factory=list)


class _Searched:
    """A part's array: an error a search meets (a damaged array, when its files were not checked)
    is an :class:`IndexQueryError` naming the part, never a panic or a bare ValueError."""

    def __init__(self, inner: suffix.SuffixIndex, where: str):
        self._inner, self._where = inner, where

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._inner, method)(*args)
        except ValueError as exc:
            raise IndexQueryError(f"{self._where}: {exc}; rerun dolma-pipe index to rebuild it") from None

    def __len__(self) -> int:
        return len(self._inner)

    def count(self, pattern: bytes | list[int]) -> int:
        return self._call("count", pattern)

    def range(self, pattern: bytes | list[int]) -> tuple[int, int]:
        return self._call("range", pattern)

    def positions(self, lo: int, hi: int, limit: int | None = None) -> list[int]:
        return self._call("positions", lo, hi, limit)

    def match_lengths(self, query: bytes | list[int], cap: int) -> np.ndarray:
        return self._call("match_lengths", query, cap)

    def symbols(self, start: int, end: int) -> bytes | list[int]:
        return self._call("symbols", start, end)


@dataclass
class _OpenPart:
    info: Part
    index: _Searched
    starts: np.ndarray  # documents' starts, in the part's symbols


class Index:
    """An index folder, opened for queries (see the module's docstring)."""

    def __init__(self, root: str, *, verify: bool = True, cache: str | None = None):
        """Opens the index at ``root`` (a local folder, or ``s3://``: read through a local copy in
        ``cache``, see :mod:`.checked`). With ``verify`` (the default) every part's files and every
        shard they index are hashed against the index's record first, on threads: a changed shard
        or a damaged part is refused, naming it."""
        self.root = root
        path = storage.join(root, INFO)
        try:
            self.info = IndexInfo.model_validate_json(storage.read_bytes(path))
        except (FileNotFoundError, storage.StorageError):
            raise IndexQueryError(f"{root}: no index here ({INFO} is missing; build one with dolma-pipe index)") from None
        except ValueError as exc:
            raise IndexQueryError(f"{path}: not an index record ({str(exc).splitlines()[0]})") from None
        kind_files = TOKEN_PART_FILES if self.info.kind == "tokens" else DOCUMENT_PART_FILES
        self.files = local_files(root, self.info, verify=verify, cache=cache, part_files=kind_files)
        self.parts = [self._open(p) for p in self.info.parts]
        # A token index's documents end with EOS, and no match runs on past it into the next
        # document: the counts a document-separated index (infini-gram's) gives, whatever the parts.
        self.eos: int | None = (self.info.tokenizer or {}).get("eos_token_id") if self.info.kind == "tokens" else None
        self._tokenizer: Any = None
        self._unigram: dict[int, int] = {}
        self._docs: dict[int, list[tuple[str, str, int]]] = {}

    def _open(self, part: Part) -> _OpenPart:
        size = SYMBOL_BYTES[self.info.symbol]
        text = self.files.sources[part.source] if self.info.kind == "tokens" else self.files.part(part, ".text")
        try:
            index = suffix.SuffixIndex(
                text,
                self.info.symbol,
                self.files.part(part, ".sa"),
                part.width,
                offset=part.offset * size,
                length=part.length * size,
            )
            starts = np.load(self.files.part(part, ".starts.npy"))
        except (OSError, ValueError) as exc:
            raise IndexQueryError(f"{self.root}: part {part.name} cannot be read ({exc}); rerun dolma-pipe index to rebuild it") from None
        return _OpenPart(part, _Searched(index, f"{self.root}: part {part.name}"), starts)

    # ---- text and tokens ------------------------------------------------------------------------

    @property
    def tokenizer(self) -> Any:
        if self.info.kind != "tokens":
            return None
        if self._tokenizer is None:
            tok = self.info.tokenizer or {}
            if not tok.get("name_or_path"):
                raise IndexQueryError(f"{self.root}: the index records no tokenizer; ask with token ids, or rebuild it with --tokenizer")
            try:
                path = toks.resolve(tok["name_or_path"])
            except toks.TokenizerError as exc:
                raise IndexQueryError(f"{self.root}: its tokenizer cannot be loaded ({exc})") from None
            if tok.get("sha256") and toks.file_digest(path) != tok["sha256"]:
                raise IndexQueryError(f"{self.root}: {tok['name_or_path']} is not the tokenizer the shards were written with any more")
            self._tokenizer = toks.load(path)
        return self._tokenizer

    def encode(self, text: str | bytes | Sequence[int]) -> list[int] | bytes:
        """A query as the index's symbols: token ids (text tokenized as ``tokenize`` does, without
        special tokens) or UTF-8 bytes."""
        if self.info.kind == "documents":
            if isinstance(text, str):
                return text.encode("utf-8", "surrogatepass")
            if isinstance(text, bytes):
                return text
            raise IndexQueryError("a document index is asked with text, not token ids")
        if isinstance(text, str):
            return list(self.tokenizer.encode(text, add_special_tokens=False).ids)
        if isinstance(text, bytes):
            raise IndexQueryError("a token index is asked with text or token ids, not bytes")
        ids = [int(t) for t in text]
        top = self.vocabulary - 1
        bad = next((t for t in ids if not 0 <= t <= top), None)
        if bad is not None:
            raise IndexQueryError(f"token id {bad} is outside this index's vocabulary: ids are 0 to {top:,} ({self._vocabulary_is()})")
        return ids

    @property
    def vocabulary(self) -> int:
        """Token ids this index can hold: its tokenizer's vocabulary, else what its symbols hold."""
        recorded = (self.info.tokenizer or {}).get("vocab_size")
        return int(recorded) if recorded else 1 << (8 * SYMBOL_BYTES[self.info.symbol])

    def _vocabulary_is(self) -> str:
        dtype = {"u8": "bytes", "u16": "uint16 tokens", "u32": "uint32 tokens"}[self.info.symbol]
        recorded = (self.info.tokenizer or {}).get("vocab_size")
        return f"its tokenizer's {int(recorded):,} entries, {dtype}" if recorded else dtype

    def decode(self, symbols: bytes | Sequence[int]) -> str:
        if isinstance(symbols, bytes):
            return symbols.replace(bytes([suffix.SEPARATOR]), b"\n").decode("utf-8", "replace")
        return self.tokenizer.decode(list(symbols), skip_special_tokens=False)

    # ---- queries --------------------------------------------------------------------------------

    def _pattern(self, ngram: str | bytes | Sequence[int]) -> bytes | list[int]:
        pattern = self.encode(ngram)
        if not pattern:
            raise IndexQueryError("an empty n-gram matches nothing; give at least one token (a byte for a document index)")
        return pattern

    def _within_a_document(self, pattern: bytes | list[int]) -> bool:
        """Whether ``pattern`` can occur inside one document: not empty, and no document end
        (EOS, or the separator of a document index) before its last symbol."""
        if not pattern:
            return False
        end = suffix.SEPARATOR if self.info.kind == "documents" else self.eos
        return end is None or end not in pattern[:-1]

    def count(self, ngram: str | bytes | Sequence[int]) -> int:
        """Occurrences of ``ngram`` in the corpus's documents (all parts; none that runs from one
        document into the next)."""
        pattern = self._pattern(ngram)
        if not self._within_a_document(pattern):
            return 0
        return sum(p.index.count(pattern) for p in self.parts)

    def find(self, ngram: str | bytes | Sequence[int], limit: int = 10, context: int = 24) -> list[Hit]:
        """Up to ``limit`` documents' occurrences of ``ngram``, in the corpus's order of parts."""
        pattern = self._pattern(ngram)
        hits: list[Hit] = []
        for p in self.parts:
            if len(hits) >= limit or not self._within_a_document(pattern):
                break
            lo, hi = p.index.range(pattern)
            for pos in sorted(p.index.positions(lo, hi, limit - len(hits))):
                hits.append(self._hit(p, pos, len(pattern), context))
        return hits

    def _hit(self, p: _OpenPart, pos: int, length: int, context: int) -> Hit:
        d = bisect.bisect_right(p.starts, pos) - 1
        doc_start = int(p.starts[d])
        doc_end = int(p.starts[d + 1]) if d + 1 < len(p.starts) else len(p.index)
        left = p.index.symbols(max(doc_start, pos - context), pos)
        mid = p.index.symbols(pos, pos + length)
        right = p.index.symbols(pos + length, min(doc_end, pos + length + context))
        snippet = f"{self.decode(left)}[[{self.decode(mid)}]]{self.decode(right)}"
        doc_id, src, loc = self._document(p.info, p.info.first_doc + d)
        return Hit(doc_id, src, loc, pos - doc_start, snippet)

    def _documents(self, source: int) -> list[tuple[str, str, int]]:
        """(id, src, line) of every document of a source (read once)."""
        if source in self._docs:
            return self._docs[source]
        s = self.info.sources[source]
        out: list[tuple[str, str, int]] = []
        if self.info.kind == "tokens":
            out = [(r.id, r.src, r.loc) for r in read_sidecar(self.files.sources[source])]
        else:
            for part in (p for p in self.info.parts if p.source == source):
                with gzip.open(self.files.part(part, ".docs.jsonl.gz"), "rb") as fh:
                    out += [(d["id"], s.path, d["line"]) for d in map(orjson.loads, fh)]
        self._docs[source] = out
        return out

    def _document(self, part: Part, doc: int) -> tuple[str, str, int]:
        return self._documents(part.source)[doc]

    def longest_matches(self, query: bytes | list[int], cap: int = 1 << 20) -> list[int]:
        """Per start of ``query`` (the index's symbols): the length of its longest prefix found in
        a document of the corpus (any part), at most ``cap``."""
        best = np.zeros(len(query), dtype=np.int64)
        if self.parts:
            # The parts are searched at once, on threads (the searches release the GIL).
            with ThreadPoolExecutor(min(len(self.parts), os.cpu_count() or 1)) as pool:
                for lengths in pool.map(lambda p: p.index.match_lengths(query, cap), self.parts):
                    np.maximum(best, lengths, out=best)
        end = suffix.SEPARATOR if self.info.kind == "documents" else self.eos
        if end is not None and end in query:
            # A match may end with a document's end, never run past it.
            symbols = np.frombuffer(query, dtype=np.uint8) if isinstance(query, bytes) else np.asarray(query)
            ends = np.flatnonzero(symbols == end)
            stop = np.full(len(query), len(query), dtype=np.int64)
            nxt = np.searchsorted(ends, np.arange(len(query)))  # the first document end at or after each start
            has = nxt < len(ends)
            stop[has] = ends[nxt[has]] + 1
            np.minimum(best, stop - np.arange(len(query)), out=best)
        return best.tolist()

    def unigram_log10_probability(self, tokens: Sequence[int]) -> float:
        """log10 of the product of the tokens' frequencies in the corpus (how likely the span is by chance)."""
        total = max(self.info.symbols, 1)
        logp = 0.0
        for t in tokens:
            if t not in self._unigram:
                self._unigram[t] = sum(p.index.count([t]) if self.info.kind == "tokens" else p.index.count(bytes([t])) for p in self.parts)
            logp += math.log10(max(self._unigram[t], 1) / total)
        return logp

    def trace(
        self,
        text: str | bytes | Sequence[int],
        min_length: int = 8,
        docs: int = 3,
        top: int | None = None,
        context: int = 24,
        max_count: int | None = None,
    ) -> list[Span]:
        """The maximal spans of ``text`` found verbatim in the corpus, least likely first; with
        ``max_count``, a position's longest match found more often than that is no span (common
        phrases), as infini-gram's ``attribute`` leaves them out, before the maximal ones are kept."""
        query = self.encode(text)
        if not query:
            return []
        best = self.longest_matches(query)
        found: list[tuple[int, int, list[tuple[_OpenPart, int, int]]]] = []
        reach = 0  # the furthest end of a span so far: one ending there or before is inside it
        for i, length in enumerate(best):
            if length < min_length or i + length <= reach:
                continue
            piece = query[i : i + length]
            ranges = [(p, *p.index.range(piece)) for p in self.parts]
            if max_count is not None and sum(hi - lo for _, lo, hi in ranges) > max_count:
                continue
            found.append((i, i + length, ranges))
            reach = i + length
        out = []
        for start, end, ranges in found:
            piece = query[start:end]
            count = sum(hi - lo for _, lo, hi in ranges)
            hits: list[Hit] = []
            for p, lo, hi in ranges:
                for pos in sorted(p.index.positions(lo, hi, docs - len(hits))):
                    hits.append(self._hit(p, pos, end - start, context))
            out.append(Span(start, end, self.decode(piece), count, self.unigram_log10_probability(list(piece)), hits))
        out.sort(key=lambda s: (s.unigram_log10_probability, s.start))
        return out[:top] if top is not None else out


def spans_as_json(spans: list[Span]) -> list[dict]:
    return [asdict(s) for s in spans]
