"""Checkpoints: torch.distributed.checkpoint (DCP) folders ``<save_dir>/step<N>/``.

Each folder is a stock DCP checkpoint written by ``FileSystemWriter`` (so ``dcp.load``,
``torch.distributed.checkpoint.format_utils`` and other generic tools read it) with keys
``model.<param>`` and ``optim.<...>`` holding sharded tensors that reload on any number of
ranks, plus ``trainer_state.json`` (step, tokens seen, data seed/epoch/fingerprint, learning
rate, RNG states), written before the tensors. DCP writes ``.metadata`` last, so a folder
with ``.metadata`` is complete; resuming picks the newest complete one.

Saves are asynchronous: the state is copied to CPU memory (staging, blocking but short),
then written by a background thread over a separate gloo group, while training continues.
Retention keeps the newest ``keep_last`` folders plus "permanent" ones.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import warnings
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.metadata import Metadata, TensorStorageMetadata
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)

from train.errors import CheckpointError

STATE_FILE = "trainer_state.json"
_STEP_RE = re.compile(r"^step(\d+)$")


def step_dir(save_dir: str | Path, step: int) -> Path:
    return Path(save_dir) / f"step{step}"


def is_complete(path: str | Path) -> bool:
    path = Path(path)
    return (path / ".metadata").exists() and (path / STATE_FILE).exists()


def list_checkpoints(save_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints in ``save_dir``, oldest first."""
    root = Path(save_dir)
    if not root.is_dir():
        return []
    out = []
    for p in root.iterdir():
        m = _STEP_RE.match(p.name)
        if m and is_complete(p):
            out.append((int(m.group(1)), p))
    return sorted(out)


def latest_checkpoint(save_dir: str | Path) -> Path | None:
    ckpts = list_checkpoints(save_dir)
    return ckpts[-1][1] if ckpts else None


def require_checkpoint(path: str | Path) -> Path:
    """``path`` as a ``Path`` if it is a complete checkpoint folder, else a ``CheckpointError``
    that names it and says what is wrong (the tools print it as one line)."""
    p = Path(path)
    if not p.exists():
        raise CheckpointError(f"{p}: does not exist")
    if not p.is_dir():
        raise CheckpointError(f"{p}: not a checkpoint folder (a file)")
    if not (p / STATE_FILE).exists():
        steps = list_checkpoints(p)
        hint = f"; it holds a run's checkpoints: name one of them, e.g. {steps[-1][1]}" if steps else ""
        raise CheckpointError(f"{p}: not a checkpoint folder (no {STATE_FILE}){hint}")
    if not (p / ".metadata").exists():
        raise CheckpointError(f"{p}: incomplete checkpoint (no .metadata: a save that was cut off?)")
    return p


def read_state(path: str | Path) -> dict:
    p = require_checkpoint(path)
    try:
        state = json.loads((p / STATE_FILE).read_text())
    except ValueError as e:
        raise CheckpointError(f"{p / STATE_FILE}: not valid JSON ({e})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{p / STATE_FILE}: expected a JSON object")
    return state


def _metadata(path: str | Path) -> Metadata:
    return FileSystemReader(str(require_checkpoint(path))).read_metadata()


def has_optimizer(path: str | Path) -> bool:
    return any(k.startswith("optim.") for k in _metadata(path).state_dict_metadata)


def _config_diff(path: str | Path, model: torch.nn.Module) -> str:
    """``model.d_model: 64 in the checkpoint, 128 in the config; ...`` (empty if unknown)."""
    mine = getattr(model, "cfg", None)
    try:
        saved = read_state(path).get("config", {}).get("model")
    except CheckpointError:
        return ""
    if not dataclasses.is_dataclass(mine) or isinstance(mine, type) or not isinstance(saved, dict):
        return ""
    now = dataclasses.asdict(mine)
    diff = [f"model.{k}: {saved[k]} in the checkpoint, {now[k]} in the config" for k in now if k in saved and saved[k] != now[k]]
    return "; ".join(diff)


def check_model_shapes(path: str | Path, model: torch.nn.Module) -> None:
    """Refuse a checkpoint whose ``model.*`` tensors do not fit ``model`` (another size of
    model), naming the checkpoint, the first tensor and the model keys that differ, before
    DCP fails deep inside its load plan. Reads only the checkpoint's metadata."""
    saved = {
        k.removeprefix("model."): tuple(md.size)
        for k, md in _metadata(path).state_dict_metadata.items()
        if k.startswith("model.") and isinstance(md, TensorStorageMetadata)
    }
    mine = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    bad = [(k, saved[k], shape) for k, shape in mine.items() if k in saved and saved[k] != shape]
    missing = [k for k in mine if k not in saved]
    if not bad and not missing:
        return
    parts = []
    if bad:
        k, a, b = bad[0]
        more = f" (and {len(bad) - 1} more tensors)" if len(bad) > 1 else ""
        parts.append(f"model.{k} is {list(a)} in the checkpoint but {list(b)} in this run{more}")
    if missing:
        parts.append(f"{len(missing)} tensor(s) of this model are not in it (model.{missing[0]}{', ...' if len(missing) > 1 else ''})")
    diff = _config_diff(path, model)
    raise CheckpointError(
        f"{path}: {'; '.join(parts)}: not the model this run builds"
        + (f" ({diff})" if diff else "")
        + "; the model config must be the one the checkpoint was trained with"
    )


def _dcp_load(state_dict: dict, path: str | Path, **kw: Any) -> None:
    """``dcp.load`` whose failure (a truncated or foreign file) is one ``CheckpointError`` line
    naming the checkpoint, not a traceback per rank."""
    try:
        dcp.load(state_dict, checkpoint_id=str(path), **kw)
    except CheckpointException as e:
        first = next(iter(e.failures.values()), None)
        cause = f"{type(first[0]).__name__}: {first[0]}" if first else str(e).splitlines()[0]
        raise CheckpointError(f"{path}: cannot be loaded ({cause})") from None


def check_optimizer_layout(path: str | Path, model, optimizer) -> None:
    """Refuse an optimizer state whose parameter groups differ from this run's.

    The groups depend on ``optim.decay_embeddings`` / ``decay_norms``; loading a state saved
    with other settings would silently regroup parameters (or fail deep inside DCP).
    Reads only the groups' parameter names from the checkpoint.
    """
    names = {id(p): n for n, p in model.named_parameters()}
    mine = [sorted(names[id(p)] for p in g["params"]) for g in optimizer.param_groups]
    meta = _metadata(path)
    n_saved = len({k.split(".")[2] for k in meta.state_dict_metadata if k.startswith("optim.param_groups.")})
    saved: list = []
    if n_saved:
        sd: dict[str, Any] = {"optim": {"param_groups": [{"params": []} for _ in range(n_saved)]}}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _dcp_load(sd, path, no_dist=not dist.is_initialized())
        saved = [sorted(g["params"]) for g in sd["optim"]["param_groups"]]
    if saved != mine:

        def show(groups):
            return "; ".join(
                f"group {i}: {len(g)} params ({', '.join(g[:3])}{', ...' if len(g) > 3 else ''})" for i, g in enumerate(groups)
            )

        raise CheckpointError(
            f"{path}: the optimizer state has {len(saved)} parameter group(s) [{show(saved)}] but this run "
            f"builds {len(mine)} [{show(mine)}]. optim.decay_embeddings / optim.decay_norms differ from the "
            f"run that wrote it; set them back, or load only the model (checkpoint.load_optimizer: false "
            f"with init_from)."
        )


def prune(save_dir: str | Path, keep_last: int, permanent_interval: int) -> list[Path]:
    """Delete all but the newest ``keep_last`` complete checkpoints, sparing permanent ones
    (steps that are multiples of ``permanent_interval``). Incomplete folders are left alone:
    one may be a save still being written. Returns the deleted folders."""
    ckpts = list_checkpoints(save_dir)
    regular = [(s, p) for s, p in ckpts if not (permanent_interval and s % permanent_interval == 0)]
    doomed = [p for _, p in regular[: max(0, len(regular) - keep_last)]]
    for p in doomed:
        shutil.rmtree(p, ignore_errors=True)
    return doomed


def _write_state(path: Path, state: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.rename(path / STATE_FILE)


def _new_gloo_group() -> dist.ProcessGroup:
    """A gloo group of all ranks (every rank is a member, so it is never the non-member sentinel)."""
    pg = dist.new_group(backend="gloo")
    if not isinstance(pg, dist.ProcessGroup):
        raise RuntimeError(f"dist.new_group returned {pg!r} for a group of all ranks")
    return pg


class Checkpointer:
    """Saves (async or not), loads and prunes checkpoints for one training run."""

    # The DCP storage writer of every save (a subclass may wrap it, e.g. to slow writes down).
    storage_writer: type[FileSystemWriter] = FileSystemWriter

    def __init__(self, save_dir: str | Path, keep_last: int, permanent_interval: int, async_save: bool):
        self.save_dir = Path(save_dir)
        self.keep_last = keep_last
        self.permanent_interval = permanent_interval
        self.async_save = async_save
        self.rank = dist.get_rank()
        # Background saves talk over their own gloo group so their collectives never
        # interleave with the training loop's on the default group.
        self.pg = _new_gloo_group() if async_save else None
        self._pending: Future | None = None
        self._pending_step: int | None = None

    # -- saving ------------------------------------------------------------------------

    @property
    def in_flight(self) -> bool:
        return self._pending is not None and not self._pending.done()

    def save(self, step: int, model, optimizer, state: dict, block: bool = False) -> Path:
        self.wait()  # one save at a time: staging buffers and retention stay simple
        path = step_dir(self.save_dir, step)
        if self.rank == 0:
            if path.exists():  # a stale partial save of the same step from a killed run
                shutil.rmtree(path)
            _write_state(path, state)
        dist.barrier()
        model_sd, optim_sd = get_state_dict(model, optimizer)
        sd = {"model": model_sd, "optim": optim_sd}
        if self.async_save and not block:
            pending = dcp.async_save(sd, storage_writer=self.storage_writer(str(path)), process_group=self.pg)
            # a Future (the state is staged before async_save returns), or, with an async
            # stager, a response whose upload_completion is that Future
            self._pending = pending if isinstance(pending, Future) else pending.upload_completion
            self._pending_step = step
        else:
            dcp.save(sd, storage_writer=self.storage_writer(str(path)))
            self._finish(step)
        return path

    def wait(self) -> None:
        pending, step = self._pending, self._pending_step
        if pending is None or step is None:
            return
        pending.result()
        self._pending, self._pending_step = None, None
        self._finish(step)

    def poll(self) -> None:
        """Finish bookkeeping of a background save that has completed (non-blocking)."""
        if self._pending is not None and self._pending.done():
            self.wait()

    def _finish(self, step: int) -> None:
        if self.rank == 0:
            self.prune()

    def prune(self) -> None:
        prune(self.save_dir, self.keep_last, self.permanent_interval)

    # -- loading -----------------------------------------------------------------------

    @staticmethod
    def load(path: str | Path, model, optimizer, load_optimizer: bool = True) -> dict:
        """Load model (and optimizer) state from ``path`` into a sharded model; any rank count."""
        path = require_checkpoint(path)
        check_model_shapes(path, model)
        if load_optimizer and has_optimizer(path):
            check_optimizer_layout(path, model, optimizer)
            model_sd, optim_sd = get_state_dict(model, optimizer)
            sd: dict[str, Any] = {"model": model_sd, "optim": optim_sd}
            _dcp_load(sd, path)
            set_state_dict(model, optimizer, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        else:
            sd = {"model": get_model_state_dict(model)}
            _dcp_load(sd, path)
            set_model_state_dict(model, sd["model"])
        return read_state(path)


def load_model_weights(path: str | Path, model: torch.nn.Module) -> dict:
    """Load only the model weights into a plain (unsharded) module in one process.

    Used by the soup, evaluation and the Hugging Face export; works without a process group.
    """
    state = read_state(path)
    check_model_shapes(path, model)
    sd = {"model": model.state_dict()}
    with warnings.catch_warnings():  # "assuming the intent is to load in a single process": it is
        warnings.simplefilter("ignore", UserWarning)
        _dcp_load(sd, path, no_dist=not dist.is_initialized())
    model.load_state_dict(sd["model"])
    return state


def save_model_weights(path: str | Path, model_sd: dict, state: dict) -> Path:
    """Write a model-only checkpoint (e.g. a soup) from one process; loads like any other."""
    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    _write_state(path, state)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dcp.save({"model": model_sd}, storage_writer=FileSystemWriter(str(path)), no_dist=not dist.is_initialized())
    return path


__all__ = [
    "CheckpointError",
    "Checkpointer",
    "latest_checkpoint",
    "list_checkpoints",
    "load_model_weights",
    "read_state",
    "require_checkpoint",
    "save_model_weights",
    "step_dir",
]
