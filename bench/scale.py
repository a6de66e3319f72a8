"""Scale figures: every stage of a pipeline on a generated corpus of N documents, measured per stage.

    .venv/bin/python bench/scale.py --docs 10000 100000 --processes 2

The corpus is ``bench/report_stage.py``'s generator (the benchmark corpus's real text cut into pieces of
about ``--chars`` characters, rewritten round after round until there are N), with its duplicate
structure turned on: 2% exact copies and 5% near copies of earlier documents, a boilerplate family
of ``--boilerplate`` (2%) of the documents sharing one large template with small edits, and
``--paragraphs`` (5%) of the documents carrying a paragraph from a pool of N / 1,000 popular ones;
the pieces in a seeded random order and every document rewritten (30% of its words replaced, dropped
or upper-cased), so that every size has the same mix of sources, languages and edits.

Stages, each a ``dolma-pipe`` command with ``--processes`` workers, in order:

* ``convert``: the generated files validated and rewritten (the later stages read its output);
* ``tag``: ``ft_lang_id``, ``gopher``, ``pii_regex_with_counts``, ``char_length_with_paragraphs_v1``;
* ``dedup-exact``: exact documents and paragraphs in one run (exact mode, no Bloom filter);
* ``dedup-minhash``: near-duplicates, MinHash at Jaccard 0.8;
* ``mix``: one stream with an include rule (English), exclude rules (Gopher's verdict, document
  copies, near-duplicates, many e-mail addresses) and span replacement (duplicate paragraphs
  removed, e-mail addresses masked);
* ``tokenize``: the mix's output, ``olmo:gpt-neox-olmo-dolma-v1_5``, 1% validation.

Per stage it prints: documents and text bytes (UTF-8 of ``text``) read, CPU seconds of the whole
process tree (user + system, start-up included: ``peers.run_measured``), documents and MB per
CPU-second, wall seconds (noisy on a shared machine), the peak resident memory of the largest
process, the work files the run wrote (run with ``keep_work``, so every work file of every phase is
still there at the end: an upper bound of the ``_work/`` peak) and the output bytes per document in.
Then a projection to ``--project`` documents (one billion by default): per-document CPU, output and
work bytes from the largest size run (from the difference between the two largest sizes, when two
were run, so that start-up is not multiplied), CPU-hours, and wall hours on ``--cores`` cores.
Memory is not projected (per-file stages hold one file; see docs/benchmarks.md, "Scale").

Everything is under ``bench/_work/scale/<N>/``, removed afterwards unless ``--keep``; the figures
also go to ``bench/_work/scale/results.json``.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import shutil
import sys
import time

import peers
import report_stage

WORK = os.path.join(peers.ROOT, "bench", "_work", "scale")
TAGGERS = ["ft_lang_id", "gopher", "pii_regex_with_counts", "char_length_with_paragraphs_v1"]
TOKENIZER = "olmo:gpt-neox-olmo-dolma-v1_5"
STAGES = ["convert", "tag", "dedup-exact", "dedup-minhash", "mix", "tokenize"]


def du(path: str, skip: str | None = None) -> int:
    """Bytes of the files under ``path`` (a file or a folder), leaving out folders named ``skip``."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, dirs, files in os.walk(path):
        if skip:
            dirs[:] = [d for d in dirs if d != skip]
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files if os.path.exists(os.path.join(root, f)))
    return total


def work_bytes(root: str) -> int:
    """Bytes of every ``_work`` folder under ``root``; the folders are removed once counted."""
    total = 0
    for path in glob.glob(os.path.join(root, "**", "_work"), recursive=True):
        total += du(path)
        shutil.rmtree(path, ignore_errors=True)
    return total


def text_stats(pattern: str) -> tuple[int, int]:
    """Documents and UTF-8 bytes of their ``text`` in the files matching ``pattern``."""
    docs = size = 0
    for path in sorted(glob.glob(pattern)):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                docs += 1
                size += len(json.loads(line)["text"].encode())
    return docs, size


def dp(*args: str) -> peers.Measured:
    return peers.run_measured([os.path.join(peers.ROOT, ".venv", "bin", "dolma-pipe"), *args, "--no-progress"], env=peers.our_env())


def mix_spec(docs: str, out: str, processes: int) -> dict:
    return {
        "streams": [
            {
                "name": "scale",
                "documents": [docs],
                "attributes": ["t", "exact", "near"],
                "filter": {
                    "syntax": "shorthand",
                    "include": ["max(ft_lang_id__doc_en) >= 0.5"],
                    "exclude": [
                        "gopher__keep == 0",
                        "bff_duplicate_docs",
                        "minhash_duplicate",
                        "count(pii_regex_with_counts__EMAIL_ADDRESS) > 5",
                    ],
                },
                "span_replacement": [
                    {"span": "$.attributes.bff_duplicate_paragraph_spans", "min_score": 0.5, "replacement": ""},
                    {
                        "span": "$.attributes.t__pii_regex_with_counts__EMAIL_ADDRESS",
                        "min_score": 0.5,
                        "replacement": "|||EMAIL_ADDRESS|||",
                    },
                ],
                "output": {"path": os.path.join(out, "mix"), "max_size_in_bytes": 100_000_000, "discard_fields": ["attributes"]},
            }
        ],
        "processes": processes,
        "keep_work": True,
    }


def measure(n: int, args: argparse.Namespace) -> list[dict]:
    out = os.path.join(WORK, str(n))
    gen = os.path.join(out, "generated")
    t0 = time.perf_counter()
    made = report_stage.make_corpus(n, args.chars, gen, boilerplate=args.boilerplate, paragraphs=args.paragraphs, mixed=True)
    print(f"[{n:,}] corpus: {made:,} documents in {time.perf_counter() - t0:.0f} s -> {gen}", flush=True)
    for sub in ("convert", "mix", "tokens", "mix.json"):
        path = os.path.join(out, sub)
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else None
    p = str(args.processes)
    conv = os.path.join(out, "convert")
    docs = os.path.join(conv, "documents", "*", "*.jsonl.gz")
    rows: list[dict] = []

    counted: dict[str, tuple[int, int]] = {}

    def stage(name: str, inputs: str, output: str, cmd: list[str], output_skip: str | None = None) -> None:
        if inputs not in counted:
            counted[inputs] = text_stats(inputs)
        n_docs, n_bytes = counted[inputs]
        print(f"[{n:,}] {name}: dolma-pipe {' '.join(cmd)}", flush=True)
        m = dp(*cmd)
        work = work_bytes(output)
        written = du(output, skip=output_skip)
        row = {
            "n": n,
            "stage": name,
            "docs": n_docs,
            "text_bytes": n_bytes,
            "cpu_s": round(m.cpu, 2),
            "wall_s": round(m.wall, 2),
            "docs_per_cpu_s": round(n_docs / m.cpu),
            "mb_per_cpu_s": round(n_bytes / 1e6 / m.cpu, 2),
            "peak_rss_mb": round(m.peak_rss_mb),
            "work_bytes": work,
            "output_bytes": written,
            "output_bytes_per_doc": round(written / max(n_docs, 1), 1),
            "summary": m.output.strip().splitlines()[-12:],  # the run's own summary (dedup's clusters, mix's kept share)
        }
        rows.append(row)
        print(f"[{n:,}] {name}: {json.dumps({k: v for k, v in row.items() if k != 'summary'})}", flush=True)
        print("\n".join(f"    {line}" for line in row["summary"]), flush=True)

    gen_docs = os.path.join(gen, "documents", "*", "*.jsonl.gz")
    stage("convert", gen_docs, conv, ["convert", "--documents", gen_docs, "--destination", conv, "--processes", p])
    # The attribute sets live beside the documents: attributes/<name>/ under the convert output.
    attrs = os.path.join(conv, "attributes")
    stage(
        "tag", docs, os.path.join(attrs, "t"),
        ["tag", "--documents", docs, "--experiment", "t", "--taggers", *TAGGERS, "--processes", p],
    )  # fmt: skip
    stage(
        "dedup-exact", docs, os.path.join(attrs, "exact"),
        ["dedup", "--documents", docs, "--dedupe.name", "exact", "--dedupe.documents.attribute_name", "bff_duplicate_docs",
         "--dedupe.documents.key", "$.text", "--dedupe.paragraphs.attribute_name", "bff_duplicate_paragraph_spans",
         "--dedupe.skip_empty", "--keep-work", "--processes", p],
    )  # fmt: skip
    stage(
        "dedup-minhash", docs, os.path.join(attrs, "near"),
        ["dedup", "--documents", docs, "--dedupe.name", "near", "--minhash.threshold", "0.8", "--keep-work", "--processes", p],
    )  # fmt: skip
    spec = os.path.join(out, "mix.json")
    with open(spec, "w") as fh:
        json.dump(mix_spec(docs, out, args.processes), fh, indent=1)
    stage("mix", docs, os.path.join(out, "mix"), ["mix", "-c", spec])
    stage(
        "tokenize", os.path.join(out, "mix", "*.jsonl.gz"), os.path.join(out, "tokens"),
        ["tokenize", "--documents", os.path.join(out, "mix", "*.jsonl.gz"), "--destination", os.path.join(out, "tokens"),
         "--tokenizer.name_or_path", TOKENIZER, "--validation.fraction", "0.01", "--keep-work", "--processes", p],
    )  # fmt: skip
    # convert's output is the corpus the other stages read: its bytes are its own, not the attributes'.
    rows[0]["output_bytes"] = du(conv, skip="attributes")
    rows[0]["output_bytes_per_doc"] = round(rows[0]["output_bytes"] / max(rows[0]["docs"], 1), 1)
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return rows


def project(rows: list[dict], target: int, cores: int) -> list[dict]:
    """Per stage: per-document CPU, work and output bytes of the corpus (N = the first stage's input)
    from the largest size, or the slope between the two largest sizes, times ``target``."""
    sizes = sorted({r["n"] for r in rows})
    by = {(r["n"], r["stage"]): r for r in rows}
    out = []
    for name in STAGES:
        big = by.get((sizes[-1], name))
        if big is None:
            continue
        small = by.get((sizes[-2], name)) if len(sizes) > 1 else None
        if small is not None:
            dn = big["n"] - small["n"]
            cpu = (big["cpu_s"] - small["cpu_s"]) / dn
            work = (big["work_bytes"] - small["work_bytes"]) / dn
            written = (big["output_bytes"] - small["output_bytes"]) / dn
            how = f"slope {small['n']:,}->{big['n']:,}"
        else:
            cpu = big["cpu_s"] / big["n"]
            work, written = big["work_bytes"] / big["n"], big["output_bytes"] / big["n"]
            how = f"per doc at {big['n']:,}"
        out.append(
            {
                "stage": name,
                "cpu_hours": round(cpu * target / 3600),
                "wall_hours_on_cores": round(cpu * target / 3600 / cores, 1),
                "work_tb": round(work * target / 1e12, 2),
                "output_tb": round(written * target / 1e12, 2),
                "measured_peak_rss_mb": big["peak_rss_mb"],
                "how": how,
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[100_000], help="corpus sizes (documents)")
    ap.add_argument("--processes", type=int, default=2, help="worker processes of every stage")
    ap.add_argument("--chars", type=int, default=2000, help="characters per generated document (about)")
    ap.add_argument("--boilerplate", type=float, default=0.02, help="share of the documents in the boilerplate family")
    ap.add_argument("--paragraphs", type=float, default=0.05, help="share of the documents given a popular paragraph")
    ap.add_argument("--project", type=int, default=1_000_000_000, help="documents to project the figures to")
    ap.add_argument("--cores", type=int, default=128, help="cores for the projection's wall hours")
    ap.add_argument("--keep", action="store_true", help="keep the corpora and runs under bench/_work/scale/")
    args = ap.parse_args(argv)
    print(f"command: python bench/scale.py {' '.join(sys.argv[1:] if argv is None else argv)}", flush=True)
    rows = [r for n in sorted(args.docs) for r in measure(n, args)]
    head = ["N", "stage", "docs in", "MB in", "CPU-s", "wall s", "docs/CPU-s", "MB/CPU-s", "peak RSS MB", "work MB", "out B/doc"]
    print("  ".join(f"{h:>13}" for h in head))
    for r in rows:
        cells = [r["n"], r["stage"], r["docs"], round(r["text_bytes"] / 1e6, 1), r["cpu_s"], r["wall_s"], r["docs_per_cpu_s"]]
        cells += [r["mb_per_cpu_s"], r["peak_rss_mb"], round(r["work_bytes"] / 1e6, 1), r["output_bytes_per_doc"]]
        print("  ".join(f"{c:>13,}" if isinstance(c, (int, float)) else f"{c:>13}" for c in cells))
    proj = project(rows, args.project, args.cores)
    print(f"\nprojected to {args.project:,} documents ({args.cores} cores for wall hours):")
    for p in proj:
        print(
            f"  {p['stage']:>14}  {p['cpu_hours']:>10,} CPU-h  {p['wall_hours_on_cores']:>8,} h  {p['work_tb']:>6} TB work  {p['output_tb']:>6} TB out  ({p['how']})"
        )
    os.makedirs(WORK, exist_ok=True)
    with open(os.path.join(WORK, "results.json"), "w") as fh:
        json.dump({"args": vars(args), "rows": rows, "projection": proj}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
