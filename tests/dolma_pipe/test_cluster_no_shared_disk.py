"""A Ray cluster whose nodes share no disk: every file on S3, the same bytes as a local run.

The head node (no CPUs: the driver's machine) runs here; each of two worker nodes runs in its own
mount namespace with its own ``/tmp`` (a tmpfs) and working directory, so a task sees none of the
driver's local files (the test's folders are under ``/tmp``). Inputs, work files and outputs are
on a moto S3 server every node reaches (the AWS_* variables the nodes inherit). dedup (Bloom mode
with documents and paragraphs; MinHash with its work directory elsewhere), mix (streams, and
Dolmino sources) and tokenize run on the cluster with ``--ray-address`` and write the same bytes
as the same configs on the local executor; a driver killed mid-phase is rerun and resumes; a local
path is refused in one line; the suffix index of S3 token shards is built by the nodes (each
in its own scratch space) into S3 as the local executor builds it, and queried through a checked
local copy. Only the processes this test started are stopped (their command lines
name its temp dirs).
"""

from __future__ import annotations

import io
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from dolma_pipe import storage
from dolma_pipe.cli import COMMANDS
from dolma_pipe.config import load_config
from dolma_pipe.documents import write_documents
from dolma_pipe.manifest import read_manifest
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.tokenize import TokenizeConfig, TokenizeStage
from tests.support.documents import make_docs
from tests.support.index import EOS, index_config, planted_documents, run_index, write_corpus
from tests.support.namespaces import private_tmp
from tests.support.processes import free_port, kill_processes_under, kill_when
from tests.support.tokens import train_tokenizer

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(900)]

RAY = Path(sys.executable).with_name("ray")
WORKERS = 2
FILES = 6


@pytest.fixture(scope="module")
def cluster(s3_server):
    """The head here (0 CPUs), and WORKERS nodes of 1 CPU each in their own mount namespace."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to give each node its own /tmp")
    base = tempfile.mkdtemp(prefix="dpn", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    marker = os.path.basename(base)
    port = free_port()
    # Token authentication as on a real cluster (the driver needs the token too); the AWS_* variables
    # of the S3 server are in os.environ, so every node's workers inherit them.
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16), "RAY_USAGE_STATS_ENABLED": "0"}
    env = {**os.environ, **auth}
    common = ["--node-ip-address", "127.0.0.1", "--disable-usage-stats", "--object-store-memory", str(100 * 2**20)]
    try:
        head = [str(RAY), "start", "--head", "--port", str(port), "--num-cpus", "0", "--include-dashboard", "false"]
        subprocess.run([*head, "--temp-dir", f"{base}/h", *common], env=env, check=True, capture_output=True, timeout=180)
        joining = []
        for i in range(WORKERS):
            # The node's /tmp is its own tmpfs: its Ray files and working directory are there, and the
            # driver's folders (under the host's /tmp) are not. The nodes join at once (each takes seconds).
            node = f"/tmp/{marker}-n{i}"
            join = [str(RAY), "start", "--address", f"127.0.0.1:{port}", "--num-cpus", "1", "--temp-dir", node, *common]
            script = f"{private_tmp()} && mkdir -p {node}/cwd && cd {node}/cwd && exec {' '.join(join)}"
            joining.append(
                subprocess.Popen(
                    ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for i, proc in enumerate(joining):
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, f"worker node {i} did not start: {out[-2000:]}{err[-3000:]}"
        yield f"127.0.0.1:{port}", auth
    finally:
        kill_processes_under(marker)
        shutil.rmtree(base, ignore_errors=True)


# ---- the corpus and the configs ------------------------------------------------------------------


def _corpus(bucket: str) -> str:
    """FILES files on S3 with whole documents and paragraphs repeated across them."""
    root = f"s3://{bucket}/corpus"
    shared = make_docs(4, seed=99, words=30)
    for f in range(FILES):
        docs = make_docs(25, seed=f, words=40 + 5 * f)
        for i, d in enumerate(docs):
            if i % 4 == 0:  # a paragraph seen in other files
                d["text"] = d["text"] + "\n" + shared[i % 3]["text"]
        docs += [dict(d, id=f"copy-{f}-{j}") for j, d in enumerate(shared[: 1 + f % 3])]  # whole copies
        write_documents(f"{root}/documents/part-{f:02d}.jsonl.gz", docs)
    return root


def _configs(bucket: str, root: str, tokenizer: str) -> dict[str, tuple[str, dict]]:
    docs = [f"{root}/documents/*.jsonl.gz"]
    out = f"s3://{bucket}/out"
    exact = {"documents": docs, "dedupe": {"name": "exact", "documents": {"attribute_name": "dup_docs", "key": "$.text"}}}
    bloom = {
        "documents": docs,
        "dedupe": {"name": "bloom", "paragraphs": {"attribute_name": "dup_paras"}},
        "bloom_filter": {"file": f"{out}/paragraphs.bloom", "estimated_doc_count": 10_000, "desired_false_positive_rate": 1e-6},
    }
    near = {
        "documents": docs,
        "dedupe": {"name": "near"},
        "minhash": {"threshold": 0.8},
        "work_dir": {"output": f"s3://{bucket}/scratch"},
    }
    streams = {
        "streams": [
            {
                "name": "mixed",
                "documents": docs,
                "attributes": ["exact", "bloom", "near"],
                "output": {"path": f"{out}/mixed", "max_size_in_bytes": 6_000},
                "filter": {"exclude": ["$.attributes[?(@.dup_docs && @.dup_docs[0] && @.dup_docs[0][2] >= 1.0)]"]},
                "span_replacement": [{"span": "$.attributes.dup_paras", "min_score": 0.5, "replacement": ""}],
            }
        ],
    }
    sources = {
        "sources": [
            {"name": "first", "documents": [f"{root}/documents/part-0[0-2].jsonl.gz"], "ratio": 0.6, "max_repetition": 2},
            {"name": "second", "documents": [f"{root}/documents/part-0[3-5].jsonl.gz"], "ratio": 0.4, "max_repetition": 2},
        ],
        "output": f"{out}/dolmino",
        "tokenizer": tokenizer,  # a file on the driver only: shipped to the nodes through the work directory
        "target_tokens": 6000,
        "seeds": [0, 1],
        "max_size_in_bytes": 8000,
    }
    tokens = {
        "documents": [f"{out}/mixed/*.jsonl.gz"],
        "destination": f"{out}/tokens",
        "tokenizer": {"name_or_path": tokenizer, "eos_token_id": 1},
        "max_tokens": 3000,
        "validation": {"fraction": 0.1},
    }
    return {
        "dedup-exact": ("dedup", exact),
        "dedup-bloom": ("dedup", bloom),
        "dedup-near": ("dedup", near),
        "mix-streams": ("mix", streams),
        "mix-sources": ("mix", sources),
        "tokenize": ("tokenize", tokens),
    }


def stage_class(command: str):
    """The stage class of the CLI command ``command``."""
    return next(c for c in COMMANDS if c.name == command).load()


def _run_local(command: str, config: dict) -> None:
    """The same config on the local executor, in this process."""
    stage_cls = stage_class(command)
    assert stage_cls is not None
    stage = stage_cls(load_config(stage_cls.config_model, None, {**config, "processes": 2, "progress": False}))
    run_stage(stage, stream=io.StringIO())


def _cli(args: list[str], cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dolma_pipe", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _run_ray(command: str, config: dict, cluster: tuple[str, dict], folder: Path) -> str:
    address, auth = cluster
    path = folder / f"{command}-{len(list(folder.iterdir()))}.json"
    path.write_text(json.dumps(config))
    proc = _cli([command, "-c", str(path), "--ray-address", address, "--processes", "2", "--no-progress"], folder, auth)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stderr


def _outputs(bucket: str) -> dict[str, bytes]:
    """Every object of the bucket a run wrote but markers, manifests, locks and logs (which name
    times, hosts and executors): the attributes, shards, filters and errors."""
    out = {}
    for path in storage.glob(f"s3://{bucket}/**"):
        name = path.rsplit("/", 1)[-1]
        if name.endswith(".done") or name in ("_manifest.json", "_lock.json", "_failures.log") or "/scratch/" in path:
            continue
        if "/corpus/documents/" in path:
            continue
        out[path] = storage.read_bytes(path)
    return out


def _clear_outputs(bucket: str) -> None:
    for path in storage.glob(f"s3://{bucket}/**"):
        if "/corpus/documents/" not in path:
            storage.remove(path)


ORDER = ("dedup-exact", "dedup-bloom", "dedup-near", "mix-streams", "mix-sources", "tokenize")


def test_a_cluster_sharing_no_disk_writes_what_a_local_run_writes(cluster, s3_bucket, tmp_path):
    address, auth = cluster
    tokenizer = train_tokenizer(tmp_path / "tokenizer.json", [d["text"] for d in make_docs(200, words=40)])  # on the driver only
    root = _corpus(s3_bucket)
    configs = _configs(s3_bucket, root, tokenizer)
    folder = tmp_path / "configs"
    folder.mkdir()

    for name in ORDER:
        _run_local(*configs[name])
    local = _outputs(s3_bucket)
    assert (
        any("/attributes/exact/" in p for p in local)
        and any("/attributes/bloom/" in p for p in local)
        and any("/attributes/near/" in p for p in local)
    )
    assert any(p.endswith(".npy") for p in local) and any("/dolmino/seed-1/" in p for p in local)
    _clear_outputs(s3_bucket)

    for name in ORDER:
        command, config = configs[name]
        _run_ray(command, config, cluster, folder)
        assert read_manifest(_root_of(s3_bucket, name)).executor.name == "ray"
    assert _outputs(s3_bucket) == local
    # The work files went where the configs put them, and were removed when the runs completed.
    assert not storage.glob(f"s3://{s3_bucket}/scratch/**")

    # A driver killed mid-phase: the rerun against the same cluster resumes there, the same bytes.
    command, config = configs["dedup-near"]
    for path in storage.glob(f"{root}/attributes/near/**"):
        storage.remove(path)
    path = folder / "near-killed.json"
    path.write_text(json.dumps(config))
    scan_done = f"{root}/attributes/near/_done/scan/"
    kill_when(
        "dolma_pipe",
        [command, "-c", str(path), "--ray-address", address, "--processes", "2", "--no-progress"],
        ready=lambda: bool(storage.glob(scan_done + "*.done")),
        env=auth,
        timeout=240,
    )
    assert read_manifest(f"{root}/attributes/near").status == "running"
    again = _run_ray(command, config, cluster, folder)
    assert re.search(r"[1-9][\d,]* already done", again), again
    assert _outputs(s3_bucket) == local


def _root_of(bucket: str, name: str) -> str:
    return {
        "dedup-exact": f"s3://{bucket}/corpus/attributes/exact",
        "dedup-bloom": f"s3://{bucket}/corpus/attributes/bloom",
        "dedup-near": f"s3://{bucket}/corpus/attributes/near",
        "mix-streams": f"s3://{bucket}/out/mixed",
        "mix-sources": f"s3://{bucket}/out/dolmino",
        "tokenize": f"s3://{bucket}/out/tokens",
    }[name]


def test_a_local_path_is_refused_in_one_line(cluster, s3_bucket, tmp_path):
    address, auth = cluster
    write_documents(str(tmp_path / "documents" / "a.jsonl.gz"), make_docs(3))
    for args, key in (
        (["convert", "--documents", str(tmp_path / "documents" / "*"), "--destination", f"s3://{s3_bucket}/c"], "documents.0"),
        (["convert", "--documents", str(tmp_path / "documents" / "*"), "--destination", str(tmp_path / "out")], "documents.0"),
    ):
        proc = _cli([*args, "--ray-address", address, "--no-progress"], tmp_path, auth)
        ours = [line for line in proc.stderr.splitlines() if line.startswith("dolma-pipe")]
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert len(ours) == 1, proc.stderr[-3000:]
        assert f"config key '{key}': " in ours[0] and f"the Ray cluster at {address} has {WORKERS + 1} nodes that share no disk" in ours[0]
        assert "s3://" in ours[0] and "DOLMA_PIPE_SHARED_FS=1" in ours[0]
    # DOLMA_PIPE_SHARED_FS=1 says the local paths are on every node: here they are not, and the
    # worker says so (its /tmp is its own).
    proc = _cli(
        ["convert", "--documents", str(tmp_path / "documents" / "*"), "--destination", f"s3://{s3_bucket}/c", "--ray-address", address],
        tmp_path,
        {**auth, "DOLMA_PIPE_SHARED_FS": "1"},
    )
    assert proc.returncode == 1 and "cannot see input" in proc.stderr and "share no disk" not in proc.stderr, proc.stderr[-3000:]
    # A dedup whose inputs and outputs are on S3 but whose work directory is local.
    storage.write_bytes(f"s3://{s3_bucket}/d/documents/a.jsonl", b'{"id": "1", "text": "x"}\n')
    proc = _cli(
        [
            "dedup",
            "--documents",
            f"s3://{s3_bucket}/d/documents/*",
            "--dedupe.name",
            "x",
            "--minhash.threshold",
            "0.8",
            "--work_dir.output",
            str(tmp_path / "work"),
            "--ray-address",
            address,
            "--no-progress",
        ],
        tmp_path,
        auth,
    )
    assert proc.returncode == 1 and f"config key 'work_dir.output': {tmp_path / 'work'} is on this machine's disk" in proc.stderr, (
        proc.stderr[-3000:]
    )
    assert not storage.glob(f"s3://{s3_bucket}/d/attributes/x/_done/**")  # no task ran


# -- the index: token shards on S3, built by the nodes, the index on S3 -------------------------


def _index_objects(prefix: str) -> dict[str, bytes]:
    """The index's objects but its manifest, lock and markers (which name times, hosts, executors)."""
    out = {}
    for path in storage.glob(f"{prefix}/**"):
        rel = path[len(prefix) + 1 :]
        if not rel.startswith(("_done/", "_manifest.json", "_lock.json", "_failures.log")):
            out[rel] = storage.read_bytes(path)
    return out


def test_an_s3_index_built_by_nodes_that_share_no_disk(cluster, s3_bucket, tmp_path):
    address, auth = cluster
    files = planted_documents(files=3, docs=30, seed=8)
    write_corpus(tmp_path, files)
    tokenizer = train_tokenizer(tmp_path / "tokenizer.json", [d["text"] for rows in files for d in rows], vocab_size=300)
    tokens = f"s3://{s3_bucket}/tokens"
    cfg = {
        "documents": [str(tmp_path / "documents" / "*.gz")],
        "destination": tokens,
        "tokenizer": {"name_or_path": tokenizer, "eos_token_id": EOS},
        "max_tokens": 1200,
        "validation": {"fraction": 0.2},
        "processes": 1,
        "progress": False,
    }
    run_stage(TokenizeStage(load_config(TokenizeConfig, None, cfg)), stream=io.StringIO())
    shards = [f"{tokens}/train", f"{tokens}/val"]

    local = f"s3://{s3_bucket}/index-local"
    run_index(index_config(local, shards=shards, processes=2))
    dest = f"s3://{s3_bucket}/index"
    config = tmp_path / "index.json"
    config.write_text(json.dumps(index_config(dest, shards=shards)))
    proc = subprocess.run(
        [sys.executable, "-m", "dolma_pipe", "index", "-c", str(config), "--ray-address", address, "--processes", "2", "--no-progress"],
        cwd=tmp_path,
        env={**os.environ, **auth},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert read_manifest(dest).executor.name == "ray"
    built = _index_objects(dest)
    assert len([k for k in built if k.endswith(".sa")]) >= 4 and built == _index_objects(local)

    answers = []
    for root in (dest, local):
        r = subprocess.run(
            [sys.executable, "-m", "dolma_pipe", "query", "--index", root, "--cache", str(tmp_path / "cache"), "--tokens", str(EOS)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        answers.append(r.stdout)
    assert answers[0] == answers[1] and int(answers[0].replace(",", "")) == sum(len(rows) for rows in files)
    assert any(Path(tmp_path / "cache").rglob("*.sa"))
