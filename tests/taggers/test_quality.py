"""Learned quality: training a fastText classifier (train_classifier.run) and the ``quality`` tagger."""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from dolma_pipe.documents import read_attribute_rows, write_documents
from dolma_pipe.runner import run_stage
from taggers import registry
from taggers.base import Document, TaggerError
from taggers.stage import TagConfig, TagStage
from taggers.train_classifier import TrainClassifierConfig, TrainClassifierError, normalise, run
from tests.support.repo import REPO_ROOT

pytest.importorskip("fasttext")

ROOT = REPO_ROOT
SAMPLE = ROOT / "examples/sample/documents"
# Small and quick: the sample corpus is ~3,000 documents.
FAST = {"epoch": 20, "lr": 0.2, "dim": 32, "bucket": 100_000, "max_chars": 3000}


@pytest.fixture(scope="module")
def sample_model(tmp_path_factory):
    """Technical documentation (Python, kernel) as positives vs fortune cookies and dictionary entries."""
    out = tmp_path_factory.mktemp("clf") / "quality.bin"
    config = TrainClassifierConfig(
        positive=[str(SAMPLE / "python-doc/*"), str(SAMPLE / "linux-doc/*")],
        negative=[str(SAMPLE / "fortunes/*"), str(SAMPLE / "gcide/*")],
        output=str(out),
        heldout_fraction=0.25,
        keep_files=True,
        **FAST,
    )
    return out, run(config)


def _heldout(model: Path) -> list[tuple[bool, str]]:
    rows = []
    for line in Path(str(model) + ".valid.txt").read_text(encoding="utf-8").splitlines():
        label, _, text = line.partition(" ")
        rows.append((label == "__label__hq", text))
    return rows


def test_training_on_sample_corpus_reports_high_heldout_scores(sample_model):
    model, report = sample_model
    assert model.is_file() and Path(str(model) + ".json").is_file()
    assert json.loads(Path(str(model) + ".json").read_text()) == report
    docs = report["documents"]
    assert docs["positive"]["read"] == 203 + 625 and docs["negative"]["read"] == 1392 + 625
    # Balanced: the negatives are sampled down to the 828 positives, a quarter of each held out.
    assert docs["positive"]["train"] == docs["negative"]["train"] == 621
    assert docs["positive"]["heldout"] == docs["negative"]["heldout"] == 207
    assert report["errors"] == {} and report["labels"] == {"positive": "__label__hq", "negative": "__label__lq"}
    held = report["heldout"]
    # Measured: precision 0.986, recall 1.0, AUC 0.996.
    assert held["precision"] >= 0.95 and held["recall"] >= 0.95 and held["f1"] >= 0.95 and held["auc"] >= 0.98, held
    assert held["tp"] + held["fn"] == 207 and held["fp"] + held["tn"] == 207
    assert held["accuracy"] == pytest.approx((held["tp"] + held["tn"]) / 414)


def test_quality_tagger_scores_heldout_positives_above_negatives(sample_model):
    model, report = sample_model
    tagger = registry.get("quality")(model_path=str(model))
    heldout = _heldout(model)
    docs = [Document(str(i), text) for i, (_, text) in enumerate(heldout)]
    results = tagger.predict_batch(docs)
    assert all(len(r) == 1 and r[0].type == "score" and (r[0].start, r[0].end) == (0, len(d.text)) for r, d in zip(results, docs))
    scores = [r[0].score for r in results]
    pos = [s for (p, _), s in zip(heldout, scores) if p]
    neg = [s for (p, _), s in zip(heldout, scores) if not p]
    assert sum(pos) / len(pos) > 0.9 and sum(neg) / len(neg) < 0.1
    # The tagger reproduces the trainer's held-out confusion counts exactly (same model, same text).
    assert sum(s >= 0.5 for s in pos) == report["heldout"]["tp"]
    assert sum(s >= 0.5 for s in neg) == report["heldout"]["fp"]
    # predict (one document) agrees with predict_batch.
    assert tagger.predict(docs[0]) == results[0]


def test_quality_tagger_reads_normalisation_from_report(sample_model):
    model, _ = sample_model
    tagger = registry.get("quality")(model_path=str(model))
    assert tagger.norm == {"lowercase": True, "collapse_whitespace": True, "max_chars": 3000}
    assert tagger.positive == "__label__hq"
    override = registry.get("quality")(model_path=str(model), max_chars=None, positive_label="lq")
    assert override.norm["max_chars"] is None and override.positive == "__label__lq"
    # Normalisation makes case and line breaks irrelevant.
    a, b = Document("a", "The Function RETURNS\n\n a list."), Document("b", "the function returns a list.")
    assert tagger.predict(a)[0].score == tagger.predict(b)[0].score


def test_quality_tagger_paragraphs_and_empty_documents(sample_model):
    model, _ = sample_model
    tagger = registry.get("quality")(model_path=str(model), granularity="both")
    code = "The function returns a new list containing the elements of the iterable, sorted by the key argument."
    joke = "Q: Why did the chicken cross the road? A: To get to the other side, of course!"
    text = f"{code}\n\n{joke}\n"
    spans = tagger.predict(Document("d", text))
    assert [(s.type, s.start, s.end) for s in spans] == [
        ("score", 0, len(text)),
        ("paragraph_score", 0, len(code)),
        ("paragraph_score", len(code) + 2, len(code) + 2 + len(joke)),
    ]
    assert spans[1].score > spans[2].score
    assert tagger.predict(Document("e", " \n ")) == [("score", 0, 3, 0.0)]
    assert tagger.group([]) == {"score": [], "paragraph_score": []}
    para = registry.get("quality")(model_path=str(model), granularity="paragraph")
    assert para.predict(Document("e", "")) == [] and para.group([]) == {"paragraph_score": []}


def test_quality_tagger_errors(sample_model, tmp_path):
    model, _ = sample_model
    missing = str(tmp_path / "nope.bin")
    with pytest.raises(TaggerError, match=re.escape(missing)):
        registry.get("quality")(model_path=missing)
    with pytest.raises(TaggerError, match="model_path"):
        registry.get("quality")()
    with pytest.raises(TaggerError, match="'__label__good' is not one of the model's labels"):
        registry.get("quality")(model_path=str(model), positive_label="good")
    with pytest.raises(TaggerError, match="granularity"):
        registry.get("quality")(model_path=str(model), granularity="sentence")
    with pytest.raises(TaggerError, match="max_chars"):
        registry.get("quality")(model_path=str(model), max_chars=0)
    with pytest.raises(TaggerError, match=re.escape(missing)):
        registry.get("dclm-oh-eli5")(model_path=missing)


def test_tag_stage_with_quality_model(sample_model, tmp_path):
    model, _ = sample_model
    docs = [
        {"id": "doc", "text": "Return a new sorted list from the items in iterable. The key argument specifies a function.", "source": "t"},
        {"id": "joke", "text": "A fool and his money are soon parted.\n\t\t-- Proverb", "source": "t"},
    ]
    write_documents(str(tmp_path / "documents" / "x.jsonl"), docs)
    config = TagConfig(
        documents=[str(tmp_path / "documents" / "*.jsonl")],
        taggers=["quality"],
        tagger_options={"quality": {"model_path": str(model)}},
        processes=1,
        progress=False,
    )
    run_stage(TagStage(config), stream=io.StringIO())
    rows = [r for _, r in read_attribute_rows(str(tmp_path / "attributes" / "quality" / "x.jsonl"))]
    assert [r["id"] for r in rows] == ["doc", "joke"]
    (doc_span,) = rows[0]["attributes"]["quality__quality__score"]
    (joke_span,) = rows[1]["attributes"]["quality__quality__score"]
    assert doc_span[:2] == [0, len(docs[0]["text"])] and doc_span[2] > 0.5 > joke_span[2]


# --- training on synthetic data: label fields, bad records, determinism, errors -------------------------------

GOOD = "theorem proof lemma function parameter returns value module kernel memory interface protocol".split()
BAD = "lol omg cheap pills click here win free prize now best deal amazing wow".split()
SHARED = "the a of and to is in it".split()


def _synthetic(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        good = i % 2 == 0
        words = rng.choices(GOOD if good else BAD, k=30) + rng.choices(SHARED, k=20)
        rng.shuffle(words)
        docs.append({"id": f"s{seed}-{i}", "text": " ".join(words), "source": "syn", "metadata": {"grade": "A" if good else "C"}})
    return docs


def _synthetic_corpus(root: Path) -> str:
    write_documents(str(root / "documents" / "a.jsonl.gz"), _synthetic(300, 1))
    write_documents(str(root / "documents" / "b.jsonl.gz"), _synthetic(300, 2))
    return str(root / "documents" / "*.jsonl*")


def test_label_field_bad_records_and_determinism(tmp_path):
    pattern = _synthetic_corpus(tmp_path)
    # One malformed line and one document without the label: quarantined / skipped, not fatal.
    (tmp_path / "documents" / "c.jsonl").write_text('{"id": "x", "text": "no label here", "source": "s"}\n{not json\n')
    common = dict(
        documents=[pattern, str(tmp_path / "documents" / "c.jsonl")],
        label_field="metadata.grade",
        positive_values=["A"],
        dim=16,
        bucket=10_000,
        epoch=10,
    )
    first = run(TrainClassifierConfig(output=str(tmp_path / "m1.bin"), **common))
    second = run(TrainClassifierConfig(output=str(tmp_path / "m2.bin"), **common))
    assert first["documents"]["positive"]["read"] == 300 and first["documents"]["negative"]["read"] == 300
    assert first["skipped"]["unlabelled"] == 1
    assert sum(first["errors"].values()) == 1
    errors = (tmp_path / "m1.bin.errors.jsonl").read_text().splitlines()
    assert len(errors) == 1 and json.loads(errors[0])["line"] == 2
    assert first["heldout"]["f1"] == 1.0 and first["heldout"]["auc"] == 1.0
    # One thread + one seed: the same model, byte for byte.
    assert (tmp_path / "m1.bin").read_bytes() == (tmp_path / "m2.bin").read_bytes()
    assert first["heldout"] == second["heldout"]
    assert not (tmp_path / "m1.bin.train.txt").exists()  # training files are temporary unless keep_files


def test_max_docs_per_class_and_no_balance(tmp_path):
    pattern = _synthetic_corpus(tmp_path)
    report = run(
        TrainClassifierConfig(
            documents=[pattern],
            label_field="metadata.grade",
            positive_values=["A"],
            output=str(tmp_path / "m.bin"),
            max_docs_per_class=100,
            heldout_fraction=0.2,
            dim=16,
            bucket=10_000,
            epoch=10,
        )
    )
    assert report["documents"]["positive"]["train"] == 80 and report["documents"]["positive"]["heldout"] == 20
    # Balance off: each class keeps its own (capped) size.
    report = run(
        TrainClassifierConfig(
            documents=[pattern],
            label_field="metadata.grade",
            positive_values=["A"],
            output=str(tmp_path / "n.bin"),
            max_docs_per_class=200,
            balance=False,
            heldout_fraction=0.5,
            dim=16,
            bucket=10_000,
            epoch=10,
        )
    )
    assert report["documents"]["positive"]["train"] == report["documents"]["negative"]["train"] == 100


def test_unbalanced_classes_are_balanced_by_default(tmp_path):
    write_documents(str(tmp_path / "documents" / "g.jsonl"), [d for d in _synthetic(400, 3) if d["metadata"]["grade"] == "A"])
    write_documents(str(tmp_path / "documents" / "b.jsonl"), [d for d in _synthetic(100, 4) if d["metadata"]["grade"] == "C"])
    common = dict(
        positive=[str(tmp_path / "documents" / "g.jsonl")],
        negative=[str(tmp_path / "documents" / "b.jsonl")],
        dim=16,
        bucket=10_000,
        epoch=10,
        heldout_fraction=0.2,
    )
    balanced = run(TrainClassifierConfig(output=str(tmp_path / "m.bin"), **common))["documents"]
    assert balanced["positive"]["read"] == 200 and balanced["negative"]["read"] == 50
    assert balanced["positive"]["train"] + balanced["positive"]["heldout"] == 50
    unbalanced = run(TrainClassifierConfig(output=str(tmp_path / "n.bin"), balance=False, **common))["documents"]
    assert unbalanced["positive"]["train"] + unbalanced["positive"]["heldout"] == 200


def test_config_errors(tmp_path):
    out = str(tmp_path / "m.bin")
    with pytest.raises(ValidationError, match="not both"):
        TrainClassifierConfig(positive=["a"], negative=["b"], documents=["c"], label_field="x", positive_values=["y"], output=out)
    with pytest.raises(ValidationError, match="'negative'"):
        TrainClassifierConfig(positive=["a"], output=out)
    with pytest.raises(ValidationError, match="positive_values"):
        TrainClassifierConfig(documents=["a"], label_field="metadata.x", output=out)
    with pytest.raises(ValidationError, match="extra"):
        TrainClassifierConfig(positive=["a"], negative=["b"], output=out, epochs=3)
    with pytest.raises(ValidationError, match="must differ"):
        TrainClassifierConfig(positive=["a"], negative=["b"], output=out, positive_label="x", negative_label="__label__x")


def test_missing_files_and_empty_class(tmp_path):
    pattern = _synthetic_corpus(tmp_path)
    with pytest.raises(TrainClassifierError, match="no document files match"):
        run(TrainClassifierConfig(positive=[pattern], negative=[str(tmp_path / "nothing*.jsonl")], output=str(tmp_path / "m.bin")))
    with pytest.raises(TrainClassifierError, match="the positive class has 0 usable documents"):
        run(TrainClassifierConfig(documents=[pattern], label_field="metadata.grade", positive_values=["Z"], output=str(tmp_path / "m.bin")))
    assert not (tmp_path / "m.bin").exists()


def test_nan_from_fasttext_becomes_a_clear_error(tmp_path, monkeypatch):
    import fasttext

    def diverge(**kwargs):
        raise RuntimeError("Encountered NaN.")

    monkeypatch.setattr(fasttext, "train_supervised", diverge)
    pattern = _synthetic_corpus(tmp_path)
    with pytest.raises(TrainClassifierError, match=r"fastText diverged .*lower learning rate than lr=0.1"):
        run(TrainClassifierConfig(documents=[pattern], label_field="metadata.grade", positive_values=["A"], output=str(tmp_path / "m.bin")))


def test_normalise():
    assert normalise("  Hello\n\tWORLD  \r\n") == "hello world"
    assert normalise("A\nB", lowercase=False, collapse_whitespace=False) == "A B"
    assert normalise("abcdef ghi", max_chars=5) == "abcde"
