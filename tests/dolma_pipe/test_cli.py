"""The command line: every stage listed, unbuilt stages say so, stats reports a corpus."""

from __future__ import annotations

import orjson

from tests.helpers import run_cli

STAGES = ["convert", "stats", "tag", "dedup", "mix", "tokenize", "train-classifier", "list"]


def test_help_lists_every_stage():
    proc = run_cli("--help")
    assert proc.returncode == 0
    for stage in STAGES:
        assert stage in proc.stdout


def test_list_and_unbuilt_stages():
    proc = run_cli("list")
    assert proc.returncode == 0 and "convert" in proc.stdout and "not built yet" in proc.stdout
    proc = run_cli("report", "--whatever")
    assert proc.returncode == 2 and "not built yet" in proc.stderr and "Traceback" not in proc.stderr
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
