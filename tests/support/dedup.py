"""What the dedup tests share: small corpora with planted copies, running the stage, comparing
outputs byte for byte, a stand-in for the mixer's removal, and a slowed run to kill.

``python -m tests.support.dedup CONFIG_JSON PHASE SECONDS`` runs the stage
with every task of ``PHASE`` slowed by ``SECONDS`` (the stage's own code is untouched: the
phase's run function is wrapped here, before the workers fork), so a test can kill it there.
"""

from __future__ import annotations

import io
import os
import random
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from dolma_pipe import paths
from dolma_pipe.attributes import read_with_attributes
from dolma_pipe.config import load_config
from dolma_pipe.documents import read_attribute_rows, read_documents, write_documents
from dolma_pipe.manifest import read_manifest
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.runner import RunSummary, run_stage
from dolma_pipe.stages.dedup import DedupConfig, DedupStage
from tests.support.documents import make_docs, sample_rows
from tests.support.outputs import done_markers
from tests.support.processes import kill_when

REPEATED = "This paragraph is repeated in several documents of the corpus, word for word."


def planted_corpus(root: Path, files: int = 4, docs: int = 30) -> dict[str, Any]:
    """Documents with planted exact copies (within and across files, three copies of one) and a
    repeated paragraph; returns where the copies are, in the global order."""
    rng = random.Random(7)
    per_file = [make_docs(docs, seed=f, words=45) for f in range(files)]
    for docs_ in per_file:
        for d in docs_:
            words = d["text"].split(" ")
            # Three paragraphs of 15 words (unlike one another), the last with non-ASCII text.
            cut = 15 + rng.randrange(3)
            d["text"] = "\n".join([" ".join(words[:cut]), " ".join(words[cut : cut + 15]), " ".join(words[cut + 15 :])])
    per_file[0][5]["text"] = per_file[0][3]["text"]
    per_file[2][0]["text"] = per_file[1][7]["text"]
    per_file[3][9]["text"] = per_file[1][7]["text"]
    for f, line in ((1, 2), (2, 4), (3, 1)):
        per_file[f][line]["text"] = f"{REPEATED}\n{per_file[f][line]['text']}"
    for f, docs_ in enumerate(per_file):
        write_documents(str(root / "documents" / f"part-{f}.jsonl.gz"), docs_)
    return {"files": files, "docs": docs, "copies": {(0, 5), (2, 0), (3, 9)}, "repeated": [(1, 2), (2, 4), (3, 1)]}


def config(documents: str, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "documents": [documents],
        "dedupe": {
            "name": "dd",
            "documents": {"attribute_name": "dup_docs", "key": "$.text"},
            "paragraphs": {"attribute_name": "dup_paras"},
        },
        "processes": 1,
        "progress": False,
    }
    for key, value in extra.items():
        base[key] = value
    return base


def make_stage(overrides: dict[str, Any]) -> DedupStage:
    return DedupStage(load_config(DedupConfig, None, overrides))


def run(overrides: dict[str, Any], executor: Any = None) -> RunSummary:
    return run_stage(make_stage(overrides), executor=executor, stream=io.StringIO())


def attribute_rows(corpus: Path, name: str = "dd", destination: Path | None = None) -> dict[tuple[int, int], tuple[dict, dict]]:
    """{(file index, document index): (document, attributes)}, documents and attribute rows read in
    lockstep (ids checked): under ``X/attributes/<name>/``, or ``<destination>/<name>/``."""
    out = {}
    for f, path in enumerate(sorted((corpus / "documents").glob("*"))):
        if destination is None:
            rows = read_with_attributes(str(path), [name], Quarantine())
        else:
            attr = destination / name / paths.attribute_file_name(path.name)
            docs = list(read_documents(str(path), Quarantine()))
            arows = list(read_attribute_rows(str(attr)))
            assert [d["id"] for _, d in docs] == [r["id"] for _, r in arows], path
            rows = ((line, d, r["attributes"]) for (line, d), (_, r) in zip(docs, arows))
        for i, (_, doc, attrs) in enumerate(rows):
            out[(f, i)] = (doc, attrs)
    return out


def stand_in_mix(rows: dict[tuple[int, int], tuple[dict, dict]], doc_attrs: list[str], span_attrs: list[str]) -> dict[tuple[int, int], str]:
    """What a mixer keeps: documents without a doc-level mark, with marked spans cut out."""
    kept = {}
    for key, (doc, attrs) in rows.items():
        if any(attrs.get(a) for a in doc_attrs):
            continue
        text = doc["text"]
        spans = sorted((s, e) for a in span_attrs for s, e, score in attrs.get(a, []) if score >= 1)
        for s, e in reversed(spans):
            text = text[:s] + text[e:]
        kept[key] = text
    return kept


def near_copy(text: str, rate: float, rng: random.Random) -> str:
    """``text`` with about ``rate`` of its words replaced by others of the text."""
    parts = re.split(r"(\s+)", text)
    vocab = [p for p in parts[::2] if p]
    for i in range(0, len(parts), 2):
        if parts[i] and rng.random() < rate:
            parts[i] = rng.choice(vocab)
    return "".join(parts)


def near_corpus(root: Path, copies: int = 60, seed: int = 3) -> list[tuple[str, str]]:
    """Real documents (the sample corpus's long ones) with planted near copies at edit rates
    from 0.5% to 40%, spread over three files; returns (original id, copy id) of every copy."""
    rng = random.Random(seed)
    rows = [r for r in sample_rows() if len(r["text"].split()) >= 150]
    rng.shuffle(rows)
    base = rows[:240]
    planted = []
    extra = []
    for j, r in enumerate(base[:copies]):
        rate = [0.005, 0.01, 0.02, 0.03, 0.06, 0.4][j % 6]
        copy = {**r, "id": f"{r['id']}|near{j}", "text": near_copy(r["text"], rate, rng)}
        extra.append(copy)
        planted.append((r["id"], copy["id"]))
    docs = base + extra
    order = list(range(len(base))) + sorted(rng.sample(range(len(base), len(docs)), len(extra)))
    docs = [docs[i] for i in order]
    for f in range(3):
        write_documents(str(root / "documents" / f"part-{f}.jsonl.gz"), docs[f::3])
    return planted


def documents_in_order(corpus: Path) -> list[dict]:
    return [d for p in sorted((corpus / "documents").glob("*")) for _, d in read_documents(str(p))]


def kill_in_phase(overrides: dict[str, Any], root: Path, phase: str, delay: float = 0.4) -> int:
    """Starts the stage in a subprocess with ``phase``'s tasks slowed, SIGKILLs it while the phase
    runs (after its first task is done when it has several), returns that phase's finished tasks."""
    markers = root / "_done" / phase

    def running() -> bool:
        try:
            phases = read_manifest(str(root)).phases
        except Exception:
            return False
        # The runner records the first phase as running only when it ends.
        status = next((p.status for p in phases if p.name == phase), "pending")  # a round is listed once it starts
        if status not in (("pending", "running") if phases[0].name == phase else ("running",)):
            return False
        return phase in SINGLE_TASK_PHASES or bool(done_markers(markers, recursive=True))

    kill_when("tests.support.dedup", [orjson.dumps(overrides).decode(), phase, str(delay)], running)
    return len(done_markers(markers, recursive=True))


SINGLE_TASK_PHASES = ("clusters", "bloom")


class SlowedDedupStage(DedupStage):
    """The dedup stage with the tasks of phase ``$DEDUP_SLOW_PHASE`` slowed by ``$DEDUP_SLOW_SECONDS``
    (a class importable by name, so it pickles to workers)."""

    def phases(self):  # type: ignore[no-untyped-def]
        phase = os.environ.get("DEDUP_SLOW_PHASE")
        return [replace(p, run=self._slow) if phase and p.runs_as(phase) else p for p in super().phases()]

    def _slow(self, task, quarantine, ctx):  # type: ignore[no-untyped-def]
        time.sleep(float(os.environ.get("DEDUP_SLOW_SECONDS", "0")))
        original = next(p for p in super().phases() if p.runs_as(os.environ["DEDUP_SLOW_PHASE"]))
        return original.run(task, quarantine, ctx)


if __name__ == "__main__":
    os.environ["DEDUP_SLOW_PHASE"], os.environ["DEDUP_SLOW_SECONDS"] = sys.argv[2], sys.argv[3]
    run_stage(SlowedDedupStage(load_config(DedupConfig, None, orjson.loads(sys.argv[1]))))
