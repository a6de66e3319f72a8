"""`dolma-pipe tag`: registry, user modules, Dolma attribute layout, failures, both executors."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from dolma_pipe.attributes import read_with_attributes
from dolma_pipe.config import load_config
from dolma_pipe.documents import read_attribute_rows, write_documents
from dolma_pipe.executors import RayExecutor
from dolma_pipe.runner import run_stage
from taggers import registry
from taggers.base import TaggerError
from taggers.stage import TagConfig, TagStage
from tests.support.cli import run_cli
from tests.support.repo import REPO_ROOT

MODULE = str(Path(__file__).parent / "data" / "user_taggers.py")
DOCS = [
    {"id": "a", "text": "HELLO World\n\nsecond line", "source": "t"},
    {"id": 7, "text": "Ünïcödé ÄÖÜ\nabc", "source": "t"},
    {"id": "c", "text": "BOOM goes it", "source": "t"},
]


@pytest.fixture
def corpus(tmp_path):
    write_documents(str(tmp_path / "x" / "documents" / "sub" / "p0.jsonl.gz"), DOCS)
    write_documents(str(tmp_path / "x" / "documents" / "p1.jsonl.zst"), DOCS[:2])
    return tmp_path / "x"


def test_cli_tag_writes_dolma_attributes(corpus):
    proc = run_cli(
        "tag",
        "--documents",
        f"{corpus}/documents/**/*",
        "--taggers",
        "test_upper_lines",
        "--tagger-modules",
        MODULE,
        "--tagger_options.test_upper_lines.min_letters",
        "3",
        "--processes",
        "2",
    )
    assert proc.returncode == 0, proc.stderr
    attr = corpus / "attributes" / "test_upper_lines" / "sub" / "p0.jsonl.gz"
    rows = [r for _, r in read_attribute_rows(str(attr))]
    assert [r["id"] for r in rows] == ["a", "7", "c"]
    first = rows[0]["attributes"]
    assert first["test_upper_lines__test_upper_lines__line"] == [[0, 11, 0.6], [13, 24, 0.0]]
    assert first["test_upper_lines__test_upper_lines__doc"] == [[0, 24, 2.0]]
    # Offsets are code points: the accented line is 11 characters, not 18 bytes.
    assert rows[1]["attributes"]["test_upper_lines__test_upper_lines__line"] == [[0, 11, 0.4], [12, 15, 0.0]]
    assert (corpus / "attributes" / "test_upper_lines" / "p1.jsonl.zst").exists()
    manifest = orjson.loads((corpus / "attributes" / "test_upper_lines" / "_manifest.json").read_bytes())
    assert manifest["status"] == "complete" and manifest["totals"]["docs_out"] == 5
    # Dolma's lockstep reading works on what we wrote.
    merged = list(read_with_attributes(str(corpus / "documents" / "sub" / "p0.jsonl.gz"), ["test_upper_lines"]))
    assert merged[2][2]["test_upper_lines__test_upper_lines__doc"] == [[0, 12, 1.0]]


def test_failing_tagger_quarantines_the_document_and_keeps_rows_aligned(corpus, tmp_path):
    cfg = load_config(
        TagConfig,
        None,
        {
            "documents": [f"{corpus}/documents/sub/*"],
            "taggers": ["test_fragile", "test_upper_lines"],
            "experiment": "exp",
            "tagger_modules": [MODULE],
            "destination": str(tmp_path / "attrs"),
            "processes": 1,
        },
    )
    summary = run_stage(TagStage(cfg))
    assert summary.errors == {"tagger_error": 1}
    rows = [r for _, r in read_attribute_rows(str(tmp_path / "attrs" / "exp" / "sub" / "p0.jsonl.gz"))]
    assert [r["id"] for r in rows] == ["a", "7", "c"]
    assert "exp__test_fragile__len" not in rows[2]["attributes"]
    assert rows[2]["attributes"]["exp__test_upper_lines__doc"] == [[0, 12, 1.0]]
    assert rows[0]["attributes"]["exp__test_fragile__len"] == [[0, 24, 24.0]]
    err = orjson.loads((tmp_path / "attrs" / "exp" / "_errors" / "sub" / "p0.jsonl.gz.jsonl").read_bytes())
    assert err["kind"] == "tagger_error" and err["line"] == 3 and "'c'" in err["message"]


def test_tagger_errors_are_clear(corpus, tmp_path):
    proc = run_cli("tag", "--documents", f"{corpus}/documents/**/*", "--taggers", "test_uper_lines", "--tagger-modules", MODULE)
    assert proc.returncode == 1 and "unknown tagger 'test_uper_lines'" in proc.stderr and "test_upper_lines" in proc.stderr
    proc = run_cli(
        "tag", "--documents", f"{corpus}/documents/**/*", "--taggers", "test_upper_lines", "test_fragile", "--tagger-modules", MODULE
    )
    assert proc.returncode == 1 and "--experiment" in proc.stderr
    proc = run_cli(
        "tag",
        "--documents",
        f"{corpus}/documents/**/*",
        "--taggers",
        "test_upper_lines",
        "--tagger-modules",
        MODULE,
        "--tagger_options.test_upper_lines.bogus",
        "1",
    )
    assert proc.returncode == 1 and "bad options" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("tag", "--documents", f"{corpus}/documents/**/*", "--taggers", "x", "--tagger-modules", str(tmp_path / "nope.py"))
    assert proc.returncode == 1 and "nope.py does not exist" in proc.stderr
    for bad in ("a__b", "a/b"):
        proc = run_cli("tag", "--documents", f"{corpus}/documents/**/*", "--taggers", "x", "--experiment", bad)
        assert proc.returncode == 1 and "config key 'experiment'" in proc.stderr


def test_list_shows_user_taggers():
    proc = run_cli("list", "--tagger-modules", MODULE)
    assert proc.returncode == 0
    assert "test_upper_lines" in proc.stdout and "fraction of upper-case letters" in proc.stdout


def test_registry_refuses_a_taken_name():
    registry.load_modules([MODULE])
    from taggers.base import Tagger

    with pytest.raises(TaggerError, match="is taken"):

        @registry.register("test_upper_lines")
        class Other(Tagger):
            def predict(self, doc):
                return []


@pytest.mark.slow
def test_cli_train_classifier_then_quality_tagger(tmp_path):
    sample = REPO_ROOT / "examples" / "sample" / "documents"
    model = tmp_path / "q" / "model.bin"
    proc = run_cli(
        "train-classifier",
        "--positive",
        f"{sample}/python-doc/*",
        f"{sample}/linux-doc/*",
        "--negative",
        f"{sample}/fortunes/*",
        f"{sample}/gcide/*",
        "--output",
        str(model),
        "--epoch",
        "20",
        "--lr",
        "0.2",
        "--dim",
        "16",
        "--bucket",
        "20000",
    )
    assert proc.returncode == 0, proc.stderr
    report = orjson.loads(Path(str(model) + ".json").read_bytes())
    assert report["heldout"]["precision"] > 0.9 and report["heldout"]["recall"] > 0.9
    assert "held-out precision" in proc.stdout
    proc = run_cli(
        "tag",
        "--documents",
        f"{sample}/python-doc/part-0000.jsonl.gz",
        f"{sample}/fortunes/part-0000.jsonl.zst",
        "--taggers",
        "quality",
        "--tagger_options.quality.model_path",
        str(model),
        "--destination",
        str(tmp_path / "attrs"),
        "--processes",
        "1",
    )
    assert proc.returncode == 0, proc.stderr

    def mean_score(rel):
        rows = [r for _, r in read_attribute_rows(str(tmp_path / "attrs" / "quality" / rel))]
        return sum(r["attributes"]["quality__quality__score"][0][2] for r in rows) / len(rows)

    assert mean_score("python-doc/part-0000.jsonl.gz") > 0.8 > 0.2 > mean_score("fortunes/part-0000.jsonl.zst")


def test_grouped_output_passes_through_with_defaults():
    from taggers.base import Document, Span, Tagger

    class Grouping(Tagger):
        name = "grouping_test"
        defaults = ("always",)

        def predict(self, doc):
            return {"many": [[0, 1, 1.0], [1, 2, 0.5]]}

    class Spanning(Grouping):
        def predict(self, doc):
            return [Span("many", 0, 1, 1), Span("many", 1, 2, 0.499999999)]

    doc = Document("d", "ab")
    expected = {"always": [], "many": [[0, 1, 1.0], [1, 2, 0.5]]}
    assert Grouping().group(Grouping().predict(doc)) == expected
    assert Spanning().group(Spanning().predict(doc)) == expected


def test_parquet_documents_get_jsonl_attributes_readable_in_lockstep(tmp_path):
    doc_path = tmp_path / "x" / "documents" / "b.parquet"
    write_documents(str(doc_path), DOCS[:2])
    proc = run_cli("tag", "--documents", str(doc_path), "--taggers", "test_upper_lines", "--tagger-modules", MODULE, "--experiment", "e1")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "x" / "attributes" / "e1" / "b.jsonl.gz").exists()
    rows = list(read_with_attributes(str(doc_path), ["e1"]))
    assert [d["id"] for _, d, _ in rows] == ["a", "7"] and "e1__test_upper_lines__doc" in rows[0][2]


def test_user_modules_with_the_same_file_name_both_load(tmp_path):
    for sub, name in (("u1", "one_test"), ("u2", "two_test")):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "t.py").write_text(
            "from taggers.base import Span, Tagger\nfrom taggers.registry import register\n"
            f"@register('{name}')\nclass T(Tagger):\n    description = 'x'\n"
            "    def predict(self, doc):\n        return [Span('n', 0, 1, 1.0)]\n"
        )
    registry.load_modules([str(tmp_path / "u1" / "t.py"), str(tmp_path / "u2" / "t.py")])
    assert {"one_test", "two_test"} <= set(registry.available())


def test_a_user_tagger_cannot_shadow_a_builtin(tmp_path):
    builtin = next(iter(registry.available()))
    mod = tmp_path / "shadow.py"
    mod.write_text(
        "from taggers.base import Tagger\nfrom taggers.registry import register\n"
        f"@register('{builtin}')\nclass Mine(Tagger):\n    def predict(self, doc):\n        return []\n"
    )
    with pytest.raises(TaggerError, match="is taken"):
        registry.load_modules([str(mod)])


def test_config_refuses_odd_experiments_and_repeated_taggers():
    from dolma_pipe.config import ConfigError

    for exp in (".", "..", "-x", "a__b"):
        with pytest.raises(ConfigError, match="config key 'experiment'"):
            load_config(TagConfig, None, {"documents": ["d"], "taggers": ["t"], "experiment": exp})
    with pytest.raises(ConfigError, match="repeated"):
        load_config(TagConfig, None, {"documents": ["d"], "taggers": ["t", "t"]})


def test_bad_option_values_become_tagger_errors(corpus):
    from taggers.base import Tagger
    from taggers.stage import build_taggers

    @registry.register("test_validating")
    class Validating(Tagger):
        def __init__(self, size: int = 1):
            if not isinstance(size, int):
                raise ValueError("size must be an integer")

        def predict(self, doc):
            return []

    cfg = load_config(
        TagConfig,
        None,
        {
            "documents": [f"{corpus}/documents/**/*"],
            "taggers": ["test_validating"],
            "tagger_options": {"test_validating": {"size": "x"}},
        },
    )
    with pytest.raises(TaggerError, match="test_validating.*size must be an integer"):
        build_taggers(cfg)


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    def test_tag_on_ray(self, corpus, tmp_path, ray_address, monkeypatch):
        # The module named relative to this process's folder: Ray's workers run elsewhere, so the
        # stage hands them its absolute path.
        monkeypatch.chdir(Path(MODULE).parent)
        cfg = load_config(
            TagConfig,
            None,
            {
                "documents": [f"{corpus}/documents/**/*"],
                "taggers": ["test_upper_lines"],
                "tagger_modules": [Path(MODULE).name],
                "destination": str(tmp_path / "attrs"),
            },
        )
        with RayExecutor(2, ray_address) as ex:
            summary = run_stage(TagStage(cfg), executor=ex)
        assert summary.status == "complete" and summary.totals["docs_out"] == 5
