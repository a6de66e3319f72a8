"""``mix-search`` microanneals: each anneal trained on several seeds, and a "best" named only when
its margin is above the noise between seeds.

The whole search is kept small (a one-layer proxy, a 4-step stage 1, 4-step anneals on two seeds):
what is tested is the bookkeeping of seeds and the verdict, not what the anneals learn.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from dolma_pipe.cli import main
from dolma_pipe.config import ConfigError, load_config
from mixers.search import noise
from mixers.search.config import MixSearchConfig
from tests.support.mix_search import anneal_config, make_sources, proxy_config

pytestmark = pytest.mark.train


def test_a_margin_below_the_seed_noise_is_no_clear_best():
    # the case: 0.0017 between two anneals whose seeds disagree by more
    v = noise.verdict({"baseline": [3.2190, 3.2230], "with-a": [3.2170, 3.2216], "with-b": [3.2187, 3.2233]})
    assert v.best == "with-a" and v.runner_up == "baseline" and v.margin == pytest.approx(0.0017, abs=1e-9)
    assert v.noise is not None and v.margin < v.noise and not v.clear
    assert v.line().startswith("  no clear best: with-a is 0.0017 below baseline, less than the noise between seeds")
    # the same margin between anneals whose seeds agree closely is clear
    v = noise.verdict({"baseline": [3.21900, 3.21905], "with-a": [3.21730, 3.21735]})
    assert v.clear and v.line().startswith("  best on the objective: with-a, 0.0017 below baseline")
    # Student's t, not the normal quantile: two anneals of two seeds give 2 degrees of freedom
    assert v.factor == pytest.approx(4.303, abs=1e-3)
    # one seed: no noise estimate, and it says so instead of naming a best
    v = noise.verdict({"baseline": [3.2190], "with-a": [3.2173]})
    assert v.noise is None and not v.clear and "no noise estimate" in v.line() and "best" not in v.line().split(":")[0]


def test_microanneal_seeds_are_distinct(tmp_path):
    spec = {
        "method": "microanneal",
        "output": str(tmp_path / "out"),
        "sources": [{"name": "a", "paths": ["x"], "val": ["y"]}, {"name": "b", "paths": ["z"]}],
        "proxy": {"config": "p.yaml", "tokens": 100},
        "microanneal": {"checkpoint": "c", "baseline": {"a": 1}, "seeds": [1, 1]},
    }
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError, match=r"config key 'microanneal.seeds': seeds are distinct"):
        load_config(MixSearchConfig, str(path))
    spec["microanneal"]["seeds"] = [3, 4]
    path.write_text(yaml.safe_dump(spec))
    assert load_config(MixSearchConfig, str(path)).microanneal.seeds == [3, 4]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_microanneal_trains_each_anneal_on_two_seeds_and_weighs_its_best_against_their_noise(tmp_path, capsys):
    src = make_sources(tmp_path)
    stage1 = tmp_path / "stage1"
    cmd = [sys.executable, "-m", "train", "--config", str(proxy_config(tmp_path / "proxy.yaml"))]
    cmd += ["--set", f"data.paths=[{src['a'] / 'train'}]", "--set", "train.max_steps=4", "--set", f"checkpoint.save_dir={stage1}"]
    subprocess.run([*cmd, "--set", "checkpoint.interval=0"], check=True, capture_output=True)
    spec = {
        "method": "microanneal",
        "output": str(tmp_path / "anneal"),
        "processes": 1,
        "progress": False,
        "sources": [{"name": n, "paths": [str(src[n] / "train")], "val": [str(src[n] / "val")]} for n in ("a", "b")],
        "eval": {"max_instances": 16},
        "proxy": {"config": str(anneal_config(tmp_path / "anneal.yaml")), "tokens": 1024},
        "microanneal": {"checkpoint": str(stage1 / "step4"), "baseline": {"a": 1.0}, "share": 0.5},
    }
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["mix-search", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    s = json.loads((tmp_path / "anneal" / "search.json").read_text())
    assert s["seeds"] == [0, 1]  # two seeds by default
    assert sorted(r["key"] for r in s["runs"]) == ["baseline-seed0", "baseline-seed1", "with-b-seed0", "with-b-seed1"]
    per_seed = s["objective_per_seed"]
    assert per_seed["baseline"][0] != per_seed["baseline"][1]  # the seeds took other documents
    v = s["verdict"]
    assert v["seed_spread"] > 0 and v["noise"] > 0 and "noise: the objective's standard deviation between seeds is" in out
    # the verdict follows the numbers: a best only when its margin is above the noise
    assert v["clear"] == (v["margin"] >= v["noise"])
    if v["clear"]:
        assert f"best on the objective: {v['best']}" in out and s["best"] == v["best"]
    else:
        assert f"no clear best: {v['best']} is" in out and s["best"] is None
    assert s["losses"]["baseline"]["objective"] == pytest.approx(sum(per_seed["baseline"]) / 2)
