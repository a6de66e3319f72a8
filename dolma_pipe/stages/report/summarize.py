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
reads the file, what each filter rule removed (every rule re-evaluated by the mix's own engine)
with sampled removed documents and the values that removed them. It also picks up the texts of
the near-duplicate cluster members and contaminated paragraphs the page shows.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dolma_pipe.attributes import read_with_attributes
from dolma_pipe.filters import BatchResult, RuleSyntax, rule_attributes
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.stages.report.bins import add_nested, length_bin, value_bin

NO_INCLUDE = "no include rule matched"
TOKEN_SAMPLE_BYTES = 64 * 1024  # per source and file: enough for a steady bytes-per-token ratio


def sample_key(seed: int, doc_id: str) -> int:
    """The seeded hash that orders documents for sampling (smallest first)."""
    return int.from_bytes(hashlib.blake2b(f"{seed}\x00{doc_id}".encode(), digest_size=8).digest(), "big")


def merge_samples(into: dict[str, list], other: dict[str, list], k: int) -> None:
    """Keeps the ``k`` smallest-hash samples per key (samples are ``[hash, record]``)."""
    for key, rows in other.items():
        both = into.get(key, []) + rows
        into[key] = heapq.nsmallest(k, both, key=lambda r: (r[0], str(r[1].get("id", ""))))


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


def _language_prefix(key: str) -> tuple[str, str] | None:
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
    rules: Any  # StreamRules
    labels: list[str] = field(default_factory=list)  # per bit of the match mask
    reads: dict[str, list[str]] = field(default_factory=dict)  # per label: attributes the rule reads

    @staticmethod
    def of(key: str, rules: Any) -> RuleSet:
        inc = [f"include {i}: {label}" for i, label in enumerate(rules.include_labels)]
        exc = [f"exclude {i}: {label}" for i, label in enumerate(rules.exclude_labels)]
        reads: dict[str, list[str]] = {}
        syntax: RuleSyntax = rules.filter_syntax or "jq"
        for label, expr in zip(inc + exc, [*rules.include, *rules.exclude]):
            try:
                reads[label] = rule_attributes(syntax, expr)
            except ValueError:
                reads[label] = []
        return RuleSet(key, rules, inc + exc, reads)

    def decision(self, mask: int) -> str | None:
        """The rule that removed a document with this match mask (Dolma's order), None when kept."""
        n_inc = len(self.rules.include)
        if n_inc and not mask & ((1 << n_inc) - 1):
            return NO_INCLUDE
        for j in range(len(self.rules.exclude)):
            if mask >> (n_inc + j) & 1:
                return self.labels[n_inc + j]
        return None


def _verdicts(path: str, rs: RuleSet) -> tuple[dict[str, int], dict[str, int]]:
    """Per document id of ``path``: its match mask under ``rs``; and the overlap counts (mask -> documents)."""
    from mixers.reading import mix_file

    masks: dict[str, int] = {}
    overlap: dict[str, int] = {}

    def sink(result: BatchResult) -> None:
        for doc_id, mask in zip(result.ids, result.matches):
            masks[doc_id] = mask
            overlap[str(mask)] = overlap.get(str(mask), 0) + 1

    # A quarantine of its own: the summary's reading pass counts the file's bad records once.
    mix_file(rs.rules, path, Quarantine(), sink)
    return masks, overlap


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
    """The summary of one document file (see the module's docstring); ``sets`` are its attribute sets."""
    verdicts = [_verdicts(path, rs) for rs in rule_sets]
    counts: dict[str, Any] = {
        "sources": {},
        "lengths": {},
        "present": {},
        "scores": {},
        "spans": {},
        "languages": {},
        "rules": {},
        "contamination": {},
    }
    samples: dict[str, dict[str, list]] = {"removed": {}, "contaminated": {}}
    texts: dict[str, str] = {}
    token_texts: dict[str, list[str]] = {}
    token_bytes: dict[str, int] = {}
    for rs, (_, overlap) in zip(rule_sets, verdicts):
        counts["rules"].setdefault(rs.key, {})["overlap"] = overlap
    sources, lengths, present, scores, span_stats, languages = (
        counts[k] for k in ("sources", "lengths", "present", "scores", "spans", "languages")
    )
    for line, doc, attrs in read_with_attributes(path, sets, quarantine):
        text: str = doc["text"]
        doc_id = str(doc.get("id"))
        src = str(doc.get("source") or "(none)")
        n_chars = len(text)
        n_bytes = len(text.encode("utf-8", "surrogatepass"))
        w = [1, n_chars, n_bytes]
        _add(sources, src, w)
        _add(lengths.setdefault(src, {}), length_bin(n_chars), w)
        if tokenizer is not None and token_bytes.get(src, 0) < TOKEN_SAMPLE_BYTES:
            token_texts.setdefault(src, []).append(text)
            token_bytes[src] = token_bytes.get(src, 0) + n_bytes
        best_lang: dict[str, tuple[float, str]] = {}
        for key, spans in attrs.items():
            if not isinstance(spans, list) or not spans:
                continue
            _add(present.setdefault(key, {}), src, w)
            if _is_document_score(spans, n_chars):
                value = spans[0][2]
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    _add(scores.setdefault(key, {}).setdefault(src, {}), value_bin(float(value)), w)
                    lang = _language_prefix(key)
                    if lang is not None and value > best_lang.get(lang[0], (-1.0, ""))[0]:
                        best_lang[lang[0]] = (float(value), lang[1])
                continue
            row = span_stats.setdefault(key, {}).setdefault(src, {"spans": 0, "covered": 0, "lengths": {}})
            covered = 0
            for span in spans:
                length = max(0, int(span[1]) - int(span[0]))
                covered += length
                _add(row["lengths"], length_bin(length), [1, length])
            row["spans"] += len(spans)
            row["covered"] += min(covered, n_chars)
        for prefix, (_, top) in best_lang.items():
            _add(languages.setdefault(prefix, {}).setdefault(src, {}), top, w)
        for rs, (masks, _) in zip(rule_sets, verdicts):
            mask = masks.get(doc_id)
            if mask is None:
                continue
            label = rs.decision(mask) or "kept"
            _add(counts["rules"][rs.key].setdefault("by_source", {}).setdefault(src, {}), label, w)
            if label != "kept" and samples_per_rule:
                reads = rs.reads.get(label, [])
                values = {name: _shown_value(attrs.get(name)) for name in reads}
                marked = sorted(
                    [int(s[0]), int(s[1])] for name in reads for s in (attrs.get(name) or []) if not _is_document_score([s], n_chars)
                )
                record = {"id": doc_id, "source": src, "file": rel, "line": line, "values": values, **_snippet(text, marked, sample_chars)}
                bucket = samples["removed"].setdefault(f"{rs.key}\x00{label}", [])
                _keep_smallest(bucket, [sample_key(seed, doc_id), record], samples_per_rule)
        if doc_id in wanted_texts:
            texts[doc_id] = text[: sample_chars * 4]
        for name in contamination:
            spans = attrs.get(name) or []
            if not spans:
                continue
            _add(counts["contamination"].setdefault(name, {}), src, [1, len(spans), sum(int(e) - int(s) for s, e, *_ in spans)])
            for s, e, *score in spans:
                record = {"id": doc_id, "source": src, "file": rel, "line": line, "paragraph": text[int(s) : int(e)][:sample_chars]}
                record["score"] = score[0] if score else None
                _keep_smallest(samples["contaminated"].setdefault(name, []), [sample_key(seed, f"{doc_id}:{s}"), record], samples_per_rule)
    if tokenizer is not None:
        per = counts.setdefault("bytes_per_token", {})
        for src, batch in token_texts.items():
            n_tokens = sum(len(e.ids) for e in tokenizer.encode_batch(batch, add_special_tokens=False))
            per[src] = [sum(len(t.encode("utf-8", "surrogatepass")) for t in batch), n_tokens]
    return {"counts": counts, "samples": samples, "texts": texts}


def _keep_smallest(bucket: list, row: list, k: int) -> None:
    bucket.append(row)
    if len(bucket) > k:
        bucket.sort(key=lambda r: r[0])
        del bucket[k:]


def summarize_tokens(run: str, split: str, path: str) -> dict[str, Any]:
    """Per source of one token shard's metadata: documents, tokens and the document length histogram (tokens)."""
    from train.shards import iter_sidecar

    per: dict[str, Any] = {}
    for row in iter_sidecar(path):
        n = row.end - row.start
        src = row.src or "(none)"
        cell = per.setdefault(src, {"docs": 0, "tokens": 0, "lengths": {}})
        cell["docs"] += 1
        cell["tokens"] += n
        b = length_bin(n)
        cell["lengths"][b] = cell["lengths"].get(b, 0) + 1
    return {"counts": {"tokens": {run: {split: per}}}}
