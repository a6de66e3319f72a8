"""Recovery without a human: ``python -m train.launch`` on 2 gloo ranks with real faults injected
from outside (``train.faults``: SIGKILL, SIGSTOP), against the same run uninterrupted.

A killed rank (at a random step, or while an asynchronous save is in flight) restarts the job
from the newest complete checkpoint (torchrun ``--max-restarts``); the run ends with model and
optimizer state ``torch.equal`` to the uninterrupted run's and every step's loss identical, and the
goodput ledger counts exactly the injected failures and the steps they cost. A SIGSTOPped rank
is caught by the other rank's step watchdog (stacks dumped, exit status 77), the stopped rank is
killed by torchrun, nothing is left running, and the run recovers the same way. A rank whose
blocks run 2x slower is named, with its host.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.train, pytest.mark.slow]

from train.faults import Job  # noqa: E402
from train.goodput import summarize  # noqa: E402
from train.ledger import read_ledger  # noqa: E402
from train.testing import make_shards, tiny_config, train_losses, write_config  # noqa: E402

STEPS, INTERVAL = 12, 2
# the launcher's torchrun checks its ranks often and waits little for a stopped one to go
LAUNCH = ["--backoff", "0", "--monitor-interval", "0.1", "--shutdown-timeout", "3"]


def _raw(save_dir: Path, data: dict, **resilience) -> dict:
    return tiny_config(
        save_dir,
        data,
        train={"max_steps": STEPS},
        checkpoint={"interval": INTERVAL, "keep_last": 2},
        resilience={"heartbeat_interval": 0, **resilience},
        eval={"at_end": False},
    )


def _final_state(save_dir: Path, scratch: Path) -> dict:
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    out = scratch / f"{save_dir.name}-final.pt"
    dcp_to_torch_save(save_dir / f"step{STEPS}", out)
    return torch.load(out, weights_only=False)


def _assert_equal_states(a, b, where: str = "") -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_equal_states(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    else:
        assert a == b, where


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run, through the same launcher."""
    root = tmp_path_factory.mktemp("recovery")
    data = make_shards(root / "data")
    cfg = write_config(root / "ref.yaml", _raw(root / "ref", data))
    job = Job(cfg, root / "ref", launch_args=LAUNCH, log=root / "ref.log").start()
    assert job.wait(240) == 0, (root / "ref.log").read_text()[-3000:]
    state = _final_state(root / "ref", root)
    yield {"root": root, "data": data, "losses": train_losses(root / "ref"), "state": state}
    shutil.rmtree(root, ignore_errors=True)


def test_kills_at_random_steps_and_during_an_async_save_end_bit_identical(reference, tmp_path):
    rng = random.Random(29)
    save_dir = tmp_path / "run"
    cfg = write_config(tmp_path / "run.yaml", _raw(save_dir, reference["data"]))
    job = Job(cfg, save_dir, launch_args=LAUNCH, log=tmp_path / "run.log").start()
    try:
        job.wait_step(rng.randint(2, 4))
        job.kill(1)
        saving = job.wait_async_save()
        job.kill(0)  # while the save of step `saving` is being written
        job.wait_step(rng.randint(saving + 2, saving + 4))
        job.kill(rng.randint(0, 1))
        status = job.wait(300)
        assert status == 0, (tmp_path / "run.log").read_text()[-4000:]
        assert job.leftovers() == []
    finally:
        job.close()
    # every step's loss and the final model and optimizer state are the uninterrupted run's
    assert train_losses(save_dir) == reference["losses"]
    _assert_equal_states(_final_state(save_dir, tmp_path), reference["state"])
    # no checkpoint that was cut off looks complete: the one being saved at the kill was redone
    records = read_ledger(save_dir / "goodput.jsonl")
    restored = [r["step"] for r in records if r["event"] == "restored"]
    assert len(restored) == 4 and restored[0] == 0
    assert restored[2] < saving  # the kill during the save of `saving` left it incomplete
    # the ledger counts exactly the injected failures and the steps each one cost
    summary = summarize(records)
    assert summary["failures"] == 3
    reached = [max(r["step"] for r in records if r.get("attempt") == a and "step" in r) for a in _attempts(records)[:-1]]
    per_failure = [f["steps_lost"] for f in summary["failure_list"]]
    assert per_failure == [s - r for s, r in zip(reached, restored[1:], strict=True)]
    assert summary["steps_lost"] == sum(per_failure)
    assert all(lost <= INTERVAL + 1 for lost in per_failure)  # at most one interval (+ the step in flight)


def _attempts(records: list[dict]) -> list[str]:
    out: list[str] = []
    for r in records:
        if r["event"] == "start" and r["attempt"] not in out:
            out.append(r["attempt"])
    return out


def test_a_stopped_rank_is_caught_by_the_watchdog_and_the_run_recovers(reference, tmp_path):
    save_dir = tmp_path / "run"
    timeout = 4.0
    cfg = write_config(tmp_path / "run.yaml", _raw(save_dir, reference["data"], step_timeout=timeout))
    job = Job(cfg, save_dir, launch_args=LAUNCH, log=tmp_path / "run.log").start()
    try:
        job.wait_step(5)
        stop = job.stop(1)
        status = job.wait(300)
        log = (tmp_path / "run.log").read_text()
        assert status == 0, log[-4000:]
        assert job.leftovers() == []  # the stopped rank was killed, nothing else left behind
    finally:
        job.close()
    records = read_ledger(save_dir / "goodput.jsonl")
    (hang,) = [r for r in records if r["event"] == "exit" and r["reason"] == "hang"]
    assert hang["status"] == 77 and f"watchdog: rank 0 on {hang['host']}: no step finished in" in hang["message"]
    assert hang["time"] - stop.time <= timeout + 5  # detected within its timeout + 5 s
    (dump,) = (save_dir / "hangs").glob("hang-rank0-*.txt")
    assert "fit" in dump.read_text()  # the main thread's stack: blocked in the step loop
    assert "watchdog: rank 0" in log
    assert train_losses(save_dir) == reference["losses"]
    _assert_equal_states(_final_state(save_dir, tmp_path), reference["state"])
    assert summarize(records)["failures"] == 1


def test_a_slow_rank_is_named_with_its_host(reference, tmp_path):
    """Rank 1's blocks 2x slower (a sleep in their forwards, patched in from outside): named by
    the first straggler window, in the log and in the ledger; rank 0 never."""
    save_dir = tmp_path / "run"
    cfg = write_config(tmp_path / "run.yaml", _raw(save_dir, reference["data"], straggler_window=5))
    slow = ["--module", "tests.support.slow_rank --rank 1 --factor 2"]
    job = Job(cfg, save_dir, launch_args=[*LAUNCH, *slow], log=tmp_path / "run.log").start()
    try:
        assert job.wait(300) == 0, (tmp_path / "run.log").read_text()[-4000:]
    finally:
        job.close()
    log = (tmp_path / "run.log").read_text()
    records = read_ledger(save_dir / "goodput.jsonl")
    named = [r for r in records if r["event"] == "straggler"]
    assert named and {r["rank"] for r in named} == {1}, log[-3000:]
    assert named[0]["step"] <= 20 and named[0]["score"] >= 1.5
    assert f"straggler: rank 1 on {named[0]['host']}: " in log
    assert train_losses(save_dir) == reference["losses"]  # slow, not wrong
