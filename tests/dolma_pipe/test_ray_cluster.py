"""A real two-node Ray cluster on loopback: relative paths, token authentication, bytes equal to a local run."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from dolma_pipe.documents import write_documents
from dolma_pipe.manifest import read_manifest
from tests.support.documents import make_docs
from tests.support.processes import free_port, kill_processes_under

RAY = Path(sys.executable).with_name("ray")


@pytest.fixture(scope="module")
def two_node_cluster(tmp_path_factory):
    """Head (no CPUs, so every task runs on the second node) plus a node, each in its own directory;
    one cluster for the module's tests (starting one takes about 13 s)."""
    tmp_path = tmp_path_factory.mktemp("cluster")
    base = tempfile.mkdtemp(prefix="dpr", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    port = free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16), "RAY_USAGE_STATS_ENABLED": "0"}
    # Both nodes are on this machine, so they share its disk: say so, or local paths are refused
    # (test_cluster_no_shared_disk.py runs nodes that share none).
    env["DOLMA_PIPE_SHARED_FS"] = "1"
    head_dir, node_dir = tmp_path / "head", tmp_path / "node"
    head_dir.mkdir()
    node_dir.mkdir()
    common = ["--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
    try:
        subprocess.run(
            [
                str(RAY),
                "start",
                "--head",
                "--port",
                str(port),
                "--num-cpus",
                "0",
                "--include-dashboard",
                "false",
                "--temp-dir",
                f"{base}/h",
                *common,
            ],
            cwd=head_dir,
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
        subprocess.run(
            [str(RAY), "start", "--address", f"127.0.0.1:{port}", "--num-cpus", "2", "--temp-dir", f"{base}/n", *common],
            cwd=node_dir,
            env=env,
            check=True,
            capture_output=True,
            timeout=120,
        )
        yield f"127.0.0.1:{port}", env, node_dir
    finally:
        kill_processes_under(base, rounds=3)
        shutil.rmtree(base, ignore_errors=True)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.ray
@pytest.mark.slow
def test_relative_paths_on_a_two_node_cluster_match_a_local_run(two_node_cluster, tmp_path):
    address, env, node_dir = two_node_cluster
    work = tmp_path / "work"
    for f in range(6):
        write_documents(str(work / "data" / "documents" / f"p{f}.jsonl.gz"), make_docs(50, seed=f))
    (work / "data" / "documents" / "bad.jsonl").write_bytes(b'{"id": "1", "text": "ok"}\n{nope\n')
    common = ["--documents", "data/documents/*", "--processes", "2", "--no-progress"]
    cli = [sys.executable, "-m", "dolma_pipe", "convert"]
    ray_run = subprocess.run(
        [*cli, *common, "--destination", "out-ray", "--ray-address", address],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ray_run.returncode == 0, ray_run.stderr[-3000:]
    local = subprocess.run([*cli, *common, "--destination", "out-local"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr[-3000:]
    for sub in ("documents", "_errors"):
        assert _tree(work / "out-ray" / sub) == _tree(work / "out-local" / sub) != {}
    manifest = read_manifest(str(work / "out-ray"))
    assert manifest.status == "complete" and manifest.executor.name == "ray"
    assert manifest.totals["docs_out"] == 301 and manifest.errors == {"malformed_json": 1}
    # Nothing landed beside the second node's working directory.
    assert not any(node_dir.iterdir())


@pytest.mark.ray
@pytest.mark.slow
def test_joining_without_the_token_is_one_clear_line(two_node_cluster, tmp_path, make_corpus):
    address, env, _ = two_node_cluster
    root = make_corpus(files=1, docs=2)
    no_token = {k: v for k, v in env.items() if not k.startswith("RAY_AUTH")}
    # Ray retries a refused join for about 20 s (a head may still be starting); two tries show it.
    no_token["RAY_gcs_server_port_wait_time_s"] = "2"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dolma_pipe",
            "convert",
            "--documents",
            f"{root}/documents/*",
            "--destination",
            str(tmp_path / "o"),
            "--ray-address",
            address,
        ],
        env=no_token,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    ours = [line for line in proc.stderr.splitlines() if line.startswith("dolma-pipe")]
    assert len(ours) == 1 and f"cannot join the Ray cluster at {address}" in ours[0] and "RAY_AUTH_TOKEN" in ours[0]
    assert read_manifest(str(tmp_path / "o")).status == "failed"
