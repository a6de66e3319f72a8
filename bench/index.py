"""The suffix index beside its peers: infini-gram 2.6.0 (build, counts, tracing) and
``deduplicate-text-datasets`` (ExactSubstr, substring dedup), on the same input in one run.

    .venv/bin/python bench/index.py [--processes 2] [--large-tokens 300000000]

1. **Token index.** The bench corpus (``bench/corpus.py``: 20,000 ~3 KB Debian documents with
   planted copies) tokenized by ``dolma-pipe tokenize`` (GPT-NeoX-OLMo, uint16, shards of 2 M
   tokens; 5% held out). ``dolma-pipe index`` builds over the train shards; infini-gram builds
   over the same token ids (its ``tokenized.N`` files written from the shards, one per shard:
   each document ``\\xff\\xff`` + its tokens, EOS included, which infini-gram's own tokenizing
   step would write) with its ``infini_gram.indexing`` (``rust_indexing`` make-part, merge,
   concat). Tokens per CPU-second of the build (the process tree's user + system time), peak
   memory, and bytes per token.
2. **Counts.** 1,000 n-grams drawn from the train documents (1 to 12 tokens) and 1,000 not in
   the corpus (4 to 8 tokens drawn by their unigram frequencies), counted by both
   (``bench/index_queries.py``, each engine in its own environment and process): answers
   compared, latency per query.
3. **Trace.** 500-token texts: passages of train documents, passages of held-out documents:
   dolma-pipe's maximal spans (``Index.trace``) against infini-gram's ``attribute`` (the engine
   behind OLMoTrace; no delimiters, no word-boundary rule), spans compared, latency per text.
4. **Large index.** ``--large-tokens`` (default 300 M): the train shards plus documents drawn from
   their bigram model (real token statistics, no copy of the corpus), as uint16 shards of 100 M
   tokens; ``dolma-pipe index`` over them, and the same 500-token traces timed. (infini-gram too
   with ``--large-peers``.)
5. **Substring dedup.** The corpus's documents: ExactSubstr (its ``make_suffix_array.py``,
   ``self-similar`` and ``collect`` at ``--substring-length`` bytes, built with cargo from its
   repository) against ``dolma-pipe dedup`` with ``substrings: {min_length, keep: none}`` (what
   ExactSubstr removes: every copy). The removed bytes compared per document; differences
   classified: ExactSubstr's data file puts ``\\xff\\xff`` + a 4-byte id between documents, and
   a match may take up to 3 bytes of it (a repeat touching a document's start or end, up to
   6 bytes shorter than the length, is removed by ExactSubstr and not by us). Then ours again
   with ``keep: first`` (Dolma 3's setting: the first copy stays) and with a small
   ``memory_per_task`` (the same spans, within the budget).

Prints one table; writes ``bench/_work/index/results.json``. Needs the corpus's Debian packages,
PyPI (infini-gram's wheel) and crates.io (ExactSubstr's dependencies) the first time.
"""

from __future__ import annotations

import argparse
import bisect
import glob
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time

import corpus
import numpy as np
import peers

INFINI_VENV = os.path.join(peers.WORK, "infini-venv")
INFINI_REQUIREMENTS = ["infini-gram==2.6.0", "numpy<2.3"]
EXACT_DIR = os.path.join(peers.WORK, "exactsubstr")
EXACT_REPO = "https://github.com/google-research/deduplicate-text-datasets"
EXACT_COMMIT = "4e9888a"
TOKENIZER = "olmo:gpt-neox-olmo-dolma-v1_5"
EOS = 50279
SEP = 0xFFFF


# -- the peers' environments ---------------------------------------------------------------------


def ensure_infini() -> str:
    python = os.path.join(INFINI_VENV, "bin", "python")
    if not os.path.exists(os.path.join(INFINI_VENV, ".installed")):
        print(f"installing {' '.join(INFINI_REQUIREMENTS)} into {INFINI_VENV} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", INFINI_VENV], check=True)
        subprocess.run([os.path.join(INFINI_VENV, "bin", "pip"), "install", "-q", *INFINI_REQUIREMENTS], check=True)
        open(os.path.join(INFINI_VENV, ".installed"), "w").close()
    return python


def ensure_exactsubstr() -> str:
    """ExactSubstr's binary, built with cargo (its dev profile is optimized: opt-level 3, which
    its scripts' ``./target/debug/`` paths expect)."""
    exe = os.path.join(EXACT_DIR, "target", "debug", "dedup_dataset")
    if os.path.exists(exe):
        return exe
    if not os.path.exists(os.path.join(EXACT_DIR, "Cargo.toml")):
        print(f"fetching {EXACT_REPO} into {EXACT_DIR} ...", flush=True)
        subprocess.run(["git", "clone", "-q", EXACT_REPO, EXACT_DIR], check=True)
        subprocess.run(["git", "-C", EXACT_DIR, "checkout", "-q", EXACT_COMMIT], check=True)
    with open(os.path.join(EXACT_DIR, "Cargo.toml")) as fh:
        manifest = fh.read()
    if "[workspace]" not in manifest:  # inside this repository's workspace otherwise
        with open(os.path.join(EXACT_DIR, "Cargo.toml"), "a") as fh:
            fh.write("\n[workspace]\n")
    subprocess.run(["cargo", "build", "-q"], cwd=EXACT_DIR, check=True)
    return exe


def dp(*args: str) -> list[str]:
    return [peers.OUR_PYTHON, "-m", "dolma_pipe", *args]


# -- 1. token index --------------------------------------------------------------------------------


def tokenize(docs_dir: str, work: str, processes: int) -> str:
    out = os.path.join(work, "tokens")
    subprocess.run(
        dp(
            "tokenize",
            "--documents",
            os.path.join(docs_dir, "*", "*.jsonl.gz"),
            "--destination",
            out,
            "--tokenizer.name_or_path",
            TOKENIZER,
            "--tokenizer.eos_token_id",
            str(EOS),
            "--tokenizer.pad_token_id",
            "1",
            "--max_tokens",
            "2000000",
            "--validation.fraction",
            "0.05",
            "--processes",
            str(processes),
            "--no-progress",
        ),
        check=True,
        env=peers.our_env(),
        cwd=peers.ROOT,
        stdout=subprocess.DEVNULL,
    )
    return out


def shards_of(folder: str) -> list[str]:
    return sorted(glob.glob(os.path.join(folder, "*.npy")))


def documents_of(npy: str) -> list[np.ndarray]:
    from train.shards import read_shard

    shard = read_shard(npy, np.uint16, eos_id=EOS)
    return [np.asarray(shard.document(i)) for i in range(len(shard.docs))]


def build_ours(shards: str, dest: str, processes: int, extra: list[str] = ()) -> peers.Measured:
    shutil.rmtree(dest, ignore_errors=True)
    cmd = dp("index", "--shards", shards, "--destination", dest, "--processes", str(processes), "--no-progress", *extra)
    return peers.run_measured(cmd, env=peers.our_env(), cwd=peers.ROOT)


def write_infini_input(shards: list[str], dest: str) -> float:
    """infini-gram's ``tokenized.N``/``offset.N`` of each shard (what its tokenizing step writes);
    the seconds it took."""
    start = time.perf_counter()
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    sep = np.array([SEP], dtype=np.uint16)
    for i, npy in enumerate(shards):
        docs = documents_of(npy)
        pieces = [p for d in docs for p in (sep, d.astype(np.uint16))]
        data = np.concatenate(pieces)
        lengths = np.array([(len(d) + 1) * 2 for d in docs], dtype=np.uint64)
        offsets = np.cumsum(lengths) - lengths
        data.tofile(os.path.join(dest, f"tokenized.{i}"))
        offsets.tofile(os.path.join(dest, f"offset.{i}"))
    return time.perf_counter() - start


def build_infini(python: str, dest: str, shards: int, processes: int) -> peers.Measured:
    empty = os.path.join(dest, "_no_data")
    os.makedirs(empty, exist_ok=True)
    for f in glob.glob(os.path.join(dest, "table.*")):
        os.unlink(f)
    cmd = [
        python,
        "-m",
        "infini_gram.indexing",
        "--data_dir",
        empty,
        "--save_dir",
        dest,
        "--token_dtype",
        "u16",
        "--cpus",
        str(processes),
        "--mem",
        "16",
        "--shards",
        str(shards),
        "--ulimit",
        "1024",
    ]
    return peers.run_measured(cmd, cwd=dest)


def size_of(paths: list[str]) -> int:
    return sum(os.path.getsize(p) for p in paths)


# -- 2 and 3. queries --------------------------------------------------------------------------------


def make_queries(train: list[np.ndarray], held_out: list[np.ndarray], n: int, traces: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    counts = []
    usable = [d for d in train if len(d) > 13]
    for _ in range(n):
        d = rng.choice(usable)
        k = rng.randint(1, 12)
        p = rng.randrange(len(d) - k)  # never the EOS
        counts.append([int(t) for t in d[p : p + k]])
    stream = np.concatenate(train)
    ids, freq = np.unique(stream, return_counts=True)
    nprng = np.random.default_rng(seed)
    for _ in range(n):
        counts.append([int(t) for t in nprng.choice(ids, size=rng.randint(4, 8), p=freq / freq.sum())])
    texts = []
    for pool in (train, held_out):
        long = [d for d in pool if len(d) > 520]
        for d in rng.sample(long, min(traces // 2, len(long))):
            p = rng.randrange(len(d) - 510)
            texts.append([int(t) for t in d[p : p + 500]])
    return {"counts": counts, "traces": texts, "min_length": 8, "drawn": n}


def run_queries(python: str, engine: str, index: str, queries: str, out: str) -> dict:
    cmd = [python, os.path.join(peers.HERE, "index_queries.py"), "--engine", engine, "--index", index, "--queries", queries, "--out", out]
    env = peers.our_env() if engine == "ours" else dict(os.environ)
    subprocess.run(cmd, check=True, env=env, cwd=peers.ROOT)
    with open(out) as fh:
        return json.load(fh)


def latency(seconds: list[float]) -> dict:
    a = np.asarray(seconds)
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)), "max": float(a.max())}


# -- 4. the large index ------------------------------------------------------------------------------


def write_large(train: list[np.ndarray], dest: str, tokens: int, shard_tokens: int = 100_000_000, seed: int = 1) -> int:
    """The train documents, then documents drawn from their bigram model, to ``tokens`` tokens, as
    shards of ``shard_tokens``; the tokens written."""
    from train.shards import ShardWriter

    shutil.rmtree(dest, ignore_errors=True)
    stream = np.concatenate(train).astype(np.int64)
    vocab = int(stream.max()) + 1
    # Bigram transitions as sorted (previous, next) pairs: a token's successors are a run of them.
    pairs = np.sort(stream[:-1] * vocab + stream[1:])
    prev = pairs // vocab
    starts = np.searchsorted(prev, np.arange(vocab + 1))
    rng = np.random.default_rng(seed)
    lengths = np.array([len(d) for d in train])
    written = 0
    shard = 0
    writer = None
    doc = 0

    def emit(tokens_: np.ndarray, id_: str) -> None:
        nonlocal writer, shard, written
        if writer is None or writer.n_tokens + len(tokens_) > shard_tokens:
            if writer is not None:
                writer.close()
            writer = ShardWriter(os.path.join(dest, f"part-{shard:05d}.npy"), vocab_size=50280, eos_id=EOS, add_eos=False)
            shard += 1
        writer.add(tokens_, id=id_, src="large", loc=doc)
        written += len(tokens_)

    for d in train:
        doc += 1
        emit(d, f"real-{doc}")
    chains = 4096
    while written < tokens:
        # 4,096 documents at once, each as long as a real one drawn at random, walked token by token.
        n = rng.choice(lengths, size=chains)
        steps = int(n.max())
        out = np.empty((chains, steps), dtype=np.int64)
        cur = rng.choice(stream, size=chains)
        for j in range(steps):
            out[:, j] = cur
            lo, hi = starts[cur], starts[cur + 1]
            has = hi > lo
            pick = lo + (rng.random(chains) * np.maximum(hi - lo, 1)).astype(np.int64)
            cur = np.where(has, pairs[np.minimum(pick, len(pairs) - 1)] % vocab, rng.choice(stream, size=chains))
        for c in range(chains):
            if written >= tokens:
                break
            body = out[c, : n[c] - 1]
            body = body[body != EOS]
            doc += 1
            emit(np.append(body, EOS).astype(np.uint16), f"bigram-{doc}")
    assert writer is not None
    writer.close()
    return written


# -- 5. substring dedup -----------------------------------------------------------------------------


def corpus_documents(docs_dir: str) -> tuple[list[str], list[bytes]]:
    """(ids, UTF-8 texts) in the global order dolma-pipe reads them (files by name, then line)."""
    from dolma_pipe.documents import read_documents

    ids, texts = [], []
    for path in sorted(glob.glob(os.path.join(docs_dir, "*", "*.jsonl.gz"))):
        for _, d in read_documents(path):
            ids.append(d["id"])
            texts.append(d["text"].encode("utf-8"))
    return ids, texts


def write_exact_data(texts: list[bytes], path: str) -> list[int]:
    """ExactSubstr's data file (its ``load_dataset.py`` format: ``\\xff\\xff`` + a 4-byte
    little-endian id before each document); where each document's text starts."""
    starts = []
    with open(path, "wb") as fh:
        pos = 0
        for uid, t in enumerate(texts, 1):
            head = b"\xff\xff" + struct.pack("<I", uid)
            fh.write(head + t)
            starts.append(pos + len(head))
            pos += len(head) + len(t)
    return starts


def run_exact(exe: str, data: str, length: int, processes: int) -> tuple[list[peers.Measured], list[tuple[int, int]]]:
    cache = data + ".cache"
    shutil.rmtree(cache, ignore_errors=True)
    for f in glob.glob(data + ".part.*") + glob.glob(data + ".table.bin"):
        os.unlink(f)
    os.makedirs(os.path.join(EXACT_DIR, "tmp"), exist_ok=True)
    runs = [
        peers.run_measured([peers.OUR_PYTHON, "scripts/make_suffix_array.py", data], cwd=EXACT_DIR),
        peers.run_measured(
            [
                exe,
                "self-similar",
                "--data-file",
                data,
                "--length-threshold",
                str(length),
                "--cache-dir",
                cache,
                "--num-threads",
                str(processes),
            ],
            cwd=EXACT_DIR,
        ),
        peers.run_measured([exe, "collect", "--data-file", data, "--cache-dir", cache, "--length-threshold", str(length)], cwd=EXACT_DIR),
    ]
    lines = runs[-1].output.splitlines()
    ranges = [tuple(map(int, line.split())) for line in lines[lines.index("out") + 1 :] if line.strip()] if "out" in lines else []
    for f in glob.glob(data + ".part.*"):
        os.unlink(f)
    return runs, ranges  # type: ignore[return-value]


def exact_per_document(ranges: list[tuple[int, int]], starts: list[int], texts: list[bytes]) -> list[np.ndarray]:
    """ExactSubstr's removed byte ranges as a mask over each document's text."""
    masks = [np.zeros(len(t), dtype=bool) for t in texts]
    for a, b in ranges:
        i = max(0, bisect.bisect_right(starts, a) - 1)
        while i < len(texts) and starts[i] < b:
            s, e = starts[i], starts[i] + len(texts[i])
            lo, hi = max(a, s), min(b, e)
            if lo < hi:
                masks[i][lo - s : hi - s] = True
            i += 1
    return masks


def run_ours_substrings(docs_dir: str, dest: str, length: int, keep: str, processes: int, memory: int | None = None) -> peers.Measured:
    shutil.rmtree(dest, ignore_errors=True)
    cfg = {
        "documents": [os.path.join(docs_dir, "*", "*.jsonl.gz")],
        "dedupe": {"name": "substrings"},
        "substrings": {"min_length": length, "keep": keep, **({"memory_per_task": memory} if memory else {})},
        "destination": dest,
        "processes": processes,
        "progress": False,
    }
    path = dest + ".json"
    with open(path, "w") as fh:
        json.dump(cfg, fh)
    return peers.run_measured(dp("dedup", "-c", path), env=peers.our_env(), cwd=peers.ROOT)


def ours_per_document(dest: str, ids: list[str], texts: list[bytes]) -> list[np.ndarray]:
    """dolma-pipe's substring spans (characters) as a mask over each document's bytes."""
    from dolma_pipe.documents import read_attribute_rows

    spans: dict[str, list] = {}
    for path in sorted(glob.glob(os.path.join(dest, "substrings", "**", "*.jsonl.gz"), recursive=True)):
        for _, row in read_attribute_rows(path):
            spans[row["id"]] = row["attributes"].get("substring_duplicate", [])
    masks = []
    for doc_id, t in zip(ids, texts):
        m = np.zeros(len(t), dtype=bool)
        if spans.get(doc_id):
            text = t.decode("utf-8")
            for a, z, _ in spans[doc_id]:
                m[len(text[:a].encode()) : len(text[:z].encode())] = True
        masks.append(m)
    return masks


def compare_masks(ours: list[np.ndarray], theirs: list[np.ndarray], texts: list[bytes], length: int) -> dict:
    """Bytes both remove, only one removes, and each differing run of bytes explained or not:

    * ``edge``: a run at a document's start or end, at least ``length - 6`` bytes: ExactSubstr's
      window took separator bytes (``\xff\xff`` + the id) to reach the length;
    * ``character``: at most 3 bytes of one multi-byte character at a removed range's edge:
      ExactSubstr cuts the character, dolma-pipe keeps it whole (its spans are characters);
    * ``other``: neither."""
    out = {"both": 0, "only_ours": 0, "only_theirs": 0, "edge": 0, "character": 0, "other": 0}
    for a, b, t in zip(ours, theirs, texts):
        out["both"] += int((a & b).sum())
        out["only_ours"] += int((a & ~b).sum())
        out["only_theirs"] += int((b & ~a).sum())
        diff = a ^ b
        if not diff.any():
            continue
        edges = np.flatnonzero(np.diff(np.concatenate([[0], diff.astype(np.int8), [0]])))
        for s, e in zip(edges[::2].tolist(), edges[1::2].tolist()):
            lead = s
            while lead > 0 and (t[lead] & 0xC0) == 0x80:
                lead -= 1
            multibyte = t[lead] >= 0xC0
            if (s == 0 or e == len(t)) and e - s >= length - 6:
                out["edge"] += 1
            elif e - s <= 3 and multibyte and lead >= s - 3:
                out["character"] += 1
            else:
                out["other"] += 1
    return out


# -- the run -----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--docs", type=int, default=20000, help="bench corpus documents")
    ap.add_argument("--ngrams", type=int, default=1000, help="n-grams drawn from the corpus (and as many not in it)")
    ap.add_argument("--traces", type=int, default=20, help="500-token texts traced (half from train, half held out)")
    ap.add_argument("--large-tokens", type=int, default=300_000_000, help="tokens of the large index (0: skip it)")
    ap.add_argument("--large-peers", action="store_true", help="build infini-gram's index over the large shards too")
    ap.add_argument("--substring-length", type=int, default=500, help="bytes (Dolma 3: 500)")
    ap.add_argument("--keep", action="store_true", help="keep bench/_work/index afterwards (indexes, data files)")
    args = ap.parse_args(argv)

    docs_dir = corpus.ensure(args.docs)
    work = os.path.join(peers.WORK, "index")
    os.makedirs(work, exist_ok=True)
    infini = ensure_infini()
    exact = ensure_exactsubstr()
    results: dict = {"processes": args.processes}
    P = args.processes
    try:
        # 1. build
        tokens = tokenize(docs_dir, work, P)
        shards = shards_of(os.path.join(tokens, "train"))
        train = [d for s in shards for d in documents_of(s)]
        held_out = [d for s in shards_of(os.path.join(tokens, "val")) for d in documents_of(s)]
        n_tokens = sum(len(d) for d in train)
        ours_dir = os.path.join(work, "ours")
        ours = build_ours(os.path.join(tokens, "train"), ours_dir, P)
        infini_dir = os.path.join(work, "infini-gram")
        convert = write_infini_input(shards, infini_dir)
        theirs = build_infini(infini, infini_dir, len(shards), P)
        ours_files = glob.glob(os.path.join(ours_dir, "shards", "*"))
        results["build"] = {
            "tokens": n_tokens,
            "shards": len(shards),
            "ours": {"cpu": ours.cpu, "wall": ours.wall, "rss_mb": ours.peak_rss_mb, "index_bytes": size_of(ours_files)},
            "infini": {
                "cpu": theirs.cpu,
                "wall": theirs.wall,
                "rss_mb": theirs.peak_rss_mb,
                "convert_seconds": convert,
                "index_bytes": size_of(glob.glob(os.path.join(infini_dir, "table.*"))),
                "token_bytes": size_of(
                    glob.glob(os.path.join(infini_dir, "tokenized.*")) + glob.glob(os.path.join(infini_dir, "offset.*"))
                ),
            },
            "shard_bytes": size_of(shards),
        }
        # 2, 3. counts and traces
        queries = make_queries(train, held_out, args.ngrams, args.traces)
        qpath = os.path.join(work, "queries.json")
        with open(qpath, "w") as fh:
            json.dump(queries, fh)
        a = run_queries(peers.OUR_PYTHON, "ours", ours_dir, qpath, os.path.join(work, "ours-answers.json"))
        b = run_queries(infini, "infini-gram", infini_dir, qpath, os.path.join(work, "infini-answers.json"))
        drawn = args.ngrams
        results["counts"] = {
            "equal": sum(x == y for x, y in zip(a["counts"], b["counts"])),
            "total": len(queries["counts"]),
            "drawn_found": sum(c > 0 for c in a["counts"][:drawn]),
            "absent_zero": sum(c == 0 for c in a["counts"][drawn:]),
            "ours": latency(a["count_seconds"]),
            "infini": latency(b["count_seconds"]),
        }
        results["trace"] = {
            "equal": sum(x == y for x, y in zip(a["traces"], b["traces"])),
            "total": len(queries["traces"]),
            "spans": sum(len(x) for x in a["traces"]),
            "ours": latency(a["trace_seconds"]),
            "infini": latency(b["trace_seconds"]),
        }
        # 4. the large index
        if args.large_tokens:
            large = os.path.join(work, "large-tokens")
            written = write_large(train, large, args.large_tokens)
            large_index = os.path.join(work, "large-ours")
            extra = ["--dtype", "uint16", "--eos_token_id", str(EOS), "--tokenizer", TOKENIZER]
            built = build_ours(large, large_index, P, extra)
            big = run_queries(peers.OUR_PYTHON, "ours", large_index, qpath, os.path.join(work, "large-answers.json"))
            row = {
                "tokens": written,
                "shards": len(shards_of(large)),
                "cpu": built.cpu,
                "wall": built.wall,
                "rss_mb": built.peak_rss_mb,
                "index_bytes": size_of(glob.glob(os.path.join(large_index, "shards", "*"))),
                "trace": latency(big["trace_seconds"]),
                "count": latency(big["count_seconds"]),
                "open_seconds": big["open_seconds"],
            }
            if args.large_peers:
                large_infini = os.path.join(work, "large-infini")
                write_infini_input(shards_of(large), large_infini)
                t = build_infini(infini, large_infini, len(shards_of(large)), P)
                tb = run_queries(infini, "infini-gram", large_infini, qpath, os.path.join(work, "large-infini-answers.json"))
                row["infini"] = {"cpu": t.cpu, "wall": t.wall, "rss_mb": t.peak_rss_mb, "trace": latency(tb["trace_seconds"])}
                row["trace_equal"] = sum(x == y for x, y in zip(big["traces"], tb["traces"]))
                shutil.rmtree(large_infini, ignore_errors=True)
            results["large"] = row
            shutil.rmtree(large, ignore_errors=True)
            shutil.rmtree(large_index, ignore_errors=True)
        # 5. substring dedup
        L = args.substring_length
        ids, texts = corpus_documents(docs_dir)
        data = os.path.join(work, "exact", "data.bin")
        os.makedirs(os.path.dirname(data), exist_ok=True)
        starts = write_exact_data(texts, data)
        exact_runs, ranges = run_exact(exact, data, L, P)
        theirs_masks = exact_per_document(ranges, starts, texts)
        sub_dest = os.path.join(work, "substrings-none")
        mine = run_ours_substrings(docs_dir, sub_dest, L, "none", P)
        ours_masks = ours_per_document(sub_dest, ids, texts)
        first_dest = os.path.join(work, "substrings-first")
        first = run_ours_substrings(docs_dir, first_dest, L, "first", P)
        first_masks = ours_per_document(first_dest, ids, texts)
        small_dest = os.path.join(work, "substrings-small")
        budget = 64 << 20
        small = run_ours_substrings(docs_dir, small_dest, L, "none", P, memory=budget)
        small_masks = ours_per_document(small_dest, ids, texts)
        text_bytes = sum(len(t) for t in texts)
        results["substrings"] = {
            "length": L,
            "documents": len(texts),
            "text_bytes": text_bytes,
            "compare": compare_masks(ours_masks, theirs_masks, texts, L),
            "ours": {"cpu": mine.cpu, "wall": mine.wall, "rss_mb": mine.peak_rss_mb, "removed": int(sum(m.sum() for m in ours_masks))},
            "exact": {
                "cpu": sum(r.cpu for r in exact_runs),
                "wall": sum(r.wall for r in exact_runs),
                "rss_mb": max(r.peak_rss_mb for r in exact_runs),
                "removed": int(sum(m.sum() for m in theirs_masks)),
            },
            "keep_first_removed": int(sum(m.sum() for m in first_masks)),
            "keep_first_cpu": first.cpu,
            "small_budget": {
                "memory_per_task": budget,
                "rss_mb": small.peak_rss_mb,
                "same": all((x == y).all() for x, y in zip(small_masks, ours_masks)),
            },
        }
    finally:
        if not args.keep:
            for name in ("ours", "infini-gram", "exact", "substrings-none", "substrings-first", "substrings-small"):
                shutil.rmtree(os.path.join(work, name), ignore_errors=True)
            for f in glob.glob(os.path.join(work, "*.json*")):
                if not f.endswith("results.json"):
                    os.unlink(f)
    with open(os.path.join(work, "results.json"), "w") as fh:
        json.dump(results, fh, indent=2, default=lambda o: o.item())  # numpy scalars
    print_table(results)
    return 0


def print_table(r: dict) -> None:
    b = r["build"]
    n = b["tokens"]
    ours_rate, their_rate = n / b["ours"]["cpu"], n / b["infini"]["cpu"]
    rows = [("", "dolma-pipe", "peer", "ratio")]
    rows.append(
        (
            f"index build, {n / 1e6:.1f} M tokens in {b['shards']} shards (tokens / CPU-s)",
            f"{ours_rate / 1e6:.2f} M",
            f"{their_rate / 1e6:.2f} M (infini-gram)",
            f"{ours_rate / their_rate:.2f}x",
        )
    )
    rows.append(
        (
            "  wall s, peak RSS MB",
            f"{b['ours']['wall']:.1f}, {b['ours']['rss_mb']:.0f}",
            f"{b['infini']['wall']:.1f}, {b['infini']['rss_mb']:.0f}",
            "",
        )
    )
    ours_b = b["ours"]["index_bytes"] / n
    their_b = (b["infini"]["index_bytes"] + b["infini"]["token_bytes"]) / n
    rows.append(
        (
            "  bytes per token (index files; ours reads the shards in place)",
            f"{ours_b:.2f} (+{b['shard_bytes'] / n:.2f} shards)",
            f"{their_b:.2f} (table + its token copy)",
            f"{their_b / ours_b:.2f}x less",
        )
    )
    c = r["counts"]
    rows.append(("count: answers equal to infini-gram's", f"{c['equal']:,} of {c['total']:,}", "", ""))
    rows.append(
        (
            "  drawn n-grams found / absent ones counted 0",
            f"{c['drawn_found']:,} / {c['absent_zero']:,}",
            "",
            "",
        )
    )
    rows.append(
        (
            "  latency per count, mean (p99) ms",
            f"{c['ours']['mean'] * 1e3:.3f} ({c['ours']['p99'] * 1e3:.3f})",
            f"{c['infini']['mean'] * 1e3:.3f} ({c['infini']['p99'] * 1e3:.3f})",
            f"{c['infini']['mean'] / c['ours']['mean']:.2f}x",
        )
    )
    t = r["trace"]
    rows.append(
        (
            "trace of 500 tokens: spans equal to infini-gram attribute's",
            f"{t['equal']} of {t['total']} texts ({t['spans']:,} spans)",
            "",
            "",
        )
    )
    rows.append(
        (
            "  latency per text, mean (max) ms",
            f"{t['ours']['mean'] * 1e3:.1f} ({t['ours']['max'] * 1e3:.1f})",
            f"{t['infini']['mean'] * 1e3:.1f} ({t['infini']['max'] * 1e3:.1f})",
            f"{t['infini']['mean'] / t['ours']['mean']:.2f}x",
        )
    )
    if "large" in r:
        g = r["large"]
        peer = g.get("infini")
        rows.append(
            (
                f"large index, {g['tokens'] / 1e6:,.0f} M tokens in {g['shards']} shards: build CPU-s, wall s, RSS MB",
                f"{g['cpu']:.0f}, {g['wall']:.0f}, {g['rss_mb']:.0f}",
                f"{peer['cpu']:.0f}, {peer['wall']:.0f}, {peer['rss_mb']:.0f}" if peer else "",
                f"{peer['cpu'] / g['cpu']:.2f}x" if peer else "",
            )
        )
        rows.append(
            (
                "  trace of 500 tokens, mean (max) s",
                f"{g['trace']['mean']:.3f} ({g['trace']['max']:.3f})",
                f"{peer['trace']['mean']:.3f} ({peer['trace']['max']:.3f})" if peer else "",
                f"{peer['trace']['mean'] / g['trace']['mean']:.2f}x" if peer else "",
            )
        )
        rows.append(
            (
                "  count latency mean (p99) ms; index bytes per token",
                f"{g['count']['mean'] * 1e3:.3f} ({g['count']['p99'] * 1e3:.3f}); {g['index_bytes'] / g['tokens']:.2f}",
                "",
                "",
            )
        )
    s = r["substrings"]
    cmp = s["compare"]
    rows.append(
        (
            f"substring dedup, {s['documents']:,} documents, {s['text_bytes'] / 1e6:.1f} MB, {s['length']} bytes: CPU s",
            f"{s['ours']['cpu']:.1f}",
            f"{s['exact']['cpu']:.1f} (ExactSubstr)",
            f"{s['exact']['cpu'] / s['ours']['cpu']:.2f}x",
        )
    )
    rows.append(
        (
            "  wall s, peak RSS MB",
            f"{s['ours']['wall']:.1f}, {s['ours']['rss_mb']:.0f}",
            f"{s['exact']['wall']:.1f}, {s['exact']['rss_mb']:.0f}",
            "",
        )
    )
    rows.append(("  bytes removed (every copy)", f"{s['ours']['removed']:,}", f"{s['exact']['removed']:,}", ""))
    rows.append(
        (
            "  bytes both / only ours / only ExactSubstr",
            f"{cmp['both']:,} / {cmp['only_ours']:,} / {cmp['only_theirs']:,}",
            f"differing runs: {cmp['character']} cut characters, {cmp['edge']} at a document's edge, {cmp['other']} other",
            "",
        )
    )
    rows.append(
        (
            "  keep first (Dolma 3): bytes removed, share of the text",
            f"{s['keep_first_removed']:,} ({s['keep_first_removed'] / s['text_bytes']:.2%})",
            "",
            "",
        )
    )
    sb = s["small_budget"]
    rows.append(
        (
            f"  memory_per_task {sb['memory_per_task'] >> 20} MiB: peak RSS MB, same spans",
            f"{sb['rss_mb']:.0f}, {'yes' if sb['same'] else 'NO'}",
            "",
            "",
        )
    )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


if __name__ == "__main__":
    raise SystemExit(main())
