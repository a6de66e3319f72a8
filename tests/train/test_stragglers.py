"""Stragglers (``train/stragglers.py``): the pure scoring, and 2 gloo ranks training a small
FSDP2 model (as the trainer shards it) with ``ComputeClock`` and ``StragglerMonitor`` as the
trainer uses them: a rank slowed down is named with its host within 20 steps (window 10); a
healthy run raises no alarm, three times over.

The ranks run a script made here (not the trainer): each step is 2 micro-batches of forward and
backward, gradient clipping, AdamW and the loss all-reduce, so the FSDP2 all-gathers and
reduce-scatters between the blocks make every rank wait for the slowest, as in training."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from tests.support.repo import REPO_ROOT  # noqa: E402
from train.stragglers import ComputeClock, Straggler, describe, find_stragglers, scores, window_time  # noqa: E402

# -- the pure part -------------------------------------------------------------------------------


def _spin(seconds: float) -> None:
    """``seconds`` of this thread's CPU time (a sleep spends none)."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def test_window_time():
    """The mean without the slowest step: one compilation or GC pause does not name a rank; a
    rank slowed in bursts (slow on some steps by a lot) still weighs in."""
    assert window_time([1.0, 1.0, 1.0, 30.0]) == 1.0
    assert window_time([1.0, 3.0, 1.0, 3.0, 9.0]) == 2.0
    assert window_time([2.0, 4.0]) == 3.0  # fewer than 3: the plain mean
    assert window_time([5.0]) == 5.0


def test_scores():
    assert scores([2.0, 1.0, 3.0]) == [2.0, 1.0, 3.0]
    assert scores([0.5, 0.5]) == [1.0, 1.0]
    assert scores([0.0, 2.0, 4.0]) == [0.0, 1.0, 2.0]  # not measured: scores 0, never the fastest
    assert scores([0.0, 0.0]) == [0.0, 0.0]
    assert scores([]) == []


def test_find_stragglers():
    hosts = ["a", "a", "b", "b"]
    found = find_stragglers([1.0, 1.2, 2.0, 3.0], hosts, 1.5, step=20)
    assert found == [Straggler(3, "b", 3.0, 20, 3.0, 0, 1.0), Straggler(2, "b", 2.0, 20, 2.0, 0, 1.0)]
    assert find_stragglers([1.0, 1.49], ["a", "b"], 1.5, 10) == []
    assert [s.rank for s in find_stragglers([1.0, 1.5], ["a", "b"], 1.5, 10)] == [1]  # at the factor: named
    assert find_stragglers([1.0, 9.0], ["a", "b"], 0, 10) == []  # factor 0: off
    assert find_stragglers([1.0], ["a"], 1.5, 10) == []
    line = describe(found[0], window=10)
    assert line == ("straggler: rank 3 on b: 3.00x the fastest rank's compute time per step (3.000 s vs 1.000 s on rank 0; steps 11-20)")


def test_compute_clock_counts_training_forwards_only():
    """The clock counts the blocks' training forwards, from after the pre-hooks added before it
    (as FSDP2's, which waits for the all-gather: 1 s here, not counted) to the end of the forward
    (a pre-hook added after it: 0.2 s of CPU, counted; on CPU the clock reads the thread's CPU
    time); not an evaluation's (``eval()`` or no
    gradients); ``take`` starts the count again; ``close`` removes the hooks."""
    blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(2)])
    blocks[1].register_forward_pre_hook(lambda m, a: time.sleep(1.0))
    clock = ComputeClock(blocks, torch.device("cpu"))
    blocks[0].register_forward_pre_hook(lambda m, a: _spin(0.2))  # CPU time: the clock counts it
    x = torch.ones(1, 4)
    for b in blocks:
        x = b(x)
    first = clock.take()
    assert 0.2 <= first < 1.0
    with torch.no_grad():
        blocks[0](x)
    blocks.eval()
    blocks[0](x)
    assert clock.take() == 0.0
    clock.close()
    blocks.train()
    blocks[0](x)
    assert clock.take() == 0.0


# -- 2 gloo ranks ----------------------------------------------------------------------------------

# One torchrun job runs every case, one after the other (each a fresh monitor: a "run"), to pay
# for starting torch once: the healthy runs, then a run with rank 1 slowed down.
RANKS = """
import json, socket, sys, time
from pathlib import Path
import torch, torch.distributed as dist
from train import dist as tdist
from train.config import ModelConfig, TrainConfig
from train.errors import exit_process
from train.model import Transformer, init_weights
from train.optim import clip_grad_norm
from train.stragglers import ComputeClock, StragglerMonitor, describe, scores


def _spin(seconds):
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass

a = json.loads(sys.argv[1])
d = tdist.setup()
with torch.device("meta"):
    model = Transformer(ModelConfig(**a["model"]))
root = tdist.parallelize(model, tdist.build_mesh(d.device, (d.world,)), TrainConfig(precision="fp32"), d.device)
model.to_empty(device=d.device)
init_weights(model, 0)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
clock = ComputeClock(model.blocks, d.device)  # after fully_shard, as the trainer must
g = torch.Generator().manual_seed(d.rank)
runs = []
for slow in a["runs"]:
    hooks = []
    if d.rank == 1 and slow:  # slower compute: more work inside each block's forward
        hooks = [b.register_forward_pre_hook(lambda m, args: _spin(a["sleep"])) for b in model.blocks]
    monitor = StragglerMonitor(a["window"], a["factor"], d.rank, d.world, socket.gethostname())
    named, windows, walls = [], [], []
    for step in range(1, a["steps"] + 1):
        t0 = time.perf_counter()
        for i in range(a["micro_batches"]):
            root.set_requires_gradient_sync(i == a["micro_batches"] - 1)
            tokens = torch.randint(0, 512, a["micro_batch"], generator=g)
            logits = model(tokens)
            torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten()).backward()
        clip_grad_norm(list(model.parameters()), 1.0)  # the trainer's: one all-reduce
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss = torch.ones(1)
        dist.all_reduce(loss)
        loss.item()
        walls.append(time.perf_counter() - t0)
        for s in monitor.record(clock.take(), step):
            named.append({"rank": s.rank, "host": s.host, "score": s.score, "step": s.step, "line": describe(s, a["window"])})
        if step % a["window"] == 0:
            windows.append(monitor.scores)
    for h in hooks:
        h.remove()
    wall = [0.0] * d.world
    dist.all_gather_object(wall, sorted(walls)[len(walls) // 2])
    runs.append({"slow": slow, "named": named, "scores": windows, "wall_scores": scores(wall)})
if d.rank == 0:
    Path(a["out"], "result.json").write_text(json.dumps({"host": socket.gethostname(), "runs": runs}))
# Both ranks leave together, and as python -m train does (exit_process): at interpreter teardown
# gloo's threads can race the static destructors and abort a rank that finished (SIGABRT, twice in
# CI-style runs, once after the barrier alone).
dist.barrier()
tdist.teardown()
exit_process(0)
"""

# Two blocks: few collectives, so that a step is quick even on 2 busy cores. Rank 1, when slowed,
# sleeps 60 ms in each block's forward: 0.12 s more a step (2 blocks, 1 micro-batch).
ARGS = {
    "runs": [False, False, False, True],
    "steps": 10,
    "window": 10,
    "factor": 1.5,
    "model": {"vocab_size": 512, "d_model": 256, "n_layers": 2, "n_heads": 4, "max_seq_len": 128},
    "micro_batches": 1,
    "micro_batch": [8, 128],
    "sleep": 0.06,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("stragglers")
    script = tmp / "ranks.py"
    script.write_text(RANKS)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([*cmd, json.dumps({"out": str(tmp), **ARGS})], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads((tmp / "result.json").read_text())


@pytest.mark.train
@pytest.mark.slow
def test_slow_rank_is_named(runs):
    """Rank 1 slowed down: named, with its host, at step 10 (the first window of 10), and never rank 0;
    its wall step time is no slower than rank 0's (the collectives make every rank wait for it),
    which is why the wall time is not what is compared."""
    (run,) = [r for r in runs["runs"] if r["slow"]]
    assert run["named"], run
    first = run["named"][0]
    assert first["rank"] == 1 and first["host"] == runs["host"] and first["step"] == 10 and first["score"] >= 1.5, run
    assert all(n["rank"] == 1 for n in run["named"]), run
    assert first["line"].startswith(f"straggler: rank 1 on {runs['host']}: ")
    assert max(run["wall_scores"]) < 1.5, run


@pytest.mark.train
@pytest.mark.slow
def test_healthy_runs_raise_no_alarm(runs):
    """Three runs of 10 steps (a window each) with no rank slowed: no straggler, scores below the factor."""
    healthy = [r for r in runs["runs"] if not r["slow"]]
    assert len(healthy) == 3
    for run in healthy:
        assert run["named"] == [] and len(run["scores"]) == 1, run
        assert all(max(s) < 1.5 for s in run["scores"]), run
