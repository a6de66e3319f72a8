"""Mixing speed and agreement: Dolma 1.2.1's ``dolma mix`` and ``dolma-pipe mix`` on the same inputs.

    .venv/bin/python bench/mix.py [--processes 1] [--repeat 3] [--skip-dolma]

What it does:

1. Takes the shared bench corpus (``bench/corpus.py``: 20,000+ real ~3 KB documents from Debian's
   packages with planted duplicates) and copies its documents to ``bench/_work/mix/documents``.
2. Makes the attributes both mixers read, once (cached): Dolma's own ``gopher_v1`` tagger
   (``dolma tag``, attribute set ``bench``) and Dolma's ``dolma dedupe``, run twice (it takes one
   kind per run): exact documents (``bff_duplicate_docs``, set ``dedup_docs``) and paragraphs
   (``bff_duplicate_paragraph_spans``, set ``dedup_paras``): the same files for both tools.
3. Writes two mixer configs in Dolma's schema: a jq one and a JSONPath one, each excluding on a
   tagger attribute (Gopher word count and symbol ratio) and on a dedup attribute (exact duplicate
   documents), with a span replacement removing duplicate paragraphs, discarding ``attributes``.
   (The dedup scores are the integer ``1``; the JSONPath rule compares with ``> 0.5`` because
   Dolma's JSONPath engine never matches ``>= 1.0`` against ``1``; ours does.)
4. Runs each tool on each config with the same process count, measuring the CPU seconds of the
   whole process tree (``peers.run_measured``), and prints documents per CPU-second for both and
   the ratio, start-up included (and, as bench/tag.py does, without it: each tool also runs on a
   5-document corpus). A run takes a few CPU-seconds, so one run reads up to 30% off on a shared
   machine: each tool runs ``--repeat`` times, the tools taking turns, and its fastest run counts.
   Then it compares the outputs: documents only one tool kept, and documents whose text
   differs (both must be 0). Each stream writes shards of at most 2 MB, several per stream, and
   every line of every shard is parsed: a line that is not a whole document (a document cut where
   a shard ends) is counted, and the bench exits non-zero if dolma-pipe wrote one. Dolma's shard grouping differs from ours, so documents are compared
   by id, not by file.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

import corpus
import peers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORK = os.path.join(HERE, "_work", "mix")
DOCS = os.path.join(WORK, "documents")
STAMP = os.path.join(WORK, ".attributes-done")
# Several shards per stream (the bench corpus mixes to about 15 MB of gzip), so a document cut
# where one shard ends and the next begins would show as lines that do not parse.
SHARD_BYTES = 2_000_000


def prepare(n_docs: int) -> int:
    """Corpus copy and both attribute sets (once); returns the number of documents."""
    src = corpus.ensure(n_docs)
    if os.path.exists(STAMP):
        return _count_docs()
    if not os.path.exists(os.path.join(WORK, ".copied")):
        shutil.rmtree(WORK, ignore_errors=True)
        shutil.copytree(src, DOCS)
        open(os.path.join(WORK, ".copied"), "w").close()
    dolma = peers.ensure_dolma()
    env = peers.dolma_env()
    pattern = os.path.join(DOCS, "*", "*.jsonl.gz")
    if not os.path.exists(os.path.join(WORK, ".tagged")):
        print("tagging the bench corpus with Dolma's gopher_v1 (attribute set 'bench') ...", flush=True)
        subprocess.run(
            [dolma, "tag", "--documents", pattern, "--taggers", "gopher_v1", "--experiment", "bench", "--processes", "2"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        open(os.path.join(WORK, ".tagged"), "w").close()
    # Dolma's dedupe takes documents or paragraphs per run (not both): two runs, two attribute sets.
    for name, dedupe in (
        ("dedup_docs", {"documents": {"attribute_name": "bff_duplicate_docs", "key": "$.text"}}),
        ("dedup_paras", {"paragraphs": {"attribute_name": "bff_duplicate_paragraph_spans"}}),
    ):
        print(f"deduplicating with Dolma's dedupe (attribute set {name!r}) ...", flush=True)
        config = {
            "documents": [pattern],
            "dedupe": {"name": name, "skip_empty": True, **dedupe},
            "bloom_filter": {
                "file": os.path.join(WORK, f"{name}.bloom"),
                "read_only": False,
                "estimated_doc_count": 1_000_000,
                "desired_false_positive_rate": 1e-6,
            },
            "processes": 1,  # one process: which copy is "first" follows the file order
        }
        path = os.path.join(WORK, f"{name}.json")
        with open(path, "w") as fh:
            json.dump(config, fh)
        subprocess.run([dolma, "-c", path, "dedupe"], env=env, check=True, stdout=subprocess.DEVNULL)
    open(STAMP, "w").close()
    return _count_docs()


def tiny(n: int = 5) -> str:
    """The first ``n`` documents of one file with their attribute rows: each tool's start-up cost."""
    root = os.path.join(WORK, "tiny")
    shutil.rmtree(root, ignore_errors=True)
    rel = os.path.join("debian-handbook", "part-0000.jsonl.gz")
    for sub in ("documents", *(os.path.join("attributes", a) for a in ("bench", "dedup_docs", "dedup_paras"))):
        src = os.path.join(WORK, sub, rel)
        dst = os.path.join(root, sub, rel)
        os.makedirs(os.path.dirname(dst))
        with gzip.open(src, "rt", encoding="utf-8") as fin, gzip.open(dst, "wt", encoding="utf-8") as fout:
            for _, line in zip(range(n), fin):
                fout.write(line)
    return os.path.join(root, "documents", "*", "*.jsonl.gz")


def _count_docs() -> int:
    return sum(1 for f in glob.glob(os.path.join(DOCS, "*", "*.jsonl.gz")) for _ in gzip.open(f, "rt"))


GOPHER = "bench__gopher_v1__"


def configs(processes: int) -> dict[str, dict]:
    """The two specs (jq, JSONPath), output path left to fill in."""
    common = {
        "name": "bench",
        "documents": [os.path.join(DOCS, "*", "*.jsonl.gz")],
        "attributes": ["bench", "dedup_docs", "dedup_paras"],
        "span_replacement": [{"span": "$.attributes.bff_duplicate_paragraph_spans", "min_score": 0.5, "replacement": ""}],
    }
    jq = {
        "syntax": "jq",
        "exclude": [
            f".attributes.{GOPHER}word_count[0][2] < 200",
            f".attributes.{GOPHER}symbol_to_word_ratio[0][2] > 0.1",
            ".attributes.bff_duplicate_docs | length > 0",
        ],
    }
    jsonpath = {
        "syntax": "jsonpath",
        "exclude": [
            f"$.attributes[?(@.{GOPHER}word_count && @.{GOPHER}word_count[0][2] < 200)]",
            f"$.attributes[?(@.{GOPHER}symbol_to_word_ratio && @.{GOPHER}symbol_to_word_ratio[0][2] > 0.1)]",
            "$.attributes[?(@.bff_duplicate_docs && @.bff_duplicate_docs[0] && @.bff_duplicate_docs[0][2] > 0.5)]",
        ],
    }
    return {
        name: {
            "streams": [
                {**common, "filter": flt, "output": {"path": "", "max_size_in_bytes": SHARD_BYTES, "discard_fields": ["attributes"]}}
            ],
            "processes": processes,
        }
        for name, flt in (("jq", jq), ("jsonpath", jsonpath))
    }


@dataclass
class Output:
    """What a mixer wrote: {id: text}, its shards, and lines that are not a whole JSON document."""

    docs: dict[str, str]
    shards: int
    bad_lines: int


def read_output(folder: str) -> Output:
    """Every line of every shard, parsed; a line that does not parse is counted, never skipped."""
    docs: dict[str, str] = {}
    paths = sorted(glob.glob(os.path.join(folder, "*.gz")))
    bad = 0
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    bad += 1
                    continue
                assert d["id"] not in docs, f"{d['id']} twice in {folder}"
                docs[d["id"]] = d["text"]
    return Output(docs, len(paths), bad)


def compare(ours: dict[str, str], theirs: dict[str, str]) -> tuple[int, int]:
    only = len(set(ours) ^ set(theirs))
    texts = sum(1 for i in set(ours) & set(theirs) if ours[i] != theirs[i])
    return only, texts


def run_tool(tool: str, name: str, spec: dict, documents: str, out: str) -> peers.Measured:
    spec = json.loads(json.dumps(spec))
    spec["streams"][0]["documents"] = [documents]
    spec["streams"][0]["output"]["path"] = out
    shutil.rmtree(out, ignore_errors=True)
    if tool == "dolma":
        spec["work_dir"] = {"input": os.path.join(WORK, "tmp-in"), "output": os.path.join(WORK, "tmp-out")}
    path = os.path.join(WORK, f"{tool}-{name}.json")
    with open(path, "w") as fh:
        json.dump(spec, fh, indent=1)
    if tool == "dolma":
        return peers.run_measured([peers.ensure_dolma(), "-c", path, "mix"], env=peers.dolma_env())
    return peers.run_measured([peers.OUR_PYTHON, "-m", "dolma_pipe", "mix", "-c", path, "--no-progress"], env=peers.our_env(), cwd=ROOT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20000, help="documents in the shared bench corpus")
    ap.add_argument("--processes", type=int, default=1, help="processes for both tools")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each tool, taking turns; the fastest counts")
    ap.add_argument("--skip-dolma", action="store_true", help="only run dolma-pipe")
    args = ap.parse_args()
    n = prepare(args.docs)
    print(f"corpus: {n:,} documents in {DOCS}")
    small = tiny()
    tools = ("ours",) if args.skip_dolma else ("ours", "dolma")
    results = []
    for name, spec in configs(args.processes).items():
        row: dict = {"config": name}
        starts: dict[str, list[peers.Measured]] = {t: [] for t in tools}
        runs: dict[str, list[peers.Measured]] = {t: [] for t in tools}
        for _ in range(max(1, args.repeat)):
            for tool in tools:
                starts[tool].append(run_tool(tool, name, spec, small, os.path.join(WORK, f"tiny-{tool}-{name}")))
                runs[tool].append(run_tool(tool, name, spec, spec["streams"][0]["documents"][0], os.path.join(WORK, f"out-{tool}-{name}")))
        for tool in tools:
            start = min(starts[tool], key=lambda r: r.cpu)
            m = min(runs[tool], key=lambda r: r.cpu)
            row[tool] = (m, read_output(os.path.join(WORK, f"out-{tool}-{name}")), start)
            steady = (n - 5) / max(m.cpu - start.cpu, 1e-9)
            print(
                f"  {name:8s} {tool:5s}: {m.cpu:6.2f} CPU-s {m.wall:6.2f} s wall  peak {m.peak_rss_mb:5.0f} MB -> {n / m.cpu:8,.0f} docs/CPU-s "
                f"(start-up {start.cpu:.2f} CPU-s; without it {steady:,.0f}), {len(row[tool][1].docs):,} documents kept "
                f"in {row[tool][1].shards} shards, {row[tool][1].bad_lines} lines that do not parse",
                flush=True,
            )
        results.append(row)
    broken = [(r["config"], t) for r in results for t in tools if r[t][1].bad_lines or r[t][1].shards < 2]
    if args.skip_dolma:
        sys.exit(1 if any(t == "ours" for _, t in broken) else 0)
    print()
    head = f"{'config':9s} {'dolma docs/CPU-s':>17s} {'dolma-pipe docs/CPU-s':>22s} {'ratio':>6s} {'(no start-up)':>14s} {'docs only one kept':>19s} {'texts differ':>13s}"
    print(head)
    for row in results:
        (m_ours, d_ours, s_ours), (m_dolma, d_dolma, s_dolma) = row["ours"], row["dolma"]
        only, texts = compare(d_ours.docs, d_dolma.docs)
        steady = (m_dolma.cpu - s_dolma.cpu) / max(m_ours.cpu - s_ours.cpu, 1e-9)
        print(
            f"{row['config']:9s} {n / m_dolma.cpu:17,.0f} {n / m_ours.cpu:22,.0f} {m_dolma.cpu / m_ours.cpu:5.2f}x {steady:13.2f}x {only:19,d} {texts:13,d}"
        )
    counts = collections.Counter(len(r["ours"][1].docs) for r in results)
    print(f"(documents kept per config: {dict(counts)})")
    if any(t == "ours" for _, t in broken):
        sys.exit(f"dolma-pipe wrote fewer than 2 shards or lines that do not parse: {broken}")


if __name__ == "__main__":
    main()
