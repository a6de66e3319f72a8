"""``dolma-pipe report --runs s3://...``: every kind of run read from S3 through the storage layer
(a moto server), to the numbers the same runs give on local disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dolma_pipe import storage
from tests.support.cli import run_cli
from tests.support.documents import make_docs
from tests.support.report_pipeline import build_chain, report, write_train_run
from tests.support.tokens import train_tokenizer

pytestmark = pytest.mark.slow


def _sections(dest: Path, root: str) -> dict[str, dict]:
    return {p.stem: _rooted(json.loads(p.read_bytes()), root) for p in (dest / "report_data" / "sections").glob("*.json")}


def _rooted(data, root: str):
    """``data`` with the runs' folder written ROOT (token counts are keyed by the mix file read)."""
    return json.loads(json.dumps(data).replace(root, "ROOT"))


def _numbers(section: dict) -> list:
    """A section's charts without the paths in them (a sample names the file it came from)."""
    out = []
    for c in section["charts"]:
        if c["title"] == "Runs":  # not the times
            out.append(sorted(tuple(r[:5]) for r in c["rows"]))
        elif c["type"] in ("samples", "clusters"):
            out.append((c["title"], len(c.get("docs") or c.get("clusters"))))
        else:
            out.append(json.dumps({k: v for k, v in c.items() if k != "caption"}, sort_keys=True))
    return out


def test_report_reads_every_kind_of_run_from_s3(s3_bucket, tmp_path):
    tokenizer = train_tokenizer(tmp_path / "tokenizer.json", [d["text"] for d in make_docs(200, words=50)])
    local, remote = tmp_path / "runs", f"s3://{s3_bucket}/runs"
    for root, index in ((str(local), local / "index"), (remote, tmp_path / "s3-runs" / "index")):
        build_chain(root, tokenizer, str(index))
        write_train_run(f"{root}/train/tiny", steps=8, checkpoints=(4, 8))
    assert storage.exists(f"{remote}/tokens/train/part-00000.csv.gz")
    assert storage.exists(f"{remote}/near/_clusters.jsonl.gz") or storage.glob(f"{remote}/**/_clusters.jsonl.gz")
    ours = report(local, tmp_path / "local")
    # An index is local wherever its documents are (it is memory-mapped): given beside the S3 runs.
    theirs = report(remote, tmp_path / "s3", runs=[remote, str(tmp_path / "s3-runs" / "index")])
    assert _rooted(theirs["counts"], remote) == _rooted(ours["counts"], str(local))
    assert theirs["counts"]["tokens"] and theirs["counts"]["rules"] and theirs["counts"]["scores"]
    local_sections, s3_sections = _sections(tmp_path / "local", str(local)), _sections(tmp_path / "s3", remote)
    for name, section in local_sections.items():
        assert _numbers(s3_sections[name]) == _numbers(section), name
    runs = {r["stage"]: r["status"] for r in json.loads((tmp_path / "s3" / "report_data" / "runs.json").read_bytes())}
    assert runs == {"tag": "complete", "dedup": "complete", "mix": "complete", "tokenize": "complete", "index": "complete"}
    assert any(c["title"] == "Training loss" for c in s3_sections["train"]["charts"])
    # The command line too, into a destination on S3.
    proc = run_cli(
        "report",
        "--runs",
        remote,
        str(tmp_path / "s3-runs" / "index"),
        "--destination",
        f"s3://{s3_bucket}/report",
        "--processes",
        "2",
        "--no-progress",
    )
    assert proc.returncode == 0, proc.stderr
    assert storage.stat(f"s3://{s3_bucket}/report/report.html").size > 0
