"""Pre-flight checks: is every node fit to train, before the run gives it work.

``python -m train.preflight --config CFG [--set key=value ...] [--json]`` (under torchrun or
alone) and :func:`run_preflight`, which the trainer calls at start (``preflight.enabled``) on
its already-initialised process group. Every rank checks its own node and device; the results
are gathered (``all_gather_object``) so that every rank reaches the same verdict, and rank 0
prints one line per failing check::

    preflight: FAIL rank 1 on node07: matmul: wrong result: ... [cordon]

The checks (names as in the lines and ``--json``):

- ``save_dir`` / ``save_dir_space`` / ``save_dir_speed`` (one rank per node, its local rank 0:
  the folder is shared): the folder exists or can be created; a probe file is written, fsynced
  and read back; the free space holds ``preflight.checkpoints_room`` checkpoints, sized from the
  model's description (fp32 weights and AdamW's two fp32 moments: 12 bytes a parameter, plus
  10%); the probe's write speed (``PROBE_MB``, fsync included, time-boxed) is at least
  ``preflight.min_write_mb_s``, in the best of up to ``WRITE_ROUNDS`` probes (a disk that
  another job's burst slows for a moment passes).
- ``shards``: every training and validation shard opens through ``train.shards`` and its first
  and last tokens (and its sidecar's first row) read; the ranks of a node split the shards, so
  every node reads each once. Cheap: the trainer's ``validate_shards`` reads every byte later.
- ``matmul``: a seeded ``preflight.matmul_size`` square product (float64 on CPU; fp32 with TF32
  off on CUDA) of small integers, so every product and sum is exact in any summation order:
  its row and column sums must equal the reference ``A @ (B @ 1)`` and ``(1 @ A) @ B`` computed
  in float64 on the CPU, bit for bit. ``matmul_speed``: its time (the best of a few runs, the
  ranks in step; on CPU the process's CPU time, on CUDA wall time, synchronised) against the median rank's (the lower median: on two ranks the faster one); a
  rank ``preflight.slow_factor`` times slower in each of ``MATMUL_ROUNDS`` rounds (measured
  again only while some rank looks slow) is cordoned.
- ``allreduce``: ``preflight.allreduce_mb`` MB in which rank r puts r + 1 everywhere, summed;
  every element must be world(world+1)/2 exactly. Its bus bandwidth (nccl-tests' definition:
  algorithm bandwidth x 2(n-1)/n) is reported; on CUDA this is NCCL's. Its time is the same on
  every rank by construction (they wait for each other), so it names no slow rank.
- CUDA only (not run on CPU): ``gpu_temperature`` (above ``preflight.max_gpu_temperature_c``),
  ``gpu_ecc`` (uncorrected volatile ECC errors), ``gpu_memory`` (memory held by processes that
  are not this job's, above ``preflight.max_foreign_gpu_memory_gb``), read with ``nvidia-smi``
  as OLMo-core's Lambda health checks do.

Verdicts, worst first (``PreflightResult.verdict``, the command's exit status):

- ``fatal`` (``EXIT_FATAL``): starting again cannot help: ``save_dir`` cannot be created, is
  read-only or full, or too small for the checkpoints; a shard that cannot be read.
- ``cordon`` (``EXIT_CORDON``): this node is bad, start again without it: a wrong matmul, a slow
  rank, a hot GPU, ECC errors, another process's GPU memory, a wrong all-reduce on some ranks.
- ``retry`` (``EXIT_RETRY``): transient: a slow ``save_dir`` write, a filesystem check that did
  not finish in ``FS_TIMEOUT_S``.

A check of shared storage (``save_dir*``, ``shards``) that fails on some nodes while others
pass is that node's fault (its mount), so it is ``cordon``; failing on every node it keeps its
own verdict. A wrong all-reduce sum is found on every rank alike when the reduction itself went
wrong, and then names no rank: with one node that node is cordoned, across nodes the verdict is
``retry`` (said once, by rank 0; the restart limit stops a fault that persists). Ranks whose sum
differs from the others' are cordoned.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from train.config import Config, PreflightConfig, load_config
from train.data import token_dtype
from train.errors import EXIT_CORDON, EXIT_FATAL, EXIT_RETRY, TrainError, exit_process, report
from train.model import describe
from train.shards import ShardError, find_shards, iter_sidecar, open_tokens, sidecar_path

OK, RETRY, CORDON, FATAL = "ok", "retry", "cordon", "fatal"
SEVERITY = {OK: 0, RETRY: 1, CORDON: 2, FATAL: 3}
EXIT_STATUS = {OK: 0, RETRY: EXIT_RETRY, CORDON: EXIT_CORDON, FATAL: EXIT_FATAL}

# A checkpoint holds fp32 weights and AdamW's two fp32 moments (train/checkpoint.py: model.* and
# optim.*): 12 bytes a parameter; the margin covers the metadata, the trainer state and rounding.
CHECKPOINT_BYTES_PER_PARAM = 4 + 4 + 4
CHECKPOINT_MARGIN = 1.10
PROBE_MB = 32  # save_dir's write-speed probe (MiB), fsynced
PROBE_BLOCK = 4 << 20
WRITE_TIMEBOX_S = 3.0  # a slow disk stops the probe early; the speed is taken on what was written
WRITE_ROUNDS = 3  # a save_dir that looks slow is probed again, up to this many probes in all
WRITE_ROUND_PAUSE_S = 0.5
FS_TIMEOUT_S = 120.0  # the filesystem checks of one rank (a hung mount must not hang the job)
MATMUL_SEED = 1234
MATMUL_RANGE = 8  # entries in [-8, 8]: products <= 64, sums exact in fp32 up to 2**18 columns
MATMUL_REPS = 5
MATMUL_ROUNDS = 3  # a rank that looks slow is measured again, up to this many rounds in all
MATMUL_ROUND_PAUSE_S = 0.3
ALLREDUCE_REPS = 3
NVIDIA_SMI_TIMEOUT_S = 20.0
# Without a per-process list (nvidia-smi in another pid namespace) the foreign memory is what the
# device uses minus this process's caching allocator and this allowance for its CUDA context and
# NCCL's buffers: an estimate.
OWN_CONTEXT_ALLOWANCE = 1 << 30
SHARED_CHECKS = ("save_dir", "save_dir_space", "save_dir_speed", "shards")


@dataclass
class Check:
    """One check on one rank. ``verdict`` is what a failure means seen on this rank alone
    (:func:`judge` may change it from what the other ranks saw); ``keys`` name what failed
    (shards, the folder), so that a shared check's failures can be compared across nodes."""

    check: str
    ok: bool
    value: Any = None
    seconds: float = 0.0
    verdict: str = OK
    message: str = ""
    keys: list[str] = field(default_factory=list)
    quiet: bool = False  # failing, but said by another rank's line (an all-reduce no rank can be named for)


@dataclass
class RankReport:
    rank: int
    host: str
    local_rank: int
    checks: list[Check]


@dataclass
class PreflightResult:
    """The verdict every rank reaches; ``reports`` are every rank's checks, in rank order."""

    verdict: str
    failures: list[dict]  # rank, host, check, verdict, message
    seconds: float
    reports: list[RankReport]

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS[self.verdict]

    @property
    def cordon_hosts(self) -> list[str]:
        """The nodes to leave out of the next attempt."""
        return sorted({f["host"] for f in self.failures if f["verdict"] == CORDON})

    def lines(self) -> list[str]:
        """What rank 0 says: one line per failing check and a closing one (the summary when
        every check passed)."""
        out = [f"preflight: FAIL rank {f['rank']} on {f['host']}: {f['check']}: {f['message']} [{f['verdict']}]" for f in self.failures]
        if self.verdict == OK:
            return [*out, summary(self)]
        hosts = f"; cordon {', '.join(self.cordon_hosts)}" if self.cordon_hosts else ""
        n = len(self.failures)
        out.append(
            f"preflight: {self.verdict} (exit status {self.exit_status}): {n} failing check{'s' * (n != 1)}{hosts}; {self.seconds:.2f} s"
        )
        return out

    def to_json(self) -> dict:
        ranks = [
            {
                "rank": r.rank,
                "host": r.host,
                "checks": [
                    {**{k: v for k, v in asdict(c).items() if k not in ("keys", "quiet")}, "seconds": round(c.seconds, 4)} for c in r.checks
                ],
            }
            for r in self.reports
        ]
        return {
            "verdict": self.verdict,
            "exit_status": self.exit_status,
            "seconds": round(self.seconds, 3),
            "failures": self.failures,
            "cordon_hosts": self.cordon_hosts,
            "ranks": ranks,
        }

    def say(self, rank: int, as_json: bool = False) -> None:
        """Rank 0 prints the lines: failures and the verdict on stderr, the summary on stdout
        (on stderr with ``as_json``, which prints the full results on stdout)."""
        if rank != 0:
            return
        for line in self.lines():
            to_stdout = self.verdict == OK and not as_json and line.startswith("preflight: ok")
            print(line, file=sys.stdout if to_stdout else sys.stderr, flush=True)
        if as_json:
            print(json.dumps(self.to_json(), indent=2), flush=True)


# -- the checks one rank makes -------------------------------------------------------------------


def checkpoint_bytes(cfg: Config) -> int:
    """A checkpoint's size from the model's description (see ``CHECKPOINT_BYTES_PER_PARAM``)."""
    params = int(describe(cfg.model, cfg.data.seq_len)["total"])
    return int(params * CHECKPOINT_BYTES_PER_PARAM * CHECKPOINT_MARGIN)


def _gb(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n / 1e6:.2g} MB"


def _oserror(e: OSError) -> str:
    return f"{e.strerror or e}" + (f" [errno {e.errno}]" if e.errno else "")


def _write_probe(path: Path) -> tuple[int, float]:
    """Write up to ``PROBE_MB`` MiB (time-boxed), fsync, read the first and last blocks back;
    returns (bytes written, seconds to write and fsync). Raises ``OSError``, or ``ValueError``
    when the bytes read back differ."""
    block = os.urandom(PROBE_BLOCK)
    start = time.perf_counter()
    written = 0
    with open(path, "xb", buffering=0) as f:
        while written < PROBE_MB << 20 and (written == 0 or time.perf_counter() - start < WRITE_TIMEBOX_S):
            view = memoryview(block)
            while view:
                n = f.write(view) or 0
                view = view[n:]
            written += PROBE_BLOCK
        os.fsync(f.fileno())
    seconds = time.perf_counter() - start
    with open(path, "rb") as f:
        head = f.read(PROBE_BLOCK)
        f.seek(written - PROBE_BLOCK)
        tail = f.read(PROBE_BLOCK)
    if head != block or tail != block:
        raise ValueError("the probe file read back differs from what was written")
    return written, seconds


def check_save_dir(cfg: Config, host: str) -> list[Check]:
    """``save_dir``, ``save_dir_space`` and ``save_dir_speed`` (the last two only when the
    folder could be written)."""
    root = Path(cfg.checkpoint.save_dir)
    start = time.perf_counter()
    keys = [str(root)]

    def failed(msg: str, verdict: str = FATAL) -> list[Check]:
        return [Check("save_dir", False, str(root), time.perf_counter() - start, verdict, f"{root}: {msg}", keys)]

    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return failed(f"cannot be created ({_oserror(e)})")
    pp = cfg.preflight
    written, seconds, mb_s, rounds = 0, 0.0, 0.0, 0
    # a disk that another job's burst slows for a moment is measured again, up to
    # WRITE_ROUNDS probes in all, keeping the fastest: only a disk that stays slow fails
    while rounds < WRITE_ROUNDS and (rounds == 0 or mb_s < pp.min_write_mb_s):
        if rounds:
            time.sleep(WRITE_ROUND_PAUSE_S)
        rounds += 1
        probe = root / f".preflight-{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            n, s = _write_probe(probe)
        except OSError as e:
            kind = "full" if e.errno == 28 else "read-only" if e.errno == 30 else "not writable"
            return failed(f"{kind}: a probe file cannot be written, fsynced and read back ({_oserror(e)})")
        except ValueError as e:
            return failed(str(e))
        finally:
            try:
                probe.unlink(missing_ok=True)
            except OSError:
                pass
        probe_mb_s = n / 1e6 / max(s, 1e-9)
        if rounds == 1 or probe_mb_s > mb_s:
            written, seconds, mb_s = n, s, probe_mb_s
    checks = [Check("save_dir", True, str(root.resolve()), time.perf_counter() - start)]
    t = time.perf_counter()
    need, free = pp.checkpoints_room * checkpoint_bytes(cfg), shutil.disk_usage(root).free
    space = Check("save_dir_space", free >= need, {"free_bytes": free, "need_bytes": need}, time.perf_counter() - t, keys=keys)
    if not space.ok:
        space.verdict = FATAL
        space.message = (
            f"{root}: {_gb(free)} free, {pp.checkpoints_room} checkpoints of this model need {_gb(need)} "
            f"({_gb(checkpoint_bytes(cfg))} each: fp32 weights and AdamW moments, +10%)"
        )
    checks.append(space)
    speed = Check("save_dir_speed", mb_s >= pp.min_write_mb_s, round(mb_s, 1), seconds, keys=keys)
    if not speed.ok:
        speed.verdict = RETRY
        speed.message = (
            f"{root}: writes {mb_s:.1f} MB/s ({written >> 20} MiB fsynced in {seconds:.2f} s, the best of {rounds} probes), "
            f"below preflight.min_write_mb_s {pp.min_write_mb_s:g}"
        )
    checks.append(speed)
    return checks


def _shard_problem(path: Path, dtype: Any, vocab_size: int, eos_id: int | None) -> str | None:
    """What is wrong with a shard, read cheaply: its size, first and last tokens, and its
    sidecar's first row (``train.data.validate_shards`` reads every byte later)."""
    try:
        tokens = open_tokens(path, dtype)
        if len(tokens) == 0:
            return "empty (a shard holds at least one document)"
        first, last = int(tokens[0]), int(tokens[-1])
        del tokens
        if max(first, last) >= vocab_size:
            return f"token id {max(first, last)} >= model.vocab_size {vocab_size} (wrong data.token_dtype or a damaged file?)"
        if eos_id is not None and last != eos_id:
            return f"last token {last} is not EOS ({eos_id}): truncated, or the wrong data.token_dtype?"
        row = next(iter_sidecar(sidecar_path(path)), None)  # the generator (and its file) closes when dropped
        if row is None or row.start != 0:
            return f"its sidecar {sidecar_path(path).name} does not start at token 0"
    except (ShardError, OSError, ValueError) as e:
        return str(e).replace(f"{path}: ", "")
    return None


def check_shards(cfg: Config, local_rank: int, local_world: int) -> Check:
    """Every shard named by ``data.paths`` and ``data.val_paths``, split between the ranks of
    this node (so each node reads every shard once)."""
    start = time.perf_counter()
    d = cfg.data
    if not d.paths:
        return Check("shards", False, None, 0.0, FATAL, "data.paths: empty; list the token shards to train on", ["data.paths"])
    try:
        files = [f for f, _ in find_shards(d.paths)] + ([f for f, _ in find_shards(d.val_paths)] if d.val_paths else [])
    except (ShardError, OSError) as e:
        return Check("shards", False, None, time.perf_counter() - start, FATAL, str(e), ["data.paths"])
    dtype = token_dtype(d.token_dtype, cfg.model.vocab_size)
    bad: dict[str, str] = {}
    mine = files[local_rank::local_world]
    for f in mine:
        problem = _shard_problem(f, dtype, cfg.model.vocab_size, d.eos_id)
        if problem:
            bad[str(f)] = problem
    check = Check("shards", not bad, {"shards": len(files), "read": len(mine)}, time.perf_counter() - start, keys=sorted(bad))
    if bad:
        first = next(iter(bad))
        more = f" (and {len(bad) - 1} more shard{'s' * (len(bad) > 2)})" if len(bad) > 1 else ""
        check.verdict, check.message = FATAL, f"{first}: {bad[first]}{more}"
    return check


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The product the matmul check computes and times (tests wrap it from outside)."""
    return a @ b


def _matmul_error(c: torch.Tensor, row_ref: torch.Tensor, col_ref: torch.Tensor) -> str | None:
    """What is wrong with the product ``c``, from its row and column sums (None: right)."""
    c64 = c.to("cpu", torch.float64)
    row_sums = c64.sum(1)
    rows = torch.nonzero(row_sums != row_ref).flatten().tolist()
    cols = torch.nonzero(c64.sum(0) != col_ref).flatten().tolist()
    if not rows and not cols:
        return None
    if len(rows) == len(cols) == 1:
        what = f"element ({rows[0]}, {cols[0]}) is off by {float(row_sums[rows[0]] - row_ref[rows[0]]):g}"
    else:
        what = f"{len(rows)} of {len(row_ref)} row sums and {len(cols)} column sums differ"
    return f"wrong result: {what} against the float64 reference (integer inputs make every sum exact: any difference is a hardware or library fault)"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def check_matmul(n: int, device: torch.device, slow_factor: float) -> Check:
    """The deterministic matmul: right answer (exactly) and its time per product. The time is
    the best of ``MATMUL_REPS`` runs, each started by every rank together; while some rank
    looks ``slow_factor`` times slower than the lower-median rank, every rank measures again
    after a pause, up to ``MATMUL_ROUNDS`` rounds, keeping its best: a rank is called slow
    only when it stays slow (another process's burst on a shared machine passes)."""
    start = time.perf_counter()
    g = torch.Generator().manual_seed(MATMUL_SEED)
    a64 = torch.randint(-MATMUL_RANGE, MATMUL_RANGE + 1, (n, n), generator=g).to(torch.float64)
    b64 = torch.randint(-MATMUL_RANGE, MATMUL_RANGE + 1, (n, n), generator=g).to(torch.float64)
    row_ref, col_ref = a64 @ b64.sum(1), a64.sum(0) @ b64  # the reference, computed another way
    dtype = torch.float64 if device.type == "cpu" else torch.float32
    a, b = a64.to(device, dtype), b64.to(device, dtype)
    per_rep = 1 if device.type == "cpu" else 20  # a GPU product of this size takes microseconds
    # On CPU the process's CPU time: the work the product took, not the share of a machine that
    # other processes also use (a shared test machine would make a healthy rank look slow).
    clock = time.process_time if device.type == "cpu" else time.perf_counter
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        error = _matmul_error(_matmul(a, b), row_ref, col_ref)  # also the warm-up
        best, rounds = float("inf"), 0
        while rounds < MATMUL_ROUNDS:
            if rounds:
                time.sleep(MATMUL_ROUND_PAUSE_S)
            rounds += 1
            for _ in range(MATMUL_REPS):
                dist.barrier()
                t = clock()
                for _ in range(per_rep):
                    c = _matmul(a, b)
                _sync(device)
                best = min(best, (clock() - t) / per_rep)
                error = error or _matmul_error(c, row_ref, col_ref)
            times = _gather(best)  # every rank sees the same times: the same decision to go on
            if max(times) < slow_factor * statistics.median_low(times):
                break
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    clock_name = "cpu" if device.type == "cpu" else "wall"
    value = {"size": n, "ms": round(best * 1e3, 3), "gflops": round(2 * n**3 / best / 1e9, 2), "rounds": rounds, "clock": clock_name}
    return Check("matmul", error is None, value, time.perf_counter() - start, CORDON if error else OK, error or "")


def _all_reduce(t: torch.Tensor) -> None:
    """The all-reduce the check makes and times (tests wrap it from outside)."""
    dist.all_reduce(t)


def check_allreduce(mb: float, rank: int, world: int, device: torch.device) -> Check:
    """Known values summed: exact result on this rank, and the bus bandwidth."""
    start = time.perf_counter()
    expected = world * (world + 1) // 2
    dtype = torch.float32 if expected < 2**24 else torch.float64  # exact either way
    n = max(1, int(mb * (1 << 20)) // dtype.itemsize)
    t = torch.empty(n, dtype=dtype, device=device)
    times, error = [], ""
    for i in range(1 + ALLREDUCE_REPS):  # the first one warms the connections up
        t.fill_(rank + 1)
        _sync(device)
        t0 = time.perf_counter()
        _all_reduce(t)
        _sync(device)
        if i:
            times.append(time.perf_counter() - t0)
        wrong = torch.nonzero(t != expected).flatten()
        if len(wrong) and not error:
            first = int(wrong[0])
            error = f"sum of known values wrong at {len(wrong)} of {n} elements (element {first}: {float(t[first]):g}, expected {expected})"
    seconds = statistics.median(times)
    bus = n * dtype.itemsize / seconds * 2 * (world - 1) / world / 1e9  # nccl-tests' bus bandwidth
    backend = "nccl" if device.type == "cuda" else "gloo"  # the default group's backend for this device
    value = {"mb": mb, "ms": round(seconds * 1e3, 3), "bus_gb_s": round(bus, 3), "backend": backend}
    return Check("allreduce", not error, value, time.perf_counter() - start, CORDON if error else OK, error)


def _nvidia_smi(args: list[str]) -> list[list[str]] | None:
    """``nvidia-smi`` CSV rows (no header, no units), None when it is missing or fails."""
    try:
        out = subprocess.run(
            ["nvidia-smi", *args, "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode:
        return None
    return [[x.strip() for x in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "[N/A]": not supported (no ECC on this GPU)
        return None


def _foreign_gpu_memory(device: torch.device, gpu: str, job_pids: set[int]) -> tuple[float, str]:
    """Bytes other processes hold on this GPU, and how it was measured."""
    apps = [r for r in _nvidia_smi(["--query-compute-apps=gpu_uuid,pid,used_memory"]) or [] if len(r) == 3 and r[0] == gpu]
    if any(int(pid) == os.getpid() for _, pid, _ in apps):  # nvidia-smi sees this pid namespace
        return sum(float(mib) * (1 << 20) for _, pid, mib in apps if int(pid) not in job_pids and _number(mib)), "per process"
    free, total = torch.cuda.mem_get_info(device)
    own = torch.cuda.memory_reserved(device) + OWN_CONTEXT_ALLOWANCE
    return max(0.0, float(total - free - own)), "estimated: device use less this process's"


def check_gpu(device: torch.device, pp: PreflightConfig, job_pids: set[int]) -> list[Check]:
    """Temperature, uncorrected ECC errors and other processes' memory of this rank's GPU."""
    start = time.perf_counter()
    gpu = f"GPU-{torch.cuda.get_device_properties(device).uuid}"
    rows = _nvidia_smi(["--id=" + gpu, "--query-gpu=temperature.gpu,ecc.errors.uncorrected.volatile.total"])
    checks = []
    temp = ecc = None
    if rows and len(rows[0]) == 2:
        temp, ecc = _number(rows[0][0]), _number(rows[0][1])
    took = time.perf_counter() - start
    hot = temp is not None and temp > pp.max_gpu_temperature_c
    msg = f"{gpu}: {temp:g} C, above preflight.max_gpu_temperature_c {pp.max_gpu_temperature_c:g}" if hot else ""
    checks.append(Check("gpu_temperature", not hot, temp, took, CORDON if hot else OK, msg))
    bad = ecc is not None and ecc > 0
    checks.append(
        Check(
            "gpu_ecc",
            not bad,
            ecc,
            took,
            CORDON if bad else OK,
            f"{gpu}: {ecc:g} uncorrected ECC errors since the driver loaded" if bad else "",
        )
    )
    t = time.perf_counter()
    foreign, how = _foreign_gpu_memory(device, gpu, job_pids)
    over = foreign > pp.max_foreign_gpu_memory_gb * 1e9
    msg = f"{gpu}: other processes hold {foreign / 1e9:.2f} GB ({how}), above preflight.max_foreign_gpu_memory_gb {pp.max_foreign_gpu_memory_gb:g}"
    checks.append(
        Check("gpu_memory", not over, round(foreign / 1e9, 3), time.perf_counter() - t, CORDON if over else OK, msg if over else "")
    )
    return checks


def _filesystem_checks(cfg: Config, host: str, local_rank: int, local_world: int) -> list[Check]:
    """``save_dir*`` (local rank 0) and ``shards``, in a thread given ``FS_TIMEOUT_S``: a check
    still running then fails as ``retry`` (``cordon`` when other nodes finished it)."""
    done: list[Check] = []
    running = ["save_dir" if local_rank == 0 else "shards"]

    def work() -> None:
        if local_rank == 0:
            done.extend(check_save_dir(cfg, host))
        running[0] = "shards"
        done.append(check_shards(cfg, local_rank, local_world))
        running[0] = ""

    thread = threading.Thread(target=work, name="preflight-fs", daemon=True)
    thread.start()
    thread.join(FS_TIMEOUT_S)
    if thread.is_alive():
        name = running[0]
        where = cfg.checkpoint.save_dir if name == "save_dir" else "the shards"
        done = [
            *done,
            Check(
                name, False, None, FS_TIMEOUT_S, RETRY, f"did not finish within {FS_TIMEOUT_S:g} s (a hung filesystem at {where}?)", [name]
            ),
        ]
    return list(done)


# -- across ranks -----------------------------------------------------------------------------------


def _shared_storage_rule(reports: list[RankReport]) -> None:
    """A shared check's failure seen on some nodes only is that node's fault: ``cordon``."""
    for name in SHARED_CHECKS:
        checking = {r.host for r in reports for c in r.checks if c.check == name}
        failing: dict[str, set[str]] = {}
        for r in reports:
            for c in r.checks:
                if c.check == name and not c.ok:
                    failing.setdefault(r.host, set()).update(c.keys)
        for r in reports:
            for c in r.checks:
                if c.check != name or c.ok:
                    continue
                everywhere = any(all(k in failing.get(h, set()) for h in checking) for k in c.keys)
                if not everywhere:
                    passed = sorted(checking - set(failing))[:3]
                    c.verdict = CORDON
                    c.message += f" (only on this node: {', '.join(passed) or 'other nodes'} passed)"


def _speed_rule(reports: list[RankReport], slow_factor: float) -> None:
    """``matmul_speed`` on every rank: its time against the median rank's (the lower median)."""
    times = {r.rank: c.value["ms"] for r in reports for c in r.checks if c.check == "matmul" and c.value}
    rounds = max((c.value.get("rounds", 1) for r in reports for c in r.checks if c.check == "matmul" and c.value), default=1)
    if not times:
        return
    ref = statistics.median_low(times.values())
    for r in reports:
        if r.rank not in times:
            continue
        ratio = times[r.rank] / ref if ref > 0 else 1.0
        slow = ratio >= slow_factor
        msg = (
            f"{times[r.rank]:.2f} ms a product, {ratio:.1f}x the median rank's {ref:.2f} ms "
            f"(best of {rounds} round{'s' * (rounds != 1)}; preflight.slow_factor {slow_factor:g})"
        )
        r.checks.append(Check("matmul_speed", not slow, round(ratio, 3), 0.0, CORDON if slow else OK, msg if slow else ""))


def _allreduce_rule(reports: list[RankReport]) -> None:
    """Ranks with a wrong sum while others got it right are cordoned (their own check's
    verdict); every rank wrong names no rank: one line from rank 0, ``retry`` across nodes."""
    checks = [(r, c) for r in reports for c in r.checks if c.check == "allreduce"]
    if not checks or any(c.ok for _, c in checks) or len({r.host for r, _ in checks}) == 1:
        return
    for r, c in checks:
        c.verdict, c.quiet = RETRY, r.rank != reports[0].rank
    first = checks[0][1]
    first.message = (
        f"every one of the {len(checks)} ranks got a wrong sum ({first.message}): a wrong all-reduce result names no rank or node; "
        f"start again (the restart limit stops a fault that persists)"
    )


def judge(reports: list[RankReport], pp: PreflightConfig, seconds: float = 0.0) -> PreflightResult:
    """The verdict from every rank's checks (the same on every rank: it sees the same reports)."""
    reports = sorted(reports, key=lambda r: r.rank)
    _shared_storage_rule(reports)
    _speed_rule(reports, pp.slow_factor)
    _allreduce_rule(reports)
    failures = [
        {"rank": r.rank, "host": r.host, "check": c.check, "verdict": c.verdict, "message": c.message}
        for r in reports
        for c in r.checks
        if not c.ok and not c.quiet
    ]
    verdict = max((str(f["verdict"]) for f in failures), key=lambda v: SEVERITY[v], default=OK)
    return PreflightResult(verdict, failures, seconds, reports)


def summary(result: PreflightResult) -> str:
    """The success line: what was checked, with its figures and timings."""
    by_name: dict[str, list[Check]] = {}
    for r in result.reports:
        for c in r.checks:
            by_name.setdefault(c.check, []).append(c)
    hosts = len({r.host for r in result.reports})
    parts = []
    for c in by_name.get("save_dir_speed", [])[:1]:
        space = by_name["save_dir_space"][0].value
        parts.append(f"save_dir {c.value:g} MB/s, {_gb(space['free_bytes'])} free for {_gb(space['need_bytes'])}")
    if "shards" in by_name:
        parts.append(f"{by_name['shards'][0].value['shards']} shards readable")
    if "matmul" in by_name:
        ms = [c.value["ms"] for c in by_name["matmul"]]
        worst = max(c.value for c in by_name.get("matmul_speed", [Check("", True, 1.0)]))
        parts.append(f"matmul {by_name['matmul'][0].value['size']} exact, {min(ms):.2f}-{max(ms):.2f} ms (slowest {worst:.2f}x the median)")
    if "allreduce" in by_name:
        v = by_name["allreduce"][0].value
        bandwidth = f", {v['ms']:.1f} ms, bus {v['bus_gb_s']:.2f} GB/s ({v['backend']})" if len(result.reports) > 1 else " (one rank)"
        parts.append(f"all-reduce {v['mb']:g} MB exact{bandwidth}")
    if "gpu_temperature" in by_name:
        temps = [c.value for c in by_name["gpu_temperature"] if c.value is not None]
        mem = max(c.value for c in by_name["gpu_memory"])
        parts.append(
            f"GPUs {max(temps):g} C at most, no uncorrected ECC error, {mem:.2f} GB held by others" if temps else "GPU sensors unread"
        )
    else:
        parts.append("no GPU (temperature, ECC and GPU memory not checked)")
    world = len(result.reports)
    return (
        f"preflight: ok, {world} rank{'s' * (world != 1)} on {hosts} host{'s' * (hosts != 1)} in {result.seconds:.2f} s: {'; '.join(parts)}"
    )


def run_preflight(cfg: Config, rank: int, world: int, host: str, local_rank: int) -> PreflightResult:
    """Every check on this rank, then the verdict from all ranks' results, on the default
    process group (already initialised). Every rank gets the same result; nothing is printed
    (``result.say(rank)`` does)."""
    start = time.perf_counter()
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    peers = _gather((host, local_rank, os.getpid()))
    local_world = sum(h == host for h, _, _ in peers)
    job_pids = {pid for h, _, pid in peers if h == host}
    pp = cfg.preflight
    checks = _filesystem_checks(cfg, host, local_rank, local_world)
    checks.append(check_matmul(pp.matmul_size, device, pp.slow_factor))
    checks.append(check_allreduce(pp.allreduce_mb, rank, world, device))
    if device.type == "cuda":
        checks += check_gpu(device, pp, job_pids)
    reports = _gather(RankReport(rank, host, local_rank, checks))
    return judge(reports, pp, time.perf_counter() - start)


def _gather(obj: Any) -> list[Any]:
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


# -- the command ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``python -m train.preflight``: the checks on a process group of its own (torchrun's
    env vars, or one process), the lines on rank 0, the verdict's exit status on every rank."""
    ap = argparse.ArgumentParser(prog="python -m train.preflight", description="Check the nodes, storage and data before training.")
    ap.add_argument("--config", required=True, help="the training run's YAML config")
    ap.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a config value (repeatable)"
    )
    ap.add_argument("--json", action="store_true", help="print every rank's results as JSON on stdout")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config, args.overrides)
    except TrainError as e:
        return report(e, int(os.environ.get("RANK", "0") or 0))
    from train import dist as tdist

    info = tdist.setup(timeout=cfg.resilience.init_timeout)  # a rank that hangs ends the others' wait too
    try:
        result = run_preflight(cfg, info.rank, info.world, socket.gethostname(), info.local_rank)
        result.say(info.rank, as_json=args.json)
    finally:
        tdist.teardown()
    return result.exit_status


if __name__ == "__main__":
    exit_process(main())  # as python -m train does; a filesystem check left hanging must not hold the exit
