"""``train-classifier``: train a fastText quality classifier from labelled documents.

The DCLM recipe: documents from sources you trust (reference text, curated
instructions, textbooks) are positives, random web pages are negatives, and a
bigram fastText model learns to tell them apart; its probability of the
positive class is then a quality score for every document of a corpus (the
``quality`` tagger, :mod:`taggers.builtin.quality`).

Labels come either from two sets of document globs (``positive`` and
``negative``) or from a field of the documents (``documents`` + ``label_field``
+ ``positive_values``).  Documents are read with the toolkit's reader, so bad
records are quarantined (written to ``<output>.errors.jsonl`` and counted in
the report), never fatal.  Each class is sampled down to ``max_docs_per_class``
with a seeded reservoir (memory stays bounded however large the inputs),
optionally balanced, and split into train and held-out sets per class.  Text is
normalised (lowercase, whitespace collapsed, first ``max_chars`` characters),
written as fastText files, and trained with one thread by default: fastText's
Hogwild SGD is only reproducible single-threaded.

Outputs: the model at ``output`` and a JSON report at ``<output>.json`` with
the held-out precision, recall, F1, accuracy and ROC AUC of the positive class,
the counts, and the normalisation and labels, which the ``quality`` tagger
reads so that scoring sees text exactly as training did.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import orjson
from pydantic import Field, field_validator, model_validator

from dolma_pipe import storage
from dolma_pipe.action import Action
from dolma_pipe.config import StrictModel
from dolma_pipe.documents import read_documents
from dolma_pipe.quarantine import Quarantine
from taggers.base import TaggerError
from taggers.fasttext_models import zeroed_allocations

LABEL_PREFIX = "__label__"
REPORT_SUFFIX = ".json"


class TrainClassifierError(TaggerError):
    """Training cannot proceed (no documents, one class empty, fastText diverged).

    A :class:`TaggerError` so that the CLI prints its message without a traceback.
    """


class TrainClassifierConfig(StrictModel):
    positive: list[str] = Field(default_factory=list, description="globs of positive (high-quality) documents")
    negative: list[str] = Field(default_factory=list, description="globs of negative documents (e.g. random web pages)")
    documents: list[str] = Field(
        default_factory=list, description="globs of documents labelled by label_field (instead of positive/negative)"
    )
    label_field: str | None = Field(None, description="dotted path of the label in each document, e.g. metadata.quality")
    positive_values: list[str] = Field(
        default_factory=list, description="label_field values that mean positive; other values are negative, missing ones skipped"
    )
    output: str = Field(..., description="path of the fastText model to write; the report goes to <output>.json")
    positive_label: str = Field("hq", description="fastText label of the positive class (written as __label__<name>)")
    negative_label: str = Field("lq", description="fastText label of the negative class")
    heldout_fraction: float = Field(0.1, gt=0.0, lt=1.0, description="fraction of each class held out for evaluation")
    seed: int = Field(0, description="seed for sampling, splitting, shuffling and fastText")
    max_docs_per_class: int | None = Field(None, ge=1, description="sample each class down to this many documents (seeded reservoir)")
    balance: bool = Field(True, description="sample the larger class down to the size of the smaller one")
    min_chars: int = Field(1, ge=1, description="skip documents whose normalised text is shorter than this")
    lowercase: bool = Field(True, description="lowercase text before training (and scoring)")
    collapse_whitespace: bool = Field(True, description="replace every run of whitespace by one space")
    max_chars: int | None = Field(10_000, ge=1, description="use only the first N characters of each document (None: all)")
    epoch: int = Field(5, ge=1, description="fastText epochs")
    lr: float = Field(0.1, gt=0.0, le=5.0, description="fastText learning rate")
    word_ngrams: int = Field(2, ge=1, le=5, description="fastText word n-gram length (DCLM uses bigrams)")
    dim: int = Field(100, ge=1, description="fastText vector size")
    min_count: int = Field(1, ge=1, description="fastText minimum word count")
    bucket: int = Field(2_000_000, ge=1, description="fastText n-gram hash buckets (model size ~ bucket x dim x 4 bytes)")
    threads: int = Field(1, ge=1, description="fastText threads; only 1 is reproducible")
    keep_files: bool = Field(False, description="keep the fastText training/validation files as <output>.train.txt/.valid.txt")

    @field_validator("positive_label", "negative_label")
    @classmethod
    def _label_is_a_token(cls, v: str) -> str:
        v = v.removeprefix(LABEL_PREFIX)
        if not v or any(c.isspace() for c in v):
            raise ValueError("must be a non-empty name without spaces")
        return v

    @model_validator(mode="after")
    def _one_way_to_label(self) -> TrainClassifierConfig:
        by_globs = bool(self.positive or self.negative)
        by_field = bool(self.documents or self.label_field)
        if by_globs and by_field:
            raise ValueError("give either positive + negative globs or documents + label_field, not both")
        if by_globs and not (self.positive and self.negative):
            raise ValueError("both 'positive' and 'negative' globs are needed")
        if by_field and not (self.documents and self.label_field and self.positive_values):
            raise ValueError("'documents', 'label_field' and 'positive_values' go together")
        if not by_globs and not by_field:
            raise ValueError("give positive + negative document globs, or documents + label_field + positive_values")
        if self.positive_label == self.negative_label:
            raise ValueError("positive_label and negative_label must differ")
        return self


def normalise(text: str, lowercase: bool = True, collapse_whitespace: bool = True, max_chars: int | None = None) -> str:
    """Text as the classifier sees it: one line (fastText reads one example per line)."""
    if max_chars:
        text = text[:max_chars]  # cut first: lowercasing a 10 MB page to keep 10 kB is waste
    if lowercase:
        text = text.lower()
    if collapse_whitespace:
        return " ".join(text.split())
    return text.replace("\n", " ").replace("\r", " ")


def normalisation_of(config: TrainClassifierConfig) -> dict[str, Any]:
    return {"lowercase": config.lowercase, "collapse_whitespace": config.collapse_whitespace, "max_chars": config.max_chars}


def _expand(globs: list[str]) -> list[str]:
    paths: list[str] = []
    for pattern in globs:
        found = storage.glob(pattern)
        if not found:
            raise TrainClassifierError(f"no document files match {pattern}")
        paths.extend(p for p in found if p not in paths)
    return paths


def _field(doc: dict, dotted: str) -> Any:
    value: Any = doc
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


class _Reservoir:
    """A seeded uniform sample of at most ``k`` items from a stream (Algorithm R); order-stable."""

    def __init__(self, k: int | None, rng: random.Random):
        self.k, self.rng, self.seen = k, rng, 0
        self.items: list[tuple[int, str]] = []

    def add(self, text: str) -> None:
        i = self.seen
        self.seen += 1
        if self.k is None or i < self.k:
            self.items.append((i, text))
        else:
            j = self.rng.randrange(i + 1)
            if j < self.k:
                self.items[j] = (i, text)

    def texts(self) -> list[str]:
        return [t for _, t in sorted(self.items)]  # stream order, whatever the replacements did


def _labelled(config: TrainClassifierConfig, quarantine: Quarantine, counts: dict) -> Iterator[tuple[bool, dict]]:
    if config.label_field is None:
        for is_positive, globs in ((True, config.positive), (False, config.negative)):
            for path in _expand(globs):
                for _, doc in read_documents(path, quarantine):
                    yield is_positive, doc
        return
    wanted = set(config.positive_values)
    for path in _expand(config.documents):
        for _, doc in read_documents(path, quarantine):
            value = _field(doc, config.label_field)
            if value is None:
                counts["unlabelled"] += 1
                continue
            yield str(value) in wanted, doc


def _metrics(truth: list[bool], scores: list[float]) -> dict[str, Any]:
    tp = sum(t and s >= 0.5 for t, s in zip(truth, scores))
    fp = sum((not t) and s >= 0.5 for t, s in zip(truth, scores))
    fn = sum(t and s < 0.5 for t, s in zip(truth, scores))
    tn = len(truth) - tp - fp - fn
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": (tp + tn) / len(truth) if truth else 0.0,
        "auc": _auc(truth, scores),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
    }


def _auc(truth: list[bool], scores: list[float]) -> float | None:
    """ROC AUC by ranks (Mann-Whitney U), ties counted half: threshold-free separation of the classes."""
    pos = sum(truth)
    neg = len(truth) - pos
    if not pos or not neg:
        return None
    order = sorted(range(len(scores)), key=scores.__getitem__)
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    rank_sum = sum(r for r, t in zip(ranks, truth) if t)
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


def _train(fasttext: Any, path: str, hyper: dict, config: TrainClassifierConfig, n_examples: int) -> Any:
    with zeroed_allocations() as zeroed:
        # Without zeroed allocations a NaN may be the wheel's bug rather than divergence: try again.
        attempts = 1 if zeroed else 3
        for attempt in range(attempts):
            try:
                return fasttext.train_supervised(input=path, verbose=0, **hyper)
            except (RuntimeError, ValueError) as exc:
                if "nan" not in str(exc).lower():
                    raise TrainClassifierError(f"fastText training failed: {exc}") from None
                if attempt + 1 == attempts:
                    raise TrainClassifierError(
                        f'fastText diverged ("{exc}") on {n_examples} training examples: use more (and more varied) '
                        f"data, or a lower learning rate than lr={config.lr}"
                    ) from None
    raise AssertionError("unreachable")


def _write_lines(path: str, lines: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line)
            fh.write("\n")


def _split(texts: list[str], fraction: float, rng: random.Random) -> tuple[list[str], list[str]]:
    texts = list(texts)
    rng.shuffle(texts)
    n_val = max(1, round(len(texts) * fraction))
    return texts[n_val:], texts[:n_val]


def run(config: TrainClassifierConfig) -> dict[str, Any]:
    """Train, evaluate on the held-out split, write the model and ``<output>.json``; return the report."""
    try:
        import fasttext
    except ImportError as exc:
        raise TrainClassifierError("fastText is not installed (pip install fasttext-numpy2)") from exc

    started = time.perf_counter()
    norm = normalisation_of(config)
    counts: dict[str, int] = {"unlabelled": 0, "too_short": 0}
    pools = {
        True: _Reservoir(config.max_docs_per_class, random.Random(f"{config.seed}-pos")),
        False: _Reservoir(config.max_docs_per_class, random.Random(f"{config.seed}-neg")),
    }
    read = {True: 0, False: 0}
    quarantine = Quarantine()
    try:
        for is_positive, doc in _labelled(config, quarantine, counts):
            read[is_positive] += 1
            text = normalise(doc["text"], **norm)
            if len(text) < config.min_chars:
                counts["too_short"] += 1
                continue
            pools[is_positive].add(text)
        errors = dict(quarantine.counts)
        if quarantine.total:
            with storage.open_write_atomic(config.output + ".errors.jsonl") as fh:
                quarantine.write_to(fh)
    finally:
        quarantine.close()

    texts = {k: pool.texts() for k, pool in pools.items()}
    for is_positive, name in ((True, "positive"), (False, "negative")):
        if len(texts[is_positive]) < 2:
            raise TrainClassifierError(
                f"the {name} class has {len(texts[is_positive])} usable documents ({read[is_positive]} read); "
                "at least 2 are needed (one to train on, one to hold out), and far more for a useful model"
            )
    rng = random.Random(config.seed)
    if config.balance:
        n = min(len(texts[True]), len(texts[False]))
        for k in (True, False):
            if len(texts[k]) > n:
                keep = sorted(rng.sample(range(len(texts[k])), n))
                texts[k] = [texts[k][i] for i in keep]

    labels = {True: LABEL_PREFIX + config.positive_label, False: LABEL_PREFIX + config.negative_label}
    train_lines: list[str] = []
    heldout: list[tuple[bool, str]] = []
    sizes = {}
    for k in (True, False):
        train, valid = _split(texts[k], config.heldout_fraction, rng)
        train_lines.extend(f"{labels[k]} {t}" for t in train)
        heldout.extend((k, t) for t in valid)
        sizes[k] = (len(train), len(valid))
    # SGD sees examples in file order: classes must be interleaved, not one block after the other.
    rng.shuffle(train_lines)

    work = tempfile.mkdtemp(prefix="dolma-pipe-classifier-")
    try:
        train_path = os.path.join(work, "train.txt")
        valid_path = os.path.join(work, "valid.txt")
        _write_lines(train_path, train_lines)
        _write_lines(valid_path, [f"{labels[k]} {t}" for k, t in heldout])
        hyper = {
            "epoch": config.epoch,
            "lr": config.lr,
            "wordNgrams": config.word_ngrams,
            "dim": config.dim,
            "minCount": config.min_count,
            "bucket": config.bucket,
            "thread": config.threads,
            "seed": config.seed,
            "loss": "softmax",
        }
        model = _train(fasttext, train_path, hyper, config, len(train_lines))

        # Held-out scores: P(positive) for every example, in one batched call.
        probs = model.predict([t for _, t in heldout], k=-1)
        scores = []
        for ls, ps in zip(*probs):
            scores.append(next((min(float(p), 1.0) for label, p in zip(ls, ps) if label == labels[True]), 0.0))
        metrics = _metrics([k for k, _ in heldout], scores)

        local_model = os.path.join(work, "model.bin")
        model.save_model(local_model)
        storage.upload(local_model, config.output)
        if config.keep_files:
            for src, suffix in ((train_path, ".train.txt"), (valid_path, ".valid.txt")):
                storage.upload(src, config.output + suffix)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    report = {
        "model": config.output,
        "labels": {"positive": labels[True], "negative": labels[False]},
        "normalisation": norm,
        "hyperparameters": hyper,
        "documents": {
            name: {"read": read[k], "usable": pools[k].seen, "train": sizes[k][0], "heldout": sizes[k][1]}
            for k, name in ((True, "positive"), (False, "negative"))
        },
        "skipped": counts,
        "errors": errors,
        "heldout": metrics,
        "seconds": round(time.perf_counter() - started, 3),
        "config": config.model_dump(mode="json"),
    }
    storage.write_bytes(config.output + REPORT_SUFFIX, orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    return report


class TrainClassifier(Action[TrainClassifierConfig]):
    """The ``train-classifier`` command: train, report held-out figures in one line."""

    name = "train-classifier"
    description = "train a fastText quality classifier from labelled documents"
    config_model = TrainClassifierConfig

    def run(self) -> str:
        report = run(self.config)
        held = report.get("heldout", report)
        keys = ("precision", "recall", "f1", "accuracy", "auc")
        figures = ", ".join(f"{k} {held[k]:.3f}" for k in keys if isinstance(held.get(k), (int, float)))
        out = self.config.output
        return f"dolma-pipe train-classifier: wrote {out} (held-out {figures}); report in {out}.json"
