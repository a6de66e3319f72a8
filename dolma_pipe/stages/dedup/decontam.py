"""Decontamination: flag training paragraphs that occur in evaluation texts.

The evaluation documents (Dolma-format files, e.g. BoolQ passages or HellaSwag contexts written
as documents) are read once, on the driver before the scan, into a set of keys saved under the
work directory; every scan task then looks each training paragraph up, read-only, so no order
matters. Two ways:

* ``paragraphs`` (Dolma's way): whole paragraphs of at least ``min_words`` words (13 by
  default), compared exactly (128-bit digests); a training paragraph found gets
  ``[start, end, 1]``.
* ``ngrams``: word n-grams (``ngram_length`` normalised words, 13 by default) of the evaluation
  texts; a training paragraph sharing any of them gets ``[start, end, fraction]``, the fraction
  of its n-grams that occur in the evaluation texts.

Spans are character offsets with the separator included, as for paragraph dedup. Dolma's other
way, a Bloom filter built from evaluation sets with ``read_only: false`` and then used with
``read_only: true``, works with the ``bloom_filter`` section.

Bad evaluation records are quarantined to ``<output>/_errors/evaluation.jsonl`` and counted with
the scan phase (kinds prefixed ``evaluation_``), toward ``--max-errors`` like the inputs' bad
records.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from dolma_pipe import paths, storage, workdir
from dolma_pipe._rust import DecontamBuilder
from dolma_pipe.documents import read_documents
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.workdir import WorkFileError

from .config import DecontaminationSection
from .workfiles import Layout

BATCH = 1024


def evaluation_files(section: DecontaminationSection) -> list[tuple[str, int, float]]:
    """(path, size, mtime) of every evaluation file, in order."""
    return [(f.path, f.info.size, f.info.mtime) for f in paths.expand(list(section.evaluation))]


def identity(section: DecontaminationSection) -> str:
    """What the set depends on: the section and the evaluation files as they are now."""
    blob = orjson.dumps({"section": section.model_dump(mode="json"), "files": evaluation_files(section)}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()[:16]


def ensure_set(section: DecontaminationSection, layout: Layout, root: str) -> tuple[str, dict[str, Any]]:
    """The path of the evaluation key set, built unless an up-to-date one is there; and counts."""
    ident = identity(section)
    path = layout.single(f"decontamination-{ident}.set")
    stats_path = path + ".json"
    if storage.exists(path) and storage.exists(stats_path):
        try:
            workdir.check(path)
            return path, orjson.loads(workdir.read(stats_path))
        except WorkFileError:
            pass  # damaged: built again below
    builder = DecontamBuilder(
        section.mode,
        separator=section.paragraph_separator,
        min_words=section.min_words,
        ngram=section.ngram_length,
        lowercase=section.lowercase,
        words=section.words,
    )
    quarantine = Quarantine()
    docs = 0
    for file, _, _ in evaluation_files(section):
        batch: list[str] = []
        for _, doc in read_documents(file, quarantine):
            batch.append(doc["text"])
            if len(batch) >= BATCH:
                builder.add_texts(batch)
                docs += len(batch)
                batch = []
        builder.add_texts(batch)
        docs += len(batch)
    err_path = storage.join(root, "_errors", "evaluation.jsonl")
    if quarantine.total:
        with storage.open_write_atomic(err_path) as fh:
            quarantine.write_to(fh)
    else:
        storage.remove(err_path)
    stats = {
        "evaluation_documents": docs,
        "evaluation_keys": len(builder),
        "evaluation_bad_records": quarantine.total,
        "evaluation_bad_kinds": dict(quarantine.counts),
    }
    quarantine.close()
    workdir.write(path, builder.to_bytes())
    workdir.write(stats_path, orjson.dumps(stats))
    return path, stats
