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
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist


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


def setup() -> DistInfo:
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
        if store is not None:
            dist.init_process_group(backend=backend, store=store, rank=0, world_size=1, device_id=device_id)
        else:
            dist.init_process_group(backend=backend, device_id=device_id)
    return DistInfo(rank, world, local_rank, device, local_world, node)


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
