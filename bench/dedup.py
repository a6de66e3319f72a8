"""Deduplication speed and quality: dolma-pipe dedup against Dolma 1.2.1, datasketch and datatrove.

    .venv/bin/python bench/dedup.py [--processes 2] [--scale 5] [--skip TOOL ...]
    .venv/bin/python bench/dedup.py --skip exact dolma datatrove   # MinHash: datasketch and dolma-pipe only

All tools run on the shared bench corpus (``bench/corpus.py``: 20,138 real ~2.4 KB documents from
Debian's packages, with planted exact copies, repeated paragraphs and near copies), each with the
same number of processes, each measured as the CPU seconds of its whole process tree, its wall
seconds and its largest resident set (``peers.run_measured``), start-up included, in one run:

* exact documents and paragraphs: Dolma 1.2.1's ``dolma dedupe`` with a documents config and a
  paragraphs config (Bloom filters, key ``$.text``), dolma-pipe with the same two configs unchanged
  (Bloom mode), and dolma-pipe's exact mode doing both in one run;
* near-duplicates at Jaccard 0.8 over word 5-grams: datasketch 2.0.0 MinHash-LSH (128
  permutations, its own bands x rows, signatures in a pool of ``--processes``, LSH queries),
  datatrove 0.10.1 MinHash (14 bands x 8, a whitespace word tokenizer, stages signatures, buckets
  and clusters on its local executor), and dolma-pipe's ``minhash:`` pass (threshold 0.8, defaults).

Quality, against truths computed here from the corpus itself:

* exact documents: a marked document is right when its text occurs in another document; recall
  counts, per group of identical texts, up to size - 1 marked copies;
* paragraphs (Dolma's: lines, blank ones skipped), among the documents the document pass keeps:
  the same per group of identical lines; *lost* counts what a mixer removing the marked documents
  and paragraphs would no longer have anywhere: distinct paragraphs, and groups of identical
  documents with such a paragraph;
* near pairs: every pair of documents whose true Jaccard is at least 0.8 (lower-cased ``\\w+``
  words, 5-grams: ``corpus.shingles``), found exactly (prefix filtering: two sets of Jaccard >= t
  share one of the first |A| - ceil(t |A|) + 1 shingles of each in a global rare-first order, so
  candidates from an inverted index of those prefixes miss no pair; each candidate's Jaccard is
  then computed), cached in ``bench/_work/real/near-pairs-0.80.json``. A tool's pairs are the pairs
  it reports similar (datasketch: LSH query results; datatrove and dolma-pipe: pairs in the same
  cluster, and, for dolma-pipe, also the verified pairs themselves).

``--scale N`` also runs dolma-pipe on N copies of the corpus (ids changed) and reports its peak
memory next to the 1x run's.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import itertools
import json
import math
import os
import shutil
import struct
import sys
import textwrap

import corpus
import peers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORK = os.path.join(HERE, "_work", "dedup")
REAL = corpus.DEFAULT_OUT
THRESHOLD = 0.8
DATASKETCH_VENV = os.path.join(HERE, "_work", "datasketch-venv")
DATATROVE_VENV = os.path.join(HERE, "_work", "datatrove-venv")


def ensure_venv(path: str, requirements: list[str]) -> str:
    python = os.path.join(path, "bin", "python")
    if not os.path.exists(python):
        import subprocess

        print(f"installing {' '.join(requirements)} into {path} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", path], check=True)
        subprocess.run([os.path.join(path, "bin", "pip"), "install", "-q", *requirements], check=True)
    return python


# ---- truths --------------------------------------------------------------------------------


def documents(docs_dir: str) -> list[tuple[str, dict]]:
    """(relative file, document) in the global order (files by relative name, then line)."""
    out = []
    for path in sorted(glob.glob(os.path.join(docs_dir, "*", "*.jsonl.gz"))):
        rel = os.path.relpath(path, docs_dir)
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            out.extend((rel, json.loads(line)) for line in fh)
    return out


def near_truth(docs: list[tuple[str, dict]]) -> set[tuple[str, str]]:
    """Every pair of true Jaccard >= THRESHOLD, exactly (prefix filtering, then verification)."""
    cache = os.path.join(REAL, f"near-pairs-{THRESHOLD:.2f}.json")
    if os.path.exists(cache):
        with open(cache) as fh:
            return {tuple(p[:2]) for p in json.load(fh)}  # type: ignore[misc]
    print("computing the exact near-duplicate pairs (once, a few minutes) ...", flush=True)
    ids = [d["id"] for _, d in docs]
    sets = [corpus.shingles(d["text"]) for _, d in docs]
    freq: collections.Counter = collections.Counter(s for x in sets for s in x)
    rank = {s: i for i, s in enumerate(sorted(freq, key=lambda s: (freq[s], s)))}
    tokens = [sorted(rank[s] for s in x) for x in sets]
    index: dict[int, list[int]] = collections.defaultdict(list)
    pairs = []
    for i in sorted(range(len(docs)), key=lambda i: len(tokens[i])):
        x = tokens[i]
        if not x:
            continue
        prefix = x[: len(x) - math.ceil(THRESHOLD * len(x)) + 1]
        seen: set[int] = set()
        for t in prefix:
            seen.update(index[t])
        for j in seen:
            if len(tokens[j]) >= THRESHOLD * len(x):
                inter = len(sets[i] & sets[j])
                jac = inter / (len(sets[i]) + len(sets[j]) - inter)
                if jac >= THRESHOLD:
                    pairs.append((ids[min(i, j)], ids[max(i, j)], round(jac, 4)))
        for t in prefix:
            index[t].append(i)
    with open(cache, "w") as fh:
        json.dump(sorted(pairs), fh)
    return {(a, b) for a, b, _ in pairs}


def pair_scores(found: set, truth: set, order: dict[str, int]) -> tuple[float, float]:
    norm = {tuple(sorted(p, key=order.__getitem__)) for p in found}
    truth = {tuple(sorted(p, key=order.__getitem__)) for p in truth}
    tp = len(norm & truth)
    return tp / max(len(norm), 1), tp / max(len(truth), 1)


def exact_scores(docs: list[tuple[str, dict]], marked_docs: set[str], marked_paras: dict[str, set[int]]) -> dict:
    """Precision/recall on exact duplicate documents and paragraphs, and what a mixer would lose.

    Documents: a marked document is right when its text occurs in another document; recall counts,
    per group of identical texts, up to size - 1 marked copies. Paragraphs (Dolma's: lines, blank
    ones skipped), among the documents the document pass keeps (those a mixer reads): a marked
    paragraph is right when its text occurs in another kept paragraph; recall counts up to count - 1
    marked copies per group. Lost: distinct paragraph texts, and groups of identical documents with
    a paragraph, that no longer occur anywhere once marked documents and paragraphs are removed.
    """
    by_text: dict[str, list[str]] = collections.defaultdict(list)
    for _, d in docs:
        by_text[d["text"]].append(d["id"])
    groups = [g for g in by_text.values() if len(g) > 1]
    dup_ids = {i for g in groups for i in g}
    good = len(marked_docs & dup_ids)
    rec = sum(min(sum(i in marked_docs for i in g), len(g) - 1) for g in groups) / max(sum(len(g) - 1 for g in groups), 1)
    para_groups: dict[str, list[tuple[str, int]]] = collections.defaultdict(list)
    surviving: set[str] = set()
    all_paras: set[str] = set()
    for _, d in docs:
        kept_doc = d["id"] not in marked_docs
        for k, p in enumerate(d["text"].split("\n")):
            if not p.strip():
                continue
            all_paras.add(p)
            if kept_doc:
                para_groups[p].append((d["id"], k))
                if k not in marked_paras.get(d["id"], ()):
                    surviving.add(p)
    multi = [g for g in para_groups.values() if len(g) > 1]
    dup_paras = {x for g in multi for x in g}
    marked_p = {(i, k) for i, ks in marked_paras.items() if i not in marked_docs for k in ks}
    p_good = len(marked_p & dup_paras)
    p_rec = sum(min(sum(x in marked_p for x in g), len(g) - 1) for g in multi) / max(sum(len(g) - 1 for g in multi), 1)
    lost_groups = sum(
        any(p.strip() and p not in surviving for p in by_text_key.split("\n"))
        for by_text_key in (t for t, g in by_text.items() if len(g) > 1)
    )
    return {
        "doc_p": good / max(len(marked_docs), 1) if marked_docs else 1.0,
        "doc_r": rec,
        "para_p": p_good / max(len(marked_p), 1) if marked_p else 1.0,
        "para_r": p_rec,
        "groups": len(groups),
        "lost": lost_groups,
        "lost_paragraphs": len(all_paras - surviving),
    }


# ---- reading results -----------------------------------------------------------------------


def read_marks(attr_root: str, docs_dir: str, attr: str) -> dict[str, list]:
    """{document id: spans} of one attribute over the corpus's attribute files."""
    out: dict[str, list] = {}
    for path in sorted(glob.glob(os.path.join(docs_dir, "*", "*.jsonl.gz"))):
        rel = os.path.relpath(path, docs_dir)
        with gzip.open(os.path.join(attr_root, rel), "rt", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                spans = row["attributes"].get(attr)
                if spans:
                    out[row["id"]] = spans
    return out


def paragraph_indices(docs: list[tuple[str, dict]], spans: dict[str, list]) -> dict[str, set[int]]:
    """Marked spans as paragraph numbers (Dolma's lines), by their start offsets."""
    text_of = {d["id"]: d["text"] for _, d in docs}
    out: dict[str, set[int]] = {}
    for i, ss in spans.items():
        starts = {}
        pos = 0
        for k, p in enumerate(text_of[i].split("\n")):
            starts[pos] = k
            pos += len(p) + 1
        out[i] = {starts[s] for s, _, score in ss if score >= 1 and s in starts}
    return out


def clusters_of_ours(root: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(pairs in the same cluster, verified pairs) of a dolma-pipe minhash run."""
    from dolma_pipe.stages.dedup.workfiles import read_all, read_meta

    rows = [json.loads(line) for line in gzip.open(os.path.join(root, "_clusters.jsonl.gz"))]
    by: dict[int, list[str]] = collections.defaultdict(list)
    for r in rows:
        by[r["cluster"]].append(r["id"])
    cluster_pairs = {p for ids in by.values() for p in itertools.combinations(ids, 2)}
    manifest = json.load(open(os.path.join(root, "_manifest.json")))
    rels = [f["rel"] for f in manifest["inputs"]]
    work = os.path.join(root, "_work")
    ids = {i: read_meta(f"{work}/scan/{rel}.meta").ids() for i, rel in enumerate(rels)}
    verified = set()
    for i, rel in enumerate(rels):
        path = f"{work}/verified/{rel}.bkt"
        if os.path.exists(path):
            for lf, ld, hd, _ in struct.iter_unpack("<IIIf", read_all(path)[1][0]):
                verified.add((ids[lf][ld], ids[i][hd]))
    return cluster_pairs, verified


# ---- peers ---------------------------------------------------------------------------------

DATASKETCH = textwrap.dedent(
    """
    import gzip, glob, json, re, sys
    from multiprocessing import Pool
    from datasketch import MinHash, MinHashLSH
    WORDS = re.compile(r"\\w+")
    def shingles(text, n=5):
        w = WORDS.findall(text.lower())
        if len(w) < n:
            return {" ".join(w).encode()} if w else set()
        return {" ".join(w[i:i + n]).encode() for i in range(len(w) - n + 1)}
    def sign(path):
        out = []
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                d = json.loads(line)
                m = MinHash(num_perm=128, seed=1)
                m.update_batch(list(shingles(d["text"])))
                out.append((d["id"], m))
        return out
    if __name__ == "__main__":
        files = sorted(glob.glob(sys.argv[1]))
        with Pool(int(sys.argv[3])) as pool:
            signed = pool.map(sign, files)
        lsh = MinHashLSH(threshold=0.8, num_perm=128)
        pairs = []
        for batch in signed:
            for doc_id, m in batch:
                pairs.extend([other, doc_id] for other in lsh.query(m))
                lsh.insert(doc_id, m)
        json.dump(pairs, open(sys.argv[2], "w"))
        print("bands x rows", lsh.b, lsh.r, "pairs", len(pairs))
    """
)

DATATROVE = textwrap.dedent(
    '''
    import sys
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupSignature
    from datatrove.utils.word_tokenizers import WordTokenizer

    class Whitespace(WordTokenizer):
        """str.split() words (datatrove's default, spaCy, is about 5x slower)."""
        def word_tokenize(self, text):
            return text.split()
        def sent_tokenize(self, text):
            return [text]
        def span_tokenize(self, text):
            return [(0, len(text))]

    if __name__ == "__main__":
        docs, out, files, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        config = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8)
        # fork: pool workers are children of this process, so their CPU time is measured with it
        # (forkserver workers are not waited for by this process).
        common = dict(workers=workers, skip_completed=False, start_method="fork")
        LocalPipelineExecutor(
            pipeline=[JsonlReader(docs, glob_pattern="*/*.jsonl.gz", id_key="id", text_key="text"),
                      MinhashDedupSignature(output_folder=f"{out}/sigs", config=config, language=Whitespace())],
            tasks=files, logging_dir=f"{out}/logs/sigs", **common).run()
        LocalPipelineExecutor(
            pipeline=[MinhashDedupBuckets(input_folder=f"{out}/sigs", output_folder=f"{out}/buckets", config=config)],
            tasks=config.num_buckets, logging_dir=f"{out}/logs/buckets", **common).run()
        LocalPipelineExecutor(
            pipeline=[MinhashDedupCluster(input_folder=f"{out}/buckets", output_folder=f"{out}/clusters", config=config, save_cluster_id=True)],
            tasks=1, logging_dir=f"{out}/logs/clusters", workers=1, skip_completed=False, start_method="fork").run()
    '''
)


def datatrove_pairs(out: str, docs_dir: str) -> set[tuple[str, str]]:
    """Pairs in the same datatrove cluster; rank r read the r-th file (sorted), documents in order."""
    files = sorted(glob.glob(os.path.join(docs_dir, "*", "*.jsonl.gz")))
    by: dict[int, list[str]] = collections.defaultdict(list)
    for rank, path in enumerate(files):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            ids = [json.loads(line)["id"] for line in fh]
        cpath = os.path.join(out, "clusters", f"{rank:06d}.clusters")
        if os.path.exists(cpath):
            data = open(cpath, "rb").read()
            for doc, cluster in struct.iter_unpack("<II", data):
                by[cluster].append(ids[doc])
    return {p for ids in by.values() for p in itertools.combinations(ids, 2)}


# ---- runs ----------------------------------------------------------------------------------


def dolma_config(kind: str, docs_glob: str, name: str, bloom: str, processes: int) -> dict:
    what = (
        {"documents": {"attribute_name": "bff_duplicate_docs", "key": "$.text"}}
        if kind == "documents"
        else {"paragraphs": {"attribute_name": "bff_duplicate_paragraph_spans"}}
    )
    return {
        "documents": [docs_glob],
        "work_dir": {"input": os.path.join(WORK, "tmp", name, "in"), "output": os.path.join(WORK, "tmp", name, "out")},
        "dedupe": {"name": name, **what, "skip_empty": True},
        "bloom_filter": {"file": bloom, "read_only": False, "estimated_doc_count": 3_000_000, "desired_false_positive_rate": 1e-6},
        "processes": processes,
    }


def write_json(path: str, data: dict) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(data, fh)
    return path


def scaled_corpus(n: int) -> str:
    """``n`` copies of the corpus's files (ids suffixed), for memory at scale."""
    root = os.path.join(WORK, f"scale{n}", "documents")
    stamp = os.path.join(WORK, f"scale{n}", ".done")
    if os.path.exists(stamp):
        return root
    shutil.rmtree(os.path.dirname(root), ignore_errors=True)
    for path in sorted(glob.glob(os.path.join(REAL, "documents", "*", "*.jsonl.gz"))):
        rel = os.path.relpath(path, os.path.join(REAL, "documents"))
        lines = gzip.open(path).read().splitlines()
        for c in range(n):
            dst = os.path.join(root, os.path.dirname(rel), f"copy{c}-{os.path.basename(rel)}")
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with gzip.open(dst, "wb", compresslevel=6) as fh:
                for line in lines:
                    d = json.loads(line)
                    d["id"] = f"{d['id']}@{c}"
                    fh.write(json.dumps(d, ensure_ascii=False).encode() + b"\n")
    open(stamp, "w").close()
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--scale", type=int, default=0, help="also run dolma-pipe on this many copies of the corpus (peak memory)")
    ap.add_argument(
        "--skip",
        nargs="*",
        default=[],
        choices=["dolma", "datasketch", "datatrove", "ours", "exact"],
        help="tools to leave out; 'exact': the exact documents and paragraphs runs of every tool (near-duplicates only)",
    )
    args = ap.parse_args()
    p = args.processes
    docs_dir = corpus.ensure()
    docs_glob = os.path.join(docs_dir, "*", "*.jsonl.gz")
    with open(os.path.join(REAL, "truth.json")) as fh:
        n = json.load(fh)["counts"]["documents"]
    print(f"corpus: {n:,} documents in {len(glob.glob(docs_glob))} files; {p} processes per tool", flush=True)
    shutil.rmtree(os.path.join(WORK, "run"), ignore_errors=True)
    os.makedirs(os.path.join(WORK, "run"))
    ours_cli = [os.path.join(ROOT, ".venv", "bin", "dolma-pipe"), "dedup"]
    rows: list[dict] = []
    # Results to score once every measurement is done: this process stays small while the tools
    # run (a child's peak memory would otherwise count what it inherits before exec).
    pending: list[tuple[dict, str, object]] = []

    def add(tool: str, task: str, m) -> dict:
        row = {"tool": tool, "task": task, "cpu": m.cpu, "wall": m.wall, "rss": m.peak_rss_mb, "rate": n / m.cpu}
        rows.append(row)
        print(
            f"  {tool:<26} {task:<22} {m.cpu:7.2f} CPU-s {m.wall:6.2f} s  {row['rate']:>9,.0f} docs/CPU-s  {m.peak_rss_mb:6.0f} MB",
            flush=True,
        )
        return row

    # Exact documents and paragraphs: Dolma's two configs with each tool, and our exact mode.
    names = {"documents": "bench_dedup_docs", "paragraphs": "bench_dedup_paras"}
    keep = os.path.join(WORK, "run", "attributes")
    for tool in ("dolma", "ours-bloom"):
        if ("dolma" if tool == "dolma" else "ours") in args.skip or "exact" in args.skip:
            continue
        made = {}
        for kind in ("documents", "paragraphs"):
            name = f"{names[kind]}_{tool.replace('-', '_')}"
            bloom = os.path.join(WORK, "run", f"{name}.bloom")
            cfg = write_json(os.path.join(WORK, "run", f"{name}.json"), dolma_config(kind, docs_glob, name, bloom, p))
            shutil.rmtree(os.path.join(REAL, "attributes", name), ignore_errors=True)
            if tool == "dolma":
                m = peers.run_measured([peers.ensure_dolma(), "-c", cfg, "dedupe"], env=peers.dolma_env())
            else:
                m = peers.run_measured([*ours_cli, "-c", cfg, "--no-progress"], env=peers.our_env())
            # Both tools write next to the shared corpus: move the attributes out of its way.
            made[kind] = os.path.join(keep, name)
            shutil.rmtree(made[kind], ignore_errors=True)
            shutil.move(os.path.join(REAL, "attributes", name), made[kind])
            add("Dolma 1.2.1 dedupe" if tool == "dolma" else "dolma-pipe (Bloom)", kind, m)
        pending.append((rows[-2], "exact-pair", (made["documents"], made["paragraphs"], rows[-1])))
    if "ours" not in args.skip and "exact" not in args.skip:
        out = os.path.join(WORK, "run", "ours-exact")
        cfg = dolma_config("documents", docs_glob, "exact", "", p)
        cfg.pop("bloom_filter"), cfg.pop("work_dir")
        cfg["dedupe"]["paragraphs"] = {"attribute_name": "bff_duplicate_paragraph_spans"}
        cfg["destination"] = out
        m = peers.run_measured([*ours_cli, "-c", write_json(out + ".json", cfg), "--no-progress"], env=peers.our_env())
        pending.append((add("dolma-pipe (exact)", "documents+paragraphs", m), "exact-one", os.path.join(out, "exact")))

    # Near-duplicates.
    if "datasketch" not in args.skip:
        python = ensure_venv(DATASKETCH_VENV, ["datasketch==2.0.0"])
        script = os.path.join(WORK, "run", "datasketch_lsh.py")
        open(script, "w").write(DATASKETCH)
        pairs_path = os.path.join(WORK, "run", "datasketch-pairs.json")
        m = peers.run_measured([python, script, docs_glob, pairs_path, str(p)])
        pending.append((add("datasketch 2.0.0 LSH", "near, 128 perm", m), "datasketch", pairs_path))
    if "datatrove" not in args.skip:
        python = ensure_venv(DATATROVE_VENV, ["datatrove==0.10.1", "regex", "tokenizers", "xxhash<4", "orjson"])
        script = os.path.join(WORK, "run", "datatrove_minhash.py")
        open(script, "w").write(DATATROVE)
        out = os.path.join(WORK, "run", "datatrove")
        m = peers.run_measured([python, script, docs_dir, out, str(len(glob.glob(docs_glob))), str(p)])
        pending.append((add("datatrove 0.10.1 MinHash", "near, 14x8", m), "datatrove", out))
    if "ours" not in args.skip:
        out = os.path.join(WORK, "run", "ours-minhash")
        cfg = {
            "documents": [docs_glob],
            "dedupe": {"name": "near"},
            "minhash": {"threshold": THRESHOLD},
            "destination": out,
            "processes": p,
            # the scoring reads the scan's ids and the verified pairs from the work files, which
            # a complete run removes unless kept
            "keep_work": True,
        }
        m = peers.run_measured([*ours_cli, "-c", write_json(out + ".json", cfg), "--no-progress"], env=peers.our_env())
        row = add("dolma-pipe minhash", "near, 10x6 verified", m)
        pending.append((row, "ours-near", os.path.join(out, "near")))
        # Start-up alone: the same command on a 5-document corpus.
        tiny_dir = os.path.join(WORK, "tiny", "documents", "t")
        if not os.path.exists(tiny_dir):
            os.makedirs(tiny_dir)
            first = sorted(glob.glob(docs_glob))[0]
            with gzip.open(first, "rt") as src, gzip.open(os.path.join(tiny_dir, "part.jsonl.gz"), "wt") as dst:
                dst.writelines(itertools.islice(src, 5))
        tcfg = {**cfg, "documents": [os.path.join(WORK, "tiny", "documents", "*", "*.jsonl.gz")], "destination": out + "-tiny"}
        startup = peers.run_measured([*ours_cli, "-c", write_json(out + "-tiny.json", tcfg), "--no-progress"], env=peers.our_env())
        row["startup"] = startup.cpu

    if args.scale and "ours" not in args.skip:
        print(f"\nmemory at {args.scale}x the corpus (dolma-pipe, {p} processes):")
        big = scaled_corpus(args.scale)
        for what, extra in (
            (
                "documents+paragraphs",
                {"dedupe": {"name": "s", "documents": {"attribute_name": "d", "key": "$.text"}, "paragraphs": {"attribute_name": "p"}}},
            ),
            ("minhash", {"dedupe": {"name": "s"}, "minhash": {"threshold": THRESHOLD}}),
        ):
            for label, glob_, more in (
                ("1x", docs_glob, {}),
                (f"{args.scale}x", os.path.join(big, "*", "*.jsonl.gz"), {}),
                (f"{args.scale}x", os.path.join(big, "*", "*.jsonl.gz"), {"buckets": args.scale}),
            ):
                tag = f"{label}-b{more.get('buckets', 'auto')}"
                out = os.path.join(WORK, "run", f"scale-{what.replace('+', '-')}-{tag}")
                cfg = {"documents": [glob_], "destination": out, "processes": p, **extra, **more}
                m = peers.run_measured([*ours_cli, "-c", write_json(out + ".json", cfg), "--no-progress"], env=peers.our_env())
                manifest = json.load(open(os.path.join(out, "s", "_manifest.json")))
                pairs = manifest["totals"].get("candidate_pairs", 0)
                print(
                    f"  {what:<22} {label:>4} buckets {manifest['results']['parameters']['buckets']:>2}: {m.cpu:7.2f} CPU-s  "
                    f"peak {m.peak_rss_mb:6.0f} MB  candidate pairs {pairs:,}"
                )
                shutil.rmtree(out, ignore_errors=True)

    # Quality, now that nothing is measured any more.
    print("\nscoring ...", flush=True)
    docs = documents(docs_dir)
    order = {d["id"]: i for i, (_, d) in enumerate(docs)}
    truth = near_truth(docs)
    for row, kind, where in pending:
        if kind == "exact-pair":
            docs_root, paras_root, para_row = where  # type: ignore[misc]
            marks_d = read_marks(docs_root, docs_dir, "bff_duplicate_docs")
            marks_p = read_marks(paras_root, docs_dir, "bff_duplicate_paragraph_spans")
            q = exact_scores(docs, set(marks_d), paragraph_indices(docs, marks_p))
            row.update(p=q["doc_p"], r=q["doc_r"], lost=q["lost"], groups=q["groups"])
            para_row.update(p=q["para_p"], r=q["para_r"], lost=q["lost"], groups=q["groups"], lost_paragraphs=q["lost_paragraphs"])
        elif kind == "exact-one":
            marks_d = read_marks(str(where), docs_dir, "bff_duplicate_docs")
            marks_p = read_marks(str(where), docs_dir, "bff_duplicate_paragraph_spans")
            q = exact_scores(docs, set(marks_d), paragraph_indices(docs, marks_p))
            row.update(
                p=q["doc_p"],
                r=q["doc_r"],
                p2=q["para_p"],
                r2=q["para_r"],
                lost=q["lost"],
                groups=q["groups"],
                lost_paragraphs=q["lost_paragraphs"],
            )
        elif kind == "datasketch":
            found = {tuple(x) for x in json.load(open(str(where)))}
            row["p"], row["r"] = pair_scores(found, truth, order)
        elif kind == "datatrove":
            row["p"], row["r"] = pair_scores(datatrove_pairs(str(where), docs_dir), truth, order)
        elif kind == "ours-near":
            cluster_pairs, verified = clusters_of_ours(str(where))
            row["p"], row["r"] = pair_scores(cluster_pairs, truth, order)
            row["vp"], row["vr"] = pair_scores(verified, truth, order)

    # The table.
    print(f"\n{n:,} documents, {p} processes each; docs/CPU-s = documents / CPU seconds of the whole process tree (start-up included)")
    print(f"near pairs: {len(truth):,} pairs of true Jaccard >= {THRESHOLD} (word 5-grams)\n")
    head = f"{'tool':<26} {'task':<22} {'docs/CPU-s':>11} {'CPU s':>7} {'wall s':>7} {'peak MB':>8}  quality"
    print(head)
    print("-" * len(head))
    for r in rows:
        if "vp" in r:
            qual = f"cluster pairs P {r['p']:.3f} R {r['r']:.3f}; verified pairs P {r['vp']:.3f} R {r['vr']:.3f}"
        elif "p2" in r:
            qual = (
                f"documents P {r['p']:.3f} R {r['r']:.3f}; paragraphs P {r['p2']:.3f} R {r['r2']:.3f}; "
                f"lost: {r['lost']}/{r['groups']} groups, {r['lost_paragraphs']} paragraphs"
            )
        elif "lost" in r:
            qual = f"P {r['p']:.3f} R {r['r']:.3f}" + (
                f"; lost (both runs): {r['lost']}/{r['groups']} groups, {r['lost_paragraphs']} paragraphs"
                if r["task"] == "paragraphs"
                else ""
            )
        elif "p" in r:
            qual = f"pairs P {r['p']:.3f} R {r['r']:.3f}"
        else:
            qual = ""
        print(f"{r['tool']:<26} {r['task']:<22} {r['rate']:>11,.0f} {r['cpu']:>7.2f} {r['wall']:>7.2f} {r['rss']:>8.0f}  {qual}")
    by = {(r["tool"], r["task"]): r for r in rows}

    def ratio(a: tuple, b: tuple, label: str) -> None:
        if a in by and b in by:
            print(f"  {label}: {by[a]['rate'] / by[b]['rate']:.1f}x")

    print("\nratios (docs per CPU-second):")
    for kind in ("documents", "paragraphs"):
        ratio(("dolma-pipe (Bloom)", kind), ("Dolma 1.2.1 dedupe", kind), f"dolma-pipe Bloom / Dolma, {kind}")
    if ("Dolma 1.2.1 dedupe", "documents") in by and ("dolma-pipe (exact)", "documents+paragraphs") in by:
        both = by[("Dolma 1.2.1 dedupe", "documents")]["cpu"] + by[("Dolma 1.2.1 dedupe", "paragraphs")]["cpu"]
        print(
            f"  dolma-pipe exact, both passes in one run / Dolma's two runs: {both / by[('dolma-pipe (exact)', 'documents+paragraphs')]['cpu']:.1f}x"
        )
    ratio(("dolma-pipe minhash", "near, 10x6 verified"), ("datasketch 2.0.0 LSH", "near, 128 perm"), "dolma-pipe minhash / datasketch")
    ratio(("dolma-pipe minhash", "near, 10x6 verified"), ("datatrove 0.10.1 MinHash", "near, 14x8"), "dolma-pipe minhash / datatrove")
    if ("dolma-pipe minhash", "near, 10x6 verified") in by:
        r = by[("dolma-pipe minhash", "near, 10x6 verified")]
        print(
            f"  (dolma-pipe minhash start-up: {r['startup']:.2f} CPU-s of its {r['cpu']:.2f}; without it {n / (r['cpu'] - r['startup']):,.0f} docs/CPU-s)"
        )


if __name__ == "__main__":
    main()
