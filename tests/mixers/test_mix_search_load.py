"""``mix-search`` refuses, when its config loads, shards the proxies could not train on: sources
tokenized with another tokenizer than the rest or than the proxy's vocabulary allows, and names
each mistake under its own key (``sources.N.val``, not ``eval.domains.<name>``).

Nothing here trains: the stage is made (that is where the config is checked) or the CLI stops
before the first proxy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dolma_pipe.cli import main
from dolma_pipe.config import ConfigError, load_config
from mixers.search.config import MixSearchConfig
from mixers.search.stage import MixSearchStage
from tests.support.mix_search import proxy_config, tokenize, word_tokenizer, words, write_documents

pytestmark = pytest.mark.train


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Sources ``a`` and ``b`` tokenized with the small tokenizer, ``c`` with a larger one."""
    root = tmp_path_factory.mktemp("tokens")
    small = word_tokenizer(root / "small.json", words("w", 40))
    large = word_tokenizer(root / "large.json", words("w", 100))
    out = {"small": small, "large": large}
    for name, tok in (("a", small), ("b", small), ("c", large)):
        docs = write_documents(root / "corpus", name, words("w", 40), 30, seed=ord(name))
        out[name] = tokenize(docs, root / "tokens" / name, tok)
    return out


def _spec(tmp_path: Path, tokens: dict[str, Path], names: tuple[str, ...], **extra: object) -> dict:
    spec = {
        "output": str(tmp_path / "search"),
        "processes": 1,
        "progress": False,
        "sources": [{"name": n, "paths": [str(tokens[n] / "train")], "val": [str(tokens[n] / "val")]} for n in names],
        "proxy": {"config": str(proxy_config(tmp_path / "proxy.yaml")), "tokens": 1024},
        "swarm": {"runs": 3},
    }
    spec.update(extra)
    return spec


def _stage(spec: dict) -> MixSearchStage:
    return MixSearchStage(MixSearchConfig.model_validate(spec))


def test_sources_tokenized_alike_load(tmp_path, tokens):
    stage = _stage(_spec(tmp_path, tokens, ("a", "b"), eval={"tokenizer": str(tokens["small"])}))
    assert stage.names == ["a", "b"]


def test_a_source_tokenized_with_another_tokenizer_is_refused_when_the_config_loads(tmp_path, tokens):
    with pytest.raises(ConfigError) as e:
        _stage(_spec(tmp_path, tokens, ("a", "b", "c")))
    msg = str(e.value)
    # one line: the key of the odd source, both tokenizers
    assert "\n" not in msg and msg.startswith("config key 'sources.2.paths'")
    assert str(tokens["large"]) in msg and str(tokens["small"]) in msg and "sources.0.paths" in msg
    # against eval.tokenizer when it is given: the first source that differs from it is named
    with pytest.raises(ConfigError, match=r"^config key 'sources.0.paths': .* not with .*large.json \(eval.tokenizer"):
        _stage(_spec(tmp_path, tokens, ("a", "b"), eval={"tokenizer": str(tokens["large"])}))


def test_a_tokenizer_larger_than_the_proxys_vocabulary_is_refused(tmp_path, tokens):
    spec = _spec(tmp_path, tokens, ("a", "b"))
    spec["proxy"]["config"] = str(proxy_config(tmp_path / "narrow.yaml", vocab_size=32))
    with pytest.raises(
        ConfigError, match=r"^config key 'sources.0.paths': .*small.json \(42 entries\), more ids than the proxy's model.vocab_size 32"
    ):
        _stage(spec)
    with pytest.raises(ConfigError, match="config key 'eval.tokenizer': .* 42 entries, more than the proxy's model.vocab_size 32"):
        _stage({**spec, "eval": {"tokenizer": str(tokens["small"])}})


def test_another_end_of_document_id_is_refused(tmp_path, tokens):
    spec = _spec(tmp_path, tokens, ("a", "b"))
    spec["proxy"]["set"] = ["data.eos_id=1"]
    with pytest.raises(ConfigError, match=r"^config key 'sources.0.paths': .* end with id 0, not the proxy's data.eos_id 1"):
        _stage(spec)


def test_a_missing_val_folder_is_named_by_its_own_key(tmp_path, tokens, capsys):
    spec = _spec(tmp_path, tokens, ("a", "b"))
    spec["sources"][1]["val"] = [str(tmp_path / "no-such" / "val")]
    path = tmp_path / "s.yaml"
    import yaml

    path.write_text(yaml.safe_dump(spec))
    assert main(["mix-search", "-c", str(path)]) == 1
    err = capsys.readouterr().err
    assert "config key 'sources.1.val'" in err and "eval.domains" not in err
    # an eval domain keeps its key, and may not take a source's domain's name
    spec["sources"][1]["val"] = [str(tokens["b"] / "val")]
    spec["eval"] = {"domains": {"extra": [str(tmp_path / "nope")]}}
    path.write_text(yaml.safe_dump(spec))
    assert main(["mix-search", "-c", str(path)]) == 1
    assert "config key 'eval.domains.extra'" in capsys.readouterr().err
    spec["eval"] = {"domains": {"b": [str(tokens["a"] / "val")]}}
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError, match=r"eval.domains.b: 'b' is already the domain of sources.1.val"):
        load_config(MixSearchConfig, str(path))
