"""``python -m train.evaluate`` / ``train.soup`` / ``train.export_hf`` with a user mistake (a
wrong path, shards from another tokenizer, ingredients that do not fit): one line naming the
checkpoint, file or key, and a non-zero status; no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.train

from tests.support.cli import one_line_error  # noqa: E402
from train.testing import write_shard  # noqa: E402


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    """Two model-only checkpoints of the tiny model (as a soup writes them: no training run
    needed) and the validation shards of the test data."""
    from train.checkpoint import save_model_weights
    from train.config import from_dict
    from train.model import Transformer, init_weights
    from train.testing import make_shards, tiny_config

    root = tmp_path_factory.mktemp("tools")
    data = make_shards(root / "data", n_train_shards=1)
    cfg = from_dict(tiny_config(root / "run", data))
    paths = []
    for seed in (1, 2):
        model = Transformer(cfg.model)
        init_weights(model, seed)
        state = {"step": 1, "tokens_seen": 0, "lr": 0.0, "peak_lr": 0.0, "data": {}, "config": cfg.to_dict()}
        paths.append(str(save_model_weights(root / "run" / f"step{seed}", model.state_dict(), state)))
    return data, root / "run", paths[0], paths[1]


def test_evaluate_errors_are_one_line(ckpts, tmp_path, capsys):
    from train.evaluate import main

    data, run, a, _ = ckpts
    assert main(["--val-paths", data["val"], a, "--json"]) == 0  # the checkpoints are fine
    capsys.readouterr()
    val = data["val"]
    assert main(["--val-paths", val, str(tmp_path / "nope")]) == 2
    assert one_line_error(capsys) == f"checkpoint error: {tmp_path / 'nope'}: does not exist"
    assert main(["--val-paths", val, str(run)]) == 2  # the run folder, not a step
    assert one_line_error(capsys) == (
        f"checkpoint error: {run}: not a checkpoint folder (no trainer_state.json); it holds a run's checkpoints: "
        f"name one of them, e.g. {run / 'step2'}"
    )
    assert main(["--val-paths", str(tmp_path / "val"), a]) == 3
    assert one_line_error(capsys).startswith(f"data error: data path {str(tmp_path / 'val')!r} does not exist")
    # shards from another tokenizer: ids past the model's 512; checked before any forward
    write_shard(tmp_path / "big" / "part-00000.npy", [list(range(1, 900))], vocab_size=2**16)
    assert main(["--val-paths", str(tmp_path / "big"), a]) == 3
    assert one_line_error(capsys).startswith(f"data error: {tmp_path / 'big' / 'part-00000.npy'}: token id 899 >= model.vocab_size 512")
    # a shard that does not end with the run's EOS (data.eos_id 0): wrong dtype or truncated
    write_shard(tmp_path / "eos" / "part-00000.npy", [list(range(1, 90))], eos_id=7)
    assert main(["--val-paths", str(tmp_path / "eos"), a]) == 3
    assert "last token is not EOS (0)" in one_line_error(capsys)


def test_soup_errors_are_one_line(ckpts, tmp_path, capsys):
    from train.checkpoint import save_model_weights
    from train.config import ModelConfig
    from train.model import Transformer
    from train.soup import main

    _, _, a, b = ckpts
    assert main(["--out", str(tmp_path / "soup"), a, str(tmp_path / "nope")]) == 2
    assert one_line_error(capsys) == f"checkpoint error: {tmp_path / 'nope'}: does not exist"
    # an ingredient of another shape
    state = json.loads((Path(a) / "trainer_state.json").read_text())
    state["config"]["model"]["d_model"] = 32
    small = Transformer(ModelConfig(**state["config"]["model"]))
    save_model_weights(tmp_path / "small", small.state_dict(), state)
    assert main(["--out", str(tmp_path / "soup"), a, str(tmp_path / "small")]) == 2
    line = one_line_error(capsys)
    assert line.startswith(f"soup error: {tmp_path / 'small'}: model shape differs from {a}") and "d_model" in line
    assert main(["--out", str(tmp_path / "soup"), a, b, "--weights", "1,2,3"]) == 2
    assert one_line_error(capsys) == "soup error: --weights needs one number per checkpoint (3 for 2)"
    # --out must not delete what it is not: an ingredient, or a folder that is not a soup
    assert main(["--out", a, a, b]) == 2
    assert one_line_error(capsys).startswith(f"soup error: --out {a}: is one of the ingredients")
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("x")
    assert main(["--out", str(tmp_path / "precious"), a, b]) == 2
    assert "not a soup" in one_line_error(capsys) and (tmp_path / "precious" / "notes.txt").exists()
    assert main(["--out", str(tmp_path / "soup"), a, b, "--val-paths", str(tmp_path / "nope")]) == 3
    assert one_line_error(capsys).startswith("data error: ")
    assert main(["--out", str(tmp_path / "soup"), a, b]) == 0  # a soup may be written over


def test_export_errors_are_one_line(tmp_path, capsys):
    pytest.importorskip("transformers")
    from train.export_hf import main

    assert main([str(tmp_path / "nope"), str(tmp_path / "hf")]) == 2
    assert one_line_error(capsys) == f"checkpoint error: {tmp_path / 'nope'}: does not exist"
