"""The command line: every stage listed, unbuilt stages say so, stats reports a corpus."""

from __future__ import annotations

import orjson

from tests.support.cli import run_cli

STAGES = ["convert", "stats", "tag", "dedup", "mix", "tokenize", "train-classifier", "list"]


def test_help_lists_every_stage():
    proc = run_cli("--help")
    assert proc.returncode == 0
    for stage in STAGES:
        assert stage in proc.stdout


def test_list_and_unbuilt_stages(monkeypatch, capsys):
    proc = run_cli("list")
    assert proc.returncode == 0 and "convert" in proc.stdout and "report" in proc.stdout and "not built yet" not in proc.stdout
    # A command planned but not built says so and exits 2 (none is, today).
    from dolma_pipe import cli

    monkeypatch.setattr(cli, "COMMANDS", [*cli.COMMANDS, cli.Command("future", None, "a planned stage", issue="issue 99")])
    assert cli.main(["future", "--whatever"]) == 2
    err = capsys.readouterr().err
    assert "not built yet (planned in issue 99)" in err and "Traceback" not in err
    proc = run_cli("mix", "--whatever")
    assert proc.returncode == 2 and "unknown option or config key '--whatever'" in proc.stderr and "Traceback" not in proc.stderr


def test_stats_totals(tmp_path, make_corpus):
    root = make_corpus(files=3, docs=40, words=10)
    out = tmp_path / "stats"
    proc = run_cli("stats", "--documents", f"{root}/documents/*.jsonl.gz", "--destination", str(out), "--processes", "2")
    assert proc.returncode == 0, proc.stderr
    report = orjson.loads((out / "stats.json").read_bytes())
    assert report["totals"]["docs"] == 120
    assert report["totals"]["words"] == 120 * (10 + 2)
    assert sum(report["length_hist"].values()) == 120
    assert "TOTAL" in proc.stdout


def test_progress_in_logs_is_periodic_lines():
    import io

    from dolma_pipe.progress import LogProgress

    buf = io.StringIO()
    bar = LogProgress("convert", 3, buf, interval=0.0)
    bar.set_postfix(docs="1,000", docs_s="500")
    bar.update(1)
    bar.update(2)
    assert buf.getvalue().splitlines() == [
        "dolma-pipe convert: 1/3 files, docs 1,000, docs/s 500",
        "dolma-pipe convert: 3/3 files, docs 1,000, docs/s 500",
    ]


def test_openblas_threads_default_to_one_and_a_users_value_stays():
    # numpy's OpenBLAS would start a busy-waiting thread per core in every worker process.
    import os
    import subprocess
    import sys

    code = "import dolma_pipe, numpy, os; print(os.environ['OPENBLAS_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
    out = subprocess.run([sys.executable, "-c", code], env=dict(env, OPENBLAS_NUM_THREADS="3"), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "3"


def test_list_items_are_overridden_from_the_command_line(tmp_path, make_corpus):
    root = make_corpus(files=2, docs=5)
    spec = tmp_path / "mix.json"
    stream = {"name": "s", "documents": [f"{root}/documents/*"], "output": {"path": str(tmp_path / "a")}}
    spec.write_bytes(orjson.dumps({"streams": [stream]}))
    proc = run_cli("mix", "-c", str(spec), "--streams.0.output.path", str(tmp_path / "b"), "--streams.0.output.max_size_in_bytes", "1000")
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "a").exists() and len(list((tmp_path / "b").glob("s-*.jsonl.gz"))) > 1
    proc = run_cli("mix", "-c", str(spec), "--streams.1.output.path", "x")
    assert proc.returncode == 1 and "config key 'streams.1': 'streams' has 1 item(s), numbered from 0" in proc.stderr
    proc = run_cli("mix", "-c", str(spec), "--streams.0.outptu.path", "x")
    assert proc.returncode == 1 and "unknown config key 'streams.0.outptu' (did you mean 'streams.0.output'?)" in proc.stderr


def test_a_stage_with_its_own_table_prints_one_summary_of_each_thing(tmp_path, make_corpus):
    """The run's summary (tasks, bad records, time) and the stage's table (what it found) do not
    repeat each other; a stage without a table shows its counts."""
    root = make_corpus(files=2, docs=20)
    proc = run_cli("dedup", "--documents", f"{root}/documents/*", "--dedupe.name", "d", "--dedupe.paragraphs.attribute_name", "p")
    assert proc.returncode == 0, proc.stderr
    assert "duplicate paragraphs (p)" in proc.stdout and "paragraph keys" not in proc.stderr and "python lines" not in proc.stderr
    assert "scan tasks" in proc.stderr and "bad records" in proc.stderr
    proc = run_cli("tag", "--documents", f"{root}/documents/*", "--experiment", "t", "--taggers", "lengths_v1")
    assert proc.returncode == 0 and "docs out" in proc.stderr, proc.stderr


def test_output_into_a_closed_pipe_is_no_traceback(tmp_path):
    """`dolma-pipe query ... | head`: the reader leaves early, and no BrokenPipeError is printed
    (issue 27, finding 10)."""
    import subprocess
    import sys

    from tests.support.repo import REPO_ROOT

    docs = str(REPO_ROOT / "examples" / "sample" / "documents" / "python-doc" / "*")
    run_cli("index", "--documents", docs, "--destination", str(tmp_path / "index"), "--no-progress", check=True)
    query = f"{sys.executable} -m dolma_pipe query --index {tmp_path / 'index'} --find 'the' --limit 2000"
    proc = subprocess.run(["bash", "-c", f"set -o pipefail; {query} | head -1"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
