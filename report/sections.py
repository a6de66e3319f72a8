"""The page's data: one section per stage, each a list of charts, from the merged summaries and the
runs' own records (manifests, clusters files, mix plans, training metrics, evaluation tables).

A chart is a plain dict the page's script draws: ``bars`` (categories x series), ``hist`` (bins x
series), ``lines`` (x/y series), ``table``, ``samples`` (documents with marked spans) or
``clusters`` (members side by side, differences marked). A chart whose numbers depend on the
weighting carries them per weight (``docs``, ``chars``, ``tokens``); the page's switch picks one.
Every chart has a one-line caption saying what it shows.
"""

from __future__ import annotations

import difflib
import gzip
import heapq
import io
import math
from collections import Counter
from typing import Any

import orjson

from dolma_pipe import storage
from report.bins import bin_edges, length_edges, sorted_bins, value_bin
from report.discover import RunSet, evaluation_table
from report.resolved import Clusters
from report.summarize import SHORT, language_prefix
from report.training import TrainRun

WEIGHTS = ("docs", "chars", "tokens")
TOKEN_SHARDS = "token shards (all sources)"
DEDUP_KINDS = {
    "documents": "exact duplicate documents",
    "paragraphs": "duplicate paragraphs",
    "minhash": "near-duplicate documents",
    "decontamination": "contaminated paragraphs",
    "substrings": "repeated substrings",
}


class Weigher:
    """Turns ``[docs, chars, bytes]`` into the three weights; tokens from each source's measured bytes per token."""

    def __init__(self, bytes_per_token: dict[str, list[int]]):
        self.ratio = {s: b / t for s, (b, t) in bytes_per_token.items() if t}
        total_b = sum(b for b, _ in bytes_per_token.values())
        total_t = sum(t for _, t in bytes_per_token.values())
        self.default = total_b / total_t if total_t else None

    @property
    def has_tokens(self) -> bool:
        return self.default is not None

    def tokens(self, src: str, n_bytes: float) -> float | None:
        r = self.ratio.get(src, self.default)
        return None if r is None else round(n_bytes / r, 1)

    def of(self, src: str, w: list[float]) -> dict[str, float | None]:
        return {"docs": w[0], "chars": w[1], "tokens": self.tokens(src, w[2])}


def _weighted_series(per_source: dict[str, dict[str, list]], keys: list[str], weigh: Weigher) -> list[dict[str, Any]]:
    series = []
    for src in sorted(per_source):
        cells = per_source[src]
        values = {w: [] for w in WEIGHTS}  # type: dict[str, list]
        for k in keys:
            cell = cells.get(k)
            ws = weigh.of(src, cell) if cell else {w: 0 for w in WEIGHTS}
            for w in WEIGHTS:
                values[w].append(ws[w] or 0)
        series.append({"name": src, "values": values})
    return series


def _fmt(x: float) -> str:
    """A bin edge as its label reads it: 0.05, 12, 1.4k, 2k, 3.2M."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "nan"
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= size:
            return f"{x / size:.2g}{unit}" if abs(x) < 10 * size else f"{x / size:.3g}{unit}"
    return f"{x:.3g}"


def _hist(per_source: dict[str, dict[str, list]], weigh: Weigher, edges=bin_edges) -> dict[str, Any]:
    """A histogram's bins (their edges, drawn on a real axis, and a label each) and series."""
    keys: dict[str, None] = {}
    for cells in per_source.values():
        keys.update(dict.fromkeys(cells))
    ordered = sorted_bins(keys, edges)
    return {
        "edges": [[lo, hi] for _, lo, hi in ordered],
        "bins": [f"{_fmt(lo)}–{_fmt(hi)}" for _, lo, hi in ordered],
        "series": _weighted_series(per_source, [k for k, _, _ in ordered], weigh),
    }


def _off_axis(per_source: dict[str, dict[str, list]]) -> int:
    """Documents in a histogram's NaN and infinite bins (they have no place on an axis)."""
    return sum(w[0] for cells in per_source.values() for k, w in cells.items() if not all(map(math.isfinite, bin_edges(k))))


def chart(kind: str, title: str, caption: str, **data: Any) -> dict[str, Any]:
    return {"type": kind, "title": title, "caption": caption, **data}


# ---- overview --------------------------------------------------------------------------------


def _training_table(found: RunSet, trains: list[TrainRun]) -> dict[str, Any]:
    rows = []
    for t in trains:
        steps = "" if t.step is None else f"{t.step:,}" + ("" if t.end is None else f" of {t.end:,}")
        ckpts = f"{len(t.checkpoints):,} (newest: step {t.checkpoints[-1]:,})" if t.checkpoints else "none"
        loss = "" if t.loss is None else round(t.loss, 4)
        val = "" if t.eval_loss is None else round(t.eval_loss, 4)
        rows.append(
            [found.name_of(t.folder), t.status, steps, "" if t.tokens is None else t.tokens, loss, val, ckpts, (t.finished or "")[:19]]
        )
    return chart(
        "table",
        "Training runs",
        "Every training run found (a save_dir with metrics.jsonl): complete (a checkpoint at its last step), unfinished (its "
        "newest checkpoint is earlier: running, preempted or killed; a rerun resumes there) or no checkpoint; the last step "
        "logged of the steps it asks for, tokens seen, the last training and validation losses, its complete checkpoints.",
        columns=["run", "status", "steps", "tokens", "loss", "validation loss", "checkpoints", "finished"],
        rows=rows,
    )


def overview(found: RunSet, counts: dict[str, Any], weigh: Weigher, trains: list[TrainRun]) -> dict[str, Any]:
    rows = []
    for run in found.runs:
        m = run.manifest
        docs = m.totals.get("docs_in", 0)
        secs = sum(p.seconds for p in m.phases)
        bad = sum(m.errors.values())
        rows.append([run.name, m.stage, run.status, docs, bad, round(secs, 2), (run.finished or "")[:19]])
    summary = chart(
        "table",
        "Runs",
        "Every run found: its stage, status (killed: its manifest says running but its process is gone), documents read, "
        "bad records quarantined, task seconds and when it finished.",
        columns=["run", "stage", "status", "documents", "bad records", "task seconds", "finished"],
        rows=rows,
    )
    # The funnel: what each step holds, per source.
    steps: list[tuple[str, dict[str, dict[str, float | None]]]] = []
    corpus = counts.get("sources", {})
    if corpus:
        steps.append(("corpus", {s: weigh.of(s, w) for s, w in corpus.items()}))
    for key, rule in sorted(counts.get("rules", {}).items()):
        kept: dict[str, dict[str, float | None]] = {}
        for src, per in rule.get("by_source", {}).items():
            w = per.get("kept")
            if w:
                kept[src] = weigh.of(src, w)
        steps.append((f"mix {key}: kept", kept))
    for run, splits in sorted(counts.get("tokens", {}).items()):
        # A shard's metadata names the file a document came from, not its source: one series.
        cur: dict[str, float | None] = {"docs": 0, "chars": None, "tokens": 0}
        for cells in splits.values():
            for c in cells.values():
                cur["docs"] = (cur["docs"] or 0) + c["docs"]
                cur["tokens"] = (cur["tokens"] or 0) + c["tokens"]
        steps.append((f"tokens {run}", {TOKEN_SHARDS: cur}))
    sources = sorted({s for _, per in steps for s in per})
    series = [{"name": src, "values": {w: [(per.get(src) or {}).get(w) or 0 for _, per in steps] for w in WEIGHTS}} for src in sources]
    funnel = chart(
        "bars",
        "From corpus to tokens",
        "Documents (or characters, or tokens) per source at each step: the corpus the runs read, what each mix kept (a stream: what it wrote; a source: what it samples from), "
        "and what each tokenize run wrote (all sources together: shards record files, not sources; no characters).",
        categories=[name for name, _ in steps],
        series=series,
        stacked=True,
        weighted=True,
    )
    charts = [summary, *([_training_table(found, trains)] if trains else []), funnel]
    if found.problems:
        charts.append(
            chart("table", "Notes", "What the report could not read, and left out.", columns=["note"], rows=[[p] for p in found.problems])
        )
    return {"id": "overview", "title": "Overview", "charts": charts}


# ---- tag --------------------------------------------------------------------------------------


def _family(key: str) -> tuple[str, str]:
    """(family, field) of an attribute name: ``<set>__<tagger>`` and the rest (a name without
    ``__``, as dedup writes them, is a family of its own)."""
    head, sep, last = key.rpartition("__")
    return (head, last) if sep else (key, key)


def _flags(keys: list[str], scores: dict[str, Any], weigh: Weigher) -> dict[str, Any]:
    """One chart of every 0/1 attribute: the share of documents (characters, tokens) it flags."""
    rows = []
    for key in keys:
        by_source = {}
        for src, cells in sorted(scores[key].items()):
            on = cells.get(value_bin(1.0), [0, 0, 0])
            everyone = [sum(w[i] for w in cells.values()) for i in range(3)]
            by_source[src] = [{w: v or 0 for w, v in weigh.of(src, on).items()}, {w: v or 0 for w, v in weigh.of(src, everyone).items()}]
        rows.append({"name": key, "by_source": by_source})
    return chart(
        "flags",
        "Flags (attributes that are 0 or 1)",
        "The share of documents (or characters, or tokens) each 0/1 attribute flags, of those it was computed on, per source.",
        flags=rows,
        weighted=True,
    )


def tag(found: RunSet, counts: dict[str, Any], weigh: Weigher) -> dict[str, Any]:
    """Per language tagger, its languages; document lengths; one chart of every 0/1 flag; one
    chart per attribute family (a tagger's fields: a small histogram each). Dedup's attributes are
    the Dedup section's."""
    charts = []
    langs = counts.get("languages", {})
    for prefix, per_source in sorted(langs.items()):
        totals: Counter = Counter()
        for cells in per_source.values():
            for lang, w in cells.items():
                totals[lang] += w[0]
        top = [lang for lang, _ in totals.most_common(15)]
        charts.append(
            chart(
                "bars",
                f"Languages ({prefix})",
                f"The top-scoring language of each document, per source (the {len(top)} most frequent of {len(totals)}); the "
                "tagger's per-language scores are not charted one by one.",
                categories=top,
                series=_weighted_series(per_source, top, weigh),
                stacked=True,
                weighted=True,
                xlabel="language",
            )
        )
    doc_lengths = counts.get("lengths", {})
    if doc_lengths:
        charts.append(
            chart(
                "hist",
                "Document length (characters)",
                "Documents per length in characters (half-octave bins), per source.",
                weighted=True,
                xlabel="characters",
                **_hist(doc_lengths, weigh, length_edges),
            )
        )
    dedup = {name for run in found.of("dedup") for name in dedup_attributes(run.manifest.config)}
    scores, spans = counts.get("scores", {}), counts.get("spans", {})
    nonbinary = counts.get("nonbinary", {})
    shown = [k for k in sorted(set(scores) | set(spans)) if k not in dedup and not (k in scores and language_prefix(k))]
    flags = [k for k in shown if k in scores and k not in spans and not nonbinary.get(k, 1)]
    if flags:
        charts.append(_flags(flags, scores, weigh))
    families: dict[str, list[dict[str, Any]]] = {}
    for key in shown:
        if key in flags:
            continue
        family, name = _family(key)
        panels = families.setdefault(family, [])
        if key in spans:  # a span attribute whose spans sometimes cover a whole document: shown with its spans
            lengths = {src: {b: [c[0], c[1], c[1]] for b, c in row["lengths"].items()} for src, row in spans[key].items()}
            panels.append({"title": f"{name}: span lengths", "xlabel": "characters", **_hist(lengths, weigh, length_edges)})
        else:
            off = _off_axis(scores[key])
            note = f" ({off:,} NaN or infinite, not drawn)" if off else ""
            panels.append({"title": f"{name}{note}", "xlabel": "score", **_hist(scores[key], weigh)})
    for family, panels in sorted(families.items()):
        charts.append(
            chart(
                "family",
                family,
                f"The {len(panels)} attribute{'s' if len(panels) > 1 else ''} of {family}: document scores (bins of 0.05 in [0, 1], "
                "quarter octaves beyond) and span lengths in characters (half octaves; weighted by spans, characters or tokens), "
                "per source.",
                panels=panels,
                weighted=True,
            )
        )
    return {"id": "tag", "title": "Tag: attributes", "charts": charts}


# ---- filters and mix --------------------------------------------------------------------------


def _overlap_table(overlap: dict[str, int], labels: list[str]) -> dict[str, Any]:
    """Pairs of rules: documents both matched (the diagonal: documents each matched)."""
    n = len(labels)
    both = [[0] * n for _ in range(n)]
    for mask_s, docs in overlap.items():
        mask = int(mask_s)
        on = [i for i in range(n) if mask >> i & 1]
        for i in on:
            for j in on:
                both[i][j] += docs
    short = [label.split(":", 1)[0] for label in labels]
    return chart(
        "table",
        "Overlap between rules",
        "Documents matched by both the row's and the column's rule (the diagonal: by the rule alone), every rule evaluated "
        "on every document.",
        columns=["rule", *short],
        rows=[[labels[i], *both[i]] for i in range(n)],
    )


def mixes(found: RunSet, rule_sets: dict[str, Any], counts: dict[str, Any], samples: dict[str, list], weigh: Weigher) -> dict[str, Any]:
    """``rule_sets``: the report's :class:`~.summarize.RuleSet` of each group, by its key."""
    charts = []
    for g in found.groups:
        key = f"{g.run} / {g.name}"
        rs = rule_sets[key]
        rule = counts.get("rules", {}).get(key, {})
        by_source = rule.get("by_source", {})
        labels = sorted({lab for per in by_source.values() for lab in per if lab != "kept"})
        removed_table = []
        for lab in labels:
            docs = sum(per.get(lab, [0])[0] for per in by_source.values())
            toks = sum(weigh.tokens(src, per[lab][2]) or 0 for src, per in by_source.items() if lab in per)
            chars = sum(per[lab][1] for per in by_source.values() if lab in per)
            # min_text_length: counted per file by the mix, not which documents: no characters or tokens.
            removed_table.append([lab, docs, chars, round(toks)] if lab != SHORT else [lab, docs, "", ""])
        kept_docs = sum(per.get("kept", [0])[0] for per in by_source.values())
        removed_table.append(["kept", kept_docs, sum(per.get("kept", [0, 0])[1] for per in by_source.values()), ""])
        short = (
            " min_text_length: documents the rules kept and the mix then dropped as too short after span replacement (the mix "
            "counts them per file, not which ones: no characters or tokens; the kept row's characters include theirs)."
            if SHORT in labels
            else ""
        )
        charts.append(
            chart(
                "table",
                f"{key}: removed per rule",
                f"Documents, characters and tokens each rule of the {g.kind} {g.name!r} removed (a document counts against the "
                "rule that decided, in Dolma's order), from the verdicts the mix kept (or its rules evaluated again); kept: the "
                f"documents the mix wrote.{short}",
                columns=["rule", "documents", "characters", "tokens"],
                rows=removed_table,
            )
        )
        if labels:
            charts.append(
                chart(
                    "bars",
                    f"{key}: removed per rule and source",
                    "What each rule removed, per source.",
                    categories=labels,
                    series=_weighted_series(by_source, labels, weigh),
                    stacked=True,
                    weighted=True,
                )
            )
        if rs.labels:
            charts.append(_overlap_table(rule.get("overlap", {}), rs.labels))
        for lab in labels:
            picked = samples.get(f"{key}\x00{lab}", [])
            if picked:
                charts.append(
                    chart(
                        "samples",
                        f"{key}: removed by {lab}",
                        f"A seeded sample of the documents {lab!r} removed; the spans of the attributes it reads are marked, "
                        "their values listed.",
                        docs=[r for _, r in picked],
                    )
                )
    plans = []
    for run in found.of("mix"):
        count = next((p for p in run.manifest.phases if p.name == "count"), None)
        if count is None or "plan" not in count.step:
            continue
        taken = run.manifest.results.get("taken", {})
        for p in count.step["plan"]:
            row = [run.name, p["name"], p["docs"], p["available"], p["requested"], p["repetition"], p["max_repetition"]]
            row.append(", ".join(f"seed {s}: {per[p['name']][1]:,}" for s, per in sorted(taken.items()) if p["name"] in per))
            plans.append(row)
        names = [p["name"] for p in count.step["plan"]]
        charts.append(
            chart(
                "bars",
                f"{run.name}: tokens per source",
                "Tokens available after filters, requested by the plan, and taken by each seed.",
                categories=names,
                series=[
                    {"name": "available", "values": [p["available"] for p in count.step["plan"]]},
                    {"name": "requested", "values": [p["requested"] for p in count.step["plan"]]},
                    *[{"name": f"taken seed {s}", "values": [per.get(n, [0, 0])[1] for n in names]} for s, per in sorted(taken.items())],
                ],
                stacked=False,
                weighted=False,
                ylabel="tokens",
            )
        )
    if plans:
        charts.append(
            chart(
                "table",
                "Mix plans",
                "Each Dolmino source: documents and tokens after filters, tokens requested, repetition (requested / available) "
                "and its cap, and the tokens each seed took.",
                columns=["run", "source", "documents", "available", "requested", "repetition", "max", "taken"],
                rows=plans,
            )
        )
    return {"id": "mix", "title": "Filters and mix", "charts": charts}


# ---- dedup ------------------------------------------------------------------------------------


def dedup_attributes(config: dict[str, Any]) -> dict[str, str]:
    """Attribute name -> what it marks, for one dedup run's config."""
    out = {}
    dd = config.get("dedupe") or {}
    for kind in ("documents", "paragraphs"):
        if dd.get(kind):
            out[dd[kind]["attribute_name"]] = DEDUP_KINDS[kind]
    for kind in ("minhash", "decontamination", "substrings"):
        if config.get(kind):
            out[config[kind]["attribute_name"]] = DEDUP_KINDS[kind]
    return out


def read_clusters(path: str, largest: int, members: int) -> tuple[Counter, list[dict[str, Any]]]:
    """Cluster sizes (clusters per size) and the ``largest`` clusters with their first ``members`` rows."""
    sizes: Counter = Counter()
    heads: list[tuple[int, int]] = []
    rows: dict[int, list[dict[str, Any]]] = {}
    with storage.open_read(path) as raw, gzip.open(raw) as fh:
        for line in io.BufferedReader(fh):
            r = orjson.loads(line)
            if r.get("survivor"):
                sizes[r["size"]] += 1
                heads.append((-r["size"], r["cluster"]))
    top = {c for _, c in heapq.nsmallest(largest, heads)}
    with storage.open_read(path) as raw, gzip.open(raw) as fh:
        for line in io.BufferedReader(fh):
            r = orjson.loads(line)
            if r["cluster"] in top and len(rows.setdefault(r["cluster"], [])) < members:
                rows[r["cluster"]].append(r)
    ordered = sorted(rows.items(), key=lambda kv: (-kv[1][0]["size"], kv[0]))
    return sizes, [{"cluster": c, "size": rs[0]["size"], "members": rs} for c, rs in ordered]


def diff_words(a: str, b: str) -> list[list[str]]:
    """``b`` as runs of words, each marked ``=`` (as in ``a``) or ``+`` (not in ``a``)."""
    wa, wb = a.split(" "), b.split(" ")
    out: list[list[str]] = []
    for op, _, _, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if j2 > j1:
            out.append(["=" if op == "equal" else "+", " ".join(wb[j1:j2])])
    return out


def dedup(
    found: RunSet, counts: dict[str, Any], samples: dict[str, Any], texts: dict[str, str], clusters: dict[str, Clusters], weigh: Weigher
) -> dict[str, Any]:
    charts = []
    present = counts.get("present", {})
    corpus = counts.get("sources", {})
    for run in found.of("dedup"):
        names = dedup_attributes(run.manifest.config)
        rows = []
        for attr, what in names.items():
            for src in sorted(corpus):
                w = (present.get(attr) or {}).get(src)
                span_row = (counts.get("spans", {}).get(attr) or {}).get(src) or {}
                covered = span_row.get("covered", 0) + (w[1] if w and attr not in counts.get("spans", {}) else 0)
                total = corpus[src][1] or 1
                rows.append([attr, what, src, w[0] if w else 0, corpus[src][0], f"{100 * covered / total:.2f}%"])
        charts.append(
            chart(
                "table",
                f"{run.name}: what it marked",
                "Per attribute and source: documents with at least one marked span, of the documents read, and the share of "
                "the source's characters marked (the duplicate-paragraph share, for paragraphs).",
                columns=["attribute", "marks", "source", "documents marked", "documents", "characters marked"],
                rows=rows,
            )
        )
        info = clusters.get(run.name)
        if info:
            sizes = info.sizes
            ordered = sorted(sizes, key=int)
            charts.append(
                chart(
                    "bars",
                    f"{run.name}: near-duplicate cluster sizes",
                    "Clusters per size (members, the survivor included).",
                    categories=ordered,
                    series=[{"name": "clusters", "values": [sizes[s] for s in ordered]}],
                    stacked=False,
                    weighted=False,
                    ordered=True,
                    xlabel="members",
                    ylabel="clusters",
                )
            )
            shown = []
            for c in info.largest:
                members = [m for m in c.members if m.id in texts]
                if not members:
                    continue
                base = texts[members[0].id]
                shown.append(
                    {
                        "cluster": c.cluster,
                        "size": c.size,
                        "members": [
                            {"id": m.id, "file": m.file, "line": m.line, "survivor": m.survivor, "diff": diff_words(base, texts[m.id])}
                            for m in members
                        ],
                    }
                )
            if shown:
                charts.append(
                    chart(
                        "clusters",
                        f"{run.name}: the largest clusters",
                        "Members side by side, the survivor first; words a member does not share with the survivor are marked.",
                        clusters=shown,
                    )
                )
    for attr, per_source in sorted(counts.get("contamination", {}).items()):
        charts.append(
            chart(
                "table",
                f"{attr}: contamination",
                "Per source: documents with contaminated paragraphs, the paragraphs and their characters.",
                columns=["source", "documents", "paragraphs", "characters"],
                rows=[[src, *w] for src, w in sorted(per_source.items())],
            )
        )
        picked = samples.get("contaminated", {}).get(attr, [])
        if picked:
            charts.append(
                chart(
                    "samples",
                    f"{attr}: contaminated paragraphs",
                    "A seeded sample of contaminated paragraphs, each with the evaluation text it matched.",
                    docs=[r for _, r in picked],
                )
            )
    return {"id": "dedup", "title": "Dedup", "charts": charts}


# ---- tokenize ---------------------------------------------------------------------------------


def tokenize(counts: dict[str, Any]) -> dict[str, Any]:
    charts = []
    for run, splits in sorted(counts.get("tokens", {}).items()):
        rows = []
        for split, per in sorted(splits.items()):
            for src, c in sorted(per.items()):
                rows.append([split, src.rsplit("/", 1)[-1], c["docs"], c["tokens"], round(c["tokens"] / max(1, c["docs"]), 1)])
        charts.append(
            chart(
                "table",
                f"{run}: tokens per input file and split",
                "Documents and tokens each input file (the metadata's src) contributes to each split, from the shards' metadata.",
                columns=["split", "input file", "documents", "tokens", "tokens per document"],
                rows=rows,
            )
        )
        per_source: dict[str, dict[str, list]] = {}
        for per in splits.values():
            for src, c in per.items():
                cells = per_source.setdefault(src, {})
                for b, n in c["lengths"].items():
                    cells.setdefault(b, [0, 0, 0])[0] += n
        keys: dict[str, None] = {}
        for cells in per_source.values():
            keys.update(dict.fromkeys(cells))
        ordered = sorted_bins(keys, length_edges)
        charts.append(
            chart(
                "hist",
                f"{run}: document length in tokens",
                "Documents per length in tokens (half-octave bins), per input file.",
                edges=[[lo, hi] for _, lo, hi in ordered],
                bins=[f"{_fmt(lo)}–{_fmt(hi)}" for _, lo, hi in ordered],
                xlabel="tokens",
                ylabel="documents",
                series=[
                    {"name": s.rsplit("/", 1)[-1], "values": [per_source[s].get(k, [0])[0] for k, _, _ in ordered]}
                    for s in sorted(per_source)
                ],
                stacked=True,
                weighted=False,
            )
        )
    return {"id": "tokenize", "title": "Tokenize", "charts": charts}


# ---- train ------------------------------------------------------------------------------------


def _thin(rows: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    if len(rows) <= n:
        return rows
    step = len(rows) / n
    picked = [rows[int(i * step)] for i in range(n)]
    return picked if picked[-1] is rows[-1] else [*picked[:-1], rows[-1]]


def _round(x: float | None, digits: int) -> float | str:
    return "" if x is None else round(x, digits)


def _goodput_table(found: RunSet, trains: list[TrainRun]) -> dict[str, Any]:
    rows = []
    for t in trains:
        g = t.goodput
        if g is None:
            continue
        iv, rec = g["interval"], g["recovery_s"]
        if iv["mttf_s"] is None:
            advice = "none needed (no failure)"
        elif iv["recommended_s"] is None:
            advice = ""
        else:
            steps = "" if iv["recommended_steps"] is None else f"{iv['recommended_steps']:,} steps, "
            advice = f"{steps}{iv['recommended_s']:.1f} s"
        current = "" if iv["current_steps"] is None else f"{iv['current_steps']:,} steps"
        stall = "" if g["checkpoint_stall_fraction"] is None else f"{100 * g['checkpoint_stall_fraction']:.2f}%"
        rows.append(
            [
                found.name_of(t.folder),
                round(g["wall_s"], 1),
                g["attempts"],
                g["failures"],
                g["preemptions"],
                _round(g["active_fraction"], 3),
                _round(g["ettr"], 3),
                g["steps_lost"],
                _round(rec["median"], 1),
                _round(rec["p90"], 1),
                stall,
                current,
                advice,
            ]
        )
    return chart(
        "table",
        "Goodput",
        "How much of each training run's wall time became model, from its goodput.jsonl (python -m train.goodput SAVE_DIR "
        "prints all of it): wall time over all attempts; attempts, failures (an attempt that did not end finished or "
        "preempted) and preemptions; active training fraction (the step loop's seconds / wall time); ETTR (seconds of the "
        "steps that survive into the final model / wall time); steps trained again after failures; recovery from a failure "
        "to the next first step (median, p90); the seconds the loop was blocked by checkpoint saves, as a share of step "
        "time; the checkpoint interval now and the one Young/Daly recommends for the measured save time and failure rate.",
        columns=[
            "run", "wall s", "attempts", "failures", "preemptions", "active fraction", "ETTR", "steps lost",
            "recovery median s", "recovery p90 s", "checkpoint stall", "checkpoint interval", "recommended interval",
        ],
        rows=rows,
    )  # fmt: skip


def train(found: RunSet, trains: list[TrainRun], points: int) -> dict[str, Any]:
    charts = []
    if any(t.goodput is not None for t in trains):
        charts.append(_goodput_table(found, trains))
    runs: dict[str, list[dict[str, Any]]] = {}
    evals: dict[str, list[dict[str, Any]]] = {}
    for t in trains:
        name = found.name_of(t.folder)
        runs[name] = _thin([r for r in t.rows if "loss" in r and "step" in r], points)
        evals[name] = [r for r in t.rows if "eval/loss" in r]
    for metric, label in (
        ("loss", "training loss"),
        ("lr", "learning rate"),
        ("grad_norm", "gradient norm"),
        ("tokens_per_s", "tokens per second"),
    ):
        series = [
            {"name": name, "x": [r["step"] for r in rows if metric in r], "y": [r[metric] for r in rows if metric in r]}
            for name, rows in sorted(runs.items())
        ]
        series = [s for s in series if s["x"]]
        if series:
            charts.append(
                chart("lines", label.capitalize(), f"The {label} against the step, per run.", series=series, xlabel="step", ylabel=metric)
            )
    val = [
        {"name": name, "x": [r.get("step", i) for i, r in enumerate(rows)], "y": [r["eval/loss"] for r in rows]}
        for name, rows in sorted(evals.items())
        if rows
    ]
    if val:
        charts.append(
            chart(
                "lines", "Validation loss", "The held-out loss at each evaluation, per run.", series=val, xlabel="step", ylabel="eval/loss"
            )
        )
    for path in found.evaluations:
        table = evaluation_table(orjson.loads(storage.read_bytes(path))) or {}
        names = list(table)
        short = [n.rstrip("/").rsplit("/", 2)[-2] + "/" + n.rstrip("/").rsplit("/", 1)[-1] if "/" in n else n for n in names]
        domains = sorted({d for r in table.values() for d in r.get("domains", {})})
        columns = ["checkpoint", "loss", "ppl", *[f"{d} loss" for d in domains]]
        rows = [
            [
                s,
                round(r["loss"], 4),
                round(r["ppl"], 3),
                *[round(r.get("domains", {}).get(d, {}).get("loss", math.nan), 4) for d in domains],
            ]
            for s, r in zip(short, table.values())
        ]
        charts.append(
            chart(
                "table",
                f"Evaluation ({path.rsplit('/', 1)[-1]})",
                "Validation loss and perplexity of each checkpoint on the same held-out shards (per domain where the table has them).",
                columns=columns,
                rows=rows,
            )
        )
        charts.append(
            chart(
                "bars",
                "The soup against its ingredients",
                "Validation loss of each checkpoint in the evaluation table (lower is better): the soup beside the models it averages.",
                categories=short,
                series=[{"name": "validation loss", "values": [round(r["loss"], 4) for r in table.values()]}],
                stacked=False,
                weighted=False,
                counts=False,
                ylabel="validation loss",
            )
        )
    return {"id": "train", "title": "Train", "charts": charts}
