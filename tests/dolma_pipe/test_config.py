"""Config files and dotted overrides: validated at load, one clear message naming the key."""

from __future__ import annotations

import os

import pytest

from dolma_pipe.config import ConfigError, load_config
from dolma_pipe.stages.convert import ConvertConfig
from tests.support.cli import run_cli


def test_defaults_and_overrides(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("documents: [a/*.jsonl]\ndestination: out\nprocesses: 3\n")
    cfg = load_config(ConvertConfig, str(cfg_file), {"processes": 1, "format": "parquet"})
    assert cfg.processes == 1 and cfg.format == "parquet" and cfg.documents == [os.path.abspath("a/*.jsonl")]
    assert cfg.force is False and cfg.max_errors is None


def test_local_paths_are_made_absolute_where_the_config_loads(tmp_path, monkeypatch):
    """Workers on a Ray cluster have other working directories: relative paths are resolved on the driver."""
    monkeypatch.chdir(tmp_path)
    cfg = load_config(ConvertConfig, None, {"documents": ["in/**/*.gz", "s3://b/x/*.gz", "file://rel/y"], "destination": "~/out"})
    assert cfg.documents == [f"{tmp_path}/in/**/*.gz", "s3://b/x/*.gz", f"{tmp_path}/rel/y"]
    assert cfg.destination == os.path.expanduser("~/out")


def test_unknown_key_is_named_with_a_suggestion(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("documents: [x]\ndestination: out\nprocesess: 3\n")
    with pytest.raises(ConfigError) as err:
        load_config(ConvertConfig, str(cfg_file))
    assert "unknown config key 'processes'" not in str(err.value)
    assert "unknown config key 'procesess'" in str(err.value) and "did you mean 'processes'" in str(err.value)
    assert str(cfg_file) in str(err.value)


def test_mistyped_value_names_the_key():
    with pytest.raises(ConfigError, match=r"config key 'processes'.*integer"):
        load_config(ConvertConfig, None, {"documents": ["x"], "destination": "o", "processes": "many"})
    with pytest.raises(ConfigError, match=r"config key 'format'"):
        load_config(ConvertConfig, None, {"documents": ["x"], "destination": "o", "format": "csv"})
    with pytest.raises(ConfigError, match=r"config key 'destination' is required"):
        load_config(ConvertConfig, None, {"documents": ["x"]})


def test_a_check_across_keys_says_only_its_message_and_long_values_are_cut():
    """A model's own check has no key: no "config key ''" and no copy of the whole config; a long
    value is cut short (issue 27, finding 11)."""
    from dolma_pipe.stages.index import IndexConfig

    with pytest.raises(ConfigError) as err:
        load_config(IndexConfig, None, {"destination": "out", "memory_per_task": 1 << 21, "contamination": None})
    assert str(err.value) == "invalid configuration: give either 'shards' (token shards) or 'documents' (document files) to index"
    with pytest.raises(ConfigError) as err:
        load_config(ConvertConfig, None, {"documents": ["x"], "destination": "o", "format": "csv" * 200})
    message = str(err.value)
    assert message.startswith("invalid configuration: config key 'format': ") and len(message) < 400
    assert message.endswith("... (602 characters))")


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    cfg_file = tmp_path / "broken.yaml"
    cfg_file.write_text("documents: [x]\ndestination: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken.yaml:\d+:\d+: invalid YAML"):
        load_config(ConvertConfig, str(cfg_file))


def test_cli_config_errors_have_no_traceback(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("documents: [x]\ndestination: out\nmax_erors: 3\n")
    proc = run_cli("convert", "-c", str(cfg_file))
    assert proc.returncode == 1
    assert "unknown config key 'max_erors'" in proc.stderr and "did you mean 'max_errors'" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_cli("convert", "--documents", "x", "--destinaton", "y")
    assert proc.returncode == 2 and "did you mean --destination" in proc.stderr
    proc = run_cli("convert", "--documents", str(tmp_path / "none*.jsonl"), "--destination", str(tmp_path / "o"))
    assert proc.returncode == 1 and "no input files match" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_config_file_with_command_line_override(tmp_path, make_corpus):
    root = make_corpus(files=2, docs=5)
    cfg_file = tmp_path / "c.json"
    cfg_file.write_text(f'{{"documents": ["{root}/documents/*"], "destination": "{tmp_path}/unused", "processes": 1}}')
    proc = run_cli("convert", "-c", str(cfg_file), "--destination", str(tmp_path / "used"), "--format", "jsonl")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "used" / "documents" / "part-0000.jsonl").exists()
    assert not (tmp_path / "unused").exists()


def test_dotted_overrides_build_nested_keys():
    from pydantic import BaseModel

    from dolma_pipe.config import StrictModel

    class Inner(StrictModel):
        size: int = 1
        name: str = "x"

    class Outer(StrictModel):
        inner: Inner = Inner()
        top: int = 0

    cfg = load_config(Outer, None, {"inner.size": 5, "top": 2})
    assert cfg.inner.size == 5 and cfg.inner.name == "x" and cfg.top == 2
    with pytest.raises(ConfigError, match=r"unknown config key 'inner.sise' \(did you mean 'inner.size'\?\)"):
        load_config(Outer, None, {"inner.sise": 5})
    with pytest.raises(ConfigError, match="config key 'top'"):
        load_config(Outer, None, {"top.deeper": 1})
    with pytest.raises(ConfigError, match="is a value"):
        load_config(Outer, None, {"top": 1, "top.deeper": 1})
    assert isinstance(cfg, BaseModel)


def test_did_you_mean_reaches_optional_sections_and_list_items():
    from dolma_pipe.stages.dedup.config import DedupConfig
    from mixers.config import MixConfig

    with pytest.raises(ConfigError, match=r"unknown config key 'minhash.treshold' \(did you mean 'minhash.threshold'\?\)"):
        load_config(DedupConfig, None, {"documents": ["x/*.gz"], "minhash.treshold": 0.7})
    stream = {"name": "s", "documents": ["x/*.gz"], "output": {"path": "out"}, "filtr": {}}
    with pytest.raises(ConfigError, match=r"unknown config key 'streams.0.filtr' \(did you mean 'streams.0.filter'\?\)"):
        load_config(MixConfig, None, {"streams": [stream]})


def test_a_section_nested_in_another_says_where_it_belongs():
    from dolma_pipe.stages.dedup.config import DedupConfig
    from mixers.config import MixConfig

    base = {"documents": ["x/documents/*.gz"], "dedupe": {"name": "d", "paragraphs": {"attribute_name": "p"}}}
    for section in ("minhash", "bloom_filter", "decontamination", "processes"):
        with pytest.raises(ConfigError, match=rf"unknown config key 'dedupe.{section}' \(it belongs at the top level: '{section}'\)"):
            load_config(DedupConfig, None, {**base, "dedupe": {**base["dedupe"], section: {}}})
    # One level down: a stream's output key given beside the stream's own keys.
    stream = {"name": "s", "documents": ["x/*.gz"], "output": {"path": "out", "filter": {}}}
    with pytest.raises(ConfigError, match=r"'streams.0.output.filter' \(it belongs under 'streams.0': 'streams.0.filter'\)"):
        load_config(MixConfig, None, {"streams": [stream]})
