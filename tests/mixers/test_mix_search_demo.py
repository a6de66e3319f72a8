"""The demo's mix-search step (``examples/run_demo.sh``, step 15) with ``DEMO_OUTPUT`` elsewhere.

The whole demo takes minutes, so these run its pieces: the helpers it defines (the script, sourced,
defines them and stops), on the example configs it copies and on fake commands that fail; and the
script itself with a fake ``dolma-pipe`` that fails at once.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from dolma_pipe.config import load_config
from mixers.config import MixConfig
from mixers.search.config import MixSearchConfig

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "run_demo.sh"


def demo_bash(script: str, out: Path) -> subprocess.CompletedProcess:
    """``script`` run by bash in the checkout's root after sourcing the demo for its helpers (with
    this interpreter's environment as the demo's VENV)."""
    env = {**os.environ, "DEMO_OUTPUT": str(out)}
    source = f"source {shlex.quote(str(SCRIPT))} {shlex.quote(sys.prefix)}"
    return subprocess.run(["bash", "-c", f"{source}\n{script}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)


def _paths(value: object) -> list[str]:
    if isinstance(value, str):
        return [value] if "/" in value else []
    if isinstance(value, dict):
        return [p for v in value.values() for p in _paths(v)]
    if isinstance(value, list):
        return [p for v in value for p in _paths(v)]
    return []


def test_the_demo_copies_every_example_config_it_runs_into_its_output_folder(tmp_path):
    out = tmp_path / "demo out & #1"  # characters sed would read as its own
    r = demo_bash("for c in mix-stage1.yaml mix-stage2.yaml mix-search.yaml; do demo_config $c; done", out)
    assert r.returncode == 0, r.stderr
    copies = r.stdout.split("\n")[:3]
    assert copies == [f"{out}/configs/mix-stage1.yaml", f"{out}/configs/mix-stage2.yaml", f"{out}/configs/mix-search.yaml"]
    for copy in map(Path, copies):
        text = "\n".join(line for line in copy.read_text().splitlines() if not line.lstrip().startswith("#"))
        assert "demo-output" not in text and "examples/configs/" not in text, copy
    search = load_config(MixSearchConfig, str(out / "configs" / "mix-search.yaml"))
    assert search.fit.spec == str(out / "configs" / "mix-stage2.yaml")  # the copy, naming out/ too
    local = [p for p in _paths(yaml.safe_load((out / "configs" / "mix-search.yaml").read_text())) if not p.startswith("train/")]
    assert local and all(p.startswith(f"{out}/") for p in local), local
    stage2 = load_config(MixConfig, str(out / "configs" / "mix-stage2.yaml"))
    assert stage2.output == str(out / "mix" / "stage2")
    assert all(d.startswith(f"{out}/corpus/documents/") for s in stage2.sources for d in s.documents)


def test_a_filtered_step_that_fails_prints_why(tmp_path):
    fails = "bash -c 'echo loading; echo \"dolma-pipe mix-search: error: config key fit.spec: the reason\" >&2; exit 3'"
    r = demo_bash(f"step 15 'mix-search'\nfiltered '^swarm:' {tmp_path}/logs/search.log {fails}\necho not reached", tmp_path)
    assert r.returncode == 3 and "not reached" not in r.stdout
    assert "dolma-pipe mix-search: error: config key fit.spec: the reason" in r.stderr
    assert "failed (exit 3); its whole output is in" in r.stderr
    assert "demo: step 15 failed (exit 3)" in r.stderr
    # a command that works shows its output from the pattern on
    works = "bash -c 'echo loading; echo swarm: 8 runs; echo done'"
    r = demo_bash(f"filtered '^swarm:' {tmp_path}/logs/ok.log {works}", tmp_path)
    assert r.returncode == 0 and r.stdout == "swarm: 8 runs\ndone\n"


def test_the_demo_stops_at_its_first_failing_step_and_says_why(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    fake = venv / "bin" / "dolma-pipe"
    fake.write_text('#!/usr/bin/env bash\necho "dolma-pipe $1: error: a failure for the test" >&2\nexit 1\n')
    fake.chmod(0o755)
    python = venv / "bin" / "python"  # this interpreter: step 1 writes the crawl with it, then runs dolma-pipe warc
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    env = {**os.environ, "DEMO_OUTPUT": str(tmp_path / "out")}
    r = subprocess.run(["bash", str(SCRIPT), str(venv)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 1
    assert "dolma-pipe warc: error: a failure for the test" in r.stderr  # the end of the step's log
    assert "demo: step 1 failed (exit 1)" in r.stderr and "== 2." not in r.stdout
