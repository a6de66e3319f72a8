"""``mix-search`` writes only what ``mix`` accepts, and says how far its fit can be trusted.

The proposal is checked where it will be made: at ``fit.spec``'s ``target_tokens``, within the
spec's ``max_repetition``, against the tokens the spec's sources have after its filters (counted
as ``mix`` counts them). The fit table names the sources whose cap binds, warns when a
cross-validation on few runs could be chance and when the proposal is farther from the prior than
every run.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from dolma_pipe.cli import main
from dolma_pipe.config import load_config
from dolma_pipe.manifest import read_manifest
from mixers.config import MixConfig
from mixers.search import regression
from mixers.search.stage import MixSearchStage
from mixers.search.target import SpecError, SpecMix, Target
from tests.support.mix_search import SOURCES, make_sources, proxy_config

pytestmark = pytest.mark.train


def write_spec(root: Path, src: dict[str, Path], target_tokens: int, **source_extra: dict) -> Path:
    spec = {
        "tokenizer": str(src["tokenizer"]),
        "target_tokens": target_tokens,
        "seeds": [0],
        "output": str(root / "stage2"),
        "processes": 1,
        "progress": False,
        "sources": [{"name": n, "documents": [str(src[f"{n}-docs"])], "ratio": 1 / 3, **source_extra.get(n, {})} for n in SOURCES],
    }
    path = root / "stage2.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def search_spec(root: Path, src: dict[str, Path], spec: Path | None, **extra: object) -> dict:
    out = {
        "output": str(root / "search"),
        "processes": 1,
        "progress": False,
        "sources": [{"name": n, "paths": [str(src[n] / "train")], "val": [str(src[n] / "val")]} for n in SOURCES],
        "eval": {"max_instances": 16},
        "proxy": {"config": str(proxy_config(root / "proxy.yaml")), "tokens": 2048},
        "swarm": {"runs": 3, "seed": 0, "concentration": 20.0},
        "fit": {"objective": {"a": 1.0}, "regression": "linear", "candidates": 2000, "top_k": 8, **({"spec": str(spec)} if spec else {})},
    }
    out.update(extra)
    return out


def spec_tokens(spec: Path) -> dict[str, int]:
    """Each source's tokens as mix counts them (a dry count through the search's own loader)."""
    return SpecMix(str(spec), list(SOURCES)).count(str(spec.parent / "counts.json"))


# ---- fast: the target, the counts, the checks -------------------------------------------------


def test_caps_leave_room_for_rounding_and_name_the_binding_sources():
    t = Target(1000, "fit.spec", "tokens", np.array([400.0, 5000.0, 300.0]), np.array([1.0, 1.0, 2.0]), ["k0", "k1", "k2"])
    cap = t.caps()
    assert cap[1] == 1.0 and 0.398 < cap[0] < 0.4 and 0.598 < cap[2] < 0.6
    # the rounding of a proposal at its cap stays within what mix allows: round(w * tokens) <= available * max_repetition
    w = np.round(cap, 6)
    assert np.all(np.round(w * 1000) <= t.available * t.max_repetition)
    # binding: the fit without caps would take more than the cap allows
    assert t.binding(np.array([0.9, 0.05, 0.05])) == [0]
    assert t.binding(np.array([0.1, 0.3, 0.6])) == [2]
    assert t.binding(np.array([0.3, 0.4, 0.3])) == []


def test_the_spec_is_counted_as_mix_counts_it_and_its_cache_is_reused(tmp_path):
    src = make_sources(tmp_path)
    spec = write_spec(tmp_path, src, 1000, b={"filter": {"exclude": ['.text | contains("b0 ")'], "syntax": "jq"}})
    counted = spec_tokens(spec)
    # the same numbers as mix's own plan
    assert main(["mix", "-c", str(spec)]) == 0
    plan = read_manifest(str(tmp_path / "stage2")).phase("count").step["plan"]
    assert counted == {p["name"]: p["available"] for p in plan}
    assert counted["b"] < counted["a"]  # b's filter dropped documents
    # a later count reads mix's cache (and its own file) rather than counting again
    (tmp_path / "counts.json").unlink()
    assert SpecMix(str(spec), list(SOURCES)).count(str(tmp_path / "counts.json")) == counted
    assert not (tmp_path / "counts.json").exists()


def test_a_spec_mix_would_refuse_is_refused_before_any_run(tmp_path):
    src = make_sources(tmp_path)
    spec = write_spec(tmp_path, src, 1000)
    raw = yaml.safe_load(spec.read_text())
    raw["sources"][0]["documents"] = [str(tmp_path / "nowhere" / "documents" / "*.jsonl.gz")]
    spec.write_text(yaml.safe_dump(raw))
    cfg = search_spec(tmp_path, src, spec)
    from mixers.search.config import MixSearchConfig

    with pytest.raises(SpecError, match=r"^config key 'fit.spec': .*stage2.yaml: config key 'sources.0.documents.0': no input files match"):
        MixSearchStage(MixSearchConfig.model_validate(cfg))
    raw["sources"] = raw["sources"][1:]
    raw["sources"][0]["ratio"] = raw["sources"][1]["ratio"] = 0.5
    spec.write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecError, match=r"has no source named 'a'"):
        MixSearchStage(MixSearchConfig.model_validate(cfg))
    # the last check: a proposal mix would refuse is never written
    good = write_spec(tmp_path, src, 1000)
    sm = SpecMix(str(good), list(SOURCES))
    raw = sm.proposal({"a": 0.8, "b": 0.1, "c": 0.1}, 100_000, str(tmp_path / "out"))
    with pytest.raises(
        SpecError, match=r"the proposal from .* would be refused by mix: source 'a' \(sources.0\) cannot give 80,000 tokens"
    ):
        sm.check("the proposal", raw, spec_tokens(good))


def test_spearman_p_values_say_when_a_cross_validation_could_be_chance():
    assert regression.best_p(3) == pytest.approx(1 / 6) and regression.best_p(5) == pytest.approx(1 / 120)
    up = np.arange(5.0)
    assert regression.spearman_p(up, up) == pytest.approx(1 / 120)
    assert regression.spearman_p(up[:3], up[:3]) == pytest.approx(1 / 6)  # three runs: never below 0.05
    assert regression.spearman_p(up, -up) == 1.0
    lines = MixSearchStage._cv_warning(-1.0, 1.0, 3)
    assert len(lines) == 1 and "-1.000 over 3 runs" in lines[0] and "p = 0.167" in lines[0]
    assert MixSearchStage._cv_warning(1.0, 1 / 120, 5) == []


# ---- slow: a whole search and the mix of its proposal -------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_written_proposal_is_a_mix_that_mix_makes(tmp_path, capsys):
    src = make_sources(tmp_path)
    per_source = spec_tokens(write_spec(tmp_path, src, 1000))
    # a mix 2.5x the size of a source, no repeats: no source can give more than ~0.4 of it,
    # while at proxy.tokens every source could give all of it
    target = int(2.5 * max(per_source.values()))
    spec = write_spec(tmp_path, src, target)
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(search_spec(tmp_path, src, spec)))
    assert main(["mix-search", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    s = json.loads((tmp_path / "search" / "search.json").read_text())
    assert s["target_tokens"] == target and s["target"]["from"] == "fit.spec"
    assert s["target"]["available"] == per_source
    caps = s["target"]["caps"]
    assert all(w <= caps[n] for n, w in s["proposal"].items()) and max(caps.values()) < 0.41
    assert s["target"]["binding"]  # without the caps, the fit would take more of a source
    binding = s["target"]["binding"][0]
    assert f"binding (the fit wants more of it than its cap allows): {binding} (raise sources." in out
    # the olmix file carries the real target and caps
    olmix = yaml.safe_load((tmp_path / "search" / "proposal.olmix.yaml").read_text())
    assert olmix["target_tokens"] == target and {v["repetition_factor"] for v in olmix["mix"].values()} == {1.0}
    # the proposal loads with mix's config loader, and mix makes it
    proposal = tmp_path / "search" / "proposal.mix.yaml"
    cfg = load_config(MixConfig, str(proposal))
    assert cfg.target_tokens == target and cfg.output == str(tmp_path / "search" / "mix")
    assert main(["mix", "-c", str(proposal)]) == 0
    made = json.loads((tmp_path / "search" / "mix" / "_manifest.json").read_text())
    assert made["status"] == "complete"
    # and so does the spec with the olmix file applied
    args = ["mix", "-c", str(spec), "--mixture", str(tmp_path / "search" / "proposal.olmix.yaml")]
    assert main([*args, "--output", str(tmp_path / "olmix-mix")]) == 0
    # three runs: the cross-validation cannot tell a fit from chance, and the table says so
    assert "WARNING: the cross-validated Spearman of the objective" in out and "over 3 runs" in out
    assert s["fit"]["spearman_p"] >= 1 / 6

    # refit (nothing trains) for no named mix: caps only at proxy.tokens, so the linear fit's
    # proposal is a corner, beyond every run (drawn close to the prior): the table says both
    del_spec = search_spec(tmp_path, src, None)
    path.write_text(yaml.safe_dump(del_spec))
    assert main(["mix-search", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    s = json.loads((tmp_path / "search" / "search.json").read_text())
    assert s["target"]["from"] == "proxy.tokens" and "no mix named" in out
    assert "target_tokens" not in yaml.safe_load((tmp_path / "search" / "proposal.olmix.yaml").read_text())
    assert not proposal.exists()  # the last fit's spec, for a spec this fit has not: removed
    assert s["kl_from_prior"]["proposal"] > s["kl_runs_max"]
    assert "WARNING: the proposal is" in out and "farther than every run" in out and "fit.max_kl" in out
