"""Per-file summaries: what one document file (with its attributes) or one token shard holds.

A summary is plain JSON that merges by addition (:func:`merge`): counts as numbers or lists of
numbers (documents, characters, UTF-8 bytes), histograms as bins (:mod:`.bins`), and samples as
the ``k`` documents with the smallest seeded hash of their id, which is the same ``k`` whatever
the files, their order or the process count. So the report over a billion documents is the sum
of small per-file summaries computed on the executor, and its page is bounded.

A document file's summary holds, per source: documents, characters and bytes; the document
length histogram; per attribute, a histogram of document scores or of span lengths (each bin
``[documents, characters, bytes]``); the top language per document for each language tagger; the
bytes per token of a sample of its texts (token weights); and, for each mix stream or source that
reads the file, what each filter rule removed (the verdicts the mix kept, or its rules evaluated
again by its own engine) with sampled removed documents and the values that removed them. It also
picks up the texts of the near-duplicate cluster members and contaminated paragraphs the page shows.

Two passes read a document file to the same summary: the Rust column pass (``DocumentColumns``,
``rust_bloom/src/report/``), for files as the stages write them, and the Python pass, the
reference, for the rest (bad records are quarantined there, as every stage quarantines them).
"""

from __future__ import annotations

import hashlib
import heapq
import os
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from dolma_pipe import paths, storage
from dolma_pipe.attributes import AttributeMismatchError, read_with_attributes
from dolma_pipe.documents import DocumentError, compression_of
from dolma_pipe.filters import RuleSyntax, rule_attributes
from dolma_pipe.lineblocks import AttributeRows, line_blocks
from dolma_pipe.quarantine import Quarantine
from report.bins import add_nested, code_key, length_codes, length_key, value_codes, weighted_bins

# As the mix names it in its manifest (mixers/summary.py), so the report's rows line up with it.
NO_INCLUDE = "include (none matched)"
TOKEN_SAMPLE_BYTES = 64 * 1024  # per source and file: enough for a steady bytes-per-token ratio


def sample_key(seed: int, doc_id: str) -> int:
    """The seeded hash that orders documents for sampling (smallest first)."""
    return int.from_bytes(hashlib.blake2b(f"{seed}\x00{doc_id}".encode(), digest_size=8).digest(), "big")


def _sample_order(row: list) -> tuple[int, str]:
    """Samples are ``[hash, record]``: smallest hash first, the id breaking a tie."""
    return row[0], str(row[1].get("id", ""))


def merge_samples(into: dict[str, list], other: dict[str, list], k: int) -> None:
    """Keeps the ``k`` first samples per key (:func:`_sample_order`)."""
    for key, rows in other.items():
        into[key] = heapq.nsmallest(k, into.get(key, []) + rows, key=_sample_order)


def merge(summaries: Iterable[dict[str, Any]], k: dict[str, int]) -> dict[str, Any]:
    """One summary of many: counts added, samples kept to the ``k`` of their kind, texts joined."""
    out: dict[str, Any] = {"counts": {}, "samples": {}, "texts": {}}
    for s in summaries:
        add_nested(out["counts"], s.get("counts", {}))
        for kind, per_key in s.get("samples", {}).items():
            merge_samples(out["samples"].setdefault(kind, {}), per_key, k.get(kind, 5))
        out["texts"].update(s.get("texts", {}))
    return out


def _add(row: dict[str, Any], key: str, weights: list[int]) -> None:
    cur = row.get(key)
    if cur is None:
        row[key] = list(weights)
    else:
        for i, w in enumerate(weights):
            cur[i] += w


def _is_document_score(spans: Any, n_chars: int) -> bool:
    """A document-level attribute: one span over the whole text ([0, len, score], Dolma's shape)."""
    return len(spans) == 1 and spans[0][0] == 0 and spans[0][1] >= n_chars


def language_prefix(key: str) -> tuple[str, str] | None:
    """(tagger prefix, language) for a language tagger's document score, else None."""
    head, sep, last = key.rpartition("__")
    if not sep or "lang" not in head.rsplit("__", 1)[-1]:
        return None
    lang = last[4:] if last.startswith("doc_") else last
    if not lang or lang.startswith("not_") or not lang.replace("_", "").replace("-", "").isalpha() or len(lang) > 12:
        return None
    return head, lang


@dataclass
class RuleSet:
    """One mix group's rules as the report evaluates them, and what each decision is called."""

    key: str  # "<run> / <group>"
    rules: Any  # the mix's compiled rules (mixers.rules.StreamRules)
    labels: list[str] = field(default_factory=list)  # per bit of the match mask
    reads: dict[str, list[str]] = field(default_factory=dict)  # per label: attributes the rule reads
    # (rules, path) -> (match mask per document line, documents per mask): the mix stage's own.
    verdicts: Any = None
    # Per file: documents the rules kept and min_text_length dropped (the mix's count; see _drop_short).
    short: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def of(key: str, rules: Any, verdicts: Any = None, short: dict[str, int] | None = None) -> RuleSet:
        inc = [f"include {i}: {label}" for i, label in enumerate(rules.include_labels)]
        exc = [f"exclude {i}: {label}" for i, label in enumerate(rules.exclude_labels)]
        reads: dict[str, list[str]] = {}
        syntax: RuleSyntax = rules.filter_syntax or "jq"
        for label, expr in zip(inc + exc, [*rules.include, *rules.exclude]):
            try:
                reads[label] = rule_attributes(syntax, expr)
            except ValueError:
                reads[label] = []
        # A document no include rule matched: what every include rule reads shows why.
        reads[NO_INCLUDE] = list(dict.fromkeys(name for label in inc for name in reads[label]))
        return RuleSet(key, rules, inc + exc, reads, verdicts, dict(short or {}))

    def decision(self, mask: int) -> str | None:
        """The rule that removed a document with this match mask (Dolma's order), None when kept."""
        n_inc = len(self.rules.include)
        if n_inc and not mask & ((1 << n_inc) - 1):
            return NO_INCLUDE
        for j in range(len(self.rules.exclude)):
            if mask >> (n_inc + j) & 1:
                return self.labels[n_inc + j]
        return None


def _snippet(text: str, spans: list[list[int]], limit: int) -> dict[str, Any]:
    """Up to ``limit`` characters of ``text`` around its first highlighted span, spans made relative."""
    start = max(0, spans[0][0] - limit // 8) if spans else 0
    end = min(len(text), start + limit)
    rel = [[max(s, start) - start, min(e, end) - start] for s, e in spans if e > start and s < end]
    return {"text": text[start:end], "offset": start, "chars": len(text), "spans": rel[:50]}


def _shown_value(spans: Any) -> Any:
    if isinstance(spans, list) and len(spans) > 5:
        return [*spans[:5], f"... {len(spans) - 5} more"]
    return spans


def _binary(values: Any) -> bool:
    v = np.asarray(values, dtype=np.float64)
    return bool(np.all((v == 0.0) | (v == 1.0)))


class _Columns:
    """What a file's documents showed, kept as columns (document index, value) while reading, and
    binned per source with numpy at the end: a few list appends per attribute and document."""

    # Columns are lists while the Python pass appends to them, numpy arrays from the Rust pass.
    def __init__(self) -> None:
        self.src: Any = []
        self.chars: Any = []
        self.bytes: Any = []
        self.sources: dict[str, int] = {}
        self.present: dict[str, Any] = {}
        self.scores: dict[str, tuple[Any, Any]] = {}
        self.span_lengths: dict[str, tuple[Any, Any]] = {}
        self.span_covered: dict[str, tuple[Any, Any]] = {}
        self.languages: dict[str, tuple[Any, list[str]]] = {}
        self.rules: dict[str, tuple[list[int], list[str]]] = {}

    def binned(self) -> dict[str, Any]:
        names = sorted(self.sources, key=self.sources.__getitem__)
        src = np.array(self.src, dtype=np.int64)
        weights = [np.ones(len(src)), np.array(self.chars, dtype=np.float64), np.array(self.bytes, dtype=np.float64)]

        def per_doc(idx: list[int], codes: np.ndarray, key=code_key) -> dict[str, dict[str, list[int]]]:
            at = np.array(idx, dtype=np.int64)
            out: dict[str, dict[str, list[int]]] = {}
            for g, c, w in weighted_bins(codes, src[at], [x[at] for x in weights]):
                out.setdefault(names[g], {})[key(c)] = w
            return out

        def labelled(idx: list[int], labels: list[str]) -> dict[str, dict[str, list[int]]]:
            index = {lab: i for i, lab in enumerate(sorted(set(labels)))}
            back = sorted(index, key=index.__getitem__)
            return per_doc(idx, np.array([index[lab] for lab in labels], dtype=np.int64), lambda c: back[c])

        everyone = list(range(len(src)))
        counts: dict[str, Any] = {
            "sources": {names[g]: w for g, _, w in weighted_bins(np.zeros(len(src), dtype=np.int64), src, weights)},
            "lengths": per_doc(everyone, length_codes(weights[1]), length_key),
            "present": {
                k: {n: w for n, cells in per_doc(idx, np.zeros(len(idx), dtype=np.int64)).items() for w in cells.values()}
                for k, idx in self.present.items()
            },
            "scores": {k: per_doc(idx, value_codes(np.array(vals, dtype=np.float64))) for k, (idx, vals) in self.scores.items()},
            # 1 for an attribute with a value other than 0 and 1 in this file (merged: > 0 for any file).
            "nonbinary": {k: int(not _binary(vals)) for k, (_, vals) in self.scores.items()},
            "languages": {k: labelled(idx, langs) for k, (idx, langs) in self.languages.items()},
            "spans": {},
        }
        for key, (idx, lengths) in self.span_lengths.items():
            at = np.array(idx, dtype=np.int64)
            n = np.array(lengths, dtype=np.float64)
            rows: dict[str, Any] = {}
            for g, c, w in weighted_bins(length_codes(n), src[at], [np.ones(len(n)), n]):
                rows.setdefault(names[g], {"spans": 0, "covered": 0, "lengths": {}})["lengths"][length_key(c)] = w
                rows[names[g]]["spans"] += w[0]
            cidx, covered = self.span_covered[key]
            cov = np.bincount(src[np.array(cidx, dtype=np.int64)], weights=np.array(covered, dtype=np.float64), minlength=len(names))
            for g, name in enumerate(names):
                if name in rows:
                    rows[name]["covered"] = int(cov[g])
            counts["spans"][key] = rows
        counts["rules"] = {k: {"by_source": labelled(idx, labels)} for k, (idx, labels) in self.rules.items()}
        return counts


def summarize_documents(
    path: str,
    rel: str,
    sets: list[str],
    rule_sets: list[RuleSet],
    wanted_texts: set[str],
    contamination: list[str],
    quarantine: Quarantine,
    *,
    seed: int,
    sample_chars: int,
    samples_per_rule: int,
    tokenizer: Any | None,
) -> dict[str, Any]:
    """The summary of one document file (see the module's docstring); ``sets`` are its attribute sets.

    Read by the Rust pass (:class:`_ColumnPass`) when the file is as the stages write it (every line
    a good document, every attribute row in line); else, or for Parquet, by the Python pass, which
    quarantines and refuses as every stage does. Both give the same summary."""
    verdicts = [rs.verdicts(rs.rules, path) for rs in rule_sets]
    job = _FileJob(
        path, rel, sets, rule_sets, verdicts, wanted_texts, contamination, quarantine, seed, sample_chars, samples_per_rule, tokenizer
    )
    if compression_of(path) != "parquet":
        try:
            return _ColumnPass(job).run()
        except _NotThisPass:
            pass
    return _summarize_python(job)


@dataclass
class _FileJob:
    """What summarizing one document file takes (see :func:`summarize_documents`), for either pass."""

    path: str
    rel: str
    sets: list[str]
    rule_sets: list[RuleSet]
    verdicts: list[tuple[dict[int, int], dict[str, int]]]  # per rule set: masks by line, overlap
    wanted_texts: set[str]
    contamination: list[str]
    quarantine: Quarantine
    seed: int
    sample_chars: int
    samples_per_rule: int
    tokenizer: Any | None


def _summarize_python(job: _FileJob) -> dict[str, Any]:
    """The reference pass: every document and its attributes as Python objects."""
    path, rel, sets, rule_sets, verdicts = job.path, job.rel, job.sets, job.rule_sets, job.verdicts
    wanted_texts, contamination, quarantine, tokenizer = job.wanted_texts, job.contamination, job.quarantine, job.tokenizer
    seed, sample_chars, samples_per_rule = job.seed, job.sample_chars, job.samples_per_rule
    cols = _Columns()
    samples: dict[str, dict[str, list]] = {"removed": {}, "contaminated": {}}
    texts: dict[str, str] = {}
    contaminated: dict[str, dict[str, list[int]]] = {}
    token_texts: dict[str, list[str]] = {}
    token_bytes: dict[str, int] = {}
    lang_of: dict[str, tuple[str, str] | None] = {}
    for i, (line, doc, attrs) in enumerate(read_with_attributes(path, sets, quarantine)):
        text: str = doc["text"]
        doc_id = str(doc.get("id"))
        src = str(doc.get("source") or "(none)")
        n_chars = len(text)
        n_bytes = len(text.encode("utf-8", "surrogatepass"))
        cols.src.append(cols.sources.setdefault(src, len(cols.sources)))
        cols.chars.append(n_chars)
        cols.bytes.append(n_bytes)
        if tokenizer is not None and token_bytes.get(src, 0) < TOKEN_SAMPLE_BYTES:
            token_texts.setdefault(src, []).append(text)
            token_bytes[src] = token_bytes.get(src, 0) + n_bytes
        best_lang: dict[str, tuple[float, str]] = {}
        for key, spans in attrs.items():
            if not spans or type(spans) is not list:
                continue
            present = cols.present.get(key)
            if present is None:
                present = cols.present[key] = []
            present.append(i)
            first = spans[0]
            if len(spans) == 1 and first[0] == 0 and first[1] >= n_chars:  # a document score
                value = first[2]
                if type(value) is float or type(value) is int:
                    col = cols.scores.get(key)
                    if col is None:
                        col = cols.scores[key] = ([], [])
                    col[0].append(i)
                    col[1].append(value)
                    if key not in lang_of:
                        lang_of[key] = language_prefix(key)
                    lang = lang_of[key]
                    if lang is not None and value > best_lang.get(lang[0], (-1.0, ""))[0]:
                        best_lang[lang[0]] = (float(value), lang[1])
                continue
            lengths = cols.span_lengths.setdefault(key, ([], []))
            covered = 0
            for span in spans:
                length = max(0, int(span[1]) - int(span[0]))
                covered += length
                lengths[0].append(i)
                lengths[1].append(length)
            cov = cols.span_covered.setdefault(key, ([], []))
            cov[0].append(i)
            cov[1].append(min(covered, n_chars))
        for prefix, (_, top) in best_lang.items():
            col2 = cols.languages.setdefault(prefix, ([], []))
            col2[0].append(i)
            col2[1].append(top)
        for rs, (masks, _) in zip(rule_sets, verdicts):
            mask = masks.get(line)
            if mask is None:
                continue
            label = rs.decision(mask) or "kept"
            col3 = cols.rules.setdefault(rs.key, ([], []))
            col3[0].append(i)
            col3[1].append(label)
            if label != "kept" and samples_per_rule:
                record = _removed_record(rs, label, doc_id, src, rel, line, text, attrs, sample_chars)
                bucket = samples["removed"].setdefault(f"{rs.key}\x00{label}", [])
                _keep_smallest(bucket, [sample_key(seed, doc_id), record], samples_per_rule)
        if doc_id in wanted_texts:
            texts[doc_id] = text[: sample_chars * 4]
        for name in contamination:
            _contaminated(
                name, attrs.get(name) or [], doc_id, src, rel, line, text, contaminated, samples, seed, sample_chars, samples_per_rule
            )
    return _finish(job, cols, contaminated, token_texts, samples, texts)


def _finish(
    job: _FileJob,
    cols: _Columns,
    contaminated: dict[str, dict[str, list[int]]],
    token_texts: dict[str, list[str]],
    samples: dict[str, dict[str, list]],
    texts: dict[str, str],
) -> dict[str, Any]:
    """A pass's summary of the file: its columns binned, the rules' overlap, bytes per token."""
    tokenizer = job.tokenizer
    counts = cols.binned()
    counts["contamination"] = contaminated
    for rs, (_, overlap) in zip(job.rule_sets, job.verdicts):
        counts["rules"].setdefault(rs.key, {})["overlap"] = overlap
        _drop_short(counts["rules"][rs.key].setdefault("by_source", {}), rs.short.get(job.path, 0))
    if tokenizer is not None:
        per = counts.setdefault("bytes_per_token", {})
        for src, batch in token_texts.items():
            n_tokens = sum(len(e.ids) for e in tokenizer.encode_batch(batch, add_special_tokens=False))
            per[src] = [sum(len(t.encode("utf-8", "surrogatepass")) for t in batch), n_tokens]
    return {"counts": counts, "samples": samples, "texts": texts}


SHORT = "min_text_length"


def _drop_short(by_source: dict[str, dict[str, list[int]]], n: int) -> None:
    """Moves the ``n`` documents of a file that the rules kept and ``min_text_length`` dropped from
    ``kept`` to their own label, so that ``kept`` is what the mix wrote. The mix decides it after
    span replacement and counts it per file, not per document: in a file of one source (Dolma's
    layout) they are that source's; in a file of several, they are shared among its sources in
    proportion to the documents the rules kept of each (largest remainders). Which documents they
    were is not recorded, so they carry no characters or bytes."""
    kept = sorted((src, cells["kept"][0]) for src, cells in by_source.items() if cells.get("kept"))
    total = sum(k for _, k in kept)
    if not n or not total:
        return
    n = min(n, total)
    shares = [(src, n * k // total, (n * k) % total) for src, k in kept]
    left = n - sum(q for _, q, _ in shares)
    extra = {src for src, _, _ in sorted(shares, key=lambda t: (-t[2], t[0]))[:left]}
    for src, q, _ in shares:
        q += src in extra
        if q:
            by_source[src]["kept"][0] -= q
            _add(by_source[src], SHORT, [q, 0, 0])


class _NotThisPass(Exception):
    """The file holds something the Rust pass does not read; the Python pass reads it."""


class _ColumnPass:
    """One document file read by the Rust pass (``dolma_pipe._rust.DocumentColumns``): the
    documents and attribute rows become columns there; Python keeps what needs a document whole
    (the sampled removed documents, the texts the page shows, contaminated paragraphs), parsing
    only those lines again. Raises :class:`_NotThisPass` (before touching ``quarantine``) when the
    file is not as the stages write it."""

    def __init__(self, job: _FileJob):
        self.job = job
        self.samples: dict[str, dict[str, list]] = {"removed": {}, "contaminated": {}}
        self.texts: dict[str, str] = {}
        self.contaminated: dict[str, dict[str, list[int]]] = {}
        self.rules: dict[str, tuple[list[int], list[str]]] = {}

    def run(self) -> dict[str, Any]:
        from dolma_pipe._rust import DocumentColumns

        cols = DocumentColumns(TOKEN_SAMPLE_BYTES if self.job.tokenizer is not None else 0)
        notes: Counter = Counter()
        ids: list[str] = []
        try:
            feeds = [AttributeRows(paths.attribute_path(self.job.path, name)) for name in self.job.sets]
            for numbers, lines in line_blocks(self.job.path, notes=notes):
                rows = []
                for feed in feeds:
                    feed.top_up(len(lines))
                    rows.append(feed.lines[: len(lines)])
                    feed.take(len(lines))
                start = cols.docs
                try:
                    batch_ids = cols.add(lines, rows)
                except ValueError as exc:
                    raise _NotThisPass(str(exc)) from None
                self._batch(cols, start, numbers, lines, rows, batch_ids)
                ids += batch_ids
            for feed in feeds:
                feed.top_up(1)
            if not ids or any(feed.lines for feed in feeds):
                raise _NotThisPass("no documents, or attribute rows past the last document")
        except (DocumentError, storage.StorageError, AttributeMismatchError) as exc:
            raise _NotThisPass(str(exc)) from None
        # The file is read: what the Python pass would have told the quarantine, told now.
        for doc_id in ids:
            self.job.quarantine.saw_document(doc_id)
        self.job.quarantine.notes.update(notes)
        return _finish(self.job, self._columns(cols), self.contaminated, self._token_texts(cols), self.samples, self.texts)

    def _doc(self, line: bytes, rows: list[list[bytes]], j: int) -> tuple[dict, dict]:
        """Document ``j`` of a batch and its merged attributes, parsed as the Python pass parses them."""
        doc = orjson.loads(line)
        attrs: dict = {}
        for set_rows in rows:
            attrs.update(orjson.loads(set_rows[j]).get("attributes") or {})
        return doc, attrs

    def _batch(self, cols: Any, start: int, numbers: list[int], lines: list[bytes], rows: list[list[bytes]], ids: list[str]) -> None:
        for rs, (masks, _) in zip(self.job.rule_sets, self.job.verdicts):
            idx, labels = self.rules.setdefault(rs.key, ([], []))
            decided: dict[int, str] = {}
            bucket_key = f"{rs.key}\x00"
            for j, line in enumerate(numbers):
                mask = masks.get(line)
                if mask is None:
                    continue
                label = decided.get(mask)
                if label is None:
                    label = decided[mask] = rs.decision(mask) or "kept"
                idx.append(start + j)
                labels.append(label)
                if label == "kept" or not self.job.samples_per_rule:
                    continue
                key = sample_key(self.job.seed, ids[j])
                bucket = self.samples["removed"].setdefault(bucket_key + label, [])
                if len(bucket) >= self.job.samples_per_rule and (key, ids[j]) >= max(map(_sample_order, bucket)):
                    continue  # would not be kept: not parsed
                doc, attrs = self._doc(lines[j], rows, j)
                src = str(doc.get("source") or "(none)")
                record = _removed_record(rs, label, ids[j], src, self.job.rel, line, doc["text"], attrs, self.job.sample_chars)
                _keep_smallest(bucket, [key, record], self.job.samples_per_rule)
        wanted = [j for j, doc_id in enumerate(ids) if doc_id in self.job.wanted_texts] if self.job.wanted_texts else []
        for j in wanted:
            self.texts[ids[j]] = orjson.loads(lines[j])["text"][: self.job.sample_chars * 4]
        for name in self.job.contamination:
            for d in cols.present_from(name, start):
                j = d - start
                doc, attrs = self._doc(lines[j], rows, j)
                src = str(doc.get("source") or "(none)")
                _contaminated(
                    name, attrs.get(name) or [], ids[j], src, self.job.rel, numbers[j], doc["text"],
                    self.contaminated, self.samples, self.job.seed, self.job.sample_chars, self.job.samples_per_rule,
                )  # fmt: skip

    def _columns(self, cols: Any) -> _Columns:
        out = _Columns()
        out.sources = {name: i for i, name in enumerate(cols.sources)}
        d = cols.documents()
        out.src = np.frombuffer(d["src"], dtype="<u4").astype(np.int64)
        out.chars = np.frombuffer(d["chars"], dtype="<u8")
        out.bytes = np.frombuffer(d["bytes"], dtype="<u8")
        n = len(out.src)
        best: dict[str, tuple[np.ndarray, np.ndarray, list[str]]] = {}  # prefix -> (best value, language code, languages)
        for k, key in enumerate(cols.keys):
            col = cols.column(k)
            out.present[key] = np.frombuffer(col["present"], dtype="<u4")
            score_docs = np.frombuffer(col["score_docs"], dtype="<u4")
            if len(score_docs):
                scores = np.frombuffer(col["scores"], dtype="<f8")
                out.scores[key] = (score_docs, scores)
                lang = language_prefix(key)
                if lang is not None:
                    # The Python pass's rule: per document, the first language of the highest score above -1.
                    value, code, langs = best.setdefault(lang[0], (np.full(n, -1.0), np.full(n, -1, dtype=np.int64), []))
                    better = scores > value[score_docs]
                    value[score_docs[better]] = scores[better]
                    code[score_docs[better]] = len(langs)
                    langs.append(lang[1])
            covered_docs = np.frombuffer(col["covered_docs"], dtype="<u4")
            if len(covered_docs):
                out.span_lengths[key] = (np.frombuffer(col["span_docs"], dtype="<u4"), np.frombuffer(col["span_lengths"], dtype="<u8"))
                out.span_covered[key] = (covered_docs, np.frombuffer(col["covered"], dtype="<u8"))
        for prefix, (_, code, langs) in best.items():
            docs = np.flatnonzero(code >= 0)
            out.languages[prefix] = (docs, [langs[c] for c in code[docs]])
        out.rules = self.rules
        return out

    def _token_texts(self, cols: Any) -> dict[str, list[str]]:
        if self.job.tokenizer is None:
            return {}
        return {name: texts for name, texts in zip(cols.sources, cols.sample_texts) if texts}


def _removed_record(rs: RuleSet, label: str, doc_id: str, src: str, rel: str, line: int, text: str, attrs: dict, sample_chars: int) -> dict:
    """A removed document as the page shows it: the values of what the deciding rule reads, and
    the text around the first span among them, highlighted."""
    reads = rs.reads.get(label, [])
    values = {name: _shown_value(attrs.get(name)) for name in reads}
    n_chars = len(text)
    marked = sorted([int(s[0]), int(s[1])] for name in reads for s in (attrs.get(name) or []) if not _is_document_score([s], n_chars))
    return {"id": doc_id, "source": src, "file": rel, "line": line, "values": values, **_snippet(text, marked, sample_chars)}


def _contaminated(
    name: str,
    spans: Any,
    doc_id: str,
    src: str,
    rel: str,
    line: int,
    text: str,
    contaminated: dict[str, dict[str, list[int]]],
    samples: dict[str, dict[str, list]],
    seed: int,
    sample_chars: int,
    samples_per_rule: int,
) -> None:
    """One document's spans of a contamination attribute: counted per source, paragraphs sampled."""
    if not spans:
        return
    _add(contaminated.setdefault(name, {}), src, [1, len(spans), sum(int(e) - int(s) for s, e, *_ in spans)])
    for s, e, *score in spans:
        record = {"id": doc_id, "source": src, "file": rel, "line": line, "paragraph": text[int(s) : int(e)][:sample_chars]}
        record["score"] = score[0] if score else None
        _keep_smallest(samples["contaminated"].setdefault(name, []), [sample_key(seed, f"{doc_id}:{s}"), record], samples_per_rule)


def _keep_smallest(bucket: list, row: list, k: int) -> None:
    bucket.append(row)
    if len(bucket) > k:
        bucket.sort(key=_sample_order)
        del bucket[k:]


def summarize_tokens(run: str, split: str, path: str) -> dict[str, Any]:
    """Per source of one token shard's metadata: documents, tokens and the document length histogram (tokens)."""
    lengths: dict[str, list[int]] = {}
    for row in _sidecar_rows(path):
        lengths.setdefault(row.src or "(none)", []).append(row.end - row.start)
    per: dict[str, Any] = {}
    for src, ns in lengths.items():
        codes, counts = np.unique(length_codes(np.array(ns)), return_counts=True)
        per[src] = {"docs": len(ns), "tokens": int(sum(ns)), "lengths": {length_key(int(c)): int(n) for c, n in zip(codes, counts)}}
    return {"counts": {"tokens": {run: {split: per}}}}


def _sidecar_rows(path: str) -> list[Any]:
    """The rows of a token shard's metadata file, local or remote: ``train.shards`` (the format's
    one owner) reads local files, so a remote one is copied to a temporary folder first, under
    its own name (the format's errors name the file)."""
    from train.shards import iter_sidecar

    if not storage.is_remote(path):
        return list(iter_sidecar(path))
    with tempfile.TemporaryDirectory(prefix="dolma-pipe-report-") as tmp:
        local = os.path.join(tmp, path.rsplit("/", 1)[-1])
        storage.download(path, local)
        return list(iter_sidecar(local))
