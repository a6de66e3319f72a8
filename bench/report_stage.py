"""``dolma-pipe report`` at size: a generated corpus of N documents run through tag, dedup (exact
documents, MinHash), mix (filter rules) and tokenize, then the report over all of it, measured
(CPU seconds of the whole process tree, wall, peak RSS), beside Dolma's ``dolma stat`` (its
attribute histograms, the nearest thing Dolma has) on the same attribute files.

    .venv/bin/python bench/report_stage.py --docs 100000 1000000 --processes 2

The corpus: the benchmark corpus's real documents (``bench/corpus.py``) cut into pieces of about
``--chars`` characters, then rewritten round after round (each round a seeded share of words
replaced, dropped or upper-cased) until there are N, with 2% exact copies and 5% near copies of
earlier documents planted. Files of 25,000 documents per source. Everything is under
``bench/_work/report/<N>/`` (removed afterwards unless ``--keep``).
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import random
import shutil
import sys

import corpus
import peers

WORK = os.path.join(peers.ROOT, "bench", "_work", "report")
PER_FILE = 25_000


def make_corpus(n: int, chars: int, out: str, boilerplate: float = 0.0, paragraphs: float = 0.0, mixed: bool = False) -> int:
    """N documents from the real corpus under ``out/documents/<source>/``; returns the count.

    2% exact and 5% near copies of earlier documents of the source; with ``boilerplate``, that
    share of the documents is one family: a large template (about 6 pieces) with 2% of its words
    edited and a piece of its own inserted; with ``paragraphs``, that share of the documents get a
    paragraph from a pool of N / 1,000 popular paragraphs inserted at a paragraph boundary; with
    ``mixed``, the pieces are taken in a seeded random order and every document is rewritten (the
    first round too), so that a corpus of any size has the same mix of sources and edits (all three
    off by default, as ``bench/report_stage.py`` uses it; ``bench/scale.py`` turns them on)."""
    stamp = os.path.join(
        out, f".corpus-{n}-{chars}" + (f"-b{boilerplate}-p{paragraphs}-m{int(mixed)}" if boilerplate or paragraphs or mixed else "")
    )
    if os.path.exists(stamp):
        return n
    shutil.rmtree(out, ignore_errors=True)
    pieces: list[tuple[str, str]] = []
    for doc in corpus.iter_documents(os.path.dirname(corpus.ensure())):
        pieces += [(doc["source"], p) for p in corpus.chunk(doc["text"], chars)]
    rng = random.Random(1234)
    extra = random.Random(4321)  # the families' and paragraphs' draws: rng's sequence stays report.py's
    if mixed:
        extra.shuffle(pieces)
    template = "\n\n".join(text for _, text in extra.sample(pieces, 6)) if boilerplate else ""
    popular = extra.sample(pieces, min(len(pieces), max(10, n // 1000))) if paragraphs else []
    pool = [max(text.split("\n\n"), key=len) for _, text in popular]  # each piece's longest paragraph
    by_source: dict[str, list[dict]] = {}
    made = 0
    rounds = 0
    while made < n:
        for src, text in pieces:
            if made >= n:
                break
            r = rng.random()
            if made and r < 0.02:  # an exact copy of an earlier document of the source
                prior = by_source.get(src) or [{"text": text}]
                body = rng.choice(prior[-2000:])["text"]
            elif made and r < 0.07:
                prior = by_source.get(src) or [{"text": text}]
                body = corpus._near_copy(rng.choice(prior[-2000:])["text"], 0.05, rng)
            elif made and r < 0.07 + boilerplate:  # the boilerplate family: the template, edited, with a piece of its own
                parts = corpus._near_copy(template, 0.02, extra).split("\n\n")
                parts.insert(extra.randrange(len(parts) + 1), text)
                body = "\n\n".join(parts)
            else:
                body = text if rounds == 0 and not mixed else corpus._near_copy(text, 0.3, rng)
            if paragraphs and extra.random() < paragraphs:  # a popular paragraph, repeated across documents
                parts = body.split("\n\n")
                parts.insert(extra.randrange(len(parts) + 1), extra.choice(pool))
                body = "\n\n".join(parts)
            by_source.setdefault(src, []).append({"id": f"{src}-{made:08d}", "text": body, "source": src})
            made += 1
        rounds += 1
    for src, docs in by_source.items():
        os.makedirs(os.path.join(out, "documents", src), exist_ok=True)
        for i in range(0, len(docs), PER_FILE):
            path = os.path.join(out, "documents", src, f"part-{i // PER_FILE:04d}.jsonl.gz")
            with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as fh:
                for d in docs[i : i + PER_FILE]:
                    fh.write(json.dumps(d) + "\n")
    open(stamp, "w").close()
    return made


def dp(*args: str) -> peers.Measured:
    return peers.run_measured([os.path.join(peers.ROOT, ".venv", "bin", "dolma-pipe"), *args, "--no-progress"], env=peers.our_env())


def pipeline(out: str, processes: str) -> dict[str, float]:
    docs = os.path.join(out, "documents", "*", "*.jsonl.gz")
    cpu = {}
    cpu["tag"] = dp(
        "tag",
        "--documents",
        docs,
        "--experiment",
        "b",
        "--taggers",
        "lengths_v1",
        "pii_regex_with_counts",
        "gopher",
        "--processes",
        processes,
    ).cpu
    cpu["dedup"] = dp(
        "dedup", "--documents", docs, "--dedupe.name", "dd", "--dedupe.documents.attribute_name", "bff_duplicate_docs",
        "--dedupe.documents.key", "$.text", "--processes", processes,
    ).cpu  # fmt: skip
    cpu["minhash"] = dp("dedup", "--documents", docs, "--dedupe.name", "near", "--minhash.threshold", "0.8", "--processes", processes).cpu
    spec = {
        "streams": [
            {
                "name": "broad",
                "documents": [docs],
                "attributes": ["b", "dd", "near"],
                "filter": {"syntax": "shorthand", "exclude": ["gopher__keep == 0", "bff_duplicate_docs", "minhash_duplicate"]},
                "output": {"path": os.path.join(out, "mix"), "max_size_in_bytes": 50_000_000, "discard_fields": ["attributes"]},
            }
        ],
        "processes": int(processes),
    }
    with open(os.path.join(out, "mix.json"), "w") as fh:
        json.dump(spec, fh)
    cpu["mix"] = dp("mix", "-c", os.path.join(out, "mix.json")).cpu
    cpu["tokenize"] = dp(
        "tokenize", "--documents", os.path.join(out, "mix", "*.jsonl.gz"), "--destination", os.path.join(out, "tokens"),
        "--tokenizer.name_or_path", "olmo:gpt-neox-olmo-dolma-v1_5", "--validation.fraction", "0.01", "--processes", processes,
    ).cpu  # fmt: skip
    return cpu


def measure(n: int, args: argparse.Namespace) -> dict:
    out = os.path.join(WORK, str(n))
    made = make_corpus(n, args.chars, out)
    if not os.path.exists(os.path.join(out, ".pipeline")):
        for sub in ("mix", "tokens", "report"):
            shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
        pipeline(out, str(args.processes))
        open(os.path.join(out, ".pipeline"), "w").close()
    dest = os.path.join(out, "report")
    shutil.rmtree(dest, ignore_errors=True)
    ours = dp("report", "--runs", out, "--destination", dest, "--processes", str(args.processes))
    page = os.path.join(dest, "report.html")
    data = sum(os.path.getsize(p) for p in glob.glob(os.path.join(dest, "report_data", "**", "*"), recursive=True) if os.path.isfile(p))
    row = {
        "docs": made,
        "report_cpu_s": round(ours.cpu, 1),
        "report_wall_s": round(ours.wall, 1),
        "report_peak_rss_mb": round(ours.peak_rss_mb),
        "docs_per_cpu_s": round(made / ours.cpu),
        "html_mb": round(os.path.getsize(page) / 1e6, 2),
        "data_mb": round(data / 1e6, 2),
    }
    if args.dolma:
        peers.ensure_dolma()
        report = os.path.join(out, "dolma-stat.json")
        theirs = peers.run_measured(
            [
                os.path.join(peers.DOLMA_VENV, "bin", "dolma"), "stat", "--attributes",
                os.path.join(out, "attributes", "b", "*", "*.jsonl.gz"), "--report", report, "--processes", str(args.processes),
            ],
            env=peers.dolma_env(),
        )  # fmt: skip
        row.update(
            {
                "dolma_stat_cpu_s": round(theirs.cpu, 1),
                "dolma_stat_peak_rss_mb": round(theirs.peak_rss_mb),
                "dolma_stat_docs_per_cpu_s": round(made / theirs.cpu),
            }
        )
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[100_000], help="corpus sizes (documents)")
    ap.add_argument("--chars", type=int, default=400, help="characters per generated document (about)")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--dolma", action=argparse.BooleanOptionalAction, default=True, help="also run Dolma's dolma stat")
    ap.add_argument("--keep", action="store_true", help="keep the corpora and runs under bench/_work/report/")
    args = ap.parse_args(argv)
    rows = [measure(n, args) for n in args.docs]
    head = [
        "docs",
        "report CPU-s",
        "docs / CPU-s",
        "wall s",
        "peak RSS MB",
        "page MB",
        "data MB",
        "dolma stat CPU-s",
        "its docs / CPU-s",
        "its RSS MB",
    ]
    print("  ".join(f"{h:>16}" for h in head))
    for r in rows:
        cells = [r["docs"], r["report_cpu_s"], r["docs_per_cpu_s"], r["report_wall_s"], r["report_peak_rss_mb"], r["html_mb"], r["data_mb"]]
        cells += [r.get("dolma_stat_cpu_s", ""), r.get("dolma_stat_docs_per_cpu_s", ""), r.get("dolma_stat_peak_rss_mb", "")]
        print("  ".join(f"{c:>16,}" if isinstance(c, (int, float)) else f"{c:>16}" for c in cells))
    os.makedirs(WORK, exist_ok=True)
    with open(os.path.join(WORK, "results.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
