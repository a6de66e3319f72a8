"""Real 2-rank runs (torchrun, gloo, FSDP2, DCP): exact resume, preemption, async saves,
resharding 2 -> 1 rank and 2 -> 4 ranks as HSDP (2 x 2), souping and exporting a trained run,
each run's goodput ledger, rank-independent init, and the data fingerprint check.

The resume, reshard, soup and export tests run for each model family (``FAMILIES``): the
dense model reads the shared stage-1 run; Olmo 3 and the hybrid each train the same 6 steps
once in this module (``trained``). The 2 -> 4 reshard, the dearest launch (4 ranks on the
CI's 2 cores), runs for the hybrid, whose GDN parameters (per-head vectors, depthwise
convolution kernels) are the shapes sharding has not met in the other families; 2 -> 1 for the
other two (Olmo 3 has the dense model's parameters), so that the family axis costs no launch
beyond the resume. The 4-rank run is HSDP (2 replicas of 2 shards), the one launch of hybrid
sharding outside the multi-node tests (the dense model's, 2 nodes x 2 ranks). Each family's run also serves the goodput ledger's test (no launch)."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.train, pytest.mark.slow]  # every test uses the shared stage-1 run

from tests.support.checkpoints import copy_checkpoint  # noqa: E402
from tests.support.train_launcher import HOLD_UNTIL_STEP, launch_with_hooks, stage1  # noqa: E402
from train.testing import launch, make_shards, read_metrics, tiny_config, train_losses, write_config  # noqa: E402

# The model section of each family's run: a window of 16 and GDN chunks of 16 within the
# 32-token instances, so the block-local attention and the multi-chunk recurrence both run.
FAMILIES = {
    "dense": {"preset": "tiny"},
    "olmo3": {"preset": "tiny-olmo3", "sliding_window": 16},
    "hybrid": {"preset": "tiny-hybrid", "gdn_chunk_size": 16},
}
_runs: dict[str, SimpleNamespace] = {}


def trained(tmp_path_factory, family: str) -> SimpleNamespace:
    """A finished 6-step run on 2 ranks (checkpoints at steps 3 and 6, the first saved while
    training went on; evaluation at steps 3 and 6): the dense one is the shared stage-1 run;
    the others the same config with the family's model, launched once here."""
    if family == "dense":
        return stage1(tmp_path_factory)
    if family not in _runs:
        root = tmp_path_factory.mktemp(f"train_{family}")
        data = make_shards(root / "data")
        raw = tiny_config(root / "A", data, model=FAMILIES[family], eval={"interval": 3})
        result = launch(write_config(root / "a.yaml", raw), nproc=2)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "step 3 -> " in result.stdout and "(async)" in result.stdout
        full = train_losses(root / "A")
        assert sorted(full) == [1, 2, 3, 4, 5, 6] and full[6] < full[1] - 0.5  # it learns
        _runs[family] = SimpleNamespace(root=root, data=data, raw=raw, save_dir=root / "A", result=result)
    return _runs[family]


def _like(run: SimpleNamespace, save_dir, **sections) -> dict:
    """``tiny_config`` for another run on ``run``'s data with ``run``'s model."""
    return tiny_config(save_dir, run.data, model=dict(run.raw["model"]), **sections)


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


@pytest.mark.parametrize("family", FAMILIES)
def test_resume_from_the_async_checkpoint_is_bit_identical(tmp_path_factory, tmp_path, family):
    """The step-3 checkpoint was written in the background while steps 4-6 ran; it must hold
    exactly the step-3 state (staged before training went on)."""
    run = trained(tmp_path_factory, family)
    copy_checkpoint(run.save_dir, 3, tmp_path / "F")
    r = launch(write_config(tmp_path / "f.yaml", _like(run, tmp_path / "F")), nproc=2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resumed from" in r.stdout
    full = train_losses(run.save_dir)
    assert train_losses(tmp_path / "F") == {s: full[s] for s in (4, 5, 6)}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_runs_goodput_ledger_counts_its_steps_and_saves(tmp_path_factory, capsys, family):
    """Each family's run kept its goodput ledger (``<save_dir>/goodput.jsonl``): one attempt
    from a fresh start to step 6, the step-3 save asynchronous and completed, the step-6 save
    blocking, a clean exit; ``python -m train.goodput SAVE_DIR --json`` reads it back: no
    failure, every step of the loop survives into the model."""
    from train import goodput
    from train.ledger import read_ledger

    run = trained(tmp_path_factory, family)
    records = read_ledger(run.save_dir / "goodput.jsonl")
    assert records.skipped == 0 and len({r["attempt"] for r in records}) == 1
    events = [r["event"] for r in records]
    assert (events[0], events[-1], events.count("start"), events.count("exit")) == ("start", "exit", 1, 1)
    assert records[0]["world_size"] == 2
    by = {e: [r for r in records if r["event"] == e] for e in ("restored", "first_step", "checkpoint", "checkpoint_done", "exit")}
    assert [(r["step"], r["source"]) for r in by["restored"]] == [(0, "fresh")]
    assert [r["step"] for r in by["first_step"]] == [1]
    assert [(r["step"], r["async"]) for r in by["checkpoint"]] == [(3, True), (6, False)]
    assert sorted(r["step"] for r in by["checkpoint_done"]) == [3, 6]
    assert [(r["step"], r["reason"], r["status"]) for r in by["exit"]] == [(6, "finished", 0)]
    beats = [(r["step"], r["train_s"]) for r in records if r["event"] == "heartbeat"]
    assert beats[-1][0] == 6 and [t for _, t in beats] == sorted(t for _, t in beats)  # the loop's seconds only grow

    assert goodput.main([str(run.save_dir), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["records"], s["attempts"], s["failures"], s["finished"], s["last_outcome"]) == (len(records), 1, 0, True, "finished")
    assert [(seg["from_step"], seg["to_step"]) for seg in s["lineage"]] == [(0, 6)] and s["lineage_complete"]
    assert s["checkpoints"] == 2 and s["steps_lost"] == 0 and s["failure_list"] == []
    assert s["train_s"] == pytest.approx(beats[-1][1]) and s["surviving_train_s"] == pytest.approx(s["train_s"])
    assert s["ettr"] == pytest.approx(s["active_fraction"]) and 0 < s["ettr"] <= 1 and s["step_s_median"] > 0


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


@pytest.mark.parametrize(("family", "nproc", "mesh"), [("dense", 1, "fsdp"), ("olmo3", 1, "fsdp"), ("hybrid", 4, "hsdp 2 x 2")])
def test_checkpoint_from_two_ranks_resumes_on_another_rank_count(tmp_path_factory, tmp_path, family, nproc, mesh):
    """Steps 4-6 from the 2-rank FSDP checkpoint of step 3, on 1 rank, or on 4 as HSDP (2
    replicas of 2 shards: gradients reduce-scattered within a pair, all-reduced across the
    pairs); DCP reshards the load, and the 4-rank run's step-6 checkpoint, saved from the 2-D
    mesh, is read back by the one-process evaluation."""
    run = trained(tmp_path_factory, family)
    copy_checkpoint(run.save_dir, 3, tmp_path / "C")
    # same global batch of 8: on 1 rank, 4 micro-batches of 2 instead of 2 ranks x 2 x 2
    hsdp = {"data_parallel": "hsdp", "shard_group_size": 2} if mesh.startswith("hsdp") else {}
    cfg = write_config(tmp_path / "c.yaml", _like(run, tmp_path / "C", train=hsdp))
    r = launch(cfg, nproc=nproc)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{nproc} rank(s), 1 node(s), {mesh}" in r.stdout and f"grad accum {4 // nproc}" in r.stdout
    shape = [2, 2] if hsdp else [nproc]
    assert json.loads((tmp_path / "C" / "step6" / "trainer_state.json").read_text())["mesh"] == {
        "data_parallel": mesh.split()[0],
        "shape": shape,
    }
    other, two = train_losses(tmp_path / "C"), train_losses(run.save_dir)
    assert sorted(other) == [4, 5, 6]
    for step in (4, 5, 6):  # same math, different reduction order: equal to float precision
        assert other[step] == pytest.approx(two[step], rel=1e-5, abs=1e-6)
    _assert_eval_matches_the_cli(tmp_path / "C", run.data["val"])  # 61 instances on 1 or 4 ranks


@pytest.mark.parametrize("family", FAMILIES)
def test_exported_trained_checkpoint_gives_the_same_logits(tmp_path_factory, tmp_path, family):
    """The last checkpoint, exported, loads in transformers as the family's class (its
    config as the model's) and gives our logits."""
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM

    from train.export_hf import export_checkpoint

    run = trained(tmp_path_factory, family)
    ckpt = run.save_dir / "step6"
    out = export_checkpoint(ckpt, tmp_path / "hf", eos_id=0)
    config = json.loads((out / "config.json").read_text())
    hf_type = {
        "dense": ("olmo2", "Olmo2ForCausalLM"),
        "olmo3": ("olmo3", "Olmo3ForCausalLM"),
        "hybrid": ("olmo_hybrid", "OlmoHybridForCausalLM"),
    }
    assert (config["model_type"], config["architectures"]) == (hf_type[family][0], [hf_type[family][1]])
    assert config["vocab_size"] == 512 and config["rms_norm_eps"] == 1e-6 and config["eos_token_id"] == 0
    assert config["tie_word_embeddings"] is False and (out / "model.safetensors").exists()
    if family == "olmo3":
        assert config["sliding_window"] == 16
    ours = _trained_model(ckpt)
    hf = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    assert type(hf).__name__ == hf_type[family][1]
    tokens = torch.randint(0, 512, (2, 48), generator=torch.Generator().manual_seed(0))  # past the window and a chunk
    with torch.no_grad():
        assert (hf(tokens).logits - ours(tokens)).abs().max().item() < 1e-5


@pytest.mark.parametrize("family", FAMILIES)
def test_soup_of_a_runs_checkpoints_is_their_mean_and_exports(tmp_path_factory, tmp_path, family):
    """The soup of steps 3 and 6: every weight the mean of the two, and exported, our logits
    in transformers."""
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM

    from train.export_hf import export_checkpoint
    from train.soup import soup

    run = trained(tmp_path_factory, family)
    ingredients = [str(run.save_dir / "step3"), str(run.save_dir / "step6")]
    out = soup(ingredients, str(tmp_path / "soup"), device="cpu")
    a, b, mean = (_trained_model(p).state_dict() for p in [*ingredients, out])
    for k in a:
        assert torch.allclose(mean[k], (a[k] + b[k]) / 2, atol=1e-7, rtol=0), k
    assert not torch.equal(a["lm_head.weight"], b["lm_head.weight"])
    hf = AutoModelForCausalLM.from_pretrained(str(export_checkpoint(out, tmp_path / "hf")), dtype=torch.float32).eval()
    tokens = torch.randint(0, 512, (2, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (hf(tokens).logits - _trained_model(out)(tokens)).abs().max().item() < 1e-5


def _trained_model(checkpoint):
    """Our model as the checkpoint's config builds it, with its weights, in eval mode."""
    from train.checkpoint import load_model_weights, read_state
    from train.evaluate import model_config_from_state
    from train.model import Transformer

    model = Transformer(model_config_from_state(read_state(checkpoint)))
    load_model_weights(checkpoint, model)
    return model.eval()


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
