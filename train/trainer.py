"""The training loop: build the sharded model, then step, log, evaluate and checkpoint.

One ``Trainer`` per process (torchrun starts one per GPU/rank). Everything a step does is in
``train_step``; everything that happens between steps is in ``fit``. Read top to bottom:

1. ``__init__``: process group, a check that every rank (node) sees the same ``save_dir`` and
   data, model on the meta device -> FSDP2 ``fully_shard`` per block and at the root (over all
   ranks, or hybrid: a (replicate, shard) mesh) -> materialise and initialise (same weights on
   any rank count), data, optimizer, checkpointer; then resume from ``save_dir`` or start
   stage 2 from ``init_from``.
2. ``train_step``: this rank's slice of the global batch, in micro-batches (gradient
   accumulation), loss + z-loss, clipping, AdamW; the loss and the stop flag are all-reduced.
3. ``fit``: the loop; async checkpoints every ``interval`` steps; on SIGTERM a blocking save
   and a clean exit.

The pieces live beside it, one concern each (as torchtitan cuts its trainer): ``dist`` (process
group, mesh, FSDP2 sharding, start-up checks across ranks), ``loss`` (the loss and its
all-reduce), ``metrics`` (step records and the metrics file), ``checkpoint`` (saving, and where
a run starts: resume or ``init_from``).
"""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import numpy as np
import torch
from torch.distributed.fsdp import FSDPModule

from train import dist as tdist
from train.attempt import Attempt, check_restartable_launch
from train.checkpoint import Checkpointer, check_fresh_save_dir, restore, rng_states
from train.config import Config, check_for_training, dump_config
from train.data import GlobalOrder, TokenDataset, eval_indices, token_dtype, validate_shards
from train.errors import EXIT_RETRY, TrainError
from train.evaluate import evaluate_loss
from train.loss import StepLoss, lm_loss
from train.metrics import MetricsFile, StepMeter
from train.model import Transformer, describe, init_weights
from train.optim import build_optimizer, clip_grad_norm
from train.schedule import Schedule


class Trainer:
    """One rank's training run: built from a ``Config``, trained by ``fit``, ended by ``close``."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        check_restartable_launch()
        self.d = tdist.setup(timeout=cfg.resilience.init_timeout)
        self.rank, self.world, self.device = self.d.rank, self.d.world, self.d.device
        # the ledger, the watchdog (from here: building, restoring and the first step must fit
        # in resilience.init_timeout) and the straggler check
        self.attempt = Attempt(cfg, self.rank, self.world, max(1, self.world // self.d.local_world))
        try:
            self._start()
        except BaseException as e:
            reason = "preflight" if isinstance(e, PreflightFailed) else "error"
            self.attempt.exit(reason, getattr(e, "exit_status", EXIT_RETRY), f"{type(e).__name__}: {e}"[:500])
            self.attempt.close()
            raise

    def _start(self) -> None:
        cfg = self.cfg
        t, c = cfg.train, cfg.checkpoint
        check_for_training(cfg, self.world)
        if cfg.preflight.enabled:
            self._preflight()
        self.grad_accum = t.global_batch_size // (self.world * t.micro_batch_size)
        self.mesh_shape = tdist.mesh_shape(t, self.d)
        save_dir = Path(c.save_dir)
        self.metrics = MetricsFile(save_dir / cfg.log.metrics_file, self.rank)
        tdist.check_shared_save_dir(save_dir, self.rank, self.world)
        check_fresh_save_dir(c, self.metrics.path, self.rank, self._print)
        self.model, self.fsdp = self._build_model()
        self.params = [p for p in self.model.parameters()]
        self.attempt.time_compute(self.model.blocks, self.device)
        self.stats = describe(cfg.model, cfg.data.seq_len)
        self._build_data()
        self.optimizer = build_optimizer(self.model, cfg.optim, lr=0.0)
        self.ckpt = Checkpointer(c.save_dir, c.keep_last, c.permanent_interval, c.async_save, on_done=self.attempt.checkpoint_done)
        self.lr = 0.0
        # Two flags, on purpose: the SIGTERM handler only ever sets ``_sigterm_received``
        # (this rank's wish), which is fed into the step's all-reduce; ``stop_requested`` is
        # only ever the all-reduced value, so every rank takes every stop/save/eval decision
        # from the same number even if a signal lands between the all-reduce and the check.
        self._sigterm_received = False
        self.stop_requested = False
        start = restore(cfg, self.model, self.optimizer, self.fingerprint, self.device, self._print)
        self.step, self.instances_seen, self.peak_lr = start.step, start.instances_seen, start.peak_lr
        self.saved_step: int | None = start.step if start.resumed else None
        self.attempt.restored(start.step, "resume" if start.resumed else ("init_from" if c.init_from else "fresh"))
        # after a kill, the metrics of the steps past the checkpoint go: they are logged again
        self.evaluated_steps = self.metrics.reconcile(self.step)
        s = cfg.schedule
        self.schedule = Schedule(s.kind, self.peak_lr, s.total_steps or t.max_steps, s.warmup_steps, s.min_lr_ratio)
        if self.rank == 0:
            save_dir.mkdir(parents=True, exist_ok=True)
            (save_dir / "config.yaml").write_text(dump_config(cfg))

    # -- setup -------------------------------------------------------------------------

    def _preflight(self) -> None:
        """The pre-flight checks (``train.preflight``) on every rank; a failure ends the attempt
        with the status that tells recovery what to do (retry, cordon this node, stop)."""
        from train.preflight import run_preflight

        result = run_preflight(self.cfg, self.rank, self.world, socket.gethostname(), self.d.local_rank)
        self.attempt.ledger.write("preflight", seconds=result.seconds, failures=result.failures, verdict=result.verdict)
        result.say(self.rank)
        if result.verdict != "ok":
            raise PreflightFailed(result)

    def _build_model(self) -> tuple[Transformer, FSDPModule]:
        """The sharded model, and the same object typed as the FSDP root (for the FSDP-only
        calls, e.g. ``set_requires_gradient_sync``)."""
        # Built on the meta device: no rank ever holds the full unsharded model in memory.
        with torch.device("meta"):
            model = Transformer(self.cfg.model)
        mesh = tdist.build_mesh(self.device, self.mesh_shape)
        root = tdist.parallelize(model, mesh, self.cfg.train, self.device)
        model.to_empty(device=self.device)
        init_weights(model, self.cfg.train.init_seed)
        model.train()
        return model, root

    def _build_data(self) -> None:
        """The training (and validation) shards, checked on every rank, and the global order."""
        d, vocab = self.cfg.data, self.cfg.model.vocab_size
        dtype = token_dtype(d.token_dtype, vocab)
        # every instance read is also checked against the vocabulary (a shard changed after
        # the start-up check below is a data error, not an index error in the embedding)
        self.data = TokenDataset(d.paths, d.seq_len, dtype, d.eos_id, vocab_size=vocab)
        self.fingerprint = self.data.fingerprint()
        self.val_data = TokenDataset(d.val_paths, d.seq_len, dtype, d.eos_id, vocab_size=vocab) if d.val_paths else None
        tdist.check_same_data((self.fingerprint, self.val_data.fingerprint() if self.val_data else None), self.world)
        # token ids < vocab_size and sound sidecars: one read of each shard, split over the
        # ranks, cached in save_dir (a shard is read again when its size or times change)
        cache = Path(self.cfg.checkpoint.save_dir) / "data_cache"
        for ds in filter(None, (self.data, self.val_data)):
            validate_shards(ds, vocab, cache, self.rank, self.world, tdist.all_gather)
        # the global order: one permutation file per epoch in save_dir (written by rank 0,
        # memory-mapped by all), not a full in-memory permutation per rank
        self.order = GlobalOrder(self.data.n_instances, d.seed, cache_dir=cache, is_writer=self.rank == 0, barrier=tdist.barrier)

    # -- state -------------------------------------------------------------------------

    def trainer_state(self) -> dict:
        rng = rng_states(self.device)
        return {
            "step": self.step,
            "tokens_seen": self.instances_seen * self.cfg.data.seq_len,
            "lr": self.lr,
            "peak_lr": self.peak_lr,
            "world_size": self.world,
            "mesh": {"data_parallel": self.cfg.train.data_parallel, "shape": list(self.mesh_shape)},
            "global_batch_size": self.cfg.train.global_batch_size,
            "data": {
                "seed": self.cfg.data.seed,
                "epoch": self.instances_seen // self.data.n_instances,
                "instances_seen": self.instances_seen,
                "n_instances": self.data.n_instances,
                "fingerprint": self.fingerprint,
            },
            "rng": rng,
            "run_name": self.cfg.run_name,
            "config": self.cfg.to_dict(),
            "time": time.time(),
        }

    def save(self, block: bool = False) -> None:
        state = self.trainer_state()
        t0 = time.perf_counter()
        path = self.ckpt.save(self.step, self.model, self.optimizer, state, block=block)
        is_async = self.cfg.checkpoint.async_save and not block
        self.attempt.checkpoint(self.step, time.perf_counter() - t0, is_async)
        self.saved_step = self.step
        self._print(f"checkpoint step {self.step} -> {path}{' (async)' if self.cfg.checkpoint.async_save and not block else ''}")

    # -- one step ----------------------------------------------------------------------

    def train_step(self) -> dict:
        t = self.cfg.train
        self.lr = self.schedule.lr_at(self.step + 1)
        for g in self.optimizer.param_groups:
            g["lr"] = self.lr
        idx = self.order.rank_indices(self.instances_seen, t.global_batch_size, self.rank, self.world)
        loss = StepLoss(self.grad_accum, self.device)
        for i, mb in enumerate(np.split(idx, self.grad_accum)):
            # gradient accumulation without communication: gradients are reduce-scattered
            # once per step, in the last micro-batch's backward
            self.fsdp.set_requires_gradient_sync(i == self.grad_accum - 1)
            tokens = torch.from_numpy(self.data.batch(mb)).to(self.device, non_blocking=True)
            logits = self.model(tokens)
            loss.add(*lm_loss(logits, tokens, self.cfg.model.vocab_size, t.z_loss)).backward()
        grad_norm = clip_grad_norm(self.params, t.clip_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        self.instances_seen += t.global_batch_size
        ce, z, self.stop_requested = loss.all_reduce(self._sigterm_received)  # the only writer of stop_requested
        return {"loss": ce, "z_loss": z, "grad_norm": grad_norm.item()}

    # -- the loop ----------------------------------------------------------------------

    def fit(self) -> dict:
        t, c = self.cfg.train, self.cfg.checkpoint
        signal.signal(signal.SIGTERM, self._on_sigterm)
        end = min(t.max_steps, t.stop_at_step or t.max_steps)
        self._print(
            f"{self.cfg.run_name}: {self.stats['total'] / 1e6:.2f}M params, {self.world} rank(s), "
            f"{self.world // self.d.local_world} node(s), {tdist.layout(self.mesh_shape)}, "
            f"{self.data.n_instances} instances of {self.cfg.data.seq_len}, grad accum {self.grad_accum}, "
            f"precision {tdist.precision(t, self.device)}, steps {self.step}->{end}"
        )
        if self.step >= end:
            self._print(f"already at step {self.step} of {end}: nothing to train")
        meter = StepMeter(self.cfg, self.stats["flops_per_token"], self.world, self.device)
        last_eval = None
        self.attempt.loop_started()
        while self.step < end:
            inflight = self.ckpt.in_flight
            t0 = time.perf_counter()
            losses = self.train_step()
            dt = time.perf_counter() - t0
            self.ckpt.poll()
            if self.attempt.step_done(self.step):
                # past the first step (compilation, restore, a slow start): collectives must
                # now finish in resilience.collective_timeout
                tdist.set_collective_timeout(self.cfg.resilience.collective_timeout)
            tokens = self.instances_seen * self.cfg.data.seq_len
            m = meter.record(losses, step=self.step, tokens=tokens, lr=self.lr, step_time=dt, ckpt_inflight=inflight)
            if self.step % self.cfg.log.interval == 0 or self.step == end:
                self._log(m)
            if self.stop_requested:
                self._print(f"SIGTERM: saving step {self.step} and exiting")
                if self.saved_step != self.step:  # never rewrite (and risk) a complete checkpoint
                    with self.attempt.watchdog.paused():  # a blocking save is not a step
                        self.save(block=True)
                break
            if c.interval and self.step % c.interval == 0 and self.step != end:
                self.save()
            final_eval_follows = self.step == end and self.cfg.eval.at_end
            if (
                self.cfg.eval.interval and self.step % self.cfg.eval.interval == 0 and self.val_data and not final_eval_follows
            ):  # the last step is evaluated once, below
                with self.attempt.watchdog.paused():  # an evaluation is not a step
                    last_eval = self.run_eval()
        with self.attempt.watchdog.paused():  # the final save and evaluation are not steps
            if not self.stop_requested:
                if self.saved_step != self.step:
                    self.save(block=True)
                # not again for a finished run started again (its final evaluation is logged)
                if self.cfg.eval.at_end and self.val_data and self.step not in self.evaluated_steps:
                    last_eval = self.run_eval()
            self.ckpt.wait()
        self.attempt.exit("preempted" if self.stop_requested else "finished", 0)
        return {"step": self.step, "preempted": self.stop_requested, "eval": last_eval}

    def run_eval(self) -> dict:
        if self.val_data is None:
            raise RuntimeError("run_eval without data.val_paths")
        # every validation instance, on any number of ranks (the tail is padded and masked)
        t0 = time.perf_counter()
        idx = eval_indices(self.val_data.n_instances, self.cfg.data.val_max_instances, self.rank, self.world)
        r = evaluate_loss(self.model, self.val_data, idx, self.cfg.train.micro_batch_size, self.device, self.cfg.model.vocab_size)
        self._log({"step": self.step, "eval/loss": r["loss"], "eval/ppl": r["ppl"]})
        self.evaluated_steps.add(self.step)
        self.attempt.exclude(time.perf_counter() - t0)  # not step time (ETTR)
        return r

    # -- output ------------------------------------------------------------------------

    def _on_sigterm(self, signum, frame) -> None:
        # Only set this rank's flag: it reaches the other ranks through the next step's
        # all-reduce, and every rank then saves together. Never touch ``stop_requested``.
        self._sigterm_received = True

    def _print(self, msg: str) -> None:
        if self.rank == 0:
            print(msg, flush=True)

    def _log(self, m: dict) -> None:
        self.metrics.write(m)

    def close(self) -> None:
        self.ckpt.wait()
        self.attempt.close()
        tdist.teardown()


class PreflightFailed(TrainError):
    """A pre-flight check failed; the exit status says retry, cordon or stop."""

    label = "preflight"

    def __init__(self, result):
        super().__init__(f"{result.verdict}: " + "; ".join(f"rank {f['rank']} on {f['host']}: {f['check']}" for f in result.failures))
        self.exit_status = result.exit_status
        self.same_on_every_rank = True  # every rank holds the same verdict: said once


def run(cfg: Config) -> dict:
    trainer = Trainer(cfg)
    try:
        return trainer.fit()
    except BaseException as e:
        # the ledger's exit record: why this attempt ended (a kill writes none)
        trainer.attempt.exit("error", getattr(e, "exit_status", EXIT_RETRY), f"{type(e).__name__}: {e}"[:500])
        raise
    finally:
        trainer.close()
