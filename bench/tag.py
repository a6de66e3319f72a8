"""Tagging speed: dolma-pipe's rule taggers against Dolma 1.2.1's on the same corpus.

    .venv/bin/python bench/tag.py [--docs 3000] [--ours gopher_v1,c4_v2,...] [--dolma gopher_v1,...]

What it does:

1. Installs Dolma 1.2.1 in its own virtual environment (``bench/_work/dolma-venv``; once,
   :func:`peers.ensure_dolma`, with the boto stack pinned so pip does not backtrack).
2. Builds a corpus of ~3 KB real documents from the sample corpus (long pages cut at a line
   boundary, short ones joined), repeated to ``--docs`` documents under ``bench/_work/corpus``.
3. Runs ``dolma-pipe tag`` and ``dolma tag`` on it, one process each, and measures the CPU
   seconds (user + system) of each whole process tree with ``os.wait4``; prints documents per
   CPU-second for both and the ratio, with start-up (imports, model loading) included; then the
   same with the start-up subtracted (each tool also run on a 5-document corpus), the
   steady-state rate that matters on millions of documents.

The tagger sets are the same rules on both sides: Gopher, C4, regex PII with counts and
character lengths with paragraphs.  Our PII tagger's name is configurable (``--ours``); when it
is not registered the bench runs without PII on both sides and says so.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORK = os.path.join(HERE, "_work")

OURS_DEFAULT = "gopher_v1,c4_v2,pii_regex_with_counts,char_length_with_paragraphs_v1"
DOLMA_DEFAULT = "gopher_v1,c4_v2,pii_regex_with_counts_fast_v2,char_length_with_paragraphs_v1"
OUR_PYTHON = os.path.join(ROOT, ".venv", "bin", "python")


def build_corpus(n_docs: int, target_chars: int = 3000) -> str:
    """Documents of about ``target_chars`` characters of real text; returns the documents dir."""
    sys.path.insert(0, ROOT)
    from dolma_pipe.documents import read_documents

    root = os.path.join(WORK, "corpus")
    docs_dir = os.path.join(root, "documents")
    stamp = os.path.join(root, f".built-{n_docs}-{target_chars}")
    if os.path.exists(stamp):
        return docs_dir
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(docs_dir)
    texts: list[str] = []
    pending = ""
    for path in sorted(glob.glob(os.path.join(ROOT, "examples/sample/documents/*/*"))):
        for _, row in read_documents(path, None):
            text = row["text"]
            if len(text) >= target_chars:
                cut = text.rfind("\n", 0, target_chars)
                texts.append(text[: cut if cut > target_chars // 2 else target_chars])
                continue
            pending = f"{pending}\n\n{text}" if pending else text
            if len(pending) >= target_chars * 0.8:
                texts.append(pending[: target_chars + 500])
                pending = ""
    per_file = (n_docs + 1) // 2
    for f in range(2):
        with gzip.open(os.path.join(docs_dir, f"part-{f:04d}.jsonl.gz"), "wt", encoding="utf-8") as fh:
            for i in range(f * per_file, min(n_docs, (f + 1) * per_file)):
                row = {
                    "id": f"bench-{i:06d}",
                    "text": texts[i % len(texts)],
                    "source": "bench",
                    "added": "2024-06-01T00:00:00.000Z",
                    "created": "2024-06-01T00:00:00.000Z",
                    "metadata": {},
                }
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    open(stamp, "w").close()
    mean = sum(len(texts[i % len(texts)]) for i in range(n_docs)) / n_docs
    print(f"corpus: {n_docs} documents, mean {mean:.0f} characters, {len(texts)} distinct, in {docs_dir}")
    return docs_dir


def tiny_corpus(docs_dir: str, n: int = 5) -> str:
    """The first ``n`` documents of the corpus, to measure each tool's start-up cost."""
    tiny = os.path.join(WORK, "tiny", "documents")
    shutil.rmtree(os.path.dirname(tiny), ignore_errors=True)
    os.makedirs(tiny)
    with (
        gzip.open(os.path.join(docs_dir, "part-0000.jsonl.gz"), "rt") as src,
        gzip.open(os.path.join(tiny, "part-0000.jsonl.gz"), "wt") as dst,
    ):
        for _, line in zip(range(n), src):
            dst.write(line)
    return os.path.join(tiny, "*.jsonl.gz")


def run_measured(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """(CPU seconds of the whole process tree, wall seconds) of one command."""
    m = peers.run_measured(cmd, env)
    return m.cpu, m.wall


def our_taggers_available(names: list[str]) -> list[str]:
    out = subprocess.run(
        [OUR_PYTHON, "-c", "from taggers import registry; print(' '.join(registry.available()))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    have = set(out.stdout.split())
    return [n for n in names if n not in have]


def count_rows(pattern: str) -> int:
    return sum(1 for f in glob.glob(pattern, recursive=True) for _ in gzip.open(f, "rt"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=3000, help="documents in the corpus")
    ap.add_argument("--ours", default=OURS_DEFAULT, help="comma-separated dolma-pipe tagger names")
    ap.add_argument("--dolma", default=DOLMA_DEFAULT, help="comma-separated Dolma tagger names")
    ap.add_argument("--skip-dolma", action="store_true", help="only run dolma-pipe")
    args = ap.parse_args()
    ours = [t for t in args.ours.split(",") if t]
    theirs = [t for t in args.dolma.split(",") if t]

    missing = our_taggers_available(ours)
    if missing:
        print(f"NOTE: dolma-pipe has no tagger {missing}: running without it, and without Dolma's PII tagger")
        ours = [t for t in ours if t not in missing]
        if any(m.startswith("pii") for m in missing):
            theirs = [t for t in theirs if not t.startswith("pii")]

    docs_dir = build_corpus(args.docs)
    files = os.path.join(docs_dir, "*.jsonl.gz")

    tiny = tiny_corpus(docs_dir)
    out_ours = os.path.join(WORK, "out-ours")

    def ours_cmd(documents: str) -> list[str]:
        shutil.rmtree(out_ours, ignore_errors=True)
        return [
            OUR_PYTHON,
            "-m",
            "dolma_pipe.cli",
            "tag",
            "--documents",
            documents,
            "--taggers",
            *ours,
            "--experiment",
            "bench",
            "--destination",
            out_ours,
            "--processes",
            "1",
            "--force",
        ]

    env = dict(os.environ, PYTHONPATH=ROOT)
    start_ours, _ = run_measured(ours_cmd(tiny), env)
    cpu_ours, wall_ours = run_measured(ours_cmd(files), env)
    rows = count_rows(os.path.join(out_ours, "bench", "**", "*.jsonl.gz"))
    assert rows == args.docs, f"dolma-pipe wrote {rows} rows for {args.docs} documents"
    rate_ours = args.docs / cpu_ours
    print(f"dolma-pipe tag  [{', '.join(ours)}]: {cpu_ours:.2f} CPU-s, {wall_ours:.2f} s wall -> {rate_ours:.0f} docs/CPU-s")

    steady_ours = (args.docs - 5) / max(cpu_ours - start_ours, 1e-9)
    print(f"    start-up {start_ours:.2f} CPU-s; without it {steady_ours:.0f} docs/CPU-s")
    if args.skip_dolma:
        return
    dolma = peers.ensure_dolma()
    # Dolma imports nltk, which tries to download punkt data; there is no network for it here.
    env = dict(os.environ, NLTK_DATA=os.path.join(WORK, "nltk_data"))

    def dolma_run(documents: str) -> tuple[float, float]:
        shutil.rmtree(os.path.join(os.path.dirname(os.path.dirname(documents)), "attributes"), ignore_errors=True)
        cmd = [dolma, "tag", "--documents", documents, "--taggers", *theirs, "--experiment", "bench", "--processes", "1"]
        return run_measured(cmd, env)

    start_dolma, _ = dolma_run(tiny)
    attributes = os.path.join(os.path.dirname(docs_dir), "attributes")
    cpu_dolma, wall_dolma = dolma_run(files)
    rows = count_rows(os.path.join(attributes, "bench", "**", "*.gz"))
    assert rows == args.docs, f"dolma wrote {rows} rows for {args.docs} documents"
    rate_dolma = args.docs / cpu_dolma
    print(f"dolma tag       [{', '.join(theirs)}]: {cpu_dolma:.2f} CPU-s, {wall_dolma:.2f} s wall -> {rate_dolma:.0f} docs/CPU-s")
    steady_dolma = (args.docs - 5) / max(cpu_dolma - start_dolma, 1e-9)
    print(f"    start-up {start_dolma:.2f} CPU-s; without it {steady_dolma:.0f} docs/CPU-s")
    print(
        f"ratio: dolma-pipe is {rate_ours / rate_dolma:.1f}x Dolma 1.2.1 in documents per CPU-second "
        f"({steady_ours / steady_dolma:.1f}x without start-up)"
    )


if __name__ == "__main__":
    main()
