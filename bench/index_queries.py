"""One side of ``bench/index.py``'s queries: counts and traces against one engine, timed per query.

    python bench/index_queries.py --engine ours --index DIR --queries Q.json --out R.json
    bench/_work/infini-venv/bin/python bench/index_queries.py --engine infini-gram --index DIR --eos 50279 ...

Each engine runs in its own environment (infini-gram 2.6.0 in its virtual environment, dolma-pipe
in ours), in a process of its own, on the same token ids: ``Q.json`` holds ``counts`` (lists of
ids), ``traces`` (lists of ids) and ``min_length``; ``R.json`` gets each answer and its seconds.
A trace is OLMoTrace's maximal spans: dolma-pipe's ``Index.trace`` and infini-gram's
``attribute`` (no delimiters, no word-boundary rule, no count cap), as ``[start, end, count]``.
"""

from __future__ import annotations

import argparse
import json
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", choices=["ours", "infini-gram"], required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--eos", type=int, default=50279, help="infini-gram: the EOS id")
    args = ap.parse_args(argv)
    with open(args.queries) as fh:
        q = json.load(fh)

    start = time.perf_counter()
    if args.engine == "ours":
        from dolma_pipe.stages.index import Index

        index = Index(args.index)

        def count(ids: list[int]) -> int:
            return index.count(ids)

        def trace(ids: list[int]) -> list[list[int]]:
            spans = index.trace(ids, min_length=q["min_length"], docs=1)
            return sorted([s.start, s.end, s.count] for s in spans)
    else:
        from infini_gram.engine import InfiniGramEngine

        engine = InfiniGramEngine(index_dir=args.index, eos_token_id=args.eos, token_dtype="u16")

        def count(ids: list[int]) -> int:
            return int(engine.count(input_ids=ids)["count"])

        def trace(ids: list[int]) -> list[list[int]]:
            result = engine.attribute(input_ids=ids, delim_ids=[], min_len=q["min_length"], max_cnt=2**62, enforce_bow=False)
            return sorted([s["l"], s["r"], s["count"]] for s in result["spans"])

    opened = time.perf_counter() - start
    out: dict = {"open_seconds": opened, "counts": [], "count_seconds": [], "traces": [], "trace_seconds": []}
    for ids in q["counts"]:
        t = time.perf_counter()
        out["counts"].append(count(ids))
        out["count_seconds"].append(time.perf_counter() - t)
    for ids in q["traces"]:
        t = time.perf_counter()
        out["traces"].append(trace(ids))
        out["trace_seconds"].append(time.perf_counter() - t)
    with open(args.out, "w") as fh:
        json.dump(out, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
