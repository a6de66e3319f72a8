"""Executors and the run around them: no item lost, workers die with the run, stopped runs count everything."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from dolma_pipe.config import load_config
from dolma_pipe.documents import write_documents
from dolma_pipe.executors import LocalExecutor, _Queue, _top_up
from dolma_pipe.manifest import read_manifest
from dolma_pipe.runner import RunFailed, run_stage
from dolma_pipe.stages.convert import ConvertConfig, ConvertStage
from tests.support.cli import run_cli
from tests.support.documents import make_docs


def test_an_item_whose_submission_fails_is_not_lost():
    queue = _Queue([1, 2, 3, 4])
    pending: dict = {}

    def submit(item):
        if item == 3:
            raise RuntimeError("pool broke")
        return f"handle-{item}"

    with pytest.raises(RuntimeError):
        _top_up(pending, queue, 10, submit)
    assert sorted(pending.values()) == [1, 2]
    assert queue.drain() == [3, 4]


def _square(x: int) -> int:
    time.sleep(0.05)
    return x * x


def test_stop_drains_tasks_in_flight_and_submits_no_more():
    ex = LocalExecutor(2)
    seen = []
    for item, result, exc in ex.run(_square, list(range(20)), stop=lambda: len(seen) >= 1):
        assert exc is None and result == item * item
        seen.append(item)
    # Up to 2 x workers were in flight when stop() turned true; all of them came back, no more started.
    assert 1 < len(seen) <= 4 and len(set(seen)) == len(seen)


class _DyingStage(ConvertStage):
    name = "dying"

    def process(self, task, quarantine):
        if task.rel.startswith("part-0002"):
            os.kill(os.getpid(), signal.SIGKILL)
        return super().process(task, quarantine)


def test_every_input_is_in_the_manifest_after_a_worker_dies(make_corpus, tmp_path):
    root = make_corpus(files=8, docs=5)
    cfg = load_config(
        ConvertConfig, None, {"documents": [f"{root}/documents/*"], "destination": str(tmp_path / "o"), "processes": 2, "progress": False}
    )
    with pytest.raises(RunFailed):
        run_stage(_DyingStage(cfg))
    phase = read_manifest(str(tmp_path / "o")).phases[0]
    accounted = set(phase.tasks) | set(phase.failures) | set(phase.not_run)
    assert accounted == {f"part-{i:04d}.jsonl.gz" for i in range(8)}
    assert phase.failures


def test_max_errors_summary_counts_every_file_written(tmp_path):
    d = tmp_path / "in" / "documents"
    d.mkdir(parents=True)
    for i in range(8):
        (d / f"f{i}.jsonl").write_bytes(b"{bad\n" * (i + 1) + b'{"id": "1", "text": "x"}\n')
    out = tmp_path / "out"
    cfg = load_config(
        ConvertConfig, None, {"documents": [f"{d}/*"], "destination": str(out), "processes": 2, "max_errors": 2, "progress": False}
    )
    with pytest.raises(RunFailed, match="exceed --max-errors 2"):
        run_stage(ConvertStage(cfg))
    manifest = read_manifest(str(out))
    written = sum(len(p.read_bytes().splitlines()) for p in (out / "_errors").glob("*.jsonl"))
    markers = sum(orjson.loads(p.read_bytes())["errors"].get("malformed_json", 0) for p in (out / "_done").glob("*.done"))
    assert manifest.status == "failed"
    assert manifest.errors["malformed_json"] == written == markers
    phase = manifest.phases[0]
    assert len(phase.tasks) + len(phase.not_run) == 8 and phase.not_run


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(entry))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def slow_corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("slow")
    for f in range(12):
        write_documents(str(root / "documents" / f"part-{f:04d}.jsonl.gz"), make_docs(12000, seed=f, words=80))
    return root


def _start_run(corpus: Path, out: Path) -> tuple[subprocess.Popen, list[int]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dolma_pipe",
            "convert",
            "--documents",
            f"{corpus}/documents/*",
            "--destination",
            str(out),
            "--processes",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        # A shell's background job (`make test &`, CI launchers) inherits SIGINT ignored, and Python
        # then installs no Ctrl-C handler: give the run the disposition a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 60
    kids: list[int] = []
    while time.time() < deadline and len(kids) < 2:
        kids = [k for k in _children(proc.pid) if _alive(k)]
        time.sleep(0.05)
    assert len(kids) >= 2, "the pool's workers never started"
    return proc, kids


def _wait_gone(pids: list[int], seconds: float = 10.0) -> list[int]:
    deadline = time.time() + seconds
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


@pytest.mark.slow
def test_workers_die_when_only_the_main_process_is_killed(slow_corpus, tmp_path):
    proc, workers = _start_run(slow_corpus, tmp_path / "o")
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _wait_gone(workers) == []
    finally:
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_end_the_run_cleanly(slow_corpus, tmp_path, sig, code):
    out = tmp_path / "o"
    proc, workers = _start_run(slow_corpus, out)
    os.kill(proc.pid, sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr.decode()[-2000:]
    assert "Traceback" not in stderr.decode() and "a rerun resumes" in stderr.decode()
    assert _wait_gone(workers) == []
    manifest = read_manifest(str(out))
    assert manifest.status == "failed" and manifest.stopped


def test_an_unreachable_ray_address_is_one_line_and_a_failed_manifest(make_corpus, tmp_path):
    from tests.support.processes import free_port

    root = make_corpus(files=1, docs=2)
    out = tmp_path / "o"
    proc = run_cli("convert", "--documents", f"{root}/documents/*", "--destination", str(out), "--ray-address", f"127.0.0.1:{free_port()}")
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.startswith("dolma-pipe")]
    assert len(lines) == 1 and "cannot connect to the Ray cluster at 127.0.0.1:" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert read_manifest(str(out)).status == "failed"


def test_a_run_whose_every_input_is_unreadable_fails(tmp_path):
    d = tmp_path / "in" / "documents"
    d.mkdir(parents=True)
    for name in ("a.jsonl.gz", "b.jsonl.zst"):
        (d / name).write_bytes(b"this is not compressed data at all")
    proc = run_cli("convert", "--documents", f"{d}/*", "--destination", str(tmp_path / "o"), "--processes", "1")
    assert proc.returncode == 1 and "none of the 2 input file(s) could be read" in proc.stderr, proc.stderr
    assert read_manifest(str(tmp_path / "o")).status == "failed"


def test_a_worker_that_cannot_see_the_drivers_paths_says_so(make_corpus, tmp_path):
    """What a worker on a node without the driver's filesystem meets: the message names the cause."""
    from dolma_pipe.runner import execute_task
    from dolma_pipe.stage import RunContext, file_task

    root = make_corpus(files=1, docs=2)
    cfg = load_config(ConvertConfig, None, {"documents": [f"{root}/documents/*"], "destination": str(tmp_path / "o")})
    stage = ConvertStage(cfg)
    inputs = stage.plan_inputs()
    from dolma_pipe.paths import PathError

    with pytest.raises(PathError, match="cannot see the output directory .* needs remote paths"):
        execute_task(stage, 0, RunContext(inputs), "fp", file_task(inputs[0]))


class _Unreachable(ConvertStage):
    """Convert, with every task failing as a worker that cannot see the destination does."""

    def process(self, task, quarantine):  # type: ignore[no-untyped-def]
        from dolma_pipe.paths import PathError

        raise PathError(f"worker cannot see the output directory {self.output_root} that the driver created")


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    def test_a_task_error_on_ray_is_its_one_line_and_the_traceback_goes_to_the_failures_log(self, make_corpus, tmp_path, ray_address):
        """Ray wraps a task's exception in its own, whose message is the worker's whole traceback: the
        summary and the error show the task's message alone, the failures log the traceback."""
        import io

        from dolma_pipe.executors import RayExecutor

        root = make_corpus(files=2, docs=3)
        out = tmp_path / "o"
        stage = _Unreachable(
            load_config(ConvertConfig, None, {"documents": [f"{root}/documents/*"], "destination": str(out), "progress": False})
        )
        said = io.StringIO()
        with pytest.raises(RunFailed) as e:
            run_stage(stage, executor=RayExecutor(2, ray_address), stream=said)
        assert "\n" not in str(e.value) and "PathError: worker cannot see the output directory" in str(e.value)
        failed = [line for line in said.getvalue().splitlines() if "FAILED" in line]
        assert len(failed) == 2 and all(line.endswith("that the driver created") for line in failed), said.getvalue()
        assert len(said.getvalue().splitlines()) < 15, said.getvalue()
        log = (out / "_failures.log").read_text()
        assert log.count("in the worker:") == 2 and log.count('raise PathError(f"worker cannot see') == 2 and "\x1b[" not in log
