"""Process-group and device setup: torchrun / SLURM (env vars) or a plain single process.

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (the ranks of this node), GROUP_RANK
(this node's index), MASTER_ADDR and MASTER_PORT. Without them the trainer still runs, as a
one-rank group over an in-memory store, so ``python -m train`` works for quick experiments and
the same FSDP code path is exercised everywhere.

On several nodes, torchrun numbers the ranks node by node (node ``g`` holds ranks
``g * LOCAL_WORLD_SIZE ...``), which is what hybrid sharding relies on (``train.data_parallel:
hsdp``: a shard group is one node). Nothing in the trainer is node-local: files that one rank
writes and another reads (checkpoints, the data order, the shard checks) live in
``checkpoint.save_dir``, which every node must reach (the trainer checks it at start-up).

This module owns everything that spans ranks before the first step: the process group, the
device mesh and the FSDP2 sharding over it (``parallelize``, as torchtitan's), and the start-up
checks across ranks (one ``save_dir`` and the same data on every node), and the process groups'
timeouts: ``resilience.init_timeout`` for the start and everything up to the first step (building,
restoring, compiling), then ``resilience.collective_timeout`` (``set_collective_timeout``), so a
rank that stops answering makes its peers' collectives fail in minutes instead of blocking them
until the job's time limit.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

from train.config import TrainConfig
from train.errors import ConfigError, DataError
from train.model import Block, Transformer


@dataclass
class DistInfo:
    rank: int
    world: int
    local_rank: int
    device: torch.device
    local_world: int = 1  # ranks on this node
    node: int = 0  # this node's index (torchrun's GROUP_RANK)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup(timeout: float | None = None) -> DistInfo:
    """The process group (``timeout``: seconds for its start and for every collective until
    ``set_collective_timeout``; None: torch's default, 10 min for NCCL, 30 min for gloo)."""
    store = None
    if "RANK" not in os.environ:
        # One process: an in-memory store, no port. A port found free here can be taken by another
        # process before the group binds it (seen: EADDRINUSE while other tests ran).
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        store = dist.HashStore()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    node = int(os.environ.get("GROUP_RANK", 0))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        # gloo next to nccl: async checkpoint saves coordinate over a CPU group
        backend = "cpu:gloo,cuda:nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    if not dist.is_initialized():
        device_id = device if device.type == "cuda" else None
        kw: dict[str, Any] = {"timeout": timedelta(seconds=timeout)} if timeout else {}
        if store is not None:
            dist.init_process_group(backend=backend, store=store, rank=0, world_size=1, device_id=device_id, **kw)
        else:
            dist.init_process_group(backend=backend, device_id=device_id, **kw)
    return DistInfo(rank, world, local_rank, device, local_world, node)


def set_collective_timeout(seconds: float, groups: Iterable[dist.ProcessGroup | None] | None = None) -> None:
    """Tighten the timeout of every later collective to ``seconds`` (``resilience.collective_timeout``),
    on the default group and on ``groups`` (None: every group this process has made: the mesh's
    hsdp groups, the checkpointer's gloo group, ...). Call it on every rank once the first step is
    done, as torchtitan's ``set_pg_timeouts``: until then a collective may wait for a slow start
    (model build, restore, compilation) under ``resilience.init_timeout``.

    Every rank first meets the others in a barrier under the old timeout: a fast rank that
    tightened its timeout while a slow one still worked through the first step would time out on
    its next collective. After this, a collective that a peer never joins fails on the waiting
    ranks after ``seconds``: gloo raises ``RuntimeError: ... Timed out waiting Nms for recv
    operation to complete`` (``is_collective_timeout``); NCCL's watchdog aborts the process."""
    dist.barrier()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    timeout = timedelta(seconds=seconds)
    # torch >= 2.8 has the public set_timeout; torchtitan's private name works from 2.1 (pyproject: >= 2.6)
    set_timeout = getattr(dist, "set_timeout", None) or dist.distributed_c10d._set_pg_timeout
    for group in _groups(groups):
        set_timeout(timeout, group)


def _groups(groups: Iterable[dist.ProcessGroup | None] | None) -> list[dist.ProcessGroup]:
    """The default group and ``groups`` (None: every group of this process), each once, without
    the sentinels torch returns to ranks outside a group."""
    if groups is None:
        # torch keeps every live group in this map (private, so read defensively)
        world = getattr(dist.distributed_c10d, "_world", None)
        groups = list(getattr(world, "pg_map", {}) or {})
    out: list[dist.ProcessGroup] = [dist.distributed_c10d._get_default_group()]
    for g in groups:
        if isinstance(g, dist.ProcessGroup) and all(g is not o for o in out):
            out.append(g)
    return out


def is_collective_timeout(error: BaseException) -> bool:
    """Whether ``error`` is a collective that timed out (a peer hung, died or was stopped), which
    recovery should restart like a hang (``errors.EXIT_HANG``), not report as a user's mistake."""
    text = str(error)
    return isinstance(error, RuntimeError) and (
        "Timed out waiting" in text  # gloo: "Timed out waiting 300000ms for recv operation to complete"
        or "Watchdog caught collective operation timeout" in text  # NCCL (when it raises, not aborts)
        or (isinstance(error, getattr(dist, "DistBackendError", ())) and "timed out" in text.lower())
    )


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    dist.barrier()


def all_gather(obj: Any) -> list[Any]:
    """``obj`` from every rank, in rank order."""
    out: list = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


# -- the mesh and the sharded model --------------------------------------------------------


def mesh_shape(t: TrainConfig, d: DistInfo) -> tuple[int, ...]:
    """``(world,)`` for fsdp; ``(groups, group_size)`` for hsdp, a group being
    ``train.shard_group_size`` consecutive ranks (by default one node's: torchrun numbers
    the ranks node by node), so parameters are gathered within a node and only gradients
    cross nodes, once per step."""
    if t.data_parallel == "fsdp":
        return (d.world,)
    if t.shard_group_size is None:
        per_node = sorted(set(all_gather(d.local_world)))
        if len(per_node) > 1:
            raise ConfigError(
                f"train.data_parallel: hsdp shards within a node by default, but the nodes run different numbers of "
                f"ranks ({', '.join(map(str, per_node))}); set train.shard_group_size"
            )
    size = t.shard_group_size or d.local_world
    if d.world % size:
        key = "train.shard_group_size" if t.shard_group_size else "train.data_parallel"
        raise ConfigError(
            f"{key}: hsdp shard groups of {size} ranks{'' if t.shard_group_size else ' (the ranks of one node)'} "
            f"do not divide the {d.world} ranks of this run; set train.shard_group_size"
        )
    return (d.world // size, size)


def layout(shape: tuple[int, ...]) -> str:
    """The mesh in words, for the start-up line."""
    if len(shape) == 1:
        return "fsdp"
    return f"hsdp {shape[0]} x {shape[1]} (replicate x shard)"


def build_mesh(device: torch.device, shape: tuple[int, ...]) -> DeviceMesh:
    if len(shape) == 2:  # hsdp: FSDP2 shards over the mesh's last dim, replicates over the first
        return init_device_mesh(device.type, shape, mesh_dim_names=("replicate", "shard"))
    return init_device_mesh(device.type, shape, mesh_dim_names=("shard",))


def precision(t: TrainConfig, device: torch.device) -> str:
    """``train.precision`` with ``auto`` decided: bf16 on a GPU that has it, else fp32."""
    if t.precision == "auto":
        ok = device.type == "cuda" and torch.cuda.is_bf16_supported()
        return "bf16" if ok else "fp32"
    return t.precision


def parallelize(model: Transformer, mesh: DeviceMesh, t: TrainConfig, device: torch.device) -> FSDPModule:
    """Shard ``model`` (still on the meta device) with FSDP2: each block, then the root
    (embedding, final norm, lm_head); activation checkpointing and ``torch.compile`` per block.
    Returns the same object typed as the FSDP root (for FSDP-only calls such as
    ``set_requires_gradient_sync``)."""
    if precision(t, device) == "bf16":
        # bf16 compute copies of the weights, fp32 master weights and gradient reductions
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    else:
        mp = MixedPrecisionPolicy()  # fully_shard's default: the parameters' own dtype
    for block in model.blocks:
        if not isinstance(block, Block):  # nn.ModuleList iterates as plain modules
            raise TypeError(f"unexpected block {type(block).__name__}")
        block.activation_checkpointing = t.activation_checkpointing
        if t.compile:
            block.compile()  # in place: parameter names (checkpoint keys) do not change
        fully_shard(block, mesh=mesh, mp_policy=mp)
    return fully_shard(model, mesh=mesh, mp_policy=mp)


# -- start-up checks across ranks ------------------------------------------------------------


def check_shared_save_dir(save_dir: Path, rank: int, world: int) -> None:
    """Every rank must see the same ``checkpoint.save_dir``: rank 0 writes what the others
    read there (the data order, the shard checks, the checkpoint's state file) and every
    rank writes its shards of a checkpoint into it. On several nodes that takes storage
    they all reach; a node-local folder (a relative path resolved in another working
    directory, /tmp, a local disk) would leave each node a part of every checkpoint.
    Rank 0 writes a uniquely named file there and every rank looks for it."""
    if world == 1:
        return
    probe: list[str | None] = [None]
    if rank == 0:
        save_dir.mkdir(parents=True, exist_ok=True)
        name = f".shared-check-{uuid.uuid4().hex}"
        (save_dir / name).write_text(socket.gethostname())
        probe[0] = name
    dist.broadcast_object_list(probe, src=0)
    name = str(probe[0])
    seen = all_gather(((save_dir / name).exists(), socket.gethostname(), str(save_dir.absolute())))
    if rank == 0:
        (save_dir / name).unlink(missing_ok=True)
    blind = [f"rank {r} on {host} ({path})" for r, (ok, host, path) in enumerate(seen) if not ok]
    if blind:
        raise ConfigError(
            f"checkpoint.save_dir: {save_dir} is not the same folder on every rank: rank 0 on {seen[0][1]} "
            f"({seen[0][2]}) wrote a file there that {', '.join(blind[:4])}{', ...' if len(blind) > 4 else ''} "
            f"cannot see. Every node writes its part of each checkpoint there and reads what rank 0 writes "
            f"(the data order): put it on storage all nodes reach (NFS, Lustre, ...), as an absolute path."
        )


def check_same_data(fingerprints: tuple[str, str | None], world: int) -> None:
    """Every rank must read the same shards (the global order is cut from rank 0's count of
    instances): ``fingerprints`` (of the training and validation data) that differ from rank
    0's on another node are refused."""
    if world == 1:
        return
    everyone = all_gather((*fingerprints, socket.gethostname()))
    differ = [f"rank {r} on {host}" for r, (fp, vfp, host) in enumerate(everyone) if (fp, vfp) != everyone[0][:2]]
    if differ:
        e = DataError(
            f"data.paths / data.val_paths: {', '.join(differ[:4])}{', ...' if len(differ) > 4 else ''} "
            f"see(s) other shards than rank 0 on {everyone[0][2]} (names, sizes or contents differ): "
            f"every node must read the same files, e.g. from shared storage by absolute paths"
        )
        e.same_on_every_rank = True  # every rank found the same difference: said once
        raise e
