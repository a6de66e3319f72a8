"""Pre-flight checks (``train/preflight.py``): the verdict logic on hand-made results, the checks
on a one-rank group in this process, and each injected fault on 2 gloo ranks under torchrun
(faults patched in from outside by ``tests/support/preflight_faults.py``), each named with its
rank and host and given its verdict and exit status.

Under torchrun the command's own status is the agent's (1 when a rank fails); each rank's
status is in the agent's failure summary (``exitcode : 76``), which the tests read.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import socket
import stat
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.train

from tests.support.namespaces import can_unshare_mount  # noqa: E402
from tests.support.preflight_faults import launch_faults  # noqa: E402
from train.config import PreflightConfig, from_dict  # noqa: E402
from train.errors import EXIT_CORDON, EXIT_FATAL, EXIT_RETRY  # noqa: E402
from train.preflight import CORDON, FATAL, OK, RETRY, Check, RankReport, checkpoint_bytes, judge, run_preflight  # noqa: E402
from train.testing import make_shards, tiny_config, write_config  # noqa: E402

HOST = socket.gethostname()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_shards(tmp_path_factory.mktemp("preflight") / "data")


def _fail_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("preflight: FAIL")]


def _rank_statuses(result) -> list[int]:
    """Each failed rank's exit status, from torchrun's failure summary."""
    return [int(x) for x in re.findall(r"exitcode\s*:\s*(-?\d+)", result.stderr)]


def _assert_status(result, status: int) -> None:
    codes = _rank_statuses(result)
    # every rank reaches the same verdict; one that the agent stops first shows SIGTERM (-15)
    assert status in codes and set(codes) <= {status, -15}, result.stdout + result.stderr


# -- the verdict logic (no process group) -------------------------------------------------------


def _rank(rank: int, host: str, *checks: Check) -> RankReport:
    return RankReport(rank, host, 0, list(checks))


def _matmul(ms: float, ok: bool = True) -> Check:
    return Check("matmul", ok, {"size": 16, "ms": ms, "gflops": 1.0}, 0.01, OK if ok else CORDON, "" if ok else "wrong result")


def test_verdicts_fatal_wins_then_cordon_then_retry():
    pp = PreflightConfig()
    slow_write = Check("save_dir_speed", False, 1.0, 0.1, RETRY, "slow", ["d"])
    hot = Check("gpu_temperature", False, 95.0, 0.1, CORDON, "hot")
    full = Check("save_dir_space", False, {}, 0.1, FATAL, "full", ["d"])
    assert judge([_rank(0, "a", _matmul(1.0))], pp).verdict == OK
    r = judge([_rank(0, "a", _matmul(1.0), slow_write)], pp)
    assert (r.verdict, r.exit_status, r.cordon_hosts) == (RETRY, EXIT_RETRY, [])
    r = judge([_rank(0, "a", _matmul(1.0), slow_write), _rank(1, "a", _matmul(1.0), hot)], pp)
    assert (r.verdict, r.exit_status, r.cordon_hosts) == (CORDON, EXIT_CORDON, ["a"])
    r = judge([_rank(0, "a", _matmul(1.0), slow_write, full), _rank(1, "a", _matmul(1.0), hot)], pp)
    assert (r.verdict, r.exit_status) == (FATAL, EXIT_FATAL)
    assert [(f["rank"], f["check"], f["verdict"]) for f in r.failures] == [
        (0, "save_dir_speed", RETRY),
        (0, "save_dir_space", FATAL),
        (1, "gpu_temperature", CORDON),
    ]
    assert r.lines()[:3] == [
        "preflight: FAIL rank 0 on a: save_dir_speed: slow [retry]",
        "preflight: FAIL rank 0 on a: save_dir_space: full [fatal]",
        "preflight: FAIL rank 1 on a: gpu_temperature: hot [cordon]",
    ]
    assert r.lines()[-1].startswith("preflight: fatal (exit status 78): 3 failing checks; cordon a;")


def test_shared_storage_failing_on_one_node_only_cordons_it():
    """save_dir and the shards are shared: failing on every node they are the data's or the
    storage's fault (fatal), on some nodes only that node's (cordon)."""
    pp = PreflightConfig()
    ro = Check("save_dir", False, "/s", 0.0, FATAL, "/s: read-only", ["/s"])
    ok = Check("save_dir", True, "/s", 0.0)
    r = judge([_rank(0, "a", ok, _matmul(1.0)), _rank(1, "b", ro, _matmul(1.0))], pp)
    assert (r.verdict, r.cordon_hosts) == (CORDON, ["b"])
    assert r.failures[0]["message"].endswith("(only on this node: a passed)")
    ro_too = Check("save_dir", False, "/s", 0.0, FATAL, "/s: read-only", ["/s"])
    r = judge([_rank(0, "a", ro, _matmul(1.0)), _rank(1, "b", ro_too, _matmul(1.0))], pp)
    assert (r.verdict, len(r.failures)) == (FATAL, 2)

    def shards(bad: list[str]) -> Check:
        return Check("shards", not bad, {}, 0.0, FATAL if bad else OK, f"{bad[0]}: truncated" if bad else "", bad)

    # one shard unreadable on every node: the data; another only on node b: b's mount
    r = judge([_rank(0, "a", shards(["x"]), _matmul(1.0)), _rank(1, "b", shards(["x"]), _matmul(1.0))], pp)
    assert r.verdict == FATAL
    r = judge([_rank(0, "a", shards([]), _matmul(1.0)), _rank(1, "b", shards(["y"]), _matmul(1.0))], pp)
    assert (r.verdict, r.cordon_hosts) == (CORDON, ["b"])


def test_a_slow_rank_is_measured_against_the_lower_median():
    pp = PreflightConfig(slow_factor=2.0)
    # two ranks: the lower median is the faster one (the plain median, 20 ms, would hide 3x)
    r = judge([_rank(0, "a", _matmul(10.0)), _rank(1, "b", _matmul(30.0))], pp)
    assert [(f["rank"], f["host"], f["check"], f["verdict"]) for f in r.failures] == [(1, "b", "matmul_speed", CORDON)]
    assert "3.0x the median rank's 10.00 ms" in r.failures[0]["message"]
    assert judge([_rank(0, "a", _matmul(10.0)), _rank(1, "b", _matmul(15.0))], pp).verdict == OK
    r = judge([_rank(i, "ab"[i // 2], _matmul(ms)) for i, ms in enumerate([10.0, 11.0, 10.5, 40.0])], pp)
    assert [(f["rank"], f["check"]) for f in r.failures] == [(3, "matmul_speed")]
    assert [c.value for rep in r.reports for c in rep.checks if c.check == "matmul_speed"] == [0.952, 1.048, 1.0, 3.81]


def test_a_wrong_all_reduce_names_ranks_only_when_some_got_it_right():
    pp = PreflightConfig()

    def allreduce(ok: bool) -> Check:
        return Check("allreduce", ok, {}, 0.0, OK if ok else CORDON, "" if ok else "sum wrong at 1 of 4 elements")

    r = judge([_rank(0, "a", allreduce(True)), _rank(1, "b", allreduce(False))], pp)
    assert [(f["rank"], f["verdict"]) for f in r.failures] == [(1, CORDON)]
    # every rank wrong on one node: that node is the only suspect
    r = judge([_rank(0, "a", allreduce(False)), _rank(1, "a", allreduce(False))], pp)
    assert (r.verdict, r.cordon_hosts, len(r.failures)) == (CORDON, ["a"], 2)
    # every rank wrong across nodes: no rank can be named; said once, retry
    r = judge([_rank(0, "a", allreduce(False)), _rank(1, "b", allreduce(False)), _rank(2, "c", allreduce(False))], pp)
    assert (r.verdict, r.exit_status, r.cordon_hosts) == (RETRY, EXIT_RETRY, [])
    assert [(f["rank"], f["check"]) for f in r.failures] == [(0, "allreduce")]
    assert "every one of the 3 ranks got a wrong sum" in r.failures[0]["message"]
    assert "names no rank or node" in r.failures[0]["message"]


# -- the checks on a one-rank group in this process --------------------------------------------


@pytest.fixture
def one_rank_group():
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_checks_on_one_rank_in_process(one_rank_group, data, tmp_path):
    raw = tiny_config(tmp_path / "run", data)
    cfg = from_dict(raw)
    r = run_preflight(cfg, 0, 1, "here", 0)
    assert (r.verdict, r.exit_status, r.failures) == (OK, 0, [])
    names = [c.check for c in r.reports[0].checks]
    assert names == ["save_dir", "save_dir_space", "save_dir_speed", "shards", "matmul", "allreduce", "matmul_speed"]
    checks = {c.check: c for c in r.reports[0].checks}
    assert checks["shards"].value == {"shards": 4, "read": 4}
    assert checks["save_dir_space"].value["need_bytes"] == 2 * checkpoint_bytes(cfg)
    assert not list((tmp_path / "run").iterdir())  # the probe file is gone
    assert r.lines() == [r.lines()[-1]] and r.lines()[0].startswith("preflight: ok, 1 rank on 1 host in ")
    # a checkpoint: fp32 weights and AdamW's two moments, 12 bytes a parameter, +10%
    from train.model import describe

    assert checkpoint_bytes(cfg) == int(describe(cfg.model, cfg.data.seq_len)["total"] * 12 * 1.1)

    # a save_dir that cannot be a folder (a file is in the way: fails for root too) is fatal;
    # a write speed below the minimum is a retry
    (tmp_path / "file").write_text("x")
    # (from_dict's --set overrides change the nested sections of the dict they are given)
    r = run_preflight(from_dict(copy.deepcopy(raw), ["checkpoint.save_dir=" + str(tmp_path / "file" / "run")]), 0, 1, "here", 0)
    assert (r.verdict, [(f["check"], f["verdict"]) for f in r.failures]) == (FATAL, [("save_dir", FATAL)])
    assert "cannot be created (Not a directory" in r.failures[0]["message"]
    r = run_preflight(from_dict(copy.deepcopy(raw), ["preflight.min_write_mb_s=1e9"]), 0, 1, "here", 0)
    assert (r.verdict, r.exit_status, [f["check"] for f in r.failures]) == (RETRY, EXIT_RETRY, ["save_dir_speed"])
    assert "the best of 3 probes" in r.failures[0]["message"]


def test_a_save_dir_slow_for_a_moment_passes_on_a_later_probe(tmp_path, monkeypatch):
    """A probe slowed by another job's burst (16 MB/s under a 20 MB/s floor) is followed by
    another; the best speed is judged, and the probes are gone."""
    import train.preflight as preflight

    cfg = from_dict(tiny_config(tmp_path / "run", {"train": "x", "val": "y"}))
    monkeypatch.setattr(preflight, "WRITE_ROUND_PAUSE_S", 0.0)
    seconds = iter([2.0, 0.1, 0.1])
    real = preflight._write_probe

    def burst_then_quiet(path):
        written, _ = real(path)
        return written, next(seconds)

    monkeypatch.setattr(preflight, "_write_probe", burst_then_quiet)
    checks = {c.check: c for c in preflight.check_save_dir(cfg, "here")}
    assert checks["save_dir_speed"].ok and checks["save_dir_speed"].value == round(32 * 2**20 / 1e6 / 0.1, 1)
    assert next(seconds) == 0.1  # two probes: the second passed
    assert not list((tmp_path / "run").iterdir())


# -- the CUDA checks' readings, with an nvidia-smi stand-in ---------------------------------------

# What nvidia-smi prints for the queries check_gpu makes (csv, noheader, nounits), from the env.
FAKE_NVIDIA_SMI = """#!/bin/sh
case "$*" in
  *--query-gpu=*) printf '%s\\n' "$FAKE_SMI_GPU" ;;
  *--query-compute-apps=*) printf '%b' "$FAKE_SMI_APPS" ;;
  *) exit 9 ;;
esac
"""
UUID = "ffc79498-8ff3-c2dc-3b0d-fafd804516ae"


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """A CUDA device as check_gpu sees it (its properties and memory from torch.cuda, the rest
    from an ``nvidia-smi`` stand-in first on PATH): no GPU is needed to read its answers."""
    from types import SimpleNamespace

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(uuid=UUID))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda d: 0)
    memory = {"used": 0}
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d: (80 * 2**30 - memory["used"], 80 * 2**30))

    def set_answers(gpu: str, apps: list[tuple[str, int, int]], used: int = 0) -> None:
        monkeypatch.setenv("FAKE_SMI_GPU", gpu)
        monkeypatch.setenv("FAKE_SMI_APPS", "".join(f"{u}, {pid}, {mib}\\n" for u, pid, mib in apps))
        memory["used"] = used

    return set_answers


def test_gpu_checks_read_temperature_ecc_and_other_processes_memory(fake_gpu, tmp_path, monkeypatch):
    from train.preflight import check_gpu

    pp = PreflightConfig(max_gpu_temperature_c=85.0, max_foreign_gpu_memory_gb=1.0)
    gpu, me, peer, stranger = f"GPU-{UUID}", os.getpid(), os.getpid() + 1, os.getpid() + 2
    cuda = torch.device("cuda", 0)

    def readings(job_pids=frozenset({me, peer})):
        return {c.check: (c.ok, c.value, c.verdict) for c in check_gpu(cuda, pp, set(job_pids))}

    # healthy: cool, no ECC error, only this job's processes (another GPU's stranger ignored)
    fake_gpu("41, 0", [(gpu, me, 900), (gpu, peer, 800), ("GPU-other", stranger, 9000)])
    assert readings() == {"gpu_temperature": (True, 41.0, OK), "gpu_ecc": (True, 0.0, OK), "gpu_memory": (True, 0.0, OK)}
    # hot, ECC errors, another process's 3000 MiB on this GPU: each cordons
    fake_gpu("91, 2", [(gpu, me, 900), (gpu, stranger, 3000)])
    assert readings() == {
        "gpu_temperature": (False, 91.0, CORDON),
        "gpu_ecc": (False, 2.0, CORDON),
        "gpu_memory": (False, round(3000 * 2**20 / 1e9, 3), CORDON),
    }
    # no ECC on this GPU ([N/A]); nvidia-smi in another pid namespace (this pid unlisted): the
    # device's use less this process's (its allocator and a context allowance) estimates it
    fake_gpu("50, [N/A]", [(gpu, 12345, 900)], used=3 * 2**30)
    (c_temp, c_ecc, c_mem) = check_gpu(cuda, pp, {me})
    assert (c_ecc.ok, c_ecc.value) == (True, None)
    assert (c_mem.ok, c_mem.value, c_mem.verdict) == (False, round(2 * 2**30 / 1e9, 3), CORDON)
    assert "(estimated: device use less this process's)" in c_mem.message
    # no nvidia-smi at all: temperature and ECC unread (not failed), memory estimated
    monkeypatch.setenv("PATH", str(tmp_path))
    fake_gpu("", [], used=2**29)
    assert readings() == {"gpu_temperature": (True, None, OK), "gpu_ecc": (True, None, OK), "gpu_memory": (True, 0.0, OK)}


# -- faults on 2 gloo ranks (torchrun) -----------------------------------------------------------


def test_healthy_two_ranks_pass_with_every_result_in_json(data, tmp_path):
    cfg = write_config(tmp_path / "a.yaml", tiny_config(tmp_path / "run", data))
    result = launch_faults(cfg, json_out=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not _fail_lines(result.stderr)
    assert re.search(r"^preflight: ok, 2 ranks on 1 host in [\d.]+ s: save_dir ", result.stderr, re.M), result.stderr
    out = json.loads(result.stdout)
    assert (out["verdict"], out["exit_status"], out["failures"], out["cordon_hosts"]) == ("ok", 0, [], [])
    by_rank = {r["rank"]: {c["check"]: c for c in r["checks"]} for r in out["ranks"]}
    assert sorted(by_rank) == [0, 1] and {r["host"] for r in out["ranks"]} == {HOST}
    # save_dir is shared: one rank per node (local rank 0) checks it; the node's ranks split the shards
    assert {"save_dir", "save_dir_space", "save_dir_speed"} <= by_rank[0].keys()
    assert not {"save_dir", "save_dir_space", "save_dir_speed"} & by_rank[1].keys()
    assert [by_rank[r]["shards"]["value"]["read"] for r in (0, 1)] == [2, 2]
    for r in (0, 1):
        assert all(c["ok"] for c in by_rank[r].values())
        assert {"matmul", "matmul_speed", "allreduce"} <= by_rank[r].keys()
        assert by_rank[r]["allreduce"]["value"]["bus_gb_s"] > 0 and by_rank[r]["matmul"]["value"]["ms"] > 0


def test_wrong_values_on_rank_1_cordon_it(data, tmp_path):
    cfg = write_config(tmp_path / "a.yaml", tiny_config(tmp_path / "run", data))
    result = launch_faults(cfg, wrong_matmul=1, wrong_allreduce=1)
    _assert_status(result, EXIT_CORDON)
    lines = _fail_lines(result.stderr)
    assert [line.split(":")[1].strip() for line in lines] == [f"FAIL rank 1 on {HOST}"] * 2, result.stderr
    assert lines[0].startswith(f"preflight: FAIL rank 1 on {HOST}: matmul: wrong result: element (0, 1) is off by 1 ")
    assert lines[0].endswith("[cordon]")
    assert lines[1].startswith(f"preflight: FAIL rank 1 on {HOST}: allreduce: sum of known values wrong at 1 of ")
    assert f"preflight: cordon (exit status 76): 2 failing checks; cordon {HOST};" in result.stderr


def test_too_little_space_and_unreadable_shards_are_fatal(data, tmp_path):
    """OLMo 2 13B's checkpoints with the tiny data: more room than the disk has; one shard cut
    short, another garbage; rank 1 also 3x slower (a cordon): fatal wins. One launch for all
    four: each costs torch's start-up on 2 ranks."""
    shards = tmp_path / "data"
    for kind in ("train", "val"):
        (shards / kind).mkdir(parents=True)
        for f in Path(data[kind]).iterdir():
            (shards / kind / f.name).write_bytes(f.read_bytes())
    garbage, truncated = shards / "train" / "part-00000.npy", shards / "train" / "part-00001.npy"
    garbage.write_bytes(b"\xff" * garbage.stat().st_size)
    truncated.write_bytes(truncated.read_bytes()[:-1])
    big = {"preset": "olmo2-13b", "vocab_size": 512}
    raw = tiny_config(tmp_path / "run", {"train": str(shards / "train"), "val": str(shards / "val")}, model=big)
    (tmp_path / "run").mkdir()
    room = shutil.disk_usage(tmp_path / "run").free // checkpoint_bytes(from_dict(raw)) + 2
    cfg = write_config(tmp_path / "a.yaml", {**raw, "preflight": {"checkpoints_room": int(room)}})
    result = launch_faults(cfg, slow_matmul="1:3")
    _assert_status(result, EXIT_FATAL)
    lines = _fail_lines(result.stderr)
    assert len(lines) == 4, result.stderr
    assert lines[0].startswith(f"preflight: FAIL rank 0 on {HOST}: save_dir_space: {tmp_path / 'run'}: ")
    assert f"{room} checkpoints of this model need " in lines[0] and lines[0].endswith("[fatal]")
    # the node's two ranks split the shards: part-00000 is rank 0's, part-00001 rank 1's
    assert lines[1].startswith(f"preflight: FAIL rank 0 on {HOST}: shards: {garbage}: token id 65535 >= model.vocab_size 512")
    assert (
        lines[2]
        == f"preflight: FAIL rank 1 on {HOST}: shards: {truncated}: size {truncated.stat().st_size} is not a multiple of uint16 (wrong token_dtype?) [fatal]"
    )
    # rank 1, 3x slower, gets "cordon" (fatal wins the run's verdict): slow in every round,
    # measured again twice before it is called slow
    assert re.match(rf"preflight: FAIL rank 1 on {re.escape(HOST)}: matmul_speed: [\d.]+ ms a product, [\d.]+x the median rank's", lines[3])
    assert lines[3].endswith("(best of 3 rounds; preflight.slow_factor 2) [cordon]")
    assert "preflight: fatal (exit status 78): 4 failing checks" in result.stderr


def test_a_read_only_save_dir_is_fatal(data, tmp_path):
    """``chmod`` does not stop root: as root save_dir is a read-only bind mount (in a mount
    namespace of each rank's own); otherwise a folder without write permission."""
    save_dir = tmp_path / "run"
    save_dir.mkdir()
    cfg = write_config(tmp_path / "a.yaml", tiny_config(save_dir, data))
    if os.geteuid() == 0:
        save_dir.chmod(0o555)
        (save_dir / "root-writes-anyway").write_text("x")  # why a mount is needed
        (save_dir / "root-writes-anyway").unlink()
        if not can_unshare_mount():
            pytest.skip("root without `unshare --mount`: no way to make save_dir read-only")
        result = launch_faults(cfg, read_only=save_dir)
        reason = "read-only: a probe file cannot be written, fsynced and read back (Read-only file system [errno 30])"
    else:
        save_dir.chmod(stat.S_IRUSR | stat.S_IXUSR)
        result = launch_faults(cfg)
        reason = "not writable: a probe file cannot be written, fsynced and read back (Permission denied [errno 13])"
    save_dir.chmod(0o755)
    _assert_status(result, EXIT_FATAL)
    assert _fail_lines(result.stderr) == [f"preflight: FAIL rank 0 on {HOST}: save_dir: {save_dir}: {reason} [fatal]"], result.stderr
    assert not list(save_dir.iterdir())
