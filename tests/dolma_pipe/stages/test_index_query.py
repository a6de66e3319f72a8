"""``dolma-pipe query`` never answers with silence or a traceback: an empty text, a token id outside
the index's vocabulary, a ``--trace_file`` that holds nothing to trace (plain text read as JSON
lines, a missing file, objects without ``text``) are refused in one line naming the key; plain
text traces with ``--format lines``, and JSON lines without ``id`` trace with their line numbers.
``index --help`` and docs/index.md state the build's memory a symbol as the stage counts it; an
evaluation set of ``contamination`` with no document is an error, not a count of zero."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dolma_pipe.stages.index import Index, IndexQueryError
from dolma_pipe.stages.index.config import MEMORY_PER_SYMBOL
from tests.support.cli import run_cli
from tests.support.index import index_config, planted_documents, run_index, tokenize_corpus

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, list[list[dict]]]:
    root = tmp_path_factory.mktemp("query")
    files = planted_documents(files=2, docs=20, seed=5)
    tokenize_corpus(root, files)
    run_index(index_config(root / "index", shards=[str(root / "tokens" / "train")]))
    return root / "index", files


def _error(r: subprocess.CompletedProcess) -> str:
    """The one line a refused query prints."""
    assert r.returncode == 1 and "Traceback" not in r.stderr and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dolma-pipe query: error: "), r.stderr
    return lines[0]


@pytest.mark.parametrize("key", ["count", "find", "trace"])
def test_an_empty_text_is_refused_naming_the_key(built, key):
    index, _ = built
    assert "config key '" + key + "': an empty text matches nothing" in _error(run_cli("query", "--index", str(index), f"--{key}", ""))


def test_an_empty_ngram_is_refused_from_python(built):
    index = Index(str(built[0]))
    for empty in ("", []):
        with pytest.raises(IndexQueryError, match="an empty n-gram"):
            index.count(empty)
        with pytest.raises(IndexQueryError, match="an empty n-gram"):
            index.find(empty)


def test_token_ids_outside_the_vocabulary_are_refused(built):
    index, _ = built
    vocab = Index(str(index)).vocabulary
    assert 0 < vocab < 70000  # the test tokenizer's, in uint16 shards
    for ids in (["70000"], [str(vocab)], ["3", "-1"]):
        line = _error(run_cli("query", "--index", str(index), "--tokens", *ids))
        assert "config key 'tokens'" in line
        if ids[-1] != "-1":
            assert f"token id {ids[0]} is outside this index's vocabulary: ids are 0 to {vocab - 1}" in line
    ok = run_cli("query", "--index", str(index), "--tokens", str(vocab - 1), check=True)
    assert ok.stdout.strip().replace(",", "").isdigit()


def test_a_trace_file_that_holds_nothing_to_trace_is_an_error(built, tmp_path):
    index, files = built
    plain = tmp_path / "generations.txt"
    plain.write_text(files[0][3]["text"] + "\n" + files[1][5]["text"] + "\n")
    no_text = tmp_path / "no-text.jsonl"
    no_text.write_text(json.dumps({"id": "a", "body": "x"}) + "\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    for path, says in (
        (plain, f"{plain} line 1: not JSON"),
        (tmp_path / "missing.jsonl", f"config key 'trace_file': {tmp_path / 'missing.jsonl'} does not exist"),
        (no_text, f"{no_text} line 1: an object without a string 'text'"),
        (empty, f"config key 'trace_file': {empty} holds no text to trace"),
    ):
        line = _error(run_cli("query", "--index", str(index), "--trace_file", str(path)))
        assert says in line, line
    assert "--format lines" in _error(run_cli("query", "--index", str(index), "--trace_file", str(plain)))


def test_plain_text_and_texts_without_ids_are_traced(built, tmp_path):
    index, files = built
    texts = [files[0][3]["text"], files[1][5]["text"]]
    plain = tmp_path / "generations.txt"
    plain.write_text("\n".join(texts) + "\n")
    r = run_cli("query", "--index", str(index), "--trace_file", str(plain), "--format", "lines", "--output", "jsonl", "--min_length", "4")
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.returncode == 0, r.stderr
    assert [(row["text"], row["line"]) for row in rows] == [(0, 1), (1, 2)]
    assert all(row["spans"] for row in rows)  # both texts are documents of the corpus
    generations = tmp_path / "generations.jsonl"
    generations.write_text(json.dumps({"text": texts[0]}) + "\n\n" + json.dumps({"id": 7, "text": texts[1]}) + "\n")
    r = run_cli("query", "--index", str(index), "--trace_file", str(generations), "--min_length", "4", "--docs", "0", check=True)
    heads = [line for line in r.stdout.splitlines() if line.startswith("text ")]
    assert [h.split(":")[0] for h in heads] == ["text 0 (line 1)", "text 1 (line 3, id 7)"]
    assert all(not h.startswith(("text 0 (line 1): 0 span", "text 1 (line 3, id 7): 0 span")) for h in heads)
    line = _error(run_cli("query", "--index", str(index), "--count", "x", "--format", "lines"))
    assert "config key 'format'" in line


def test_an_evaluation_set_with_no_document_is_an_error_not_a_zero(built, tmp_path):
    index, files = built
    plain = tmp_path / "evaluation.jsonl"
    plain.write_text(files[0][3]["text"] + "\n")
    shards = index.parent / "tokens" / "train"
    args = ["index", "--shards", str(shards), "--destination", str(tmp_path / "index"), "--no-progress"]
    r = run_cli(*args, "--contamination.evaluation", str(plain))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[-1].startswith(f"dolma-pipe index: error: config key 'contamination.evaluation': {plain} holds no document"), lines
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(json.dumps({"id": "e", "text": files[0][3]["text"]}) + "\nnot json\n")
    r = run_cli(*args, "--contamination.evaluation", str(mixed), "--contamination.ngram", "2", check=True)
    assert "mixed.jsonl: " in r.stdout and "of 1 documents (1 bad records left out)" in r.stdout


def test_index_help_and_docs_state_the_memory_the_build_counts():
    r = run_cli("index", "--help", check=True)
    helptext = " ".join(r.stdout.split())
    assert f"about {MEMORY_PER_SYMBOL['u16']} bytes a 16-bit token, {MEMORY_PER_SYMBOL['u32']} a 32-bit token" in helptext
    docs = " ".join((ROOT / "docs" / "index.md").read_text().split())
    said = re.findall(r"about (\d+) bytes a (?:16-bit )?token to build", docs)
    assert said == [str(MEMORY_PER_SYMBOL["u16"])], said


def test_query_into_a_closed_pipe_prints_no_traceback(built):
    index, _ = built
    cmd = [sys.executable, "-m", "dolma_pipe", "query", "--index", str(index), "--find", "the"]
    # `true` reads nothing and is gone long before the query prints: its output meets a closed pipe.
    proc = subprocess.run(f"{' '.join(cmd)} | true", shell=True, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
