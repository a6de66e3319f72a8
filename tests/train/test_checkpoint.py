"""Checkpoint folders: completeness, newest-first resume, keep-last-K and permanent retention,
and the single-process model save/load used by soups and exports."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.train

from train.checkpoint import latest_checkpoint, list_checkpoints, load_model_weights, prune, save_model_weights  # noqa: E402
from train.config import ConfigError  # noqa: E402


def fake(save_dir, step, complete=True):
    d = save_dir / f"step{step}"
    d.mkdir(parents=True)
    (d / "trainer_state.json").write_text(json.dumps({"step": step}))
    if complete:
        (d / ".metadata").write_bytes(b"x")  # DCP writes it last


def test_only_complete_checkpoints_count(tmp_path):
    for s in (10, 20):
        fake(tmp_path, s)
    fake(tmp_path, 30, complete=False)  # a save that was cut off
    (tmp_path / "notes").mkdir()
    assert [s for s, _ in list_checkpoints(tmp_path)] == [10, 20]
    assert latest_checkpoint(tmp_path).name == "step20"
    assert latest_checkpoint(tmp_path / "missing") is None


def test_keep_last_and_permanent(tmp_path):
    for s in range(100, 1100, 100):
        fake(tmp_path, s)
    fake(tmp_path, 1100, complete=False)
    deleted = prune(tmp_path, keep_last=3, permanent_interval=500)
    left = sorted(int(p.name[4:]) for p in tmp_path.iterdir())
    # permanent 500 and 1000, the 3 newest of the others, and the incomplete one (maybe in flight)
    assert left == [500, 700, 800, 900, 1000, 1100]
    assert sorted(int(p.name[4:]) for p in deleted) == [100, 200, 300, 400, 600]
    prune(tmp_path, keep_last=1, permanent_interval=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step1000", "step1100"]


def test_single_process_model_checkpoint_round_trip(tmp_path):
    from train.config import PRESETS
    from train.model import Transformer, init_weights

    a, b = Transformer(PRESETS["tiny"]), Transformer(PRESETS["tiny"])
    init_weights(a, 1), init_weights(b, 2)
    path = save_model_weights(tmp_path / "ck", a.state_dict(), {"step": 5, "config": {}})
    assert (path / ".metadata").exists()
    state = load_model_weights(path, b)
    assert state["step"] == 5
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


# -- a real (one-rank, in-process) trainer against an existing save_dir ------------------


@pytest.fixture(scope="module")
def two_step_run(tmp_path_factory):
    """A finished 2-step run (checkpoint step2, optimizer state saved with the default
    optim settings), built in a subprocess so this process keeps no process group."""
    from train.testing import launch, make_shards, tiny_config, write_config

    root = tmp_path_factory.mktemp("two_step")
    data = make_shards(root / "data", n_train_shards=1)
    raw = tiny_config(
        root / "run",
        data,
        train={"max_steps": 2, "global_batch_size": 4},
        checkpoint={"interval": 0, "async_save": False},
        eval={"at_end": False},
    )
    r = launch(write_config(root / "a.yaml", raw), nproc=1)
    assert r.returncode == 0, r.stdout + r.stderr
    return root, data, raw


def _copy_run(two_step_run, dst):
    import copy
    import shutil

    root, _, raw = two_step_run
    shutil.copytree(root / "run", dst)
    raw = copy.deepcopy(raw)
    raw["checkpoint"]["save_dir"] = str(dst)
    return raw


def test_resume_applies_the_configured_optimizer_settings(two_step_run, tmp_path, monkeypatch, capsys):
    from tests.support.train_launcher import one_rank_trainer

    raw = _copy_run(two_step_run, tmp_path / "run")
    t = one_rank_trainer(monkeypatch, raw, ["optim.weight_decay=0.5", "optim.betas=[0.8,0.99]", "optim.eps=1e-6", "train.max_steps=3"])
    try:
        assert t.step == 2  # resumed, optimizer state loaded ...
        assert all(len(t.optimizer.state[p]) for p in t.params)
        # ... and the config's settings win over the ones stored with it
        groups = [(g["weight_decay"], tuple(g["betas"]), g["eps"]) for g in t.optimizer.param_groups]
        assert groups == [(0.5, (0.8, 0.99), 1e-6), (0.0, (0.8, 0.99), 1e-6)]
    finally:
        t.close()
    out = capsys.readouterr().out
    assert "optim: param group 0 weight_decay: 0.1 (checkpoint) -> 0.5 (config)" in out
    assert "betas: (0.9, 0.95) (checkpoint) -> (0.8, 0.99) (config)" in out


def test_resume_refuses_a_different_optimizer_group_layout(two_step_run, tmp_path, monkeypatch):
    from tests.support.train_launcher import one_rank_trainer

    raw = _copy_run(two_step_run, tmp_path / "run")
    # decaying the embeddings too: one group instead of (decay, no decay)
    with pytest.raises(ConfigError, match=r"2 parameter group\(s\).*builds 1.*decay_embeddings"):
        one_rank_trainer(monkeypatch, raw, ["optim.decay_embeddings=true", "train.max_steps=3"])


def test_a_fresh_run_refuses_a_save_dir_with_checkpoints(two_step_run, tmp_path, monkeypatch):
    from tests.support.train_launcher import one_rank_trainer

    raw = _copy_run(two_step_run, tmp_path / "run")
    with pytest.raises(ConfigError, match=r"^checkpoint.resume: false, but .* already holds checkpoints \(step2\)"):
        one_rank_trainer(monkeypatch, raw, ["checkpoint.resume=false"])
    assert (tmp_path / "run" / "step2").exists()
    t = one_rank_trainer(monkeypatch, raw, ["checkpoint.resume=false", "checkpoint.overwrite=true"])
    try:
        assert t.step == 0 and not (tmp_path / "run" / "step2").exists()
        assert not (tmp_path / "run" / "metrics.jsonl").exists()
    finally:
        t.close()


def test_resume_with_another_model_shape_is_one_config_error(two_step_run, tmp_path, monkeypatch):
    """Not a DCP traceback ending in "Size mismatch": one line naming the checkpoint, the first
    tensor that does not fit, and the model keys that differ."""
    from tests.support.train_launcher import one_rank_trainer

    raw = _copy_run(two_step_run, tmp_path / "run")
    with pytest.raises(ConfigError) as e:
        one_rank_trainer(monkeypatch, raw, ["model.d_model=128", "train.max_steps=3"])
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{tmp_path / 'run' / 'step2'}: ")
    assert "model.embed.weight is [512, 64] in the checkpoint but [512, 128] in this run" in msg
    assert "model.d_model: 64 in the checkpoint, 128 in the config" in msg


def test_a_wrong_init_from_is_one_config_error(two_step_run, tmp_path, monkeypatch):
    from tests.support.train_launcher import one_rank_trainer

    root, data, _ = two_step_run
    raw = _copy_run(two_step_run, tmp_path / "unused")
    raw["checkpoint"]["save_dir"] = str(tmp_path / "stage2")
    for path, message in [
        (tmp_path / "nope", "does not exist"),
        (root / "run", r"not a checkpoint folder \(no trainer_state.json\)"),  # the run, not its step2/
    ]:
        with pytest.raises(ConfigError, match=rf"^checkpoint.init_from: {path}: {message}"):
            one_rank_trainer(monkeypatch, raw, [f"checkpoint.init_from={path}"])
