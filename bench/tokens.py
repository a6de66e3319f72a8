"""Tokenizing speed: ``dolma-pipe tokenize`` against Dolma 1.2.1's ``dolma tokens`` and a bare encode_batch loop.

    .venv/bin/python bench/tokens.py [--processes 2] [--tokenizer olmo:gpt-neox-olmo-dolma-v1_5]
                                     [--batch-size 1024] [--rounds 1]

What it does, on the shared bench corpus (``bench/corpus.py``: 20,138 real ~3 KB documents):

1. ``dolma tokens`` (Dolma 1.2.1 in its own virtual environment, ``bench/peers.py``) and
   ``dolma-pipe tokenize``, same documents, same tokenizer file, same EOS/pad, ``--processes``
   each; the CPU seconds (user + system) of each whole process tree, start-up included.
2. A bare loop: one process reads every text (stripped, as both tools do) into memory, then times
   only ``Tokenizer.encode_batch(batch, add_special_tokens=False)`` over batches of
   ``--batch-size`` texts with TOKENIZERS_PARALLELISM=false: the speed of the library both build
   on, with no reading, no writing and no start-up.  (A second bare loop, one text per call, is
   what Dolma does.)
3. Prints tokens per CPU-second of each, the ratios, each tool's peak memory, and compares every
   document's tokens by id through the two tools' sidecars: the number of documents whose tokens
   differ from Dolma's (or that one tool wrote and the other did not) must be 0.

With ``--rounds N`` each tool runs N times, interleaved, and the fastest round of each counts (the
machine is shared; CPU time still varies with what else runs on it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import corpus
import peers

from dolma_pipe import tokenizer as toks
from train.shards import find_shards, read_shard

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

BARE_LOOP = r"""
import glob, gzip, json, os, sys, time
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer
path, docs_dir, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
tok = Tokenizer.from_file(path)
texts = []
for f in sorted(glob.glob(os.path.join(docs_dir, "*", "*.jsonl.gz"))):
    with gzip.open(f, "rt", encoding="utf-8") as fh:
        texts += [t for t in (json.loads(line)["text"].strip() for line in fh) if t]
out = {}
for name, size in (("batch", batch), ("one", 1)):
    start = time.process_time()
    n = 0
    for i in range(0, len(texts), size):
        n += sum(len(e.ids) for e in tok.encode_batch(texts[i : i + size], add_special_tokens=False))
    out[name] = [n, time.process_time() - start]
print(json.dumps(out))
"""


def shard_digests(dest: str, dtype: str) -> tuple[dict[str, bytes], int]:
    """Document id -> hash of its tokens (as uint32), and the total token count, of every shard under dest."""
    digests: dict[str, bytes] = {}
    total = 0
    for path, _ in find_shards([dest]):
        shard = read_shard(path, dtype)
        total += shard.n_tokens
        for i, doc in enumerate(shard.docs):
            digests[doc.id] = hashlib.blake2b(shard.document(i).astype("<u4").tobytes(), digest_size=16).digest()
    return digests, total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--tokenizer", default="olmo:gpt-neox-olmo-dolma-v1_5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--docs", type=int, default=20000)
    args = ap.parse_args(argv)

    docs_dir = corpus.ensure(args.docs)
    tok_path = toks.resolve(args.tokenizer)
    info = toks.inspect(args.tokenizer)
    special = toks.special_ids(args.tokenizer)
    eos, pad = special.get("eos_token_id"), special.get("pad_token_id")
    if eos is None:
        raise SystemExit(f"{args.tokenizer}: the bench needs a packaged OLMo tokenizer (olmo:...) whose EOS it knows")
    dtype = "uint16" if info.vocab_size <= 2**16 else "uint32"
    dolma = peers.ensure_dolma()
    documents = [os.path.join(docs_dir, "*", "*.jsonl.gz")]
    work = tempfile.mkdtemp(prefix="tokenize-bench-", dir=peers.WORK)
    print(
        f"corpus: {docs_dir}; tokenizer {args.tokenizer} ({info.vocab_size:,} entries, EOS {eos}); "
        f"{args.processes} processes; batch {args.batch_size}",
        flush=True,
    )
    try:
        runs: dict[str, list[peers.Measured]] = {"dolma": [], "ours": []}
        bare: list[dict] = []
        for r in range(args.rounds):
            dolma_dest = os.path.join(work, f"dolma-{r}")
            cfg = {
                "documents": documents,
                "destination": dolma_dest,
                "dtype": dtype,
                "processes": args.processes,
                "tokenizer": {"name_or_path": tok_path, "eos_token_id": eos, "pad_token_id": pad},
            }
            cfg_path = os.path.join(work, "dolma.json")
            with open(cfg_path, "w") as fh:
                json.dump(cfg, fh)
            runs["dolma"].append(peers.run_measured([dolma, "-c", cfg_path, "tokens"], env=peers.dolma_env(), cwd=work))
            ours_dest = os.path.join(work, f"ours-{r}")
            cmd = [
                peers.OUR_PYTHON,
                "-m",
                "dolma_pipe",
                "tokenize",
                "--documents",
                *documents,
                "--destination",
                ours_dest,
                "--tokenizer.name_or_path",
                args.tokenizer,
                "--processes",
                str(args.processes),
                "--batch_size",
                str(args.batch_size),
                "--no-progress",
            ]
            runs["ours"].append(peers.run_measured(cmd, env=peers.our_env(), cwd=ROOT))
            out = subprocess.run(
                [peers.OUR_PYTHON, "-c", BARE_LOOP, tok_path, docs_dir, str(args.batch_size)],
                check=True,
                capture_output=True,
                text=True,
                env=peers.our_env(),
            )
            bare.append(json.loads(out.stdout))
            print(
                f"round {r + 1}: dolma {runs['dolma'][-1].cpu:.1f} CPU-s, ours {runs['ours'][-1].cpu:.1f} CPU-s, "
                f"bare loop {bare[-1]['batch'][1]:.1f} CPU-s",
                flush=True,
            )

        dolma_docs, dolma_tokens = shard_digests(os.path.join(work, "dolma-0"), dtype)
        our_docs, our_tokens = shard_digests(os.path.join(work, "ours-0", "train"), dtype)
        differ = sum(1 for k, v in dolma_docs.items() if our_docs.get(k) != v) + sum(1 for k in our_docs if k not in dolma_docs)

        d = min(runs["dolma"], key=lambda m: m.cpu)
        o = min(runs["ours"], key=lambda m: m.cpu)
        b_tokens, b_cpu = min((x["batch"] for x in bare), key=lambda x: x[1])
        one_tokens, one_cpu = min((x["one"] for x in bare), key=lambda x: x[1])
        rate = {
            "dolma tokens": dolma_tokens / d.cpu,
            "dolma-pipe tokenize": our_tokens / o.cpu,
            f"bare encode_batch loop ({args.batch_size}/call)": b_tokens / b_cpu,
            "bare encode_batch loop (1/call)": one_tokens / one_cpu,
        }
        print()
        print(
            f"documents: dolma {len(dolma_docs):,}, ours {len(our_docs):,}; tokens (EOS included): dolma {dolma_tokens:,}, "
            f"ours {our_tokens:,}; bare loop {b_tokens:,} (no EOS)"
        )
        width = max(map(len, rate))
        print(f"{'':{width}}  {'tokens/CPU-s':>14}  {'CPU s':>7}  {'wall s':>7}  {'peak RSS MB':>11}")
        for name, value in rate.items():
            m = d if name.startswith("dolma tokens") else o if name.startswith("dolma-pipe") else None
            cpu = m.cpu if m else (b_cpu if "1024" in name or str(args.batch_size) in name else one_cpu)
            extra = f"{m.wall:7.1f}  {m.peak_rss_mb:11.0f}" if m else f"{'-':>7}  {'-':>11}"
            print(f"{name:{width}}  {value:14,.0f}  {cpu:7.1f}  {extra}")
        ours_rate = rate["dolma-pipe tokenize"]
        print()
        print(f"ours / dolma:                 {ours_rate / rate['dolma tokens']:.2f}x   (target >= 2x)")
        print(
            f"ours / bare encode_batch loop: {ours_rate / rate[f'bare encode_batch loop ({args.batch_size}/call)']:.0%}   (target >= 80%)"
        )
        print(f"documents whose tokens differ from Dolma's: {differ}")
        return 0 if differ == 0 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
