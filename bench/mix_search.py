"""``dolma-pipe mix-search`` on a corpus with a planted answer: does the swarm find it?

    .venv/bin/python bench/mix_search.py [--runs 16] [--tokens 65536] [--confirm-seeds 1 2 3] [--processes 1]

The corpus: the bundled sample corpus's five real sources (``examples/sample/documents/``:
python-doc, linux-doc, debian-handbook, gcide, fortunes) plus a planted ``noise`` source of
word salad (random letter strings, as long as real documents), each tokenized on its own by
``dolma-pipe tokenize`` with a 10% held-out split, with a BPE tokenizer trained on the corpus
(``examples/train_tokenizer.py``, ``--vocab`` entries: the tiny proxies then spend their time on the model, not the output layer).

The planted answer: the target domain is python-doc's held-out documents. python-doc's training
documents are known to help it; the noise source is known to hurt it (it takes share and teaches
nothing). The swarm (``--runs`` tiny proxies around the prior, each ``--tokens`` tokens) must
propose a mixture that, trained once more from scratch (``--confirm-seeds``: one confirmation run
of the proposal, the uniform mixture and the prior per seed), beats the uniform mixture and the
prior on the target's loss; and its regression must rank the runs it did not see (5-fold
cross-validation) with Spearman >= 0.7. Peers (Dolma, datatrove, NeMo Curator) have no mix
search to run beside it: the figures are ours alone.

Everything is under ``bench/_work/mix_search/`` (removed afterwards unless ``--keep``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORK = os.path.join(ROOT, "bench", "_work", "mix_search")
SOURCES = ["python-doc", "linux-doc", "debian-handbook", "gcide", "fortunes"]
CLI = [sys.executable, "-m", "dolma_pipe"]


def write_noise(out: str, n: int, seed: int = 0) -> None:
    """Word salad: random lower-case strings with spaces and full stops, ~3 KB a document."""
    rng = random.Random(seed)
    os.makedirs(out, exist_ok=True)
    with gzip.open(os.path.join(out, "part-0000.jsonl.gz"), "wt", encoding="utf-8") as fh:
        for i in range(n):
            words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(450)]
            text = " ".join(w + ("." if rng.random() < 0.08 else "") for w in words)
            fh.write(json.dumps({"id": f"noise-{i}", "text": text, "source": "noise"}) + "\n")


def run(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=65536, help="tokens of each proxy run")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--confirm-seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--regression", default="loglinear")
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()

    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    docs = {s: os.path.join(ROOT, "examples", "sample", "documents", s, "*") for s in SOURCES}
    write_noise(os.path.join(WORK, "noise", "documents"), 120)
    docs["noise"] = os.path.join(WORK, "noise", "documents", "*")
    tok = os.path.join(WORK, "tokenizer.json")
    run([sys.executable, "examples/train_tokenizer.py", tok, *[docs[s] for s in SOURCES], "--vocab", str(args.vocab)])
    tokenize_s = 0.0
    for s, pattern in docs.items():
        tokenize_s += run(
            [*CLI, "tokenize", "--documents", pattern, "--destination", os.path.join(WORK, "tokens", s), "--tokenizer.name_or_path", tok,
             "--tokenizer.eos_token_id", "0", "--validation.fraction", "0.1", "--processes", str(args.processes), "--no-progress"]
        )  # fmt: skip
    proxy = {
        "model": {"preset": "tiny", "vocab_size": args.vocab, "max_seq_len": 128},
        "data": {"seq_len": 128, "eos_id": 0},
        "train": {"global_batch_size": 8, "micro_batch_size": 8, "precision": "fp32"},
        "optim": {"lr": 3.0e-3},
        "schedule": {"kind": "cosine", "warmup_steps": 5, "min_lr_ratio": 0.1},
        "log": {"interval": 20},
    }
    with open(os.path.join(WORK, "proxy.yaml"), "w") as fh:
        yaml.safe_dump(proxy, fh)
    names = [*SOURCES, "noise"]
    spec = {
        "method": "swarm",
        "output": os.path.join(WORK, "search"),
        "processes": args.processes,
        "progress": False,
        "sources": [
            {
                "name": s,
                "paths": [os.path.join(WORK, "tokens", s, "train")],
                "val": [os.path.join(WORK, "tokens", s, "val")],
                "max_repetition": 4,
            }
            for s in names
        ],
        "eval": {"max_instances": 64, "tokenizer": tok},
        "proxy": {"config": os.path.join(WORK, "proxy.yaml"), "tokens": args.tokens},
        "swarm": {"runs": args.runs, "seed": args.seed},
        "fit": {"objective": {"python-doc": 1.0}, "regression": args.regression},
        "confirm": {"seeds": args.confirm_seeds},
    }
    with open(os.path.join(WORK, "search.yaml"), "w") as fh:
        yaml.safe_dump(spec, fh, sort_keys=False)
    start = time.perf_counter()
    subprocess.run([*CLI, "mix-search", "-c", os.path.join(WORK, "search.yaml")], check=True, cwd=ROOT)
    search_s = time.perf_counter() - start
    with open(os.path.join(WORK, "search", "search.json")) as fh:
        s = json.load(fh)
    per_run = [r for r in s["runs"]]
    print()
    print(
        f"tokenize (6 sources): {tokenize_s:.1f} s; search ({args.runs} proxies + {3 * len(args.confirm_seeds)} confirmation runs): {search_s:.1f} s wall, {search_s / (args.runs + 3 * len(args.confirm_seeds)):.1f} s a run"
    )
    print(f"proxy: tiny preset, vocab {args.vocab}, {per_run[0]['steps']} steps of 1,024 tokens each")
    print(f"{'source':<16} {'prior':>7} {'uniform':>8} {'proposal':>9}")
    for n in names:
        print(f"{n:<16} {s['prior'][n]:7.3f} {s['uniform'][n]:8.3f} {s['proposal'][n]:9.3f}")
    c = s["confirm"]
    print(f"target (python-doc val) loss, confirmation runs (mean of seeds {args.confirm_seeds}):")
    print(f"  proposal {c['proposal']['python-doc']:.4f}  uniform {c['uniform']['python-doc']:.4f}  prior {c['prior']['python-doc']:.4f}")
    print(f"  proposal beats uniform: {s['proposal_beats']['uniform']}; beats prior: {s['proposal_beats']['prior']}")
    print(f"held-out Spearman (5-fold CV over the {args.runs} proxies): target {s['fit']['spearman']['python-doc']:.3f}; "
          + ", ".join(f"{d} {v:.3f}" for d, v in s["fit"]["spearman"].items() if v is not None and d != "python-doc"))  # fmt: skip
    if not args.keep:
        shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
