"""Documents per CPU-second (per core) of three workload shapes, beside NeMo Curator's published CPU gates.

    .venv/bin/python bench/nemo_gates.py --processes 2

NeMo Curator's nightly benchmark gates its CPU pipelines on a 128-core machine; divided by 128 they
are per-core figures: a 21-filter heuristic pipeline >= 15,000 docs/s (117 docs/s a core), fastText
language id + fastText quality >= 70,000 docs/s (547), text modifiers >= 40,000 docs/s (312).
NeMo Curator does not install or run here (no GPU stack, no network for its models), so this
compares against those published numbers, not a run of NeMo side by side. The same shapes with
dolma-pipe, on the benchmark corpus (``bench/corpus.py``: 20,138 real documents of about 2.4 KB;
``--docs N``: its first N), each step a ``dolma-pipe`` command with ``--processes`` workers:

* ``heuristic``: ``tag`` with ``gopher``, ``c4``, ``char_length_with_paragraphs_v1`` and
  ``word_repetitions_v1``, then a ``mix`` whose filter has the 21 exclude rules of
  :data:`HEURISTIC_RULES` (Gopher's quality rules one by one, C4's unpunctuated-line and sentence-count
  rules, a length and a repetition rule), the kept documents written;
* ``fasttext``: ``tag`` with ``ft_lang_id`` (document level, as NeMo's language id) and ``quality``,
  a fastText classifier trained first by ``dolma-pipe train-classifier`` on the corpus (Python's
  documentation against fortunes and dictionary entries, ``--bucket 100000 --dim 32``, as
  docs/tag.md; the training is not measured);
* ``modifiers``: span replacement in ``mix`` (no filter): e-mail addresses, phone numbers and IP
  addresses masked (``pii_regex`` spans from ``tag``) and duplicate paragraphs removed (exact
  paragraph spans from ``dedup``). Rows: the ``mix`` alone (the modifier given its spans), with the
  PII tagging (every per-document step), and with the paragraph dedup too (a cross-document step).

Per row: documents / CPU-seconds of the whole process trees (user + system, ``peers.run_measured``:
docs per core-second, start-up included) and without start-up (the same commands on a 5-document
corpus subtracted), beside NeMo's per-core gate. Everything is under ``bench/_work/nemo_gates/``,
removed afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys

import corpus
import peers

WORK = os.path.join(peers.ROOT, "bench", "_work", "nemo_gates")
NEMO_CORES = 128
NEMO_GATES = {"heuristic": 15_000, "fasttext": 70_000, "modifiers": 40_000}  # docs/s on 128 cores, published

# 21 exclude rules (a document matching any is dropped), NeMo's 21 heuristic filters' kind.
HEURISTIC_RULES = [
    "gopher__word_count < 50",
    "char_length_with_paragraphs_v1__document < 200",
    "gopher__mean_word_length < 3",
    "gopher__mean_word_length > 10",
    "gopher__symbol_to_word_ratio > 0.1",
    "gopher__fraction_of_lines_starting_with_bullet_point > 0.9",
    "gopher__fraction_of_lines_ending_with_ellipsis > 0.3",
    "gopher__fraction_of_words_with_alpha_character < 0.8",
    "gopher__hash_to_word_ratio > 0.1",
    "gopher__fraction_of_duplicate_lines > 0.3",
    "gopher__fraction_of_characters_in_duplicate_lines > 0.2",
    "gopher__fraction_of_duplicate_paragraphs > 0.3",
    "gopher__fraction_of_characters_in_duplicate_paragraphs > 0.2",
    "gopher__fraction_of_characters_in_most_common_2grams > 0.2",
    "gopher__fraction_of_characters_in_most_common_3grams > 0.18",
    "gopher__fraction_of_characters_in_most_common_4grams > 0.16",
    "gopher__fraction_of_characters_in_duplicate_5grams > 0.15",
    "gopher__fraction_of_characters_in_duplicate_10grams > 0.1",
    "frac(c4__lines_with_no_ending_punctuation) > 0.5",
    "c4__kept_sentence_count < 3",
    "word_repetitions_v1__doc_frac_repetition > 0.3",
]


def dp(*args: str, progress: bool = False) -> peers.Measured:
    flags = [] if progress else ["--no-progress"]
    return peers.run_measured([os.path.join(peers.ROOT, ".venv", "bin", "dolma-pipe"), *args, *flags], env=peers.our_env())


def copy_corpus(root: str, n_docs: int | None) -> int:
    """The benchmark corpus's files (or its first ``n_docs`` documents) under ``root/documents``."""
    src = corpus.ensure()
    shutil.rmtree(root, ignore_errors=True)
    count = 0
    with open(os.path.join(os.path.dirname(src), "truth.json"), encoding="utf-8") as fh:
        files = json.load(fh)["files"]
    for rel in files:
        if n_docs is not None and count >= n_docs:
            break
        with gzip.open(os.path.join(src, rel), "rt", encoding="utf-8") as fh:
            lines = fh.readlines()
        if n_docs is not None:
            lines = lines[: n_docs - count]
        dst = os.path.join(root, "documents", rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with gzip.open(dst, "wt", encoding="utf-8", compresslevel=1) as fh:
            fh.writelines(lines)
        count += len(lines)
    return count


def mix(root: str, name: str, attributes: list[str], processes: int, exclude: list[str] | None = None, spans: list | None = None):
    stream: dict = {
        "name": name,
        "documents": [os.path.join(root, "documents", "*", "*.jsonl.gz")],
        "attributes": attributes,
        "output": {"path": os.path.join(root, "out", name), "max_size_in_bytes": 100_000_000, "discard_fields": ["attributes"]},
    }
    if exclude:
        stream["filter"] = {"syntax": "shorthand", "exclude": exclude}
    if spans:
        stream["span_replacement"] = spans
    spec = os.path.join(root, f"{name}.json")
    with open(spec, "w") as fh:
        json.dump({"streams": [stream], "processes": processes}, fh, indent=1)
    return dp("mix", "-c", spec)


def workloads(root: str, processes: int, model: str) -> dict[str, float]:
    """CPU seconds of every step of the three workloads on the corpus under ``root``."""
    docs = os.path.join(root, "documents", "*", "*.jsonl.gz")
    p = str(processes)
    cpu: dict[str, float] = {}
    cpu["heuristic tag"] = dp(
        "tag", "--documents", docs, "--experiment", "h", "--taggers", "gopher", "c4", "char_length_with_paragraphs_v1",
        "word_repetitions_v1", "--processes", p,
    ).cpu  # fmt: skip
    cpu["heuristic mix"] = mix(root, "heuristic", ["h"], processes, exclude=HEURISTIC_RULES).cpu
    cpu["fasttext tag"] = dp(
        "tag", "--documents", docs, "--experiment", "f", "--taggers", "ft_lang_id", "quality",
        "--tagger_options.ft_lang_id.granularity", "document", "--tagger_options.quality.model_path", model, "--processes", p,
    ).cpu  # fmt: skip
    cpu["pii tag"] = dp("tag", "--documents", docs, "--experiment", "m", "--taggers", "pii_regex", "--processes", p).cpu
    cpu["paragraph dedup"] = dp(
        "dedup", "--documents", docs, "--dedupe.name", "paras", "--dedupe.paragraphs.attribute_name", "bff_duplicate_paragraph_spans",
        "--dedupe.skip_empty", "--processes", p,
    ).cpu  # fmt: skip
    spans = [
        {"span": "$.attributes.bff_duplicate_paragraph_spans", "min_score": 0.5, "replacement": ""},
        {"span": "$.attributes.m__pii_regex__EMAIL_ADDRESS", "min_score": 0.0, "replacement": "|||EMAIL_ADDRESS|||"},
        {"span": "$.attributes.m__pii_regex__PHONE_NUMBER", "min_score": 0.0, "replacement": "|||PHONE_NUMBER|||"},
        {"span": "$.attributes.m__pii_regex__IP_ADDRESS", "min_score": 0.0, "replacement": "|||IP_ADDRESS|||"},
    ]
    cpu["modifier mix"] = mix(root, "modifiers", ["m", "paras"], processes, spans=spans).cpu
    return cpu


ROWS = [
    ("heuristic", "tag (4 taggers) + mix (21 rules)", ["heuristic tag", "heuristic mix"]),
    ("fasttext", "tag: ft_lang_id (document) + quality", ["fasttext tag"]),
    ("modifiers", "mix span replacement alone", ["modifier mix"]),
    ("modifiers", "pii_regex tag + mix", ["pii tag", "modifier mix"]),
    ("modifiers", "pii_regex tag + paragraph dedup + mix", ["pii tag", "paragraph dedup", "modifier mix"]),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=2, help="worker processes of every command")
    ap.add_argument("--docs", type=int, default=None, help="only the benchmark corpus's first N documents (default: all)")
    ap.add_argument("--keep", action="store_true", help="keep bench/_work/nemo_gates/")
    args = ap.parse_args(argv)
    print(f"command: python bench/nemo_gates.py {' '.join(sys.argv[1:] if argv is None else argv)}", flush=True)
    full, tiny = os.path.join(WORK, "full"), os.path.join(WORK, "tiny")
    n = copy_corpus(full, args.docs)
    copy_corpus(tiny, 5)
    model = os.path.join(WORK, "quality.bin")
    real = os.path.join(os.path.dirname(corpus.ensure()), "documents")
    dp(
        "train-classifier", "--positive", os.path.join(real, "python-doc", "*"), "--negative", os.path.join(real, "fortunes", "*"),
        os.path.join(real, "gcide", "*"), "--output", model, "--bucket", "100000", "--dim", "32", progress=True,
    )  # fmt: skip
    print(f"corpus: {n:,} documents; quality classifier {model}; {args.processes} processes", flush=True)
    start = workloads(tiny, args.processes, model)
    cpu = workloads(full, args.processes, model)
    for step in cpu:
        print(f"  {step:>16}: {cpu[step]:8.2f} CPU-s ({n / cpu[step]:,.0f} docs/CPU-s; start-up {start[step]:.2f} CPU-s)")
    print(
        f"\n{'workload':>10}  {'dolma-pipe steps':<40} {'CPU-s':>8} {'docs/core-s':>12} {'w/o start-up':>12} {'NeMo gate/core':>14} {'ratio':>6}"
    )
    results = []
    for kind, label, steps in ROWS:
        total = sum(cpu[s] for s in steps)
        steady = sum(cpu[s] - start[s] for s in steps)
        gate = NEMO_GATES[kind] / NEMO_CORES
        row = {
            "workload": kind,
            "steps": label,
            "docs": n,
            "cpu_s": round(total, 2),
            "docs_per_core_s": round(n / total),
            "docs_per_core_s_without_startup": round((n - 5) / steady) if steady > 0 else None,  # too few documents to tell
            "nemo_gate_per_core": round(gate),
            "ratio": round(n / total / gate, 1),
        }
        results.append(row)
        steady_cell = f"{row['docs_per_core_s_without_startup']:,}" if row["docs_per_core_s_without_startup"] else "n/a"
        print(
            f"{kind:>10}  {label:<40} {total:8.2f} {row['docs_per_core_s']:>12,} {steady_cell:>12}"
            f" {row['nemo_gate_per_core']:>14,} {row['ratio']:>5}x"
        )
    with open(os.path.join(WORK, "results.json"), "w") as fh:
        json.dump({"args": vars(args), "cpu": cpu, "startup": start, "rows": results}, fh, indent=1)
    if not args.keep:
        for path in (full, tiny, model, model + ".json"):
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else (os.path.exists(path) and os.remove(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
