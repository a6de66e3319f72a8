"""jq and JSONPath rules (and span selectors) that read an attribute no attribute file holds: a
warning on stderr when the spec loads, naming the config key and the rule, with a did-you-mean;
never an error (Dolma runs such rules), and no warning for names the shorthand would find."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from dolma_pipe.config import load_config
from dolma_pipe.filters import rule_attributes
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.dedup import DedupStage
from mixers.attribute_keys import FIRST_ROWS
from mixers.config import MixConfig
from mixers.stage import MixStage
from tests.support.documents import write_gzip_jsonl
from tests.support.tokens import train_tokenizer

TAGS = [{"exp__gopher_v1__keep": [[0, 4, float(i % 2)]], "exp__pii__email": []} for i in range(4)]
DEDUP = [{"bff_duplicate_docs": [[0, 4, 1]]} if i == 3 else {} for i in range(4)]


@pytest.fixture
def root(tmp_path) -> Path:
    root = tmp_path / "c"
    write_gzip_jsonl(root / "documents" / "a.jsonl.gz", [{"id": f"d{i}", "text": f"text {i}"} for i in range(4)])
    write_gzip_jsonl(root / "attributes" / "tags" / "a.jsonl.gz", [{"id": f"d{i}", "attributes": a} for i, a in enumerate(TAGS)])
    write_gzip_jsonl(root / "attributes" / "dedup" / "a.jsonl.gz", [{"id": f"d{i}", "attributes": a} for i, a in enumerate(DEDUP)])
    return root


def stream(root: Path, out: Path, syntax: str = "jq", exclude=(), include=(), attributes=("tags", "dedup"), **extra) -> dict:
    filt = {"filter": {"syntax": syntax, "include": list(include), "exclude": list(exclude)}} if include or exclude else {}
    return {
        "name": "s",
        "documents": [str(root / "documents" / "*.gz")],
        "attributes": list(attributes),
        "output": {"path": str(out)},
        **filt,
        **extra,
    }


def load(root: Path, tmp_path: Path, **rules) -> MixStage:
    spec = {"streams": [stream(root, tmp_path / "out", **rules)], "processes": 1, "progress": False}
    return MixStage(load_config(MixConfig, None, spec))


def warnings(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if "warning" in line]


@pytest.mark.parametrize(
    "syntax,rule,name,hint",
    [
        ("jq", ".attributes.bff_duplicate_doc", "bff_duplicate_doc", "bff_duplicate_docs"),
        ("jq", ".attributes.gopher_v1__keep[0][2] < 0.5", "gopher_v1__keep", "exp__gopher_v1__keep"),
        ("jq", '(.attributes // {})["exp__pii__emails"] | length > 0', "exp__pii__emails", "exp__pii__email"),
        ("jq", ".attributes | .nothing_like_it", "nothing_like_it", None),
        (
            "jsonpath",
            "$.attributes[?(@.exp__gopher_v1_keep && @.exp__gopher_v1_keep[0][2] < 0.5)]",
            "exp__gopher_v1_keep",
            "exp__gopher_v1__keep",
        ),
        ("jsonpath", "$.attributes.toxicity", "toxicity", None),
    ],
)
def test_unknown_attribute_is_a_warning_naming_key_and_rule(root, tmp_path, capsys, syntax, rule, name, hint):
    load(root, tmp_path, syntax=syntax, exclude=[".id == 1" if syntax == "jq" else "$.nope", rule])
    (line,) = warnings(capsys)
    assert line.startswith(
        f"dolma-pipe mix: warning: config key 'streams.0.filter.exclude.1': {syntax} rule {rule!r} reads attribute {name!r}"
    )
    if hint is None:
        assert "did you mean" not in line
    else:
        assert f"(did you mean {hint!r}?)" in line
    assert "exp__gopher_v1__keep" in line  # the names it does know


def test_a_warned_rule_still_runs_as_in_dolma(root, tmp_path, capsys):
    """Not an error: the rule runs, and finds nothing (every document kept by an exclude)."""
    stage = load(root, tmp_path, exclude=[".attributes.bff_duplicate_doc"])
    assert len(warnings(capsys)) == 1
    run_stage(stage, stream=io.StringIO())
    with gzip.open(tmp_path / "out" / "s-0000.jsonl.gz", "rt") as fh:
        assert [json.loads(line)["id"] for line in fh] == ["d0", "d1", "d2", "d3"]


def test_span_selectors_and_sources_are_checked_too(root, tmp_path, capsys):
    spans = [{"span": "$.attributes.exp__pii__mail", "min_score": 0.5, "replacement": ""}]
    load(root, tmp_path, span_replacement=spans)
    (line,) = warnings(capsys)
    assert "config key 'streams.0.span_replacement.0.span': jsonpath selector '$.attributes.exp__pii__mail'" in line
    assert "(did you mean 'exp__pii__email'?)" in line

    source = stream(root, tmp_path / "unused", exclude=[".attributes.bff_dup"])
    del source["output"]
    spec = {
        "sources": [{**source, "tokens": 10}],
        "output": str(tmp_path / "out2"),
        "tokenizer": train_tokenizer(tmp_path / "tok.json", ["text 0 text 1"], vocab_size=30),
        "progress": False,
    }
    MixStage(load_config(MixConfig, None, spec))
    (line,) = warnings(capsys)
    assert "config key 'sources.0.filter.exclude.0': jq rule '.attributes.bff_dup' reads attribute 'bff_dup'" in line


def test_no_warning_for_names_the_shorthand_finds(root, tmp_path, capsys):
    """Names held by any row (not only the first ones), by the documents' own attributes, or
    declared by a complete dedup run (dedup writes a name only on the rows it marks) are known."""
    n = FIRST_ROWS + 20
    write_gzip_jsonl(root / "documents" / "a.jsonl.gz", [{"id": f"d{i}", "text": f"a {i}", "attributes": {"inline": []}} for i in range(4)])
    write_gzip_jsonl(root / "documents" / "b.jsonl.gz", [{"id": f"b{i}", "text": f"b {i}"} for i in range(n)])
    late = [{"id": f"b{i}", "attributes": {"late_key": [[0, 1, 1]]} if i == n - 1 else {}} for i in range(n)]
    write_gzip_jsonl(root / "attributes" / "tags" / "b.jsonl.gz", late)
    write_gzip_jsonl(root / "attributes" / "dedup" / "b.jsonl.gz", [{"id": f"b{i}", "attributes": {}} for i in range(n)])
    # A document dedup run that finds no duplicate: no row holds its name; its manifest declares it.
    dedupe = {"name": "exact", "documents": {"attribute_name": "exact_duplicate_docs", "key": "$.text"}}
    spec = {"documents": [str(root / "documents" / "*.gz")], "dedupe": dedupe, "processes": 1, "progress": False}
    run_stage(DedupStage(load_config(DedupStage.config_model, None, spec)), stream=io.StringIO())
    for f in (root / "attributes" / "exact").glob("*.gz"):
        assert all(not json.loads(line)["attributes"] for line in gzip.open(f, "rt"))
    rules = [
        ".attributes.bff_duplicate_docs",
        ".attributes.late_key | length > 0",
        '.attributes | has("exp__pii__email")',
        ".attributes.exact_duplicate_docs",
        ".metadata.anything and .text",  # not an attribute
        ".attributes[.text]",  # a computed key: not checked
    ]
    attributes = ("tags", "dedup", "exact")
    load(root, tmp_path, exclude=rules, attributes=attributes)
    paths = ["$.attributes[?(@.late_key)]", "$..whatever", "$.attributes.inline", "$.attributes.exact_duplicate_docs"]
    load(root, tmp_path, syntax="jsonpath", include=paths, attributes=attributes)
    assert warnings(capsys) == []


@pytest.mark.parametrize(
    "syntax,rule,names",
    [
        ("jq", ".attributes.a[0][2] > 0.5 and (.attributes | .b | length > 0)", ["a", "b"]),
        ("jq", '.attributes as $a | $a.c or ($a | has("d"))', ["c", "d"]),
        ("jq", ".attributes | map_values(.e)", []),  # .e of each value, not an attribute
        ("jsonpath", "$@.attributes[?(@.f && @.f[0] && @.f[0][2] >= 1.0)]", ["f"]),  # Dolma's own example
        ("jsonpath", "$.attributes['g','h']", ["g", "h"]),
        ("jsonpath", "$.attributes.i[?(@[2] > 0.5)]", ["i"]),
    ],
)
def test_rule_attributes(syntax, rule, names):
    assert rule_attributes(syntax, rule) == names
