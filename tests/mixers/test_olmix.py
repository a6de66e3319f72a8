"""olmix mixture files (mixers/olmix.py): written and read back equal, olmix's own shapes read as
olmix reads them (flat, nested, the older ``[weight, repetition_factor]`` lists and ``mixes``
JSON), applied to a Dolmino-style spec and taken from one, the spec's ``mixture:`` key, and one
clear error naming the file and the key for each mistake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dolma_pipe.config import ConfigError, load_config
from dolma_pipe.documents import write_documents
from mixers.config import MixConfig
from mixers.olmix import OlmixError, OlmixMix, from_mix_config, parse_olmix, read_olmix, to_mix_sources, write_olmix
from tests.support.documents import make_docs
from tests.support.tokens import train_tokenizer

# olmix's configs/examples/launch/data_proportions/mix_baseline.yaml (github.com/allenai/olmix,
# commit 9586977), its eval task list shortened: a launch config whose mix is written nested.
OLMIX_BASELINE = """\
name: mix-baseline
description: Data proportions experiment - balanced baseline mix
infra:
  budget: ai2/oe-base
  workspace: ai2/oe-data
  cluster: ai2/jupiter
  priority: high
  nodes: 1
  gpus: 1
training:
  proxy_model_id: olmo3_14m
  tokenizer: dolma2
  chinchilla_multiple: 0.5
  seed: 42
  global_batch_size: 16
data:
  sources:
  - name: dclm
    topics:
    - name: science_math_and_technology
      paths:
      - s3://ai2-llm/preprocessed/dclm/baseline_topic_ft_lr05_ng2_n3M6_ova_20pct/allenai/dolma2-tokenizer/science_math_and_technology/**/*.npy
    - name: software_development
      paths:
      - s3://ai2-llm/preprocessed/dclm/baseline_topic_ft_lr05_ng2_n3M6_ova_20pct/allenai/dolma2-tokenizer/software_development/**/*.npy
    - name: education_and_jobs
      paths:
      - s3://ai2-llm/preprocessed/dclm/baseline_topic_ft_lr05_ng2_n3M6_ova_20pct/allenai/dolma2-tokenizer/education_and_jobs/**/*.npy
  - name: wikipedia
    paths:
    - s3://ai2-llm/preprocessed/wikipedia-dolma-0823/allenai/dolma2-tokenizer/*.npy
  - name: arxiv
    paths:
    - s3://ai2-llm/preprocessed/proof-pile-2/v0_decontaminated-0625_tokenized/arxiv/train/allenai/dolma2-tokenizer/*.npy
eval:
  type: inloop
  tasks:
    qa:
      arc_easy_test_rc_5shot: eval/downstream/arc_easy_test_rc_5shot (BPB v2)
mix:
  dclm:
    weight: 0.6
    science_math_and_technology:
      weight: 0.333333
      repetition_factor: 1.0
    software_development:
      weight: 0.333333
      repetition_factor: 1.0
    education_and_jobs:
      weight: 0.333333
      repetition_factor: 1.0
  wikipedia:
    weight: 0.2
    repetition_factor: 2.0
  arxiv:
    weight: 0.2
    repetition_factor: 1.5
"""

# What `olmix generate` writes per variant (olmix/cli.py: the base launch config with a flat mix
# of MixEntry(weight, repetition_factor) and the group id), base keys shortened.
OLMIX_VARIANT = """\
name: example-swarm-a1b2c3d4-0000
training:
  proxy_model_id: olmo3_14m
  tokenizer: dolma2
  chinchilla_multiple: 0.5
  seed: 42
mix:
  dclm:science_math_and_technology:
    weight: 0.41
    repetition_factor: 1.0
  dclm:software_development:
    weight: 0.19
    repetition_factor: 1.0
  wikipedia:
    weight: 0.4
    repetition_factor: 2.0
group_id: a1b2c3d4
"""


def test_write_then_read_is_equal(tmp_path):
    mix = OlmixMix(target_tokens=1_000_000, domains={"dclm:code": (0.25, 1.0), "dclm:science": (0.5, 2.0), "wiki": (0.25, 4.0)})
    write_olmix(str(tmp_path / "mix.yaml"), mix)
    assert read_olmix(str(tmp_path / "mix.yaml")) == mix
    text = (tmp_path / "mix.yaml").read_text()
    assert text.startswith("target_tokens: 1000000\nmix:\n  dclm:code:\n    weight: 0.25\n    repetition_factor: 1.0\n")
    # A whole launch config keeps its other keys; no target_tokens is no target_tokens.
    variant = parse_olmix(__import__("yaml").safe_load(OLMIX_VARIANT), "variant.yaml")
    write_olmix(str(tmp_path / "variant.yaml"), variant)
    again = read_olmix(str(tmp_path / "variant.yaml"))
    assert again == variant and again.target_tokens is None
    assert list(again.extra) == ["name", "training", "group_id"] and again.extra["group_id"] == "a1b2c3d4"


def test_olmix_example_files_read_as_olmix_flattens_them(tmp_path):
    (tmp_path / "mix_baseline.yaml").write_text(OLMIX_BASELINE)
    mix = read_olmix(str(tmp_path / "mix_baseline.yaml"))
    assert mix.target_tokens is None
    assert mix.domains == {
        "dclm:science_math_and_technology": (pytest.approx(0.6 * 0.333333), 1.0),
        "dclm:software_development": (pytest.approx(0.6 * 0.333333), 1.0),
        "dclm:education_and_jobs": (pytest.approx(0.6 * 0.333333), 1.0),
        "wikipedia": (0.2, 2.0),
        "arxiv": (0.2, 1.5),
    }
    assert mix.extra["training"]["proxy_model_id"] == "olmo3_14m"
    (tmp_path / "variant.yaml").write_text(OLMIX_VARIANT)
    assert read_olmix(str(tmp_path / "variant.yaml")).domains == {
        "dclm:science_math_and_technology": (0.41, 1.0),
        "dclm:software_development": (0.19, 1.0),
        "wikipedia": (0.4, 2.0),
    }
    # Nested: repetition inherited from the nearest level that sets it, a bare number a weight.
    nested = {"mix": {"web": {"weight": 0.5, "repetition_factor": 2.0, "a": {"weight": 0.5}, "b": 0.5}, "wiki": {"weight": 0.5}}}
    assert parse_olmix(nested, "x").domains == {"web:a": (0.25, 2.0), "web:b": (0.25, 2.0), "wiki": (0.5, 1.0)}
    # olmix before Feb 2026: [weight, repetition_factor] lists, in a variant or a mixes JSON.
    (tmp_path / "old.yaml").write_text("name: v-0000\nmix:\n  wiki:\n  - 0.6\n  - 1.0\n  code:\n  - 0.4\n  - 1.5\n")
    assert read_olmix(str(tmp_path / "old.yaml")).domains == {"wiki": (0.6, 1.0), "code": (0.4, 1.5)}
    mixes = {"mixes": [{"wiki": [0.6, 1.0], "code": [0.4, 1.5]}, {"wiki": [0.1, 1.0], "code": [0.9, 1.5]}]}
    (tmp_path / "mixes.json").write_text(json.dumps(mixes))
    assert read_olmix(str(tmp_path / "mixes.json"), index=1).domains == {"wiki": (0.1, 1.0), "code": (0.9, 1.5)}


def _spec(tmp_path: Path, **extra) -> dict:
    return {
        "sources": [
            {"name": "dclm.code", "documents": [str(tmp_path / "code" / "documents" / "*.gz")], "ratio": 0.5},
            {"name": "dclm.science", "documents": [str(tmp_path / "science" / "documents" / "*.gz")], "ratio": 0.3},
            {"name": "wiki", "documents": [str(tmp_path / "wiki" / "documents" / "*.gz")], "tokens": 200},
        ],
        "output": str(tmp_path / "out"),
        "tokenizer": str(tmp_path / "tokenizer.json"),
        "target_tokens": 1000,
        **extra,
    }


def test_to_and_from_a_sources_spec(tmp_path):
    base = load_config(MixConfig, None, _spec(tmp_path))
    got = from_mix_config(base)
    assert got == OlmixMix(1000, {"dclm:code": (0.5, 1.0), "dclm:science": (0.3, 1.0), "wiki": (0.2, 1.0)})
    mix = OlmixMix(5000, {"dclm:code": (0.6, 1.0), "dclm:science": (0.3, 2.0), "wiki": (0.1, 4.0)})
    cfg = to_mix_sources(mix, base)
    assert cfg.target_tokens == 5000
    assert [(s.name, s.ratio, s.tokens, s.max_repetition) for s in cfg.sources] == [
        ("dclm.code", pytest.approx(0.6), None, 1.0),
        ("dclm.science", pytest.approx(0.3), None, 2.0),
        ("wiki", pytest.approx(0.1), None, 4.0),
    ]
    assert from_mix_config(cfg).domains == {k: (pytest.approx(w), r) for k, (w, r) in mix.domains.items()}
    assert base.sources[0].ratio == 0.5  # the base is left as it was
    # Weights within olmix's rounding are made exact; weight 0 and unnamed sources take no part.
    cfg = to_mix_sources(OlmixMix(None, {"dclm:code": (0.70001, 1.0), "wiki": (0.3, 1.0), "dclm:science": (0.0, 1.0)}), base)
    assert cfg.target_tokens == 1000 and [s.name for s in cfg.sources] == ["dclm.code", "wiki"]
    assert sum(s.ratio or 0 for s in cfg.sources) == pytest.approx(1, abs=1e-12)
    # Without a target the spec's tokens give the shares and the total.
    no_target = load_config(MixConfig, None, {**_spec(tmp_path), "target_tokens": None})
    no_target.sources[0].ratio, no_target.sources[0].tokens = None, 600
    no_target.sources[1].ratio, no_target.sources[1].tokens = None, 200
    assert from_mix_config(no_target) == OlmixMix(1000, {"dclm:code": (0.6, 1.0), "dclm:science": (0.2, 1.0), "wiki": (0.2, 1.0)})


def test_the_spec_mixture_key_sets_the_ratios_the_run_uses(tmp_path):
    from mixers.stage import MixStage

    texts = []
    for name in ("code", "science", "wiki"):
        docs = make_docs(5, seed=len(name), source=name)
        texts += [d["text"] for d in docs]
        write_documents(str(tmp_path / name / "documents" / "part-0.jsonl.gz"), docs)
    train_tokenizer(tmp_path / "tokenizer.json", texts)
    write_olmix(str(tmp_path / "mix.yaml"), OlmixMix(2000, {"dclm:code": (0.25, 1.0), "dclm:science": (0.25, 3.0), "wiki": (0.5, 2.0)}))
    stage = MixStage(load_config(MixConfig, None, _spec(tmp_path, mixture=str(tmp_path / "mix.yaml"))))
    assert stage.requested == {"dclm.code": 500, "dclm.science": 500, "wiki": 1000}
    assert [(s.ratio, s.max_repetition) for s in stage.config.sources] == [(0.25, 1.0), (0.25, 3.0), (0.5, 2.0)]
    assert stage.config.mixture == str(tmp_path / "mix.yaml")  # the manifest says where the ratios came from
    streams = {"streams": [{"name": "s", "documents": [str(tmp_path / "wiki" / "documents" / "*.gz")], "output": {"path": str(tmp_path)}}]}
    with pytest.raises(ConfigError, match="config key 'mixture': an olmix mixture belongs to a mix of sources"):
        MixStage(load_config(MixConfig, None, {**streams, "mixture": str(tmp_path / "mix.yaml")}))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "mix:\n  a: {weight: 0.5, repetition_factor: 1.0}\n  b: {weight: 0.4, repetition_factor: 1.0}\n",
            "key 'mix': the weights add up to 0.9, not 1",
        ),
        (
            "mix:\n  a: {weight: 1.2, repetition_factor: 1.0}\n  b: {weight: -0.2, repetition_factor: 1.0}\n",
            "key 'mix.b.weight': must be >= 0, got -0.2",
        ),
        ("mix:\n  a: {weight: 1.0, repetition_factor: -1}\n", "key 'mix.a.repetition_factor': must be >= 0, got -1"),
        ("mix:\n  a: {weight: one, repetition_factor: 1}\n", "key 'mix.a.weight': expected a number, got 'one'"),
        ("mix:\n  a: [1.0]\n", "key 'mix.a': expected [weight, repetition_factor], got [1.0]"),
        ("mix:\n  a: {repetition_factor: 2.0}\n", "key 'mix.a': an entry needs a 'weight'"),
        ("name: x\n", "key 'mix' is missing"),
        ("mix: [1, 2]\n", "key 'mix': expected a mapping of domains, got list"),
        ("target_tokens: -5\nmix:\n  a: [1.0, 1.0]\n", "key 'target_tokens': expected a positive integer, got -5"),
        ('{"mixes": [{"a": [1.0, 1.0]}, {"a": [1.0, 1.0]}]}', "key 'mixes' holds 2 mixtures: say which one (index 0..1)"),
        ("mix: {a: [1.0, 1.0]\n", "invalid YAML/JSON"),
    ],
)
def test_bad_files_name_the_file_and_the_key(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(OlmixError) as exc:
        read_olmix(str(path))
    assert str(exc.value).startswith(str(path)) and message in str(exc.value)


def test_bad_applications_and_writes_are_clear(tmp_path):
    with pytest.raises(OlmixError, match=r"olmix file .*nope.yaml cannot be read"):
        read_olmix(str(tmp_path / "nope.yaml"))
    with pytest.raises(OlmixError, match=r"out.yaml: key 'mix': the weights add up to 0.5, not 1"):
        write_olmix(str(tmp_path / "out.yaml"), OlmixMix(None, {"a": (0.5, 1.0)}))
    assert not (tmp_path / "out.yaml").exists()
    base = load_config(MixConfig, None, _spec(tmp_path))
    with pytest.raises(OlmixError, match=r"domains with no source in the spec: web:cc, books \(domain 'a:b' is the source named 'a.b'"):
        to_mix_sources(OlmixMix(None, {"web:cc": (0.5, 1.0), "books": (0.25, 1.0), "wiki": (0.25, 1.0)}), base)
    with pytest.raises(OlmixError, match=r"key 'mix.wiki.repetition_factor': 0.5 is below 1"):
        to_mix_sources(OlmixMix(None, {"wiki": (1.0, 0.5)}), base)
    no_target = load_config(MixConfig, None, {**_spec(tmp_path), "target_tokens": None})
    with pytest.raises(OlmixError, match="key 'target_tokens' is missing, in the mixture and in the spec"):
        to_mix_sources(OlmixMix(None, {"wiki": (1.0, 1.0)}), no_target)
