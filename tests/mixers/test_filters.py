"""Each semantic of Dolma's mixer, through `dolma-pipe mix` streams on small corpora made here:
include/exclude, jq truthiness, JSONPath (with 1 == 1.0), span replacement, discard_fields,
min_text_length, provenance, attribute merging and the errors of misaligned attribute files."""

from __future__ import annotations

import gzip
import io
import json
import re
from pathlib import Path

import pytest

from dolma_pipe.attributes import AttributeMismatchError
from dolma_pipe.config import ConfigError, load_config
from dolma_pipe.filters import DocumentMixer, SpanRule
from dolma_pipe.manifest import read_manifest
from dolma_pipe.runner import RunFailed, run_stage
from mixers.config import MixConfig
from mixers.stage import MixStage


def write_jsonl(path: Path, rows: list, gz: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows)
    path.write_bytes(gzip.compress(data.encode(), mtime=0) if gz else data.encode())


def corpus(root: Path, texts: list[str], attributes: dict[str, list[dict]] | None = None, name: str = "a.jsonl.gz", **extra) -> Path:
    """Documents d0, d1, ... with ``texts``; ``attributes[set]`` is each document's attributes dict."""
    docs = [{"id": f"d{i}", "text": t, "source": "s", **extra} for i, t in enumerate(texts)]
    write_jsonl(root / "documents" / name, docs)
    for set_name, rows in (attributes or {}).items():
        write_jsonl(root / "attributes" / set_name / name, [{"id": f"d{i}", "attributes": a} for i, a in enumerate(rows)])
    return root


def read_out(folder: Path) -> list[dict]:
    rows = []
    for p in sorted(folder.glob("*.gz")):
        with gzip.open(p, "rt", encoding="utf-8") as fh:
            rows += [json.loads(line) for line in fh if line.strip()]
    return rows


def mix(
    tmp: Path,
    root: Path,
    attributes: list[str] | None = None,
    filt: dict | None = None,
    spans: list | None = None,
    output: dict | None = None,
    **stream,
) -> tuple[list[dict], dict]:
    out = tmp / "out"
    spec = {
        "streams": [
            {
                "name": "s",
                "documents": [str(root / "documents" / "*")],
                "attributes": attributes or [],
                "output": {"path": str(out), "max_size_in_bytes": 10_000_000, **(output or {})},
                **({"filter": filt} if filt else {}),
                **({"span_replacement": spans} if spans else {}),
                **stream,
            }
        ],
        "processes": 1,
        "progress": False,
    }
    summary = run_stage(MixStage(load_config(MixConfig, None, spec)), stream=io.StringIO())
    return read_out(out), summary.manifest.phases[0].step["totals"]["s"]


def ids(rows: list[dict]) -> list[str]:
    return [r["id"] for r in rows]


def scores(*values) -> list[dict]:
    return [{"q": [[0, 1, v]]} for v in values]


def test_include_any_exclude_none(tmp_path):
    root = corpus(tmp_path / "c", ["a", "b", "c", "d"], {"x": scores(0.1, 0.5, 0.9, 0.9)})
    filt = {"syntax": "jq", "include": [".attributes.q[0][2] > 0.8", '.id == "d0"'], "exclude": ['.id == "d3"']}
    rows, totals = mix(tmp_path, root, ["x"], filt)
    assert ids(rows) == ["d0", "d2"]
    assert totals["removed_by_rule"] == {"include (none matched)": 1, 'exclude 0: .id == "d3"': 1}


def test_summary_shows_what_each_rule_matched_and_removed(tmp_path):
    """A removed document counts once, against the rule that decided (Dolma's order), and every
    rule's matches are counted over every document: a dedup rule after a rule that removes most of
    the same documents still shows all it marks."""
    dup = [{"dup": [[0, 1, 1]]} if i in (1, 2, 3, 5) else {} for i in range(6)]
    root = corpus(tmp_path / "c", list("abcdef"), {"x": scores(0.1, 0.1, 0.1, 0.9, 0.9, 0.9), "dedup": dup})
    filt = {
        "syntax": "jq",
        "include": ['.id != "d5"', '.id != "d4" and .id != "d5"'],
        "exclude": [".attributes.q[0][2] < 0.5", ".attributes.dup"],
    }
    out = tmp_path / "out"
    stream = {"name": "s", "documents": [str(root / "documents" / "*")], "attributes": ["x", "dedup"], "output": {"path": str(out)}}
    spec = {"streams": [{**stream, "filter": filt}], "processes": 1, "progress": False}
    summary = run_stage(MixStage(load_config(MixConfig, None, spec)), stream=io.StringIO())
    assert ids(read_out(out)) == ["d4"]
    totals = read_manifest(str(out)).results["streams"]["s"]
    assert totals["removed_by_rule"] == {
        "include (none matched)": 1,  # d5
        "exclude 0: .attributes.q[0][2] < 0.5": 3,  # d0 d1 d2
        "exclude 1: .attributes.dup": 1,  # d3 (d1 and d2 went to exclude 0, d5 to the includes)
    }
    assert totals["matched_by_rule"] == {
        'include 0: .id != "d5"': 5,
        'include 1: .id != "d4" and .id != "d5"': 4,
        "exclude 0: .attributes.q[0][2] < 0.5": 3,
        "exclude 1: .attributes.dup": 4,
    }
    assert "failed_by_rule" not in totals
    table = summary.table or ""
    assert re.search(r"\n +include 1 +4 +\.id != \"d4\" and", table), table
    assert re.search(r"\n +no include +1 +\(documents no include rule matched\)\n", table), table
    assert re.search(r"\n +exclude 1 +4 +1 +\.attributes\.dup\n", table), table


def test_a_rule_counted_where_dolma_would_not_evaluate_it_never_fails_the_run(tmp_path):
    """Counting every rule evaluates rules Dolma skips; one that fails there (`.q.x` on a list) is
    counted as failed, not raised: the output is what Dolma writes."""
    root = corpus(tmp_path / "c", ["a", "b", "c"], {"x": scores(0.1, 0.5, 0.9)})
    rows, totals = mix(tmp_path, root, ["x"], {"syntax": "jq", "exclude": [".attributes.q[0][2] < 1", ".attributes.q.x"]})
    assert rows == []
    assert totals["removed_by_rule"] == {"exclude 0: .attributes.q[0][2] < 1": 3, "exclude 1: .attributes.q.x": 0}
    assert totals["matched_by_rule"] == {"exclude 0: .attributes.q[0][2] < 1": 3, "exclude 1: .attributes.q.x": 0}
    assert totals["failed_by_rule"] == {"exclude 1: .attributes.q.x": 3}


@pytest.mark.parametrize(
    "rule,kept",
    [
        (
            ".attributes.v",
            ["t_true", "t_2", "t_str", "t_list", "t_obj", "t_float_decimal"],
        ),  # Dolma's truth: 0, "", [], {}, null, false are false
        ("(.attributes.v, true)", ["t_true", "t_2", "t_str", "t_list", "t_obj", "t_float_decimal"]),  # several outputs: all must be true
        ("(.attributes.v, false)", []),
        ("empty", []),  # no output: an include is false
        (".attributes.v | tostring | length > 4", ["t_false", "t_obj"]),  # "false", "{\"a\":0}"
    ],
)
def test_jq_truthiness_as_in_dolma(tmp_path, rule, kept):
    values = {
        "t_false": False,
        "t_null": None,
        "t_zero": 0,
        "t_true": True,
        "t_2": 2,
        "t_empty_str": "",
        "t_str": "x",
        "t_empty_list": [],
        "t_list": [0],
        "t_empty_obj": {},
        "t_obj": {"a": 0},
        "t_float_decimal": 0.0,
    }
    docs = [{"id": k, "text": "t", "attributes": {"v": v}} for k, v in values.items()]
    write_jsonl(tmp_path / "c" / "documents" / "a.jsonl.gz", docs)
    rows, _ = mix(tmp_path, tmp_path / "c", filt={"syntax": "jq", "include": [rule]})
    assert ids(rows) == kept


def test_jq_exclude_with_no_output_keeps(tmp_path):
    root = corpus(tmp_path / "c", ["a", "b"], {"x": scores(0.1, 0.9)})
    rows, _ = mix(tmp_path, root, ["x"], {"syntax": "jq", "exclude": ["empty", ".attributes.q[] | select(.[2] > 0.5) | true"]})
    assert ids(rows) == ["d0"]


@pytest.mark.parametrize(
    "op,expect",
    [
        (">= 1.0", ["d1", "d2"]),
        (">= 1", ["d1", "d2"]),
        ("== 1.0", ["d1", "d2"]),
        ("== 1", ["d1", "d2"]),
        ("< 1.0", ["d0"]),
        ("!= 1.0", ["d0"]),
    ],
)
def test_jsonpath_compares_integers_and_floats_by_value(tmp_path, op, expect):
    """Dolma's JSONPath engine never matches `>= 1.0` (or `== 1.0`) against the integer 1; here it does."""
    root = corpus(tmp_path / "c", ["a", "b", "c"], {"x": [{"q": [[0, 1, 0.5]]}, {"q": [[0, 1, 1]]}, {"q": [[0, 1, 1.0]]}]})
    rows, _ = mix(tmp_path, root, ["x"], {"include": [f"$.attributes[?(@.q[0][2] {op})]"]})
    assert ids(rows) == expect


def test_dolmas_jsonpath_engine_misses_integer_one():
    """What the fix changes: the same rule through the engine as Dolma runs it (a span selector) misses."""
    doc = b'{"id": "a", "text": "t", "attributes": {"q": [[0, 1, 1]]}}'
    fixed = DocumentMixer(filter_syntax="jsonpath", include=["$.attributes[?(@.q[0][2] >= 1.0)]"])
    assert fixed.process([doc], [1], [], "f").counts.kept == 1
    as_dolma = DocumentMixer(spans=[SpanRule("$.attributes[?(@.q[0][2] >= 1.0)]", min_score=0)])
    assert as_dolma.process([doc], [1], [], "f").counts.spans_replaced == 0


def test_span_replacement_bounds_offsets_and_braces(tmp_path):
    text = "héllo wörld; bye now"
    spans = {"p": [[0, 5, 0.5], [6, 11, 0.9], [13, 16, 0.2], [16, 20, 1.0]]}
    root = corpus(tmp_path / "c", [text], {"x": [spans]})
    rule = {"span": "$.attributes.p", "min_score": 0.5, "max_score": 1.0, "replacement": "<{}>"}
    rows, totals = mix(tmp_path, root, ["x"], spans=[rule])
    # min_score <= score < max_score: 0.5 and 0.9 replaced; 0.2 and 1.0 not. Offsets are characters.
    assert rows[0]["text"] == "<héllo> <wörld>; bye now"
    assert totals["spans_replaced"] == 2


def test_span_replacement_deletes_with_several_rules_and_jq(tmp_path):
    text = "keep DROP keep EMAIL keep"
    root = corpus(tmp_path / "c", [text], {"x": [{"a": [[5, 10, 1]], "b": [[15, 20, 1]]}]})
    spans = [
        {"span": "$.attributes.a", "min_score": 0.5, "replacement": ""},
        {"span": ".attributes.b", "syntax": "jq", "min_score": 0.5, "replacement": "[{}]"},
    ]
    rows, _ = mix(tmp_path, root, ["x"], spans=spans)
    assert rows[0]["text"] == "keep keep [EMAIL] keep"


def test_replacement_from_jq(tmp_path):
    root = corpus(tmp_path / "c", ["a secret here"], {"x": [{"a": [[2, 8, 1]]}]})
    rows, _ = mix(tmp_path, root, ["x"], spans=[{"span": "$.attributes.a", "min_score": 0.5, "replacement": "$.source"}])
    assert rows[0]["text"] == "a s here"


def test_discard_fields_min_text_length_and_provenance(tmp_path):
    root = tmp_path / "c"
    rows_in = [
        {"id": "d0", "text": "  abc \n", "source": "s", "metadata": {"url": "u"}},  # trimmed 3 bytes < 4
        "",  # a blank line still counts as a line for provenance
        {"id": "d1", "text": "abcd", "source": "s", "metadata": "not an object", "added": "x"},
        {"id": "d2", "text": "éé", "source": "s", "metadata": {"url": "v"}},  # 4 bytes
    ]
    write_jsonl(root / "documents" / "a.jsonl.gz", rows_in)
    rows, totals = mix(tmp_path, root, output={"discard_fields": ["added", "source"], "min_text_length": 4})
    assert rows == [
        {"id": "d1", "text": "abcd", "metadata": {"provenance": "a.jsonl.gz:3"}},
        {"id": "d2", "text": "éé", "metadata": {"url": "v", "provenance": "a.jsonl.gz:4"}},
    ]
    assert totals["removed_by_rule"] == {"min_text_length": 1}


def test_output_lines_have_sorted_keys_like_dolma(tmp_path):
    root = corpus(tmp_path / "c", ["t"], {"x": [{"z": [], "a": []}]}, extra_field=1)
    mix(tmp_path, root, ["x"])
    line = gzip.decompress((tmp_path / "out" / "s-0000.jsonl.gz").read_bytes()).decode().strip()
    keys = list(json.loads(line))
    assert keys == sorted(keys) and keys == ["attributes", "extra_field", "id", "metadata", "source", "text"]


def test_attribute_sets_merge_into_document_attributes(tmp_path):
    root = tmp_path / "c"
    write_jsonl(root / "documents" / "a.jsonl.gz", [{"id": "d0", "text": "t", "attributes": {"inline": 1, "k": "doc"}}])
    write_jsonl(root / "attributes" / "one" / "a.jsonl.gz", [{"id": "d0", "attributes": {"k": "one", "o": 1}}])
    write_jsonl(root / "attributes" / "two" / "a.jsonl.gz", [{"id": "d0", "attributes": {"k": "two"}}])
    rows, _ = mix(tmp_path, root, ["one", "two"])
    assert rows[0]["attributes"] == {"inline": 1, "k": "two", "o": 1}


def test_bad_lines_are_quarantined_and_attributes_stay_aligned(tmp_path):
    root = tmp_path / "c"
    write_jsonl(root / "documents" / "a.jsonl.gz", [{"id": "d0", "text": "a"}, "{broken", {"id": "d1"}, {"id": "d2", "text": "c"}])
    # Our taggers (and Dolma's, which would stop at a bad line) write one row per good document.
    write_jsonl(
        root / "attributes" / "x" / "a.jsonl.gz", [{"id": "d0", "attributes": {"q": [[0, 1, 1]]}}, {"id": "d2", "attributes": {"q": []}}]
    )
    rows, _ = mix(tmp_path, root, ["x"], {"syntax": "jq", "exclude": [".attributes.q | length > 0"]})
    assert ids(rows) == ["d2"]
    manifest = read_manifest(str(tmp_path / "out"))
    assert manifest.errors == {"malformed_json": 1, "missing_text": 1}
    errors = (tmp_path / "out" / "_errors" / "filter" / "s" / "a.jsonl.gz.jsonl").read_text()
    assert '"line":2' in errors and '"line":3' in errors


@pytest.mark.parametrize(
    "rows,message",
    [
        ([{"id": "d0", "attributes": {}}, {"id": "zz", "attributes": {}}], "a.jsonl.gz:2: id 'zz' does not match document id 'd1'"),
        ([{"id": "d0", "attributes": {}}], "ends before"),
        ([{"id": f"d{i}", "attributes": {}} for i in range(3)], "a.jsonl.gz:3: has more rows than"),
    ],
)
def test_misaligned_attribute_files_fail_naming_files_and_lines(tmp_path, rows, message):
    root = corpus(tmp_path / "c", ["a", "b"])
    write_jsonl(root / "attributes" / "x" / "a.jsonl.gz", rows)
    with pytest.raises(RunFailed, match="AttributeMismatchError"):
        mix(tmp_path, root, ["x"])
    failure = next(iter(read_manifest(str(tmp_path / "out")).failures.values()))
    assert message.replace("'", '"') in failure.replace("'", '"')
    assert issubclass(AttributeMismatchError, Exception)


def test_missing_attribute_file_is_a_config_error(tmp_path):
    root = corpus(tmp_path / "c", ["a"])
    with pytest.raises(ConfigError, match=r"streams\.0\.attributes\.0.*has no file .*attributes/nope/a\.jsonl\.gz"):
        mix(tmp_path, root, ["nope"])


def test_compression_input_and_output(tmp_path):
    root = tmp_path / "c"
    # gzip content under a name that says plain: compression.input says what it is.
    write_jsonl(root / "documents" / "a.jsonl", [{"id": "d0", "text": "t"}], gz=True)
    out = tmp_path / "out"
    spec = {
        "streams": [
            {
                "name": "s",
                "documents": [str(root / "documents" / "*")],
                "output": {"path": str(out)},
                "compression": {"input": "gz", "output": "zst"},
            }
        ],
        "processes": 1,
        "progress": False,
    }
    run_stage(MixStage(load_config(MixConfig, None, spec)), stream=io.StringIO())
    import zstandard

    (shard,) = out.glob("*.jsonl.zst")
    assert shard.name == "s-0000.jsonl.zst"
    assert json.loads(zstandard.ZstdDecompressor().decompressobj().decompress(shard.read_bytes()))["id"] == "d0"


def test_rule_errors_name_the_key_and_column(tmp_path):
    root = corpus(tmp_path / "c", ["a"])
    with pytest.raises(ConfigError, match=r"'streams\.0\.filter\.exclude\.1': jq rule '\.a \| sum' at column 6: undefined filter"):
        mix(tmp_path, root, filt={"syntax": "jq", "exclude": [".a", ".a | sum"]})
    with pytest.raises(ConfigError, match=r"'streams\.0\.filter\.include\.0': jsonpath rule .* at column \d+: JSONPath syntax error"):
        mix(tmp_path, root, filt={"include": ["$.a[?(@.b >= )]"]})
    with pytest.raises(ConfigError, match=r"streams\.0\.filter\.include\.0.*index -1 is not supported"):
        mix(tmp_path, root, filt={"include": ["$.a[0,-1]"]})
    with pytest.raises(ConfigError, match=r"streams\.0\.span_replacement\.0\.span"):
        mix(tmp_path, root, spans=[{"span": ".a[", "syntax": "jq", "min_score": 0}])
    with pytest.raises(ConfigError, match=r"span_replacement\.0.*min_score or max_score"):
        mix(tmp_path, root, spans=[{"span": "$.a"}])
    with pytest.raises(ConfigError, match=r"filter.*needs 'include' or 'exclude'"):
        mix(tmp_path, root, filt={"syntax": "jq"})


def test_duplicate_ids_and_blank_lines_are_noted_for_the_run(tmp_path):
    """The runner's warnings see what mix reads, as they see what read_documents reads."""
    root = tmp_path / "c"
    write_jsonl(root / "documents" / "a.jsonl.gz", [{"id": "d0", "text": "a"}, "", {"id": "d0", "text": "b"}])
    write_jsonl(root / "documents" / "b.jsonl.gz", [{"id": "d0", "text": "c"}])
    rows, _ = mix(tmp_path, root)
    assert len(rows) == 3
    manifest = read_manifest(str(tmp_path / "out"))
    assert manifest.warnings["blank_lines"] == 1
    assert manifest.warnings["duplicate_ids"] >= 1 and manifest.phase("filter").duplicate_ids_across_tasks == 1
