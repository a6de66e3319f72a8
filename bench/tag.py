"""Tagging speed: dolma-pipe's rule taggers against Dolma 1.2.1's on the same real documents.

    .venv/bin/python bench/tag.py [--processes 2] [--docs 20000] [--ours gopher_v1,c4_v2,...] [--dolma gopher_v1,...]

What it does:

1. Installs Dolma 1.2.1 in its own virtual environment (``bench/_work/dolma-venv``; once,
   :func:`peers.ensure_dolma`, with the boto stack pinned so pip does not backtrack).
2. Takes the real corpus of :mod:`corpus` (20,000+ documents of ~2.4 KB from Debian's
   documentation in many languages, ``bench/_work/real``; built once), or with ``--docs N`` its
   first N documents, linked (or cut) into ``bench/_work/tag/documents``.
3. Runs ``dolma tag`` and ``dolma-pipe tag`` on it, side by side in one run, each with
   ``--processes`` workers (2 by default), and measures the CPU seconds (user + system) of each
   whole process tree with ``os.wait4``; prints documents per CPU-second for both and the
   ratio, start-up (imports, model loading) included; then the same with the start-up
   subtracted (each tool also run on a 5-document corpus), the steady-state rate that matters on
   millions of documents.  Each tool is run ``--repeat`` times and its fastest run counts (the
   machine is shared; a run slowed by a neighbour says nothing about the tool).

The tagger sets are the same rules on both sides under Dolma's names: ``gopher_v1``, ``c4_v2``
and ``char_length_with_paragraphs_v1`` (the same values, see ``bench/parity.py``), and regex PII
with counts (Dolma's ``pii_regex_with_counts_fast_v2``, ours ``pii_regex_with_counts``: the same
kind of spans and counts, with our stricter patterns).
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import shutil

import peers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORK = os.path.join(HERE, "_work", "tag")

OURS_DEFAULT = "gopher_v1,c4_v2,pii_regex_with_counts,char_length_with_paragraphs_v1"
DOLMA_DEFAULT = "gopher_v1,c4_v2,pii_regex_with_counts_fast_v2,char_length_with_paragraphs_v1"


def corpus_files(n_docs: int | None) -> tuple[list[str], int, float]:
    """The real corpus's files under WORK/documents (all of them, or cut to the first n_docs
    documents); returns the files, the document count and the mean length in characters."""
    import corpus

    src = corpus.ensure()
    docs_dir = os.path.join(WORK, "documents")
    shutil.rmtree(WORK, ignore_errors=True)
    files, count, chars = [], 0, 0
    for path in sorted(glob.glob(os.path.join(src, "*", "*.jsonl.gz"))):
        if n_docs is not None and count >= n_docs:
            break
        dst = os.path.join(docs_dir, os.path.relpath(path, src))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        lines = gzip.open(path, "rt", encoding="utf-8").read().splitlines(keepends=True)
        if n_docs is not None:
            lines = lines[: n_docs - count]
        with gzip.open(dst, "wt", encoding="utf-8") as fh:
            fh.writelines(lines)
        chars += sum(len(json.loads(line)["text"]) for line in lines)
        count += len(lines)
        files.append(dst)
    return files, count, chars / max(count, 1)


def tiny_corpus(first_file: str, n: int = 5) -> str:
    """The first ``n`` documents, to measure each tool's start-up cost."""
    tiny = os.path.join(WORK, "tiny", "documents", "part-0000.jsonl.gz")
    os.makedirs(os.path.dirname(tiny), exist_ok=True)
    with gzip.open(first_file, "rt") as src, gzip.open(tiny, "wt") as dst:
        for _, line in zip(range(n), src):
            dst.write(line)
    return tiny


def count_rows(pattern: str) -> int:
    return sum(1 for f in glob.glob(pattern, recursive=True) for _ in gzip.open(f, "rt"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=None, help="only the corpus's first N documents (default: all, 20,000+)")
    ap.add_argument("--processes", type=int, default=2, help="worker processes of each tool")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each tool; the fastest counts")
    ap.add_argument("--ours", default=OURS_DEFAULT, help="comma-separated dolma-pipe tagger names")
    ap.add_argument("--dolma", default=DOLMA_DEFAULT, help="comma-separated Dolma tagger names")
    ap.add_argument("--skip-dolma", action="store_true", help="only run dolma-pipe")
    args = ap.parse_args()
    ours = [t for t in args.ours.split(",") if t]
    theirs = [t for t in args.dolma.split(",") if t]

    files, n_docs, mean_chars = corpus_files(args.docs)
    print(f"corpus: {n_docs:,} real documents in {len(files)} files, mean {mean_chars:,.0f} characters; {args.processes} processes each")
    tiny = tiny_corpus(files[0])

    def ours_run(documents: list[str], out: str) -> peers.Measured:
        shutil.rmtree(out, ignore_errors=True)
        cmd = [peers.OUR_PYTHON, "-m", "dolma_pipe.cli", "tag", "--documents", *documents, "--taggers", *ours]
        cmd += ["--experiment", "bench", "--destination", out, "--processes", str(args.processes), "--force", "--duplicate_ids", "ignore"]
        return peers.run_measured(cmd, env=peers.our_env(), cwd=ROOT)

    def dolma_run(documents: list[str]) -> peers.Measured:
        root = documents[0].rsplit(f"{os.sep}documents{os.sep}", 1)[0]
        shutil.rmtree(os.path.join(root, "attributes"), ignore_errors=True)
        cmd = [peers.ensure_dolma(), "tag", "--documents", *documents, "--taggers", *theirs, "--experiment", "bench"]
        return peers.run_measured(cmd + ["--processes", str(args.processes)], env=peers.dolma_env())

    out_ours = os.path.join(WORK, "out-ours")
    start_ours = min(ours_run([tiny], out_ours + "-tiny").cpu for _ in range(args.repeat))
    runs = [ours_run(files, out_ours) for _ in range(args.repeat)]
    best = min(runs, key=lambda m: m.cpu)
    rows = count_rows(os.path.join(out_ours, "bench", "**", "*.jsonl.gz"))
    assert rows == n_docs, f"dolma-pipe wrote {rows} rows for {n_docs} documents"
    rate_ours = n_docs / best.cpu
    steady_ours = (n_docs - 5) / max(best.cpu - start_ours, 1e-9)
    print(
        f"dolma-pipe tag [{', '.join(ours)}]: {best.cpu:.2f} CPU-s, {best.wall:.2f} s wall, "
        f"peak {best.peak_rss_mb:.0f} MB -> {rate_ours:,.0f} docs/CPU-s"
        + (f" (runs: {', '.join(f'{m.cpu:.2f}' for m in runs)} CPU-s)" if len(runs) > 1 else "")
    )
    print(f"    start-up {start_ours:.2f} CPU-s; without it {steady_ours:,.0f} docs/CPU-s")
    if args.skip_dolma:
        return

    start_dolma = min(dolma_run([tiny]).cpu for _ in range(args.repeat))
    runs = [dolma_run(files) for _ in range(args.repeat)]
    best = min(runs, key=lambda m: m.cpu)
    rows = count_rows(os.path.join(WORK, "attributes", "bench", "**", "*.gz"))
    assert rows == n_docs, f"dolma wrote {rows} rows for {n_docs} documents"
    rate_dolma = n_docs / best.cpu
    steady_dolma = (n_docs - 5) / max(best.cpu - start_dolma, 1e-9)
    print(
        f"dolma tag      [{', '.join(theirs)}]: {best.cpu:.2f} CPU-s, {best.wall:.2f} s wall, "
        f"peak {best.peak_rss_mb:.0f} MB -> {rate_dolma:,.0f} docs/CPU-s"
        + (f" (runs: {', '.join(f'{m.cpu:.2f}' for m in runs)} CPU-s)" if len(runs) > 1 else "")
    )
    print(f"    start-up {start_dolma:.2f} CPU-s; without it {steady_dolma:,.0f} docs/CPU-s")
    print(
        f"ratio: dolma-pipe is {rate_ours / rate_dolma:.1f}x Dolma 1.2.1 in documents per CPU-second "
        f"({steady_ours / steady_dolma:.1f}x without start-up)"
    )


if __name__ == "__main__":
    main()
