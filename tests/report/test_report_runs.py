"""Which runs the report reads and how it tells about the others: a killed run is shown killed
(with no finish time), a running one running; the command's summary names every run it left out
and every manifest it could not read; a folder that does not exist, or that holds no run, is an
error naming it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import orjson

from dolma_pipe.documents import write_documents
from dolma_pipe.lock import RunLock
from dolma_pipe.manifest import read_manifest
from tests.support.cli import run_cli
from tests.support.documents import make_docs
from tests.support.processes import kill_when
from tests.support.report_pipeline import report, run, write_train_run


def _corpus(root: Path, files: int = 2, docs: int = 30) -> str:
    for f in range(files):
        write_documents(str(root / "corpus" / "documents" / f"p{f}.jsonl.gz"), make_docs(docs, seed=f, words=40))
    return str(root / "corpus" / "documents" / "*.jsonl.gz")


def _tag(pattern: str, experiment: str, **extra) -> None:
    from taggers.stage import TagConfig, TagStage

    run(TagStage, TagConfig, {"documents": [pattern], "experiment": experiment, "taggers": ["lengths_v1"], **extra})


def _overview_rows(dest: Path) -> dict[str, dict]:
    overview = json.loads((dest / "report_data" / "sections" / "overview.json").read_bytes())
    runs = next(c for c in overview["charts"] if c["title"] == "Runs")
    return {r[0]: dict(zip(runs["columns"], r)) for r in runs["rows"]}


def test_a_killed_run_is_killed_and_a_running_one_running(tmp_path):
    root = tmp_path / "runs"
    pattern = _corpus(root, files=6, docs=400)
    _tag(pattern, "done")
    killed = root / "corpus" / "attributes" / "killed"
    args = ["tag", "--documents", pattern, "--experiment", "killed", "--taggers", "gopher", "--processes", "1", "--no-progress"]
    kill_when("dolma_pipe", args, lambda: (killed / "_manifest.json").exists())
    assert read_manifest(str(killed)).status == "running" and (killed / "_lock.json").exists()
    # A run that is running: its manifest says so and its lock's holder (this process) is alive.
    live = root / "corpus" / "attributes" / "live"
    manifest = orjson.loads((root / "corpus" / "attributes" / "done" / "_manifest.json").read_bytes())
    live.mkdir()
    (live / "_manifest.json").write_bytes(orjson.dumps({**manifest, "status": "running", "finished": None}))
    with RunLock([str(live)], "tag", io.StringIO()):
        report(root, tmp_path / "report")
    rows = _overview_rows(tmp_path / "report")
    assert rows["corpus/attributes/killed"]["status"] == "killed" and rows["corpus/attributes/killed"]["finished"] == ""
    assert rows["corpus/attributes/live"]["status"] == "running" and rows["corpus/attributes/live"]["finished"] == ""
    assert rows["corpus/attributes/done"]["status"] == "complete" and rows["corpus/attributes/done"]["finished"]
    runs = {Path(r["root"]).name: r for r in json.loads((tmp_path / "report" / "report_data" / "runs.json").read_bytes())}
    assert runs["killed"]["status"] == "killed" and runs["killed"]["finished"] is None
    # Without its lock (a run of the same kind killed before it took one, or its lock removed by hand).
    (killed / "_lock.json").unlink()
    report(root, tmp_path / "report2")
    assert _overview_rows(tmp_path / "report2")["corpus/attributes/killed"]["status"] == "killed"


def test_the_summary_names_the_runs_left_out_and_the_manifests_not_read(tmp_path):
    root = tmp_path / "runs"
    pattern = _corpus(root)
    _tag(pattern, "done")
    # A failed run: a bad line over --max-errors 0.
    (root / "corpus" / "documents" / "p9.jsonl").write_text('{"id": "x", "text": "one"}\n{not json\n')
    try:
        _tag(str(root / "corpus" / "documents" / "p9.jsonl"), "failed", max_errors=0)
    except Exception:
        pass
    assert read_manifest(str(root / "corpus" / "attributes" / "failed")).status == "failed"
    (root / "broken").mkdir()
    (root / "broken" / "_manifest.json").write_text("{not json")
    proc = run_cli("report", "--runs", str(root), "--destination", str(tmp_path / "report"), "--processes", "1", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "left out: 1 failed run, 1 unreadable manifest" in proc.stdout
    assert f"{root / 'corpus' / 'attributes' / 'failed'}: tag run is failed" in proc.stdout
    assert f"{root / 'broken' / '_manifest.json'}: not JSON" in proc.stdout


def test_a_runs_folder_that_does_not_exist_or_holds_no_run_is_an_error(tmp_path):
    missing = tmp_path / "no" / "such" / "dir"
    proc = run_cli("report", "--runs", str(missing), "--destination", str(tmp_path / "r1"), "--no-progress")
    assert proc.returncode == 1 and f"{missing} does not exist" in proc.stderr and "Traceback" not in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli("report", "--runs", str(empty), "--destination", str(tmp_path / "r2"), "--no-progress")
    assert proc.returncode == 1 and f"{empty} holds no files" in proc.stderr
    (empty / "notes.txt").write_text("not a run")
    proc = run_cli("report", "--runs", str(empty), "--destination", str(tmp_path / "r3"), "--no-progress")
    assert proc.returncode == 1 and f"no runs below {empty}" in proc.stderr
    assert not (tmp_path / "r3" / "report.html").exists()


def test_training_runs_are_listed_with_their_state(tmp_path):
    root = tmp_path / "runs"
    write_train_run(str(root / "done"), steps=8, checkpoints=(4, 8))
    write_train_run(str(root / "cut"), steps=7, checkpoints=(4,), max_steps=12)
    write_train_run(str(root / "early"), steps=3, checkpoints=())
    report(root, tmp_path / "report")
    overview = json.loads((tmp_path / "report" / "report_data" / "sections" / "overview.json").read_bytes())
    assert all(r[1] != "train" for r in next(c for c in overview["charts"] if c["title"] == "Runs")["rows"])
    table = next(c for c in overview["charts"] if c["title"] == "Training runs")
    rows = {r[0]: dict(zip(table["columns"], r)) for r in table["rows"]}
    assert rows["done"] == {
        "run": "done", "status": "complete", "steps": "8 of 8", "tokens": 8 * 8 * 64, "loss": 6.0, "validation loss": 6.5,
        "checkpoints": "2 (newest: step 8)", "finished": "2026-09-21T14:13:28",
    }  # fmt: skip
    assert (
        rows["cut"]["status"] == "unfinished" and rows["cut"]["steps"] == "7 of 12" and rows["cut"]["checkpoints"] == "1 (newest: step 4)"
    )
    assert rows["cut"]["finished"] == "" and rows["cut"]["validation loss"] == 7.5
    assert rows["early"]["status"] == "no checkpoint" and rows["early"]["validation loss"] == ""
    assert all(v != "" for k, v in rows["done"].items())


def test_training_runs_show_their_goodput(tmp_path):
    """A run killed once (step 6, its last checkpoint at 4) and resumed to the end: the Train
    section's Goodput table has the figures ``python -m train.goodput`` computes from its ledger;
    a run without a ledger has no row, and a report with no ledger at all no table."""
    root = tmp_path / "runs"
    write_train_run(str(root / "done"), steps=8, checkpoints=(4, 8))
    write_train_run(str(root / "plain"), steps=8, checkpoints=(4, 8))

    def rec(event, time, attempt, **fields):
        return {"event": event, "time": float(time), "host": "h0", "attempt": attempt, **fields}

    ledger = [
        rec("start", 1, "A", process_start=0.0, world_size=2, nodes=1, restart=0, job=None, launch_attempt=None),
        rec("restored", 2, "A", step=0, source="fresh"),
        rec("first_step", 3, "A", step=1),
        rec("checkpoint", 6, "A", step=4, train_s=4.0, blocked_s=0.5, **{"async": True}),
        rec("checkpoint_done", 7, "A", step=4, seconds=1.0),
        rec("heartbeat", 8, "A", step=6, train_s=6.0),  # then SIGKILL
        rec("start", 12, "B", process_start=10.0, world_size=2, nodes=1, restart=1, job=None, launch_attempt=None),
        rec("restored", 13, "B", step=4, source="resume"),
        rec("first_step", 14, "B", step=5),
        rec("checkpoint", 18, "B", step=8, train_s=4.0, blocked_s=0.5, **{"async": True}),
        rec("heartbeat", 18, "B", step=8, train_s=4.0),
        rec("checkpoint_done", 19, "B", step=8, seconds=1.0),
        rec("exit", 20, "B", step=8, reason="finished", status=0),
    ]
    (root / "done" / "goodput.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ledger) + '{"event": "exit", "ti')
    report(root, tmp_path / "report")
    train = json.loads((tmp_path / "report" / "report_data" / "sections" / "train.json").read_bytes())
    table = train["charts"][0]
    assert table["title"] == "Goodput" and len(table["rows"]) == 1
    assert dict(zip(table["columns"], table["rows"][0])) == {
        "run": "done", "wall s": 20.0, "attempts": 2, "failures": 1, "preemptions": 0,
        "active fraction": 0.5,  # (6 + 4) s of step loop over 20 s
        "ETTR": 0.4,  # steps (0, 4] of A and (4, 8] of B: 8 s
        "steps lost": 2, "recovery median s": 6.0, "recovery p90 s": 6.0,  # A's last record at 8, B's first step at 14
        "checkpoint stall": "10.00%", "checkpoint interval": "4 steps",
        "recommended interval": "4 steps, 4.5 s",  # sqrt(2 * 0.5 s * 20 s) at 1 s a step
    }  # fmt: skip
    (root / "done" / "goodput.jsonl").unlink()
    report(root, tmp_path / "report2")
    train = json.loads((tmp_path / "report2" / "report_data" / "sections" / "train.json").read_bytes())
    assert all(c["title"] != "Goodput" for c in train["charts"]) and train["charts"][0]["title"] == "Training loss"
