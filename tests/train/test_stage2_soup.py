"""Stage 2 from a stage-1 checkpoint with several data seeds, then a soup of the three runs,
evaluated next to its ingredients."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.train, pytest.mark.slow]  # every test uses the stage-2 runs

from tests.support.train_launcher import stage1  # noqa: E402
from train.testing import launch, make_shards, read_metrics, tiny_config, train_losses, write_config  # noqa: E402

SEEDS = (1, 2, 3)
STAGE2_STEPS = 3


@pytest.fixture(scope="module")
def stage2(tmp_path_factory):
    s1 = stage1(tmp_path_factory)
    root = tmp_path_factory.mktemp("train_stage2")
    data = make_shards(root / "data", n_train_shards=2, seed=5)  # new documents, same motifs
    data["val"] = s1.data["val"]
    runs = {}
    for seed in SEEDS:
        raw = tiny_config(
            root / f"seed{seed}",
            data,
            data={"seed": seed},
            train={"max_steps": STAGE2_STEPS},
            schedule={"kind": "linear_decay", "warmup_steps": 0},
            checkpoint={"init_from": str(s1.save_dir / "step6"), "interval": 0},
        )
        r = launch(write_config(root / f"seed{seed}.yaml", raw), nproc=2)
        assert r.returncode == 0, r.stdout + r.stderr
        runs[seed] = root / f"seed{seed}"
    return s1, root, data, runs


def test_stage2_starts_from_stage1_model_optimizer_and_lr(stage2):
    s1, _, _, runs = stage2
    stage1_lr = json.loads((s1.save_dir / "step6" / "trainer_state.json").read_text())["lr"]
    stage1_first = train_losses(s1.save_dir)[1]
    for seed, run in runs.items():
        m = [x for x in read_metrics(run) if "loss" in x]
        # linear decay from the stage-1 checkpoint's lr, reaching zero one step after the
        # last (3 steps: 3/4, 2/4 and 1/4 of it), so that the last step still trains
        assert [x["lr"] for x in m] == pytest.approx([stage1_lr * 0.75, stage1_lr * 0.5, stage1_lr * 0.25])
        # the model starts trained: far below the loss of a fresh model
        assert m[0]["loss"] < stage1_first - 0.5
        state = json.loads((run / "step3" / "trainer_state.json").read_text())
        assert state["step"] == 3 and state["peak_lr"] == stage1_lr and state["data"]["seed"] == seed
    # the optimizer state came along: AdamW's step count continues from stage 1's 6
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    dcp_to_torch_save(runs[1] / "step3", runs[1].parent / "s1.pt")
    sd = torch.load(runs[1].parent / "s1.pt", weights_only=False)
    assert sd["optim"]["state"]["lm_head.weight"]["step"].item() == 6 + STAGE2_STEPS
    # different data seeds -> different data orders -> different runs
    firsts = {train_losses(run)[1] for run in runs.values()}
    assert len(firsts) == len(SEEDS)


def test_evaluate_cli_reports_each_checkpoint(stage2, capsys):
    from train.evaluate import main

    _, _, data, runs = stage2
    paths = [str(runs[s] / "step3") for s in SEEDS[:2]]
    assert main(["--val-paths", data["val"], *paths, "--max-instances", "60", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == paths and all(out[p]["tokens"] == 60 * 31 for p in paths)


def test_evaluate_untrained_baseline_and_the_configs_instance_count(stage2, tmp_path, capsys):
    from train.evaluate import main

    _, _, data, runs = stage2
    trained = str(runs[SEEDS[0]] / "step3")
    raw = tiny_config(tmp_path / "unused", data, data={"val_max_instances": 20}, train={"init_seed": 7})
    config = str(write_config(tmp_path / "fresh.yaml", raw))
    assert main(["--val-paths", data["val"], "--untrained", config, trained, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    fresh = out[f"untrained:{config}"]
    assert list(out) == [f"untrained:{config}", trained]
    # each model reads as many instances as its own data.val_max_instances says (61 is all of them)
    assert fresh["tokens"] == 20 * 31 and out[trained]["tokens"] == 61 * 31
    # near-uniform predictions over the 512-entry vocabulary, far above the trained model
    assert abs(fresh["loss"] - math.log(512)) < 0.2 and fresh["loss"] > out[trained]["loss"] + 0.5
    # the weights are those the trainer starts from with that seed: the same result twice, another seed differs
    assert main(["--val-paths", data["val"], "--untrained", config, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[f"untrained:{config}"]["loss"] == fresh["loss"]
    raw["train"]["init_seed"] = 8
    other = str(write_config(tmp_path / "other.yaml", raw))
    assert main(["--val-paths", data["val"], "--untrained", other, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[f"untrained:{other}"]["loss"] != fresh["loss"]
    assert main(["--val-paths", data["val"], "--untrained", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_soup_of_three_runs_averages_weights_and_is_evaluated(stage2):
    from train.checkpoint import load_model_weights, read_state
    from train.config import PRESETS
    from train.evaluate import evaluate_checkpoints
    from train.model import Transformer

    _, root, data, runs = stage2
    ingredients = [str(runs[s] / "step3") for s in SEEDS]
    out = root / "soup"
    r = subprocess.run(
        [sys.executable, "-m", "train.soup", "--out", str(out), *ingredients, "--val-paths", data["val"]],  # all 61 instances
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "soup of 3 checkpoints" in r.stdout
    # the soup is a checkpoint like any other: same loader, weights are the mean
    models = []
    for path in [*ingredients, str(out)]:
        m = Transformer(PRESETS["tiny"])
        load_model_weights(path, m)
        models.append(m.state_dict())
    for k in models[0]:
        mean = (models[0][k] + models[1][k] + models[2][k]) / 3
        assert torch.allclose(models[3][k], mean, atol=1e-7), k
    assert not torch.equal(models[0]["lm_head.weight"], models[1]["lm_head.weight"])
    assert read_state(out)["kind"] == "soup" and read_state(out)["ingredients"] == ingredients
    # evaluation: a loss and perplexity per ingredient and for the soup
    results = json.loads((out / "eval.json").read_text())
    assert list(results) == [*ingredients, str(out)]
    for res in results.values():
        assert math.isfinite(res["loss"]) and res["ppl"] == pytest.approx(math.exp(res["loss"]))
    table = r.stdout.splitlines()[1:]  # after the "soup of ..." line: header + one row per model
    assert table[0].split() == ["checkpoint", "loss", "ppl"] and len(table) == 5
    assert table[-1].split()[0] == str(out)
    # the single-process evaluation agrees with the 2-rank evaluation at the end of training
    # (every one of the 61 validation instances in both)
    for seed, path in zip(SEEDS, ingredients):
        in_training = [x["eval/loss"] for x in read_metrics(runs[seed]) if "eval/loss" in x][-1]
        assert results[path]["loss"] == pytest.approx(in_training, rel=1e-5)
    assert evaluate_checkpoints([str(out)], [data["val"]], device="cpu")[str(out)]["loss"] == pytest.approx(
        results[str(out)]["loss"], rel=1e-6
    )


def test_weighted_soup_is_a_float32_running_mean(stage2, tmp_path):
    from train.checkpoint import load_model_weights
    from train.config import PRESETS
    from train.model import Transformer
    from train.soup import soup

    _, _, _, runs = stage2
    ingredients = [str(runs[s] / "step3") for s in SEEDS]
    out = soup(ingredients, str(tmp_path / "soup"), weights=[1.0, 0.0, 3.0], device="cpu")
    sds = []
    for path in [*ingredients, str(out)]:
        m = Transformer(PRESETS["tiny"])
        load_model_weights(path, m)
        sds.append(m.state_dict())
    for k in sds[0]:
        assert sds[3][k].dtype == torch.float32
        want = (sds[0][k].double() + 3 * sds[2][k].double()) / 4
        assert torch.allclose(sds[3][k].double(), want, atol=1e-7, rtol=0), k
    with pytest.raises(ValueError, match="non-negative"):
        soup(ingredients, str(tmp_path / "bad"), weights=[1.0, -1.0, 1.0])
