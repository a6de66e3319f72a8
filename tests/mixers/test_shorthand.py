"""The shorthand for common rules: its meaning (through the jq engine it compiles to) and its
load-time errors, which name the config key and the column before any file is mixed."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from dolma_pipe.config import ConfigError, load_config
from dolma_pipe.runner import run_stage
from mixers import shorthand
from mixers.attribute_keys import FIRST_ROWS
from mixers.config import MixConfig
from mixers.stage import MixStage
from tests.support.documents import write_gzip_jsonl

# Six documents; attribute set "tags" is what `dolma-pipe tag --experiment exp` writes, "dedup" a
# dedup attribute present (with spans) only on duplicates.
TAGS = [
    {"exp__gopher_v1__keep": [[0, 9, 1.0]], "exp__c4_v2__keep": [[0, 9, 1.0]], "exp__pii__email": []},
    {"exp__gopher_v1__keep": [[0, 9, 0.0]], "exp__c4_v2__keep": [[0, 9, 1.0]], "exp__pii__email": [[0, 2, 1.0]]},
    {"exp__gopher_v1__keep": [[0, 9, 1.0]], "exp__c4_v2__keep": [[0, 9, 0.0]], "exp__pii__email": [[0, 2, 1.0], [3, 4, 0.2], [5, 6, 0.9]]},
    {"exp__gopher_v1__keep": [[0, 9, 1]], "exp__c4_v2__keep": [[0, 9, 1]], "exp__pii__email": []},
    {"exp__gopher_v1__keep": [[0, 9, 0]], "exp__c4_v2__keep": [[0, 9, 0]], "exp__pii__email": []},
    {"exp__gopher_v1__keep": [[0, 9, 1.0]], "exp__c4_v2__keep": [[0, 9, 1.0]], "exp__pii__email": []},
]
DEDUP = [{}, {}, {}, {}, {"bff_duplicate_docs": [[0, 9, 1]]}, {"bff_duplicate_paragraph_spans": [[0, 4, 1], [5, 9, 1]]}]
TEXTS = ["aaaa bbbb", "cccc dddd", "eeee ffff", "gggg hhhh", "iiii jjjj", "kkkk llll"]


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "c"
    write_gzip_jsonl(root / "documents" / "a.jsonl.gz", [{"id": f"d{i}", "text": t} for i, t in enumerate(TEXTS)])
    write_gzip_jsonl(root / "attributes" / "tags" / "a.jsonl.gz", [{"id": f"d{i}", "attributes": a} for i, a in enumerate(TAGS)])
    write_gzip_jsonl(root / "attributes" / "dedup" / "a.jsonl.gz", [{"id": f"d{i}", "attributes": a} for i, a in enumerate(DEDUP)])
    return root


def stage(
    root: Path, out: Path, exclude: list[str] | None = None, include: list[str] | None = None, attributes=("tags", "dedup")
) -> MixStage:
    spec = {
        "streams": [
            {
                "name": "s",
                "documents": [str(root / "documents" / "*.gz")],
                "attributes": list(attributes),
                "output": {"path": str(out), "discard_fields": ["attributes"]},
                "filter": {"syntax": "shorthand", "include": include or [], "exclude": exclude or []},
            }
        ],
        "processes": 1,
        "progress": False,
    }
    return MixStage(load_config(MixConfig, None, spec))


def kept(root: Path, tmp_path: Path, **rules) -> list[str]:
    out = tmp_path / "out"
    run_stage(stage(root, out, **rules), stream=io.StringIO())
    with gzip.open(out / "s-0000.jsonl.gz", "rt") as fh:
        return [json.loads(line)["id"] for line in fh]


@pytest.mark.parametrize(
    "rules,expect",
    [
        ({"exclude": ["gopher_v1__keep == 0"]}, ["d0", "d2", "d3", "d5"]),  # integer 0 and float 0.0 alike
        ({"exclude": ["bff_duplicate_docs"]}, ["d0", "d1", "d2", "d3", "d5"]),  # present on a document = has spans
        ({"exclude": ["gopher_v1__keep == 0", "c4_v2__keep < 0.5", "bff_duplicate_docs"]}, ["d0", "d3", "d5"]),
        ({"include": ["pii__email >= 0.9"]}, ["d1", "d2"]),  # any span's score
        ({"include": ["count(pii__email) >= 2"]}, ["d2"]),
        ({"include": ["max(pii__email) >= 1"]}, ["d1", "d2"]),  # no spans: false
        ({"include": ["min(pii__email) < 0.5"]}, ["d2"]),
        ({"include": ["frac(bff_duplicate_paragraph_spans) > 0.8"]}, ["d5"]),  # 8 of 9 characters
        ({"exclude": ["c4_v2__keep == 0 or not (gopher_v1__keep == 1 and count(pii__email) < 1)"]}, ["d0", "d3", "d5"]),
        ({"include": ['"exp__pii__email"']}, ["d1", "d2"]),  # a whole key, quoted
        ({"include": ["exp__c4_v2__keep != 1.0"]}, ["d2", "d4"]),
    ],
)
def test_shorthand_meaning(root, tmp_path, rules, expect):
    assert kept(root, tmp_path, **rules) == expect


def test_compiles_to_jq():
    tree = shorthand.parse("gopher_v1__keep == 0 and not bff")
    program = shorthand.to_jq(tree, lambda n: {"gopher_v1__keep": "exp__gopher_v1__keep", "bff": "bff"}[n.name])
    assert (
        program
        == '((((.attributes // {})["exp__gopher_v1__keep"] // []) | any(.[2] == 0)) and ((((.attributes // {})["bff"] // []) | length > 0) | not))'
    )


@pytest.mark.parametrize(
    "rule,column,message",
    [
        ("gopher_v1__keeep == 0", 1, "unknown attribute 'gopher_v1__keeep' (did you mean 'gopher_v1__keep'?)"),
        ("gopher_v1__keep == 0 and bff_dupe", 26, "unknown attribute 'bff_dupe'"),
        ("keep == 1", 1, "attribute 'keep' is ambiguous"),
        ("gopher_v1__keep >= ", 20, "expected a number after '>='"),
        ("gopher_v1__keep = 0", 17, "unexpected character '='"),
        ("(gopher_v1__keep == 0", 22, "expected ')'"),
        ("gopher_v1__keep == 0 bff_duplicate_docs", 22, "unexpected 'bff_duplicate_docs'"),
        ("count(pii__email)", 18, "count(...) needs a comparison"),
        ("and == 1", 1, "expected an attribute name, found the keyword 'and'"),
        ("", 1, "empty rule"),
    ],
)
def test_errors_at_load_name_key_and_column(root, tmp_path, rule, column, message):
    with pytest.raises(ConfigError) as err:
        stage(root, tmp_path / "out", exclude=["bff_duplicate_docs", rule])
    text = str(err.value)
    assert text.startswith("config key 'streams.0.filter.exclude.1': shorthand rule")
    assert f"at column {column}: " in text
    assert message in text
    assert not (tmp_path / "out").exists()  # nothing was run


def test_non_span_attribute_is_refused(tmp_path):
    root = tmp_path / "c"
    write_gzip_jsonl(root / "documents" / "a.jsonl.gz", [{"id": "d0", "text": "t"}])
    write_gzip_jsonl(root / "attributes" / "tox" / "a.jsonl.gz", [{"id": "d0", "attributes": {"toxicity": 0.3}}])
    with pytest.raises(ConfigError, match="'toxicity' holds number values, not .* spans; use a jq or JSONPath rule"):
        stage(root, tmp_path / "out", exclude=["toxicity > 0.5"], attributes=("tox",))


def test_a_key_only_late_rows_hold_is_found(tmp_path):
    """The first rows are read first; a name not found there is looked for further before failing."""
    n = FIRST_ROWS + 50
    root = tmp_path / "c"
    write_gzip_jsonl(root / "documents" / "a.jsonl.gz", [{"id": f"d{i}", "text": "t"} for i in range(n)])
    rows = [{"id": f"d{i}", "attributes": {"exp__pii__email": [[0, 1, 1.0]]} if i == n - 1 else {}} for i in range(n)]
    write_gzip_jsonl(root / "attributes" / "pii" / "a.jsonl.gz", rows)
    assert kept(root, tmp_path, include=["pii__email"], attributes=("pii",)) == [f"d{n - 1}"]


def test_names_a_dedup_run_declares_are_known_though_no_row_holds_them(tmp_path):
    """dedup writes a name only on the rows it marks: a set without duplicates holds none, and its
    complete run's manifest says which names it can hold. An unfinished run's manifest does not count."""
    from dolma_pipe.stages.dedup import DedupStage

    root = tmp_path / "c"
    write_gzip_jsonl(root / "documents" / "a.jsonl.gz", [{"id": f"d{i}", "text": f"unique document {i}"} for i in range(3)])
    dedupe = {"name": "dedup_docs", "documents": {"attribute_name": "bff_duplicate_docs", "key": "$.text"}}
    spec = {"documents": [str(root / "documents" / "*.gz")], "dedupe": dedupe, "processes": 1, "progress": False}
    run_stage(DedupStage(load_config(DedupStage.config_model, None, spec)), stream=io.StringIO())
    assert kept(root, tmp_path, exclude=["bff_duplicate_docs"], attributes=("dedup_docs",)) == ["d0", "d1", "d2"]
    manifest = root / "attributes" / "dedup_docs" / "_manifest.json"
    manifest.write_text(manifest.read_text().replace('"status": "complete"', '"status": "running"'))
    with pytest.raises(ConfigError, match="unknown attribute 'bff_duplicate_docs'"):
        stage(root, tmp_path / "out2", exclude=["bff_duplicate_docs"], attributes=("dedup_docs",))


def test_attribute_files_of_an_unfinished_run_are_refused(root, tmp_path):
    from dolma_pipe.paths import PathError

    manifest = root / "attributes" / "dedup" / "_manifest.json"
    manifest.write_text('{"stage": "dedup", "status": "running", "inputs": []}')
    with pytest.raises(PathError, match=r"dedup/_manifest.json: these inputs .* unfinished dedup run \(status running\)"):
        kept(root, tmp_path, exclude=["bff_duplicate_docs"])
    manifest.write_text('{"stage": "dedup", "status": "complete", "inputs": []}')
    assert kept(root, tmp_path, exclude=["bff_duplicate_docs"]) == ["d0", "d1", "d2", "d3", "d5"]
