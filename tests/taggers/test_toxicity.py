"""Toxicity taggers: the offline profanity model and a user fastText classifier (trained here)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from taggers import registry
from taggers.base import Document, TaggerError
from taggers.fasttext_models import zeroed_allocations

CLEAN = "The committee reviewed the annual budget and approved the new library opening hours."
TOXIC = "You are a fucking stupid idiot, shut the fuck up you worthless piece of shit."


def doc(text: str, id: str = "d") -> Document:
    return Document(id, text)


def by_type(spans):
    out: dict[str, list] = {}
    for s in spans:
        out.setdefault(s.type, []).append(s)
    return out


# ---------------------------------------------------------------- profanity (alt-profanity-check)


def test_profanity_document_ranks_toxic_above_clean():
    tagger = registry.get("profanity_document")()
    clean, toxic, blank = tagger.predict_batch([doc(CLEAN), doc(TOXIC), doc("  \n ")])
    c, t = by_type(clean), by_type(toxic)
    assert set(c) == set(t) == {"__label__toxic", "__label__non-toxic"}
    assert [(s.start, s.end) for s in c["__label__toxic"]] == [(0, len(CLEAN))]
    assert [(s.start, s.end) for s in t["__label__toxic"]] == [(0, len(TOXIC))]
    assert t["__label__toxic"][0].score > 0.9 > 0.2 > c["__label__toxic"][0].score
    for spans in (c, t):
        assert spans["__label__toxic"][0].score + spans["__label__non-toxic"][0].score == pytest.approx(1.0)
    assert blank == []
    # predict (one document) agrees with predict_batch
    assert tagger.predict(doc(TOXIC)) == toxic


def test_profanity_paragraph_spans_are_lines():
    text = f"{CLEAN}\n\n  {TOXIC}\n{CLEAN}"
    spans = by_type(registry.get("profanity_paragraph")().predict(doc(text)))
    toxic = spans["__label__toxic"]
    second = len(CLEAN) + 2
    assert [(s.start, s.end) for s in toxic] == [
        (0, len(CLEAN)),
        (second, second + 2 + len(TOXIC)),  # Dolma paragraphs keep the line's leading spaces
        (second + 3 + len(TOXIC), len(text)),
    ]
    assert [s.score > 0.5 for s in toxic] == [False, True, False]


# ---------------------------------------------------------------- user fastText classifier

INSULTS = "idiot moron stupid loser scum trash pathetic disgusting worthless dumb ugly jerk creep fool clown".split()
VERBS = "hate despise loathe detest".split()
NEUTRAL = (
    "garden river weather morning library committee budget recipe concert museum train schedule "
    "coffee mountain lesson chapter season harvest bicycle window meeting project report island"
).split()
POSITIVE = "lovely helpful interesting pleasant calm bright careful useful friendly quiet".split()


def _lines(rng: random.Random, n: int) -> list[str]:
    rows = []
    for _ in range(n):
        if rng.random() < 0.5:
            words = [
                rng.choice(["you", "your", "what a"]),
                rng.choice(INSULTS),
                rng.choice(INSULTS),
                "i",
                rng.choice(VERBS),
                "you",
                rng.choice(NEUTRAL),
            ]
            label = "toxic"
        else:
            words = [
                "the",
                rng.choice(POSITIVE),
                rng.choice(NEUTRAL),
                "and",
                "the",
                rng.choice(NEUTRAL),
                rng.choice(["was", "is", "looks"]),
                rng.choice(POSITIVE),
            ]
            label = "non-toxic"
        rng.shuffle(words)
        rows.append(f"__label__{label} " + " ".join(words))
    return rows


@pytest.fixture(scope="module")
def jigsaw_like_model(tmp_path_factory) -> Path:
    """A tiny Jigsaw-style classifier (labels toxic / non-toxic), trained deterministically."""
    import fasttext

    root = tmp_path_factory.mktemp("ft")
    train = root / "train.txt"
    train.write_text("\n".join(_lines(random.Random(0), 600)) + "\n")
    with zeroed_allocations():  # fasttext-numpy2 reads uninitialised memory while training (NaN at random)
        model = fasttext.train_supervised(str(train), lr=0.5, epoch=25, wordNgrams=2, dim=16, thread=1, seed=0, verbose=0)
    path = root / "jigsaw_tiny.bin"
    model.save_model(str(path))
    return path


def test_fasttext_document_ranks_toxic_above_clean(jigsaw_like_model):
    tagger = registry.get("toxicity_fasttext_document")(model_path=str(jigsaw_like_model))
    assert tagger.positive == "toxic" and tagger.negative == "non-toxic"  # found as Dolma does
    toxic_text = "you worthless idiot, i hate you and your stupid project"
    clean_text = "the lovely garden and the quiet river looked calm this morning"
    toxic, clean, blank = tagger.predict_batch([doc(toxic_text), doc(clean_text), doc("")])
    t, c = by_type(toxic), by_type(clean)
    assert set(t) == {"__label__toxic", "__label__non-toxic"}
    assert [(s.start, s.end) for s in t["__label__toxic"]] == [(0, len(toxic_text))]
    assert t["__label__toxic"][0].score > 0.8 and c["__label__toxic"][0].score < 0.2
    assert t["__label__toxic"][0].score + t["__label__non-toxic"][0].score == pytest.approx(1.0, abs=1e-3)
    assert blank == []


def test_fasttext_paragraph_and_positive_label_option(jigsaw_like_model):
    text = "the calm museum and the bright island\nyou moron, you pathetic loser, i despise you\n\nthe useful report"
    tagger = registry.get("toxicity_fasttext_paragraph")(model_path=str(jigsaw_like_model), positive_label="__label__non-toxic")
    spans = by_type(tagger.predict(doc(text)))
    assert set(spans) == {"__label__non-toxic", "__label__toxic"}
    lines = [(0, 37), (38, 82), (84, len(text))]
    assert [(s.start, s.end) for s in spans["__label__non-toxic"]] == lines
    assert [s.score > 0.5 for s in spans["__label__non-toxic"]] == [True, False, True]


def test_fasttext_bad_options(jigsaw_like_model, tmp_path):
    cls = registry.get("toxicity_fasttext_document")
    missing = tmp_path / "nope" / "jigsaw.bin"
    with pytest.raises(TaggerError, match=str(missing)):
        cls(model_path=str(missing))
    with pytest.raises(TaggerError, match="model_path"):
        cls()
    with pytest.raises(TaggerError, match="'hatespeech' is not a label"):
        cls(model_path=str(jigsaw_like_model), positive_label="hatespeech")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a model at all")
    with pytest.raises(TaggerError, match="junk.bin"):
        cls(model_path=str(junk))


def test_tag_stage_writes_dolma_toxicity_attributes(tmp_path, jigsaw_like_model):
    import io

    from dolma_pipe.documents import read_attribute_rows, write_documents
    from dolma_pipe.runner import run_stage
    from taggers.stage import TagConfig, TagStage

    docs = [{"id": "a", "text": CLEAN, "source": "t"}, {"id": "b", "text": TOXIC, "source": "t"}]
    write_documents(str(tmp_path / "documents" / "part-0.jsonl.gz"), docs)
    config = TagConfig(
        documents=[str(tmp_path / "documents" / "*.jsonl.gz")],
        taggers=["profanity_document", "toxicity_fasttext_paragraph"],
        experiment="tox",
        tagger_options={"toxicity_fasttext_paragraph": {"model_path": str(jigsaw_like_model)}},
        processes=1,
    )
    run_stage(TagStage(config), stream=io.StringIO())
    rows = [r for _, r in read_attribute_rows(str(tmp_path / "attributes" / "tox" / "part-0.jsonl.gz"))]
    assert [r["id"] for r in rows] == ["a", "b"]
    attrs = rows[1]["attributes"]
    assert attrs["tox__profanity_document____label__toxic"][0][:2] == [0, len(TOXIC)]
    assert attrs["tox__profanity_document____label__toxic"][0][2] > 0.9
    assert attrs["tox__toxicity_fasttext_paragraph____label__toxic"][0][:2] == [0, len(TOXIC)]
