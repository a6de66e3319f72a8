"""MinHash clustering in one task against the scaled-out rounds (``minhash.cluster_memory``).

    .venv/bin/python bench/cluster_scaleout.py [--docs 300000] [--memory 16777216] [--processes 2]

Generates a corpus of short random-word documents of which most are near copies (clusters of
2 to 40 documents, and chains each a near copy of the one before), then runs ``dolma-pipe
dedup``'s MinHash pass (``verify: none``) twice on it: with the default budget (the single
``clusters`` task) and with ``--memory`` (the graph, star, labels, numbers, names and
clusters-file phases). Each task of those phases runs in a forked child so that its peak
resident memory is its own: reported is the child's peak less the resident memory it started
with. Prints seconds and the largest task peak per phase, and checks that the two runs wrote
the same bytes. The corpus and the outputs go under ``bench/_work/cluster_scaleout/`` and are
removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import io
import os
import pickle
import random
import shutil
import time
from pathlib import Path
from typing import Any

from dolma_pipe.config import load_config
from dolma_pipe.documents import write_documents
from dolma_pipe.manifest import read_manifest
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.dedup import DedupConfig, DedupStage
from dolma_pipe.stages.dedup.scaleout import MAX_STEPS, step_name

WORK = Path(__file__).resolve().parent / "_work" / "cluster_scaleout"
# The phases ("star" repeats: its rounds' names are what the manifest records).
STEPS = {step_name(s) for s in range(1, MAX_STEPS + 1)}
CLUSTER_PHASES = {"clusters", "graph", "star", "labels", "numbers", "names", "clusters-file", *STEPS}


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


class ForkedClusterStage(DedupStage):
    """The dedup stage with each task of the clustering phases run in a forked child, which
    reports its output and its peak resident memory above what it started with (KiB)."""

    def phases(self):  # type: ignore[no-untyped-def]
        from dataclasses import replace

        return [replace(p, run=self._forked(p.run)) if p.name in CLUSTER_PHASES else p for p in super().phases()]

    @staticmethod
    def _forked(run):  # type: ignore[no-untyped-def]
        def wrapped(task, quarantine, ctx):  # type: ignore[no-untyped-def]
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                # The child's peak starts at what it holds now (Linux: clear_refs 5 resets VmHWM).
                with open("/proc/self/clear_refs", "w") as fh:
                    fh.write("5")
                start = _status_kib("VmRSS")
                out = run(task, quarantine, ctx)
                peak = _status_kib("VmHWM")
                with os.fdopen(write, "wb") as fh:
                    fh.write(pickle.dumps((out, peak - start)))
                os._exit(0)
            os.close(write)
            with os.fdopen(read, "rb") as fh:
                blob = fh.read()
            os.waitpid(pid, 0)
            out, peak = pickle.loads(blob)
            out.data["peak_kib"] = peak
            return out

        return wrapped


def corpus(root: Path, docs: int, files: int, seed: int = 1) -> int:
    """Random-word documents, most of them in groups of near copies (clusters or chains); returns
    how many are in such groups."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    copies = 0

    def words(n: int) -> list[str]:
        return [f"w{rng.randrange(1 << 30)}" for _ in range(n)]

    while len(out) < docs:
        kind = rng.random()
        base = words(60)
        if kind < 0.2:
            out.append({"text": " ".join(base)})
            continue
        size = rng.choice([2, 2, 3, 4, 6, 10, 40]) if kind < 0.9 else rng.choice([20, 100])
        for _ in range(size):
            text = list(base)
            text[rng.randrange(60)] = f"x{rng.randrange(1 << 30)}"
            out.append({"text": " ".join(text)})
            if kind >= 0.9:
                base = text  # a chain: each a near copy of the one before
        copies += size
    out = out[:docs]
    rng.shuffle(out)
    for i, d in enumerate(out):
        d["id"] = f"d{i}"
    for f in range(files):
        write_documents(str(root / "documents" / f"part-{f:03d}.jsonl.gz"), out[f::files])
    return copies


def run(root: Path, out: Path, memory: int | None, processes: int) -> dict[str, Any]:
    minhash: dict[str, Any] = {"threshold": 0.8, "verify": "none"}
    if memory is not None:
        minhash["cluster_memory"] = memory
    cfg = {
        "documents": [f"{root}/documents/*"],
        "dedupe": {"name": "near"},
        "minhash": minhash,
        "destination": str(out),
        "processes": processes,
        "progress": False,
    }
    started = time.perf_counter()
    run_stage(ForkedClusterStage(load_config(DedupConfig, None, cfg)), stream=io.StringIO())
    total = time.perf_counter() - started
    manifest = read_manifest(str(out / "near"))
    phases = {}
    for p in manifest.phases:
        if p.name in CLUSTER_PHASES and p.tasks:
            peaks = [r.data.get("peak_kib", 0) for r in p.tasks.values()]
            phases[p.name] = {"tasks": len(p.tasks), "seconds": p.seconds or 0.0, "peak_mib": max(peaks) / 1024}
    pairs = manifest.phases[[p.name for p in manifest.phases].index("bands")].step.get("counts", {}).get("candidate_pairs", 0)
    return {"seconds": total, "phases": phases, "pairs": pairs}


def outputs(out: Path) -> dict[str, bytes]:
    root = out / "near"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.gz"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=300_000)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--memory", type=int, default=16 << 20, help="cluster_memory of the scaled-out run (bytes)")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    shutil.rmtree(WORK, ignore_errors=True)
    try:
        copies = corpus(WORK / "corpus", args.docs, args.files)
        print(f"corpus: {args.docs:,} documents, {copies:,} of them in groups of near copies, {args.files} files")
        for label, memory in (("single task", None), (f"cluster_memory {args.memory:,}", args.memory)):
            res = run(WORK / "corpus", WORK / label.split()[0], memory, args.processes)
            print(f"\n{label}: {res['pairs']:,} candidate pairs, whole run {res['seconds']:.1f} s")
            steps = {k: v for k, v in res["phases"].items() if k.startswith("star-")}
            for name, p in res["phases"].items():
                if not name.startswith("star-"):
                    print(f"  {name:<14} {p['tasks']:>4} tasks  {p['seconds']:7.2f} s  largest task peak {p['peak_mib']:8.1f} MiB")
            if steps:
                secs = sum(p["seconds"] for p in steps.values())
                peak = max(p["peak_mib"] for p in steps.values())
                tasks = next(iter(steps.values()))["tasks"]
                print(f"  {'star steps':<14} {len(steps):>4} x {tasks} tasks  {secs:7.2f} s  largest task peak {peak:8.1f} MiB")
        same = outputs(WORK / "single") == outputs(WORK / "cluster_memory")
        print(f"\nsame clusters file and attributes: {same}")
        if not same:
            raise SystemExit(1)
    finally:
        if not args.keep:
            shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
