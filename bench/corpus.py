"""The benchmark corpus: 20,000+ real ~3 KB documents from Debian's packages, with planted duplicates.

    .venv/bin/python bench/corpus.py [--docs 20000] [--out bench/_work/real]

Every bench that measures dolma-pipe against a peer (``dedup``, ``mix``, ``tokenize``, ``tag``)
runs both tools on this corpus.  The text comes from the same Debian packages as the bundled
sample corpus (``examples/build_sample_corpus.py``, whose extractors this reuses, with every
page of every package instead of a sample): the Debian Administrator's Handbook in all its
languages, the Linux 6.1 and Python 3.11 documentation, the GCIDE dictionary and fortunes.
Pages are cut at paragraph boundaries into documents of about ``--chars`` characters.

Planted, with the truth in ``<out>/truth.json``:

* exact duplicates (``exact``): copies of a document under a new id, in the same file or another
  file, some copied twice; ``groups`` lists each original with its copies in input order;
* near duplicates (``near``): copies with a share of words replaced, dropped or swapped, their
  true Jaccard similarity recorded over word 5-gram shingles (:func:`shingles`: lower-cased
  ``\\w+`` words), spread from about 0.5 to 0.98;
* repeated paragraphs (``paragraphs``): one paragraph copied into several other documents,
  where each copy is placed.

Documents are written Dolma-style to ``<out>/documents/<source>/part-NNNN.jsonl.gz``, in a fixed
order, byte-identical on a rerun (gzip mtime 0, one seeded ``random.Random``).  Needs the Debian
packages of the sample corpus: ``python examples/build_sample_corpus.py --print-apt``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import random
import re
import sys
from collections.abc import Iterable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_OUT = os.path.join(HERE, "_work", "real")
SEED = 20261123
FILES_PER_SOURCE = 4
_WORDS = re.compile(r"\w+", re.UNICODE)


def shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    """Word ``n``-grams of lower-cased ``\\w+`` words (a text shorter than ``n`` words is one shingle)."""
    words = _WORDS.findall(text.lower())
    if len(words) < n:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def jaccard(a: str, b: str, n: int = 5) -> float:
    sa, sb = shingles(a, n), shingles(b, n)
    return len(sa & sb) / len(sa | sb) if sa or sb else 1.0


def _sample_builder():
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import build_sample_corpus as b

    # Every page instead of the sample's few.
    b.HANDBOOK_LANGS = sorted(d for d in os.listdir(b.HANDBOOK_DIR) if os.path.isdir(os.path.join(b.HANDBOOK_DIR, d)))
    b.HANDBOOK_PAGES_PER_LANG = 10**9
    b.LINUX_DOCS = 10**9
    b.LINUX_TRANSLATED_PER_LANG = 10**9
    b.PYTHON_DOCS = 10**9
    b.GCIDE_DOCS = 4000
    b.FORTUNE_DOCS = {"en": 1500, "de": 800, "es": 400, "it": 400}
    b.MAX_CHARS = 10**9
    return b


@contextlib.contextmanager
def _take_every_page():
    """The sample builder samples a fixed number of pages per package: take them all instead."""
    original = random.Random.sample

    def take_all(self, population, k, **kw):
        return list(population) if k >= len(population) else original(self, population, k, **kw)

    random.Random.sample = take_all  # type: ignore[method-assign]
    try:
        yield
    finally:
        random.Random.sample = original  # type: ignore[method-assign]


def chunk(text: str, target: int) -> list[str]:
    """``text`` cut at paragraph (else line) boundaries into pieces of about ``target`` characters."""
    paras = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    out, cur = [], ""
    for p in paras:
        while len(p) > 2 * target:  # a huge paragraph: cut at a line, else a space
            cut = p.rfind("\n", 0, target)
            cut = cut if cut > target // 2 else p.rfind(" ", 0, target)
            cut = cut if cut > target // 2 else target
            if cur:
                out.append(cur)
                cur = ""
            out.append(p[:cut].strip())
            p = p[cut:].strip()
        cur = f"{cur}\n\n{p}" if cur else p
        if len(cur) >= target:
            out.append(cur)
            cur = ""
    if cur:
        if out and len(cur) < target // 3:
            out[-1] = f"{out[-1]}\n\n{cur}"
        else:
            out.append(cur)
    return [c for c in out if len(c) >= 200]


def _near_copy(text: str, rate: float, rng: random.Random) -> str:
    """``text`` with about ``rate`` of its words replaced, dropped or upper-cased (whitespace kept)."""
    parts = re.split(r"(\s+)", text)
    vocab = [p for p in parts[::2] if p]
    for i in range(0, len(parts), 2):
        if parts[i] and rng.random() < rate:
            op = rng.random()
            parts[i] = rng.choice(vocab) if op < 0.6 else ("" if op < 0.8 else parts[i].upper() + "x")
    return "".join(parts)


def build(n_docs: int, out: str, target_chars: int = 3000) -> dict:
    b = _sample_builder()
    rng = random.Random(SEED)
    with _take_every_page():
        pages: dict[str, list[dict]] = {
            "debian-handbook": b.build_handbook(random.Random(SEED + 1)),
            "linux-doc": b.build_linux(random.Random(SEED + 2)),
            "python-doc": b.build_python(random.Random(SEED + 3)),
            "gcide": b.build_gcide(random.Random(SEED + 4)),
            "fortunes": b.build_fortunes(random.Random(SEED + 5)),
        }
    by_source: dict[str, list[dict]] = {}
    for src, docs in pages.items():
        pieces = []
        for d in docs:
            for i, text in enumerate(chunk(d["text"], target_chars)):
                meta = {k: v for k, v in d["metadata"].items() if k in ("package", "path", "license", "language", "locale")}
                pieces.append(
                    {"id": f"{d['id']}#{i}", "text": text, "source": src, "added": d["added"], "created": d["created"], "metadata": meta}
                )
        by_source[src] = pieces
    total = sum(len(v) for v in by_source.values())
    planted_share = 0.06  # exact + near copies, added on top of the real documents
    want_real = int(n_docs / (1 + planted_share))
    if total < want_real:
        print(f"note: the packages give {total:,} documents, fewer than the {want_real:,} asked for", file=sys.stderr)
    # Keep each source's share, drop at random beyond the target (the order stays the packages').
    for src, docs in by_source.items():
        keep = min(len(docs), round(len(docs) * want_real / max(total, 1)))
        idx = sorted(rng.sample(range(len(docs)), keep))
        by_source[src] = [docs[i] for i in idx]

    truth: dict = {
        "seed": SEED,
        "target_chars": target_chars,
        "shingles": "word 5-grams of lower-cased \\w+ words",
        "exact": [],
        "groups": [],
        "near": [],
        "paragraphs": [],
    }
    all_docs = [d for docs in by_source.values() for d in docs]
    # Repeated paragraphs: a paragraph of one document copied into 2-4 others (at a paragraph boundary).
    for donor in rng.sample(all_docs, max(10, len(all_docs) // 200)):
        paras = [p for p in donor["text"].split("\n\n") if len(p) >= 80]
        if not paras:
            continue
        para = rng.choice(paras)
        for target in rng.sample(all_docs, rng.randint(2, 4)):
            if target is donor:
                continue
            tparas = target["text"].split("\n\n")
            at = rng.randrange(len(tparas) + 1)
            tparas.insert(at, para)
            target["text"] = "\n\n".join(tparas)
            truth["paragraphs"].append({"id": target["id"], "paragraph": para, "from": donor["id"]})
    # Exact and near copies, placed at seeded positions in their source (same or another file).
    for docs in by_source.values():
        extra: list[dict] = []
        for j, d in enumerate(rng.sample(docs, max(3, len(docs) * 3 // 100))):
            group = [d["id"]]
            for c in range(2 if j % 4 == 0 else 1):
                copy = json.loads(json.dumps(d))
                copy["id"] = f"{d['id']}|dup{c + 1}"
                extra.append(copy)
                group.append(copy["id"])
                truth["exact"].append({"id": copy["id"], "duplicate_of": d["id"]})
            truth["groups"].append(group)
        for d in rng.sample([d for d in docs if len(d["text"].split()) >= 60], max(3, len(docs) * 3 // 100)):
            rate = rng.choice([0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12])
            copy = json.loads(json.dumps(d))
            copy["id"] = f"{d['id']}|near"
            copy["text"] = _near_copy(d["text"], rate, rng)
            extra.append(copy)
            truth["near"].append(
                {"id": copy["id"], "near_duplicate_of": d["id"], "edit_rate": rate, "jaccard": round(jaccard(d["text"], copy["text"]), 4)}
            )
        for copy in extra:
            docs.insert(rng.randrange(len(docs) + 1), copy)
    # Write: each source in FILES_PER_SOURCE parts, in order.
    docs_root = os.path.join(out, "documents")
    n = 0
    order: list[str] = []
    for src, docs in by_source.items():
        per = -(-len(docs) // FILES_PER_SOURCE)
        for part in range(FILES_PER_SOURCE):
            chunk_docs = docs[part * per : (part + 1) * per]
            if not chunk_docs:
                continue
            path = os.path.join(docs_root, src, f"part-{part:04d}.jsonl.gz")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as fh:
                for d in chunk_docs:
                    fh.write(json.dumps(d, ensure_ascii=False, sort_keys=True).encode() + b"\n")
            n += len(chunk_docs)
            order.append(os.path.relpath(path, docs_root))
    truth["files"] = order
    truth["counts"] = {
        "documents": n,
        "exact": len(truth["exact"]),
        "groups": len(truth["groups"]),
        "near": len(truth["near"]),
        "paragraphs": len(truth["paragraphs"]),
        "chars": sum(len(d["text"]) for docs in by_source.values() for d in docs),
    }
    with open(os.path.join(out, "truth.json"), "w", encoding="utf-8") as fh:
        json.dump(truth, fh, ensure_ascii=False, indent=1)
    return truth


def ensure(n_docs: int = 20000, out: str = DEFAULT_OUT, target_chars: int = 3000) -> str:
    """Build the corpus once (a stamp file remembers the parameters); return its documents folder."""
    stamp = os.path.join(out, f".built-{n_docs}-{target_chars}-{SEED}")
    if not os.path.exists(stamp):
        import shutil

        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        build(n_docs, out, target_chars)
        open(stamp, "w").close()
    return os.path.join(out, "documents")


def iter_documents(out: str = DEFAULT_OUT) -> Iterable[dict]:
    with open(os.path.join(out, "truth.json"), encoding="utf-8") as fh:
        files = json.load(fh)["files"]
    for rel in files:
        with gzip.open(os.path.join(out, "documents", rel), "rt", encoding="utf-8") as fh:
            for line in fh:
                yield json.loads(line)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=20000, help="documents wanted, copies included (default 20,000)")
    ap.add_argument("--chars", type=int, default=3000, help="target document length in characters")
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    docs = ensure(args.docs, args.out, args.chars)
    with open(os.path.join(args.out, "truth.json"), encoding="utf-8") as fh:
        counts = json.load(fh)["counts"]
    print(f"{docs}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
