"""What a training run's ``save_dir`` tells the report: how far it got and how it ended.

``train`` writes, in ``checkpoint.save_dir``: ``config.yaml`` (the resolved config: ``train.max_steps``
and ``train.stop_at_step`` say where it ends), ``metrics.jsonl`` (a row per logged step: loss,
tokens, step time...; a row per evaluation: ``eval/loss``) and a folder ``step<N>/`` per
checkpoint, complete once DCP's ``.metadata`` is in it, with ``trainer_state.json`` (step, tokens
seen, the time it was saved). A run is ``complete`` when it holds a complete checkpoint at its
last step, ``unfinished`` when its newest complete checkpoint is earlier (running, preempted or
killed: the files cannot tell which; a rerun resumes from that checkpoint), and ``no checkpoint``
when none is complete. Its ``goodput.jsonl`` (the append-only ledger of its attempts, checkpoints
and failures, ``train/ledger.py``), where it has one, is summarised by ``train.goodput``, the same
figures ``python -m train.goodput`` prints. Everything is read through the storage layer (local or
``s3://``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import orjson
import yaml

from dolma_pipe import storage
from train.goodput import summarize
from train.ledger import LEDGER, parse_ledger

_STEP = re.compile(r"/step(\d+)/\.metadata$")


@dataclass
class TrainRun:
    """One training run as the overview shows it (None: the save_dir does not say)."""

    folder: str
    status: str
    step: int | None = None  # the last step logged
    end: int | None = None  # the step it ends at (max_steps, or stop_at_step when earlier)
    tokens: int | None = None  # tokens seen at the last step logged
    loss: float | None = None  # training loss at the last step logged
    eval_loss: float | None = None  # the last evaluation's loss
    checkpoints: list[int] = field(default_factory=list)  # steps of the complete checkpoints
    finished: str | None = None  # when the final checkpoint was saved (complete runs)
    rows: list[dict[str, Any]] = field(default_factory=list)  # metrics.jsonl, parsed
    goodput: dict[str, Any] | None = None  # train.goodput.summarize of its goodput.jsonl (None: no ledger)


def _config(folder: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(storage.read_bytes(storage.join(folder, "config.yaml")))
    except (storage.StorageError, FileNotFoundError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _end_step(config: dict[str, Any]) -> int | None:
    train = config.get("train") or {}
    ends = [v for v in (train.get("max_steps"), train.get("stop_at_step")) if isinstance(v, int)]
    return min(ends) if ends else None


def metrics_rows(folder: str) -> list[dict[str, Any]]:
    """The rows of ``metrics.jsonl`` (a line cut short by a kill is skipped)."""
    rows = []
    for line in storage.read_bytes(storage.join(folder, "metrics.jsonl")).splitlines():
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def read_goodput(folder: str) -> dict[str, Any] | None:
    """The goodput figures of the run's ledger (None: it has none, or no record in it)."""
    path = storage.join(folder, LEDGER)
    try:
        records = parse_ledger(storage.read_bytes(path))
    except (storage.StorageError, FileNotFoundError):
        return None
    return summarize(records, records.skipped, path) if records else None


def read_train_run(folder: str) -> TrainRun:
    """The run whose ``save_dir`` is ``folder`` (a folder holding ``metrics.jsonl``)."""
    rows = metrics_rows(folder)
    steps = [r for r in rows if "loss" in r and isinstance(r.get("step"), int)]
    evals = [r for r in rows if isinstance(r.get("eval/loss"), (int, float))]
    checkpoints = sorted(int(m.group(1)) for p in storage.glob(storage.join(folder, "step*", ".metadata")) if (m := _STEP.search(p)))
    end = _end_step(_config(folder))
    last = steps[-1] if steps else {}
    if not checkpoints:
        status = "no checkpoint"
    elif end is not None and checkpoints[-1] >= end:
        status = "complete"
    else:
        status = "unfinished"
    finished = None
    if status == "complete":
        try:
            state = orjson.loads(storage.read_bytes(storage.join(folder, f"step{checkpoints[-1]}", "trainer_state.json")))
            finished = datetime.fromtimestamp(float(state["time"]), timezone.utc).isoformat(timespec="seconds")
        except (storage.StorageError, FileNotFoundError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            finished = None
    return TrainRun(
        folder=folder,
        status=status,
        step=last.get("step"),
        end=end,
        tokens=last.get("tokens"),
        loss=last.get("loss"),
        eval_loss=evals[-1]["eval/loss"] if evals else None,
        checkpoints=checkpoints,
        finished=finished,
        rows=rows,
        goodput=read_goodput(folder),
    )
