"""Dolma's own mixer tests, run against `dolma-pipe mix` with Dolma's configs and expected outputs.

The configs and fixtures are Dolma 1.2.1's (``tests/mixers/data/dolma/``, see its README), with
only the input paths adapted. Each test mirrors ``tests/python/test_mixer.py`` of Dolma: run the
config from a working directory where its relative paths resolve, read the one output shard,
check that every document's ``metadata.provenance`` is ``<file>:<line>`` with lines increasing,
remove it (and an emptied ``metadata``), and compare with the expected documents in order.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dolma_pipe.config import load_config
from dolma_pipe.runner import run_stage
from mixers.config import MixConfig
from mixers.stage import MixStage
from tests.support.repo import REPO_ROOT

DATA = REPO_ROOT / "tests" / "mixers" / "data" / "dolma"


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """A directory where Dolma's relative paths resolve: inputs under tests/mixers/data/dolma, outputs under tests/work."""
    link = tmp_path / "tests" / "mixers" / "data"
    link.mkdir(parents=True)
    (link / "dolma").symlink_to(DATA)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def mix(config: Path, **overrides) -> str:
    """Run a spec in this process (as the CLI does); the printed summary table."""
    summary = run_stage(MixStage(load_config(MixConfig, str(config), {"progress": False, **overrides})), stream=io.StringIO())
    return summary.table or ""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dolma_pipe", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )


def load_jsonl(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def check_and_remove_provenance(rows: list[dict]) -> list[dict]:
    prev = 0
    for row in rows:
        provenance = row["metadata"].pop("provenance")
        path, line = provenance.rsplit(":", 1)
        assert path == "000.json.gz"
        assert int(line) > prev
        prev = int(line)
        if not row["metadata"]:
            row.pop("metadata")
    return rows


CASES = [
    ("email-spans.json", "email-spans", "email-spans/email-spans"),
    ("email-spans-jq.yaml", "email-spans-jq", "email-spans-jq/email-spans-jq"),
    ("filter-by-spans.json", "filter-by-spans", "filter-by-spans/filter-by-spans-test"),
    ("mixer.json", "mixer", "mixer/mixer-test"),
    ("paragraph-spans.json", "remove-paragraphs", "paragraph-spans/paragraph-spans-test"),
]


@pytest.mark.parametrize("config,expected,output", CASES, ids=[c[0] for c in CASES])
def test_dolma_config_gives_dolmas_expected_output(workdir, config, expected, output):
    table = mix(DATA / "config" / config)
    out = workdir / "tests" / "work" / "output"
    # Consistent names: Dolma calls its last shard `<name>-0000.json.gz`; every shard here is .jsonl.gz.
    shards = sorted(p.name for p in (out / output).parent.glob("*.gz"))
    assert shards == [Path(output).name + "-0000.jsonl.gz"]
    provided = check_and_remove_provenance(load_jsonl(out / f"{output}-0000.jsonl.gz"))
    assert provided == load_jsonl(DATA / "expected" / f"{expected}.json.gz")
    assert "mix summary (streams)" in table


def test_a_dolma_config_through_the_cli(workdir):
    proc = cli("mix", "-c", str(DATA / "config" / "mixer.json"), "--no-progress", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "mixer-test: 1 files, 10 documents in" in proc.stdout
    assert "6 kept (60.0%)" in proc.stdout
    assert "      no include                 1  (documents no include rule matched)\n" in proc.stdout
    assert "      exclude 2         2        1  $.attributes[?(@.toxicity > 0.8)]\n" in proc.stdout
    assert len(load_jsonl(workdir / "tests/work/output/mixer/mixer-test-0000.jsonl.gz")) == 6


def test_min_length(tmp_path):
    """Dolma's TestMixerPipeline.test_min_length: span deletion first, then the trimmed length check."""
    to_remove, head, tail = "remove second sentence", "This is a test", "do not touch"
    texts = ["doc", f"{head}\n{to_remove}", f"A\n{to_remove}", f"{head}\n{tail}", "\n\n\np\n\n\n"]
    docs_dir = tmp_path / "src" / "documents"
    attrs_dir = tmp_path / "src" / "attributes" / "test"
    docs_dir.mkdir(parents=True)
    attrs_dir.mkdir(parents=True)
    spans = [[], [[texts[1].find(to_remove), texts[1].find(to_remove) + len(to_remove), 1]], [[2, 2 + len(to_remove), 1]], [], []]
    with gzip.open(docs_dir / "0.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps({"id": str(i), "text": t, "source": "t"}) + "\n" for i, t in enumerate(texts))
    with gzip.open(attrs_dir / "0.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps({"id": str(i), "attributes": {"test": s}}) + "\n" for i, s in enumerate(spans))
    out = tmp_path / "out"
    config = {
        "streams": [
            {
                "name": "test",
                "documents": [str(docs_dir / "0.jsonl.gz")],
                "attributes": ["test"],
                "output": {"path": str(out), "max_size_in_bytes": 10000000, "min_text_length": 4},
                "span_replacement": [{"span": "$.attributes.test", "min_score": 0.5, "replacement": ""}],
            }
        ],
        "processes": 1,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    mix(tmp_path / "config.json")
    new_docs = sorted((d for p in out.glob("*.gz") for d in load_jsonl(p)), key=lambda d: int(d["id"]))
    assert [d["text"] for d in new_docs] == [f"{head}\n", f"{head}\n{tail}"]


def test_fail_on_unk_attribute(tmp_path):
    """Dolma's TestMixerPipeline.test_fail_on_unk_attribute: a jq rule indexing a missing attribute fails the run."""
    docs_dir = tmp_path / "documents"
    docs_dir.mkdir()
    with gzip.open(docs_dir / "0000.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"text": "test", "id": "0", "attributes": {"a": [[0, 3, 1]]}, "source": "t"}))
    config = {
        "streams": [
            {
                "name": "test",
                "documents": [str(docs_dir / "0000.jsonl.gz")],
                "output": {"path": str(docs_dir / "output"), "max_size_in_bytes": 10000000},
                "filter": {"include": [".attributes.b.b != null"], "syntax": "jq"},
            }
        ],
        "processes": 1,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    proc = cli("mix", "-c", str(tmp_path / "config.json"), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 1
    err = proc.stderr
    assert "Traceback" not in err
    assert "0000.jsonl.gz:1" in err and ".attributes.b.b != null" in err and "failed" in err
