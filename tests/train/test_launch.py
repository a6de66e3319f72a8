"""``python -m train.launch``'s decisions without processes: the commands it runs, what it
cordons, when it stops, and the trainer's refusal of torchrun restarts over a shared store."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repo import REPO_ROOT
from train.errors import EXIT_CORDON, EXIT_FATAL, EXIT_HANG, ConfigError
from train.launch.launcher import Launch, Launcher, _preflight_cordons, cordoned_hosts, torchrun_command
from train.ledger import Ledger, read_ledger
from train.testing import tiny_config, write_config


def _launch(tmp_path: Path, **kw) -> Launch:
    cfg = write_config(tmp_path / "c.yaml", tiny_config(tmp_path / "run", {"train": "x", "val": "y"}))
    return Launch(str(cfg), ["train.max_steps=3"], **kw)


def test_the_commands_of_an_attempt(tmp_path):
    local = torchrun_command(_launch(tmp_path, nproc_per_node=2, max_restarts=4), ["host"], 1)
    assert local[1:6] == ["-m", "train.launch.torchrun", "--restart-grace=5", "--standalone", "--nproc-per-node=2"]
    assert "--max-restarts=4" in local and local[-6:] == ["-m", "train", "--config", local[-3], "--set", "train.max_steps=3"]
    slurm = torchrun_command(_launch(tmp_path, slurm=True, rdzv_port=1234, module="tests.support.slow_rank --rank 1"), ["n2", "n3"], 7)
    assert slurm[:6] == ["srun", "--kill-on-bad-exit=1", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=n2,n3"]
    assert "--nnodes=2" in slurm and "--rdzv-endpoint=n2:1234" in slurm and any(a.endswith("-7") for a in slurm)
    assert slurm[slurm.index("-m", 8) + 1 : slurm.index("--config")] == ["tests.support.slow_rank", "--rank", "1"]


def _record(event: str, t: float, **fields) -> dict:
    return {"event": event, "time": t, "host": "h", **fields}


STUCK_RANK = """
import os, signal, sys, time
if os.environ["RANK"] == "0":
    time.sleep(0.5)
    sys.exit(3)
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a hung rank: SIGTERM does not end it
time.sleep(300)
"""


@pytest.mark.slow
def test_torchrun_stops_a_stuck_rank_after_the_restart_grace(tmp_path):
    """torch's agent stops the other ranks after a failure with a fixed 30 s grace (pytorch#192815):
    a hung rank, which never exits on SIGTERM, held every recovery for 30 s. Through our torchrun
    the rank that ignores SIGTERM is SIGKILLed after --restart-grace, at the failure and at the
    one restart's failure alike (the job then fails, out of restarts)."""
    pytest.importorskip("torch")
    script = tmp_path / "stuck.py"
    script.write_text(STUCK_RANK)
    cmd = [sys.executable, "-m", "train.launch.torchrun", "--restart-grace=1", "--standalone", "--nproc-per-node=2"]
    cmd += ["--max-restarts=1", "--monitor-interval=0.1", str(script)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=REPO_ROOT)
    assert out.returncode != 0
    stamp = r"^[WE]\d{4} (\d\d):(\d\d):(\d\d\.\d+) .*"
    sent = [m.groups() for m in re.finditer(stamp + r"closing signal SIGTERM", out.stderr, re.M)]
    killed = [m.groups() for m in re.finditer(stamp + r"Unable to shutdown process \d+ via 15", out.stderr, re.M)]
    assert len(sent) == len(killed) == 2, out.stderr[-3000:]

    def seconds(hms: tuple[str, ...]) -> float:
        return int(hms[0]) * 3600 + int(hms[1]) * 60 + float(hms[2])

    waits = [(seconds(k) - seconds(s)) % 86400 for s, k in zip(sent, killed, strict=True)]
    assert all(1 <= w < 10 for w in waits), waits  # torch's own stop waits 30 s


def test_only_a_preflight_that_ended_the_attempt_cordons():
    cordon = {"rank": 2, "host": "node1", "check": "matmul", "verdict": "cordon", "message": "wrong"}
    failed = [_record("preflight", 10, failures=[cordon]), _record("exit", 11, reason="preflight", status=EXIT_CORDON)]
    assert _preflight_cordons(failed, since=5) == [cordon]
    assert _preflight_cordons(failed, since=12) == []  # an older attempt's
    # a torchrun restart whose pre-flight passed: the attempt did not end on the cordon
    passed = [*failed, _record("preflight", 12, failures=[]), _record("exit", 20, reason="finished", status=0)]
    assert _preflight_cordons(passed, since=5) == []
    fatal = [_record("preflight", 10, failures=[cordon]), _record("exit", 11, reason="preflight", status=EXIT_FATAL)]
    assert _preflight_cordons(fatal, since=5) == []


def test_cordoned_hosts_come_from_the_ledger(tmp_path):
    ledger = Ledger(tmp_path)
    ledger.write("cordon", host="node1", check="matmul", message="wrong")
    ledger.write("cordon", host="node4", check="gpu_ecc", message="3 errors")
    assert cordoned_hosts(ledger.path) == {"node1": "matmul: wrong", "node4": "gpu_ecc: 3 errors"}
    assert cordoned_hosts(tmp_path / "none.jsonl") == {}


def _fake_torchrun(tmp_path: Path, statuses: list[int], exit_records: list[dict | None]) -> Path:
    """A stand-in for ``python -m torch.distributed.run``: each call writes the next exit record
    (as the trainer's rank 0 would) into the ledger and exits with the next status."""
    script = tmp_path / "fake_torchrun.py"
    script.write_text(
        f"""
import json, os, sys, time
from pathlib import Path
calls = Path({str(tmp_path / "calls")!r})
n = len(calls.read_text().splitlines()) if calls.exists() else 0
calls.open("a").write(" ".join(sys.argv) + "\\n")
records = {exit_records!r}
if records[n] is not None:
    rec = dict(records[n], event="exit", time=time.time(), host="h", attempt=str(n))
    with open({str(tmp_path / "run" / "goodput.jsonl")!r}, "a") as f:
        f.write(json.dumps(rec) + "\\n")
sys.exit({statuses!r}[n])
"""
    )
    return script


@pytest.mark.parametrize(
    "statuses, exits, expect_status, expect_calls",
    [
        ([0], [{"reason": "finished", "status": 0, "step": 3}], 0, 1),
        ([1, 1, 0], [{"reason": "error", "status": 75}, None, {"reason": "finished", "status": 0}], 0, 3),  # retried, also after a kill
        ([1], [{"reason": "error", "status": 2, "message": "config error"}], 2, 1),  # a user's mistake: stop
        ([1], [{"reason": "preflight", "status": EXIT_FATAL}], EXIT_FATAL, 1),
        ([1, 1, 1], [{"reason": "hang", "status": EXIT_HANG}] * 3, 1, 3),  # attempts spent
    ],
)
def test_the_attempt_loop(tmp_path, monkeypatch, statuses, exits, expect_status, expect_calls):
    script = _fake_torchrun(tmp_path, statuses, exits)
    monkeypatch.setattr("train.launch.launcher.torchrun_command", lambda launch, nodes, attempt: [sys.executable, str(script)])
    launcher = Launcher(_launch(tmp_path, attempts=3, backoff=0))
    assert launcher.run() == expect_status
    assert len((tmp_path / "calls").read_text().splitlines()) == expect_calls
    records = read_ledger(tmp_path / "run" / "goodput.jsonl")
    assert [r["launch_attempt"] for r in records if r["event"] == "launch"] == list(range(1, expect_calls + 1))
    assert [r["status"] for r in records if r["event"] == "launch_exit"] == statuses[:expect_calls]


def test_a_cordoned_only_host_ends_the_loop(tmp_path, monkeypatch, capsys):
    Ledger(tmp_path / "run").write("cordon", host=socket.gethostname(), check="matmul", message="wrong")
    monkeypatch.setattr("train.launch.launcher.torchrun_command", lambda *a: pytest.fail("no attempt without a node"))
    assert Launcher(_launch(tmp_path)).run() == EXIT_CORDON
    assert "no node left to run on: cordoned" in capsys.readouterr().out


def test_torchrun_restarts_over_its_shared_store_are_refused_in_one_line(tmp_path):
    from train.attempt import check_restartable_launch

    check_restartable_launch({"TORCHELASTIC_MAX_RESTARTS": "3", "TORCHELASTIC_USE_AGENT_STORE": "False"})
    check_restartable_launch({"TORCHELASTIC_MAX_RESTARTS": "0", "TORCHELASTIC_USE_AGENT_STORE": "True"})
    with pytest.raises(ConfigError, match="TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"):
        check_restartable_launch({"TORCHELASTIC_MAX_RESTARTS": "3", "TORCHELASTIC_USE_AGENT_STORE": "True"})


@pytest.mark.train
@pytest.mark.slow
def test_the_trainer_says_so_under_torchrun(tmp_path):
    """The refusal as a user meets it: torchrun --max-restarts without the variable."""
    from train.testing import make_shards

    data = make_shards(tmp_path / "data", n_train_shards=1, docs_per_shard=20)
    cfg = write_config(tmp_path / "c.yaml", tiny_config(tmp_path / "run", data))
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"}
    env.update(OMP_NUM_THREADS="1")
    r = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1", "--max-restarts=1", "-m", "train", "--config", str(cfg)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert r.returncode != 0
    assert "config error: torchrun --max-restarts 1: its restarts reuse a rendezvous store" in r.stderr
    assert not (tmp_path / "run" / "step1").exists()


def _fake_sbatch(tmp_path: Path, monkeypatch) -> Path:
    """``sbatch`` on PATH: records its arguments, answers a job id as ``--parsable`` does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "sbatch-calls"}\necho "4242;cluster"\n')
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "4000")
    monkeypatch.setenv("SLURM_JOB_NAME", "olmo")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    return tmp_path / "sbatch-calls"


@pytest.mark.parametrize(
    "exits, resubmitted",
    [
        ([{"reason": "hang", "status": EXIT_HANG}] * 2, True),  # attempts spent: a new allocation
        ([{"reason": "preempted", "status": 0}], True),  # SLURM's SIGTERM before the time limit
        ([{"reason": "finished", "status": 0}], False),
        ([{"reason": "error", "status": 2}], False),  # a user's mistake: no job can help
    ],
)
def test_an_unfinished_run_is_resubmitted_without_its_cordoned_nodes(tmp_path, monkeypatch, exits, resubmitted):
    calls = _fake_sbatch(tmp_path, monkeypatch)
    statuses = [0 if e["status"] == 0 else 1 for e in exits]
    script = _fake_torchrun(tmp_path, statuses, exits)
    monkeypatch.setattr("train.launch.launcher.torchrun_command", lambda launch, nodes, attempt: [sys.executable, str(script)])
    monkeypatch.setattr("train.launch.launcher._slurm_nodes", lambda: ["node0", "node1"])
    Ledger(tmp_path / "run").write("cordon", host="node1", check="matmul", message="wrong")
    argv = "/spool/job4000/slurm_script 'my config.yaml' --set train.max_steps=9"
    launch = _launch(tmp_path, attempts=len(exits), backoff=0, slurm=True, resubmit=1, resubmit_argv=argv)
    Launcher(launch).run()
    resubmits = [r for r in read_ledger(tmp_path / "run" / "goodput.jsonl") if r["event"] == "resubmit"]
    if not resubmitted:
        assert not calls.exists() and resubmits == []
        return
    assert calls.read_text().splitlines() == [
        "--parsable --dependency=singleton --job-name=olmo --nodes=2 --exclude=node1 "
        "/spool/job4000/slurm_script my config.yaml --set train.max_steps=9"
    ]
    (rec,) = resubmits
    assert (rec["job"], rec["after"], rec["excluded"], rec["count"]) == ("4242", "4000", ["node1"], 1)
    # the resubmitted job ends unfinished too: --resubmit 1 is spent over the run, no third job
    (tmp_path / "calls").unlink()
    Launcher(launch).run()
    assert len(calls.read_text().splitlines()) == 1


def test_resubmit_needs_slurm_and_the_script(tmp_path):
    with pytest.raises(ConfigError, match="--resubmit: needs --slurm"):
        Launcher(_launch(tmp_path, resubmit=2)).run()
