"""Real 2-rank runs (torchrun, gloo, FSDP2, DCP): exact resume, preemption, async saves,
resharding 2 -> 1 rank, rank-independent init, and the data fingerprint check."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.train, pytest.mark.slow]  # every test uses the shared stage-1 run

from tests.support.checkpoints import copy_checkpoint  # noqa: E402
from tests.support.train_launcher import HOLD_UNTIL_STEP, launch_with_hooks, stage1  # noqa: E402
from train.testing import launch, make_shards, read_metrics, tiny_config, train_losses, write_config  # noqa: E402


def _assert_eval_matches_the_cli(save_dir, val, step=6):
    """The in-trainer evaluation at the end of the run reports the loss that
    ``python -m train.evaluate`` reports for the checkpoint of the same step (all 61
    validation instances, whatever the rank count)."""
    from train.evaluate import evaluate_checkpoints

    (in_training,) = [m for m in read_metrics(save_dir) if "eval/loss" in m and m["step"] == step]
    cli = evaluate_checkpoints([str(save_dir / f"step{step}")], [val], device="cpu")[str(save_dir / f"step{step}")]
    assert cli["tokens"] == 61 * 31
    assert in_training["eval/loss"] == pytest.approx(cli["loss"], rel=1e-6, abs=0)


def test_preempt_twice_then_resume_is_bit_identical(tmp_path_factory, tmp_path):
    """Two preemptions, then the rest of the run: the losses equal the uninterrupted run's.

    The first SIGTERM lands on rank 0 just *after* step 1's all-reduce (the window in which a
    rank used to stop alone while the other ran step 2: a collective mismatch and no
    checkpoint); it must be honoured by every rank after step 2. The second lands before
    step 4's all-reduce: every rank stops after step 4."""
    s1 = stage1(tmp_path_factory)
    full = train_losses(s1.save_dir)
    assert sorted(full) == [1, 2, 3, 4, 5, 6] and full[6] < full[1] - 0.5  # it learns
    cfg = write_config(tmp_path / "b.yaml", tiny_config(tmp_path / "B", s1.data))
    r = launch_with_hooks(cfg, nproc=2, sigterm_at="1:after", timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "test hook: SIGTERM to rank 0 at step 1 (after its all-reduce)" in r.stdout
    assert "SIGTERM: saving step 2" in r.stdout and "saving step 1" not in r.stdout
    assert sorted(p.name for p in (tmp_path / "B").glob("step*")) == ["step2"]
    state = json.loads((tmp_path / "B" / "step2" / "trainer_state.json").read_text())
    assert state["step"] == 2 and state["tokens_seen"] == 2 * 8 * 32 and len(state["rng"]) == 2
    # resumed; rank 0 receives SIGTERM after step 4 (before its all-reduce) -> both save step 4
    r = launch_with_hooks(cfg, nproc=2, sigterm_at="4", timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resumed from" in r.stdout and "SIGTERM: saving step 4" in r.stdout
    assert sorted(p.name for p in (tmp_path / "B").glob("step*")) == ["step2", "step3", "step4"]
    # the rest in fresh processes, resuming from the newest checkpoint
    r = launch(cfg, nproc=2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resumed from" in r.stdout
    resumed = train_losses(tmp_path / "B")
    assert resumed == full  # bit-identical, every step
    lrs = {m["step"]: m["lr"] for m in read_metrics(tmp_path / "B") if "lr" in m}
    assert lrs == {m["step"]: m["lr"] for m in read_metrics(s1.save_dir) if "lr" in m}


def test_eval_every_interval_and_once_at_the_end(tmp_path_factory):
    s1 = stage1(tmp_path_factory)  # eval.interval 3 of 6 steps, eval.at_end
    evals = [m["step"] for m in read_metrics(s1.save_dir) if "eval/loss" in m]
    assert evals == [3, 6]  # step 6 is both an interval step and the end: evaluated once
    _assert_eval_matches_the_cli(s1.save_dir, s1.data["val"])  # 2 ranks, 61 instances


def test_data_order_and_shard_checks_are_cached_in_save_dir(tmp_path_factory):
    s1 = stage1(tmp_path_factory)
    cache = sorted(p.name for p in (s1.save_dir / "data_cache").iterdir())
    assert "order-seed0-epoch0-n205.uint32" in cache  # one 4-byte index per instance, written once
    assert len([c for c in cache if c.startswith("shard-checks-")]) == 2  # train and val shards


def test_async_save_runs_while_training_continues(tmp_path_factory):
    s1 = stage1(tmp_path_factory)
    metrics = {m["step"]: m for m in read_metrics(s1.save_dir) if "loss" in m}
    # the step-3 save was started asynchronously and its write held until step 4 was done:
    # had the save blocked the loop, step 4 could not have finished while the write waited
    # (no clock involved: the write waits for the step, not for a duration)
    assert "step 3 -> " in s1.result.stdout and "(async)" in s1.result.stdout
    assert f"test hook: write of step3 held until step {HOLD_UNTIL_STEP} was done: yes" in s1.result.stdout
    assert metrics[4]["ckpt_inflight"] is True and metrics[3]["ckpt_inflight"] is False
    for step in (3, 6):
        d = s1.save_dir / f"step{step}"
        assert (d / ".metadata").exists() and json.loads((d / "trainer_state.json").read_text())["step"] == step
    # stock DCP format: a generic torch tool converts it
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    dcp_to_torch_save(s1.save_dir / "step3", s1.root / "step3.pt")
    sd = torch.load(s1.root / "step3.pt", weights_only=False)
    assert sd["optim"]["state"]["embed.weight"]["step"].item() == 3
    assert sd["model"]["embed.weight"].shape == (512, 64)


def test_resume_from_the_async_checkpoint_is_bit_identical(tmp_path_factory, tmp_path):
    """The step-3 checkpoint was written in the background while steps 4-6 ran; it must hold
    exactly the step-3 state (staged before training went on)."""
    s1 = stage1(tmp_path_factory)
    copy_checkpoint(s1.save_dir, 3, tmp_path / "F")
    r = launch(write_config(tmp_path / "f.yaml", tiny_config(tmp_path / "F", s1.data)), nproc=2)
    assert r.returncode == 0, r.stdout + r.stderr
    full = train_losses(s1.save_dir)
    assert train_losses(tmp_path / "F") == {s: full[s] for s in (4, 5, 6)}


def test_weights_do_not_depend_on_rank_count(tmp_path_factory):
    """Step 1's loss (before any update) of the 2-rank FSDP run equals a plain 1-process model's."""
    from train.config import PRESETS
    from train.data import GlobalOrder, TokenDataset
    from train.loss import lm_loss
    from train.model import Transformer, init_weights

    s1 = stage1(tmp_path_factory)
    ds = TokenDataset([s1.data["train"]], 32, np.uint16)
    tokens = torch.from_numpy(ds.batch(GlobalOrder(ds.n_instances, 0).global_indices(0, 8)))
    model = Transformer(PRESETS["tiny"])
    init_weights(model, 0)
    with torch.no_grad():
        ce, _ = lm_loss(model(tokens), tokens, 512, 1e-5)
    assert ce.item() == pytest.approx(train_losses(s1.save_dir)[1], rel=1e-6)


def test_checkpoint_from_two_ranks_resumes_on_one(tmp_path_factory, tmp_path):
    s1 = stage1(tmp_path_factory)
    copy_checkpoint(s1.save_dir, 3, tmp_path / "C")
    # same global batch on one rank: 4 micro-batches of 2 instead of 2 ranks x 2 x 2
    cfg = write_config(tmp_path / "c.yaml", tiny_config(tmp_path / "C", s1.data))
    r = launch(cfg, nproc=1)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 rank(s)" in r.stdout and "grad accum 4" in r.stdout
    one, two = train_losses(tmp_path / "C"), train_losses(s1.save_dir)
    assert sorted(one) == [4, 5, 6]
    for step in (4, 5, 6):  # same math, different reduction order: equal to float precision
        assert one[step] == pytest.approx(two[step], rel=1e-5, abs=1e-6)
    _assert_eval_matches_the_cli(tmp_path / "C", s1.data["val"])


def test_checkpoint_from_two_ranks_resumes_on_four(tmp_path_factory, tmp_path):
    s1 = stage1(tmp_path_factory)
    copy_checkpoint(s1.save_dir, 3, tmp_path / "D")
    cfg = write_config(tmp_path / "d.yaml", tiny_config(tmp_path / "D", s1.data))
    r = launch(cfg, nproc=4)
    assert r.returncode == 0, r.stdout + r.stderr
    four, two = train_losses(tmp_path / "D"), train_losses(s1.save_dir)
    for step in (4, 5, 6):
        assert four[step] == pytest.approx(two[step], rel=1e-5, abs=1e-6)
    _assert_eval_matches_the_cli(tmp_path / "D", s1.data["val"])  # 61 instances on 4 ranks


def test_resume_with_a_larger_global_batch_continues_the_token_count(tmp_path_factory, tmp_path):
    s1 = stage1(tmp_path_factory)
    copy_checkpoint(s1.save_dir, 3, tmp_path / "H")
    raw = tiny_config(tmp_path / "H", s1.data, train={"global_batch_size": 16, "micro_batch_size": 4, "max_steps": 5})
    r = launch(write_config(tmp_path / "h.yaml", raw), nproc=1)
    assert r.returncode == 0, r.stdout + r.stderr
    tokens = {m["step"]: m["tokens"] for m in read_metrics(tmp_path / "H") if "loss" in m}
    assert tokens == {4: 3 * 8 * 32 + 16 * 32, 5: 3 * 8 * 32 + 2 * 16 * 32}
    state = json.loads((tmp_path / "H" / "step5" / "trainer_state.json").read_text())
    assert state["data"]["instances_seen"] == 3 * 8 + 2 * 16 and state["global_batch_size"] == 16


def test_changed_data_is_refused_unless_overridden(tmp_path_factory, tmp_path):
    s1 = stage1(tmp_path_factory)
    copy_checkpoint(s1.save_dir, 6, tmp_path / "E")
    data = {"train": str(tmp_path / "train"), "val": s1.data["val"]}
    shutil.copytree(s1.data["train"], data["train"])
    (tmp_path / "train" / "part-00002.npy").unlink()  # one shard fewer
    cfg = write_config(tmp_path / "e.yaml", tiny_config(tmp_path / "E", data, train={"max_steps": 7}))
    r = launch(cfg, nproc=1)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "dataset fingerprint" in r.stderr and "data.allow_fingerprint_mismatch" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "E" / "step7").exists()
    r = launch(cfg, nproc=1, sets=["data.allow_fingerprint_mismatch=true"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WARNING: dataset fingerprint" in r.stdout and (tmp_path / "E" / "step7").exists()


def test_changed_data_seed_is_refused(tmp_path_factory, tmp_path):
    s1 = stage1(tmp_path_factory)
    copy_checkpoint(s1.save_dir, 6, tmp_path / "G")
    cfg = write_config(tmp_path / "g.yaml", tiny_config(tmp_path / "G", s1.data, train={"max_steps": 7}))
    r = launch(cfg, nproc=1, sets=["data.seed=9"])
    assert r.returncode == 3, r.stdout + r.stderr
    assert "data.seed is 9" in r.stderr and not (tmp_path / "G" / "step7").exists()


def test_hard_kill_then_resume_keeps_one_record_per_step(tmp_path):
    """A SIGKILL after step 5 (checkpoint at step 3) leaves records of steps 4 and 5 and maybe
    a line cut off mid-write; the resumed run rewrites the file so that each step has one
    record (the resumed run's) and the end one evaluation. Starting the finished run again
    trains nothing and appends nothing."""
    import signal

    data = make_shards(tmp_path / "data", n_train_shards=1)
    raw = tiny_config(tmp_path / "K", data, checkpoint={"interval": 3, "async_save": False})
    cfg = write_config(tmp_path / "k.yaml", raw)
    r = launch_with_hooks(cfg, nproc=1, kill_after=5)
    assert r.returncode == -signal.SIGKILL, r.stdout + r.stderr
    assert sorted(p.name for p in (tmp_path / "K").glob("step*")) == ["step3"]
    metrics = tmp_path / "K" / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3, 4, 5]
    # mark the killed run's step 5 (to see which record wins) and cut a line off mid-write
    killed5 = {**json.loads(lines[-1]), "loss": 999.0}
    metrics.write_text("\n".join([*lines[:-1], json.dumps(killed5), '{"step": 6, "lo']))
    r = launch(cfg, nproc=1)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resumed from" in r.stdout
    records = read_metrics(tmp_path / "K")
    assert [m["step"] for m in records if "loss" in m] == [1, 2, 3, 4, 5, 6]
    assert 999.0 not in [m["loss"] for m in records if "loss" in m]  # the resumed step 5 won
    assert [m["step"] for m in records if "eval/loss" in m] == [6]
    before = metrics.read_text()
    r = launch(cfg, nproc=1)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "already at step 6 of 6" in r.stdout
    assert metrics.read_text() == before  # no second final evaluation


@pytest.mark.slow
def test_sigterm_to_torchrun_saves_and_torchrun_exits_1(tmp_path):
    """The preemption path of SLURM and most schedulers: SIGTERM to the torchrun agent, which
    forwards it to the ranks. They finish the step, save it and exit 0, but torchrun itself
    exits 1 (its own behaviour, as the README says): the checkpoint is what tells that the
    run stopped cleanly."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.support.repo import REPO_ROOT

    data = make_shards(tmp_path / "data", n_train_shards=1)
    raw = tiny_config(tmp_path / "P", data, train={"max_steps": 2000}, checkpoint={"interval": 0}, eval={"at_end": False})
    cfg = write_config(tmp_path / "p.yaml", raw)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "train", "--config", str(cfg)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT)
    metrics = tmp_path / "P" / "metrics.jsonl"
    try:
        # the first logged step: both ranks are in the loop with their SIGTERM handler set (a
        # generous deadline that only a hang reaches; it bounds nothing about speed)
        deadline = time.monotonic() + 300
        while not (metrics.exists() and metrics.read_text().strip()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no step logged"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, out + err
    steps = [m["step"] for m in read_metrics(tmp_path / "P")]
    stop = steps[-1]
    assert f"SIGTERM: saving step {stop} and exiting" in out and stop < 2000
    assert sorted(p.name for p in (tmp_path / "P").glob("step*")) == [f"step{stop}"]
    assert json.loads((tmp_path / "P" / f"step{stop}" / "trainer_state.json").read_text())["step"] == stop
