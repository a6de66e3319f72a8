"""Checkpoint folders: completeness, newest-first resume, keep-last-K and permanent retention,
and the single-process model save/load used by soups and exports."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.train

from train.checkpoint import latest_checkpoint, list_checkpoints, load_model_weights, prune, save_model_weights  # noqa: E402


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
    from train.model import PRESETS, Transformer, init_weights

    a, b = Transformer(PRESETS["tiny"]), Transformer(PRESETS["tiny"])
    init_weights(a, 1), init_weights(b, 2)
    path = save_model_weights(tmp_path / "ck", a.state_dict(), {"step": 5, "config": {}})
    assert (path / ".metadata").exists()
    state = load_model_weights(path, b)
    assert state["step"] == 5
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
