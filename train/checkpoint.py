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

Between a checkpoint and the model this module also owns where a training run starts
(``restore``: its own newest checkpoint, or ``checkpoint.init_from`` for stage 2, with the RNG
states, the data checks and the configured optimizer settings), the refusal of a fresh run
into a ``save_dir`` that holds another run's checkpoints (``check_fresh_save_dir``), and the
single-process helpers that the soup, evaluation and export use (``load_model_weights``,
``save_model_weights``).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import pickle
import re
import shutil
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
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

from train.config import CheckpointConfig, Config
from train.data import check_fingerprint
from train.errors import CheckpointError, ConfigError, DataError
from train.optim import apply_optim_config

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
    path = require_checkpoint(path)
    try:
        return FileSystemReader(str(path)).read_metadata()
    except (EOFError, OSError, ValueError, RuntimeError, pickle.UnpicklingError) as e:
        raise DamagedCheckpoint(f"{path / '.metadata'}: cannot be read ({type(e).__name__}: {e})") from None


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
        raise DamagedCheckpoint(f"{path}: cannot be loaded ({cause})") from None


class DamagedCheckpoint(CheckpointError):
    """A checkpoint folder that looks complete but whose files cannot be read (truncated,
    overwritten, lost by the storage)."""


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

    def __init__(
        self,
        save_dir: str | Path,
        keep_last: int,
        permanent_interval: int,
        async_save: bool,
        on_done: Callable[[int, float], None] | None = None,
    ):
        self.save_dir = Path(save_dir)
        self.on_done = on_done  # (step, seconds from the save call to a complete checkpoint)
        self._started = 0.0
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
        self._started = time.perf_counter()
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
        if self.on_done is not None:
            self.on_done(step, time.perf_counter() - self._started)
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


# -- where a training run starts ----------------------------------------------------------


def check_fresh_save_dir(c: CheckpointConfig, metrics_path: Path, rank: int, say: Callable[[str], None]) -> None:
    """A fresh run (``resume: false``) must not share save_dir with an older run's
    checkpoints: retention sorts by step, so it would delete the new run's checkpoints and
    keep the old ones, and a later resume would pick the old run's newest. With
    ``overwrite: true`` rank 0 deletes them (and the old run's metrics file)."""
    if c.resume:
        return
    old = list_checkpoints(c.save_dir)
    if not old:
        return
    if not c.overwrite:
        raise ConfigError(
            f"checkpoint.resume: false, but {c.save_dir} already holds checkpoints "
            f"({', '.join(p.name for _, p in old[-3:])}{', ...' if len(old) > 3 else ''}). Use another "
            f"checkpoint.save_dir, set checkpoint.resume: true to continue that run, or set "
            f"checkpoint.overwrite: true to delete them and start over."
        )
    if rank == 0:
        say(f"checkpoint.overwrite: deleting {len(old)} old checkpoint(s) in {c.save_dir}")
        for _, p in old:
            shutil.rmtree(p)
        metrics_path.unlink(missing_ok=True)
    dist.barrier()


def rng_states(device: torch.device) -> list[dict]:
    """Every rank's RNG states (torch, and CUDA on a GPU), base64, in rank order."""
    mine = {"torch": base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode()}
    if device.type == "cuda":
        mine["cuda"] = base64.b64encode(torch.cuda.get_rng_state(device).numpy().tobytes()).decode()
    states: list = [None] * dist.get_world_size()
    dist.all_gather_object(states, mine)
    return states


def restore_rng(states: list[dict] | None, device: torch.device) -> None:
    if not states:
        return
    # Same world size: each rank takes its own; otherwise every rank takes rank 0's.
    s = states[dist.get_rank()] if len(states) == dist.get_world_size() else states[0]
    torch.set_rng_state(torch.frombuffer(bytearray(base64.b64decode(s["torch"])), dtype=torch.uint8))
    if "cuda" in s and device.type == "cuda":
        torch.cuda.set_rng_state(torch.frombuffer(bytearray(base64.b64decode(s["cuda"])), dtype=torch.uint8), device)


@dataclass
class Start:
    """Where a training run starts: step 0 (fresh or stage 2's ``init_from``) or its own
    newest checkpoint (``resumed``), and the peak learning rate of its schedule."""

    peak_lr: float
    step: int = 0
    instances_seen: int = 0
    resumed: bool = False


def restore(cfg: Config, model, optimizer, fingerprint: str, device: torch.device, say: Callable[[str], None]) -> Start:
    """Load the run's newest checkpoint in ``save_dir`` (``resume: true``), else
    ``init_from``, into the sharded ``model`` and ``optimizer``; a checkpoint that does not fit
    is a ``ConfigError``. Then the config's optimizer settings win over the loaded ones."""
    try:
        candidates = [p for _, p in reversed(list_checkpoints(cfg.checkpoint.save_dir))] if cfg.checkpoint.resume else []
        for path in candidates:
            try:
                start = _resume(path, cfg, model, optimizer, fingerprint, device, say)
                break
            except DamagedCheckpoint as e:
                # every rank got the same error (DCP gathers the reads' failures): set it aside
                # once, where resuming never looks again, and take the one before it
                set_aside(path, str(e), say)
        else:
            start = _init_from(cfg, model, optimizer, say)
    except CheckpointError as e:
        raise ConfigError(str(e)) from None
    # A loaded optimizer state brings the groups' settings of the run that saved it:
    # the config wins (weight decay, betas, eps; the lr comes from the schedule).
    for line in apply_optim_config(optimizer, cfg.optim):
        say(f"optim: {line}")
    return start


def set_aside(path: Path, why: str, say: Callable[[str], None]) -> None:
    """Rename a damaged checkpoint to ``<name>.damaged-<unix time>`` (rank 0; every rank waits)."""
    if dist.get_rank() == 0:
        target = path.with_name(f"{path.name}.damaged-{int(time.time())}")
        path.rename(target)
        say(f"WARNING: {why}; set aside as {target.name}, resuming from the checkpoint before it")
    dist.barrier()


def _resume(latest: Path, cfg: Config, model, optimizer, fingerprint: str, device: torch.device, say: Callable[[str], None]) -> Start:
    state = Checkpointer.load(latest, model, optimizer)
    warn = check_fingerprint(state["data"]["fingerprint"], fingerprint, cfg.data.allow_fingerprint_mismatch)
    if warn:
        say(f"WARNING: {warn}")
    if state["data"]["seed"] != cfg.data.seed:
        msg = f"data.seed is {cfg.data.seed} but {latest} was trained with seed {state['data']['seed']}: the data order would not continue"
        if not cfg.data.allow_fingerprint_mismatch:
            raise DataError(msg + ". Set data.allow_fingerprint_mismatch: true to resume anyway.")
        say(f"WARNING: {msg} (accepted)")
    # stage 2 keeps the start lr it took from stage 1
    start = Start(state["peak_lr"], state["step"], state["tokens_seen"] // cfg.data.seq_len, resumed=True)
    restore_rng(state.get("rng"), device)
    say(f"resumed from {latest} (step {start.step}, {state['tokens_seen']} tokens)")
    return start


def _init_from(cfg: Config, model, optimizer, say: Callable[[str], None]) -> Start:
    """Stage 2 from ``checkpoint.init_from`` (its weights, and its optimizer state unless
    ``load_optimizer: false``), or a fresh start without it; step 0 either way."""
    c, schedule = cfg.checkpoint, cfg.schedule
    start = Start(cfg.optim.lr)
    if not c.init_from:
        if schedule.kind == "linear_decay" and schedule.start_lr is not None:
            start.peak_lr = schedule.start_lr
        return start
    try:
        if c.load_optimizer and not has_optimizer(c.init_from):
            say(f"note: {c.init_from} holds no optimizer state (a soup?): starting with a fresh AdamW")
        state = Checkpointer.load(c.init_from, model, optimizer, load_optimizer=c.load_optimizer)
    except CheckpointError as e:
        raise ConfigError(f"checkpoint.init_from: {e}") from None
    if schedule.kind == "linear_decay":
        start.peak_lr = schedule.start_lr if schedule.start_lr is not None else state["lr"]
        if start.peak_lr <= 0:
            raise ConfigError(f"schedule.start_lr: {c.init_from} records no learning rate (a soup?); set schedule.start_lr")
    say(f"initialised from {c.init_from} (its step {state['step']}, lr {state['lr']:.3e}); starting lr {start.peak_lr:.3e}")
    return start


# -- single-process helpers ------------------------------------------------------------------


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
    "Start",
    "check_fresh_save_dir",
    "latest_checkpoint",
    "list_checkpoints",
    "load_model_weights",
    "read_state",
    "require_checkpoint",
    "restore",
    "restore_rng",
    "rng_states",
    "save_model_weights",
    "step_dir",
]
