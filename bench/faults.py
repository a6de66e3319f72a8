"""Fault-injection harness: the trainer's recovery, watchdog, straggler check, pre-flight and
goodput ledger under real faults, each case against the same run uninterrupted.

    .venv/bin/python bench/faults.py [--cases kills,stop,slow,healthy,every120,preflight,damaged]
                                     [--seed 29] [--json bench/_work/faults.json]

Every case runs ``python -m train.launch`` on 2 gloo ranks of this machine (tiny preset, fp32) and
injects faults from outside (``train.faults``: SIGKILL, SIGSTOP, a SIGSTOP/SIGCONT duty cycle),
on a seeded schedule. Figures come from the goodput ledger (``train.goodput``) and from the
harness's own clock (when it injected each fault). Cases:

- ``kills``: 5 SIGKILLs at random steps of random ranks, one while an async save is in flight:
  completes with no human action; final weights and optimizer state ``torch.equal`` to the
  uninterrupted run's; steps lost per failure; recovery (kill to the next finished step) median
  and p90 against the cold start-up (process start to first step of the first attempt).
- ``stop``: a SIGSTOPped rank: the watchdog's detection time against ``step_timeout``, no
  process left, bit-identical end.
- ``slow``: rank 1's blocks made 2x slower (``tests/support/slow_rank``): the step at which the
  straggler check names it.
- ``healthy``: 3 runs without faults: no alarm (watchdog, straggler); ETTR and checkpoint stall of
  the longest.
- ``every120``: a SIGKILL every 120 s at the checkpoint interval Young/Daly recommends for the
  measured save time and that failure rate: ETTR measured and predicted.
- ``preflight``: save_dir read-only, too small, an unreadable shard, a wrong matmul, a rank 3x
  slower: each verdict, naming rank and host, and its time (``tests/support/preflight_faults``).
- ``damaged``: the newest checkpoint truncated: set aside, the run resumes from the one before.
- ``nodeloss``: 2 loopback nodes (a torchrun agent each, 2 ranks, ``--nnodes 1:2``, c10d on
  127.0.0.1; here they share this machine's disk, ``tests/train/test_multinode.py`` gives each its
  own ``/tmp``); node 1's agent and ranks SIGKILLed for good: node 0 goes on alone on 2 ranks and
  finishes; its losses against the uninterrupted 2-node run's.

Run by hand (about 25 minutes on 2 cores); ``tests/train/test_recovery.py`` runs small cases.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from train.faults import Job
from train.goodput import summarize
from train.ledger import read_ledger
from train.testing import make_shards, tiny_config, train_losses, write_config

LAUNCH = ["--backoff", "0", "--monitor-interval", "0.1", "--shutdown-timeout", "3"]
ALL = ["kills", "stop", "slow", "healthy", "every120", "preflight", "damaged", "nodeloss"]


def config(root: Path, name: str, data: dict, steps: int, interval: int, **resilience) -> Path:
    """A tiny run whose step takes about a tenth of a second here (2 ranks, 2 micro-batches)."""
    raw = tiny_config(
        root / name,
        data,
        data={"paths": [data["train"]], "val_paths": [data["val"]], "seq_len": 64, "eos_id": 0},
        train={"max_steps": steps, "global_batch_size": 16, "micro_batch_size": 4},
        checkpoint={"interval": interval, "keep_last": 2},
        resilience={"heartbeat_interval": 0, **resilience},
        eval={"at_end": False},
    )
    return write_config(root / f"{name}.yaml", raw)


def run(root: Path, name: str, cfg: Path, inject=None, timeout: float = 1800) -> tuple[Job, dict, list[dict]]:
    job = Job(cfg, root / name, launch_args=LAUNCH, log=root / f"{name}.log").start()
    try:
        if inject is not None:
            inject(job)
        status = job.wait(timeout)
        left = job.leftovers()
    finally:
        job.close()
    if status != 0:
        raise SystemExit(f"{name}: the launcher exited {status}:\n{(root / f'{name}.log').read_text()[-3000:]}")
    records = read_ledger(root / name / "goodput.jsonl")
    return job, {"status": status, "leftovers": left, "summary": summarize(records)}, records


def final_state(save_dir: Path, step: int, scratch: Path) -> dict:
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    out = scratch / f"{save_dir.name}-step{step}.pt"
    dcp_to_torch_save(save_dir / f"step{step}", out)
    return torch.load(out, weights_only=False)


def equal_states(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(equal_states(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


def attempts(records: list[dict]) -> list[str]:
    out: list[str] = []
    for r in records:
        if r.get("event") == "start" and r["attempt"] not in out:
            out.append(r["attempt"])
    return out


def cold_start(records: list[dict]) -> float:
    first = attempts(records)[0]
    start = next(r["process_start"] for r in records if r.get("event") == "start" and r["attempt"] == first)
    step = next(r["time"] for r in records if r.get("event") == "first_step" and r["attempt"] == first)
    return step - start


def recoveries(job: Job, records: list[dict]) -> list[float]:
    """Each fault's time to the next finished step of a later attempt (the harness's clock)."""
    firsts = sorted(r["time"] for r in records if r.get("event") == "first_step")
    return [next(t for t in firsts if t > f.time) - f.time for f in job.faults]


# -- cases ------------------------------------------------------------------------------------


def case_kills(root: Path, data: dict, seed: int) -> dict:
    steps, interval = 60, 5
    _, ref, _ = run(root, "kills-ref", config(root, "kills-ref", data, steps, interval))
    rng = random.Random(seed)
    during_save = rng.randrange(5)

    def inject(job: Job) -> None:
        step = 0
        for i in range(5):
            if i == during_save:
                job.wait_step(step + 2)
                job.wait_async_save()
            else:
                job.wait_step(step + rng.randint(3, 9))
            step = job.kill(rng.randint(0, 1)).step

    job, res, records = run(root, "kills", config(root, "kills", data, steps, interval), inject)
    s = res["summary"]
    rec = recoveries(job, records)
    same = equal_states(final_state(root / "kills", steps, root), final_state(root / "kills-ref", steps, root))
    losses_same = train_losses(root / "kills") == train_losses(root / "kills-ref")
    return {
        "faults": len(job.faults),
        "during_async_save": during_save + 1,
        "completed": res["status"] == 0,
        "final_state_equal": same,
        "losses_equal": losses_same,
        "failures_counted": s["failures"],
        "steps_lost_per_failure": [f["steps_lost"] for f in s["failure_list"]],
        "interval": interval,
        "recovery_s": rec,
        "recovery_median_s": statistics.median(rec),
        "recovery_p90_s": _p90(rec),
        "cold_start_s": cold_start(records),
        "report_recovery_median_s": s["recovery_s"]["median"],
        "recovery_parts_s": {k: v["median"] for k, v in s["recovery_parts_s"].items()},
        "leftovers": res["leftovers"],
        "reference_wall_s": ref["summary"]["wall_s"],
    }


def case_stop(root: Path, data: dict, seed: int) -> dict:
    steps, timeout = 30, 5.0
    run(root, "stop-ref", config(root, "stop-ref", data, steps, 5))

    def inject(job: Job) -> None:
        job.wait_step(random.Random(seed).randint(6, 12))
        job.stop(1)

    job, res, records = run(root, "stop", config(root, "stop", data, steps, 5, step_timeout=timeout), inject)
    hang = next(r for r in records if r.get("event") == "exit" and r.get("reason") == "hang")
    return {
        "step_timeout_s": timeout,
        "detected_after_s": hang["time"] - job.faults[0].time,
        "recovered_after_s": recoveries(job, records)[0],
        "leftovers": res["leftovers"],
        "final_state_equal": equal_states(final_state(root / "stop", steps, root), final_state(root / "stop-ref", steps, root)),
        "failures_counted": res["summary"]["failures"],
        "stack_files": len(list((root / "stop" / "hangs").glob("*.txt"))),
    }


def case_slow(root: Path, data: dict, seed: int) -> dict:
    """Rank 1's blocks 2x slower in their forwards (``tests/support/slow_rank``: as much work again
    after each, as a slower device; on CPU the straggler check counts CPU time, which a
    SIGSTOP/SIGCONT duty cycle does not add)."""
    steps, window = 40, 10
    cfg = config(root, "slow", data, steps, 20, straggler_window=window)
    job = Job(cfg, root / "slow", launch_args=[*LAUNCH, "--module", "tests.support.slow_rank --rank 1 --factor 2"], log=root / "slow.log")
    job.start()
    status = job.wait(600)
    job.close()
    records = read_ledger(root / "slow" / "goodput.jsonl")
    named = [r for r in records if r.get("event") == "straggler"]
    first = named[0] if named else None
    return {
        "status": status,
        "slowed_from_step": 1,
        "named": bool(first),
        "named_rank": first and first["rank"],
        "named_host": first and first["host"],
        "named_at_step": first and first["step"],
        "score": first and first["score"],
        "windows_named": len(named),
        "other_ranks_named": sorted({r["rank"] for r in named} - {1}),
    }


HEALTHY_STEPS = 6000  # the long healthy run (--healthy-steps): ETTR needs a run long against start-up


def case_healthy(root: Path, data: dict, seed: int) -> dict:
    out = []
    for i, steps in enumerate((HEALTHY_STEPS, 60, 60)):
        _, res, records = run(root, f"healthy{i}", config(root, f"healthy{i}", data, steps, 100))
        s = res["summary"]
        alarms = [r for r in records if r.get("event") == "straggler" or (r.get("event") == "exit" and r.get("reason") != "finished")]
        out.append(
            {"steps": steps, "wall_s": s["wall_s"], "ettr": s["ettr"], "stall": s["checkpoint_stall_fraction"], "alarms": len(alarms)}
        )
    return {"runs": out, "alarms": sum(r["alarms"] for r in out), "ettr_long_run": out[0]["ettr"], "stall_long_run": out[0]["stall"]}


def case_every120(root: Path, data: dict, seed: int, kills: dict | None) -> dict:
    period, n_failures = 120.0, 4
    # the save's blocking time and the recovery, measured by a short run with one kill
    cal = kills or case_kills(root, data, seed)
    probe_records = read_ledger(root / "kills" / "goodput.jsonl")
    s = summarize(probe_records)
    t_save, step_s, recovery = s["interval"]["t_save_s"], s["step_s_median"], cal["recovery_median_s"]
    tau = math.sqrt(2 * t_save * period)
    interval = max(1, round(tau / step_s))
    steps = int((n_failures + 1) * period / step_s)

    def inject(job: Job) -> None:
        for _ in range(n_failures):
            job.wait_for(lambda: False if time.time() < deadline[0] else True, period + 600, "the next failure time")
            job.kill(1)
            deadline[0] = time.time() + period

    deadline = [time.time() + period]
    _, res, records = run(root, "every120", config(root, "every120", data, steps, interval), inject, timeout=3600)
    s = res["summary"]
    predicted = max(0.0, min(1.0, 1 - t_save / (interval * step_s) - (interval * step_s / 2 + recovery) / period))
    return {
        "period_s": period,
        "failures_counted": s["failures"],
        "t_save_s": t_save,
        "step_s": step_s,
        "interval_steps": interval,
        "interval_s": interval * step_s,
        "ettr": s["ettr"],
        "ettr_young_daly": predicted,
        "report_recommended_steps": s["interval"]["recommended_steps"],
        "report_predicted_ettr": s["interval"]["ettr_predicted_current"],
        "wall_s": s["wall_s"],
    }


def case_preflight(root: Path, data: dict, seed: int) -> dict:
    from tests.support.preflight_faults import launch_faults

    cfg = config(root, "pf", data, 4, 2)
    cases = {
        "healthy": {},
        "read-only save_dir": {"read_only": root / "pf"},
        "too little space": {"sets": ["model.preset=olmo2-13b", "model.vocab_size=512", "data.seq_len=64"]},
        "wrong matmul": {"wrong_matmul": 1},
        "rank 3x slower": {"slow_matmul": "1:3"},
        "wrong all-reduce": {"wrong_allreduce": 1},
    }
    bad = root / "pf-bad"
    shutil.copytree(data["train"], bad)
    first = sorted(bad.glob("*.npy"))[0]
    first.write_bytes(first.read_bytes()[:-3])
    cases["unreadable shard"] = {"sets": [f"data.paths=[{bad}]"]}
    out = {}
    for name, kw in cases.items():
        (root / "pf").mkdir(exist_ok=True)
        t0 = time.time()
        r = launch_faults(cfg, **kw)
        lines = [line for line in (r.stdout + r.stderr).splitlines() if line.startswith("preflight:")]
        out[name] = {"status": r.returncode, "seconds": time.time() - t0, "lines": lines[:4]}
    return out


def case_damaged(root: Path, data: dict, seed: int) -> dict:
    cfg = config(root, "damaged", data, 20, 5)
    run(root, "damaged", cfg)
    target = root / "damaged" / "step20"
    part = sorted(target.glob("*.distcp"))[0]
    os.truncate(part, part.stat().st_size // 2)
    cfg2 = config(root, "damaged", data, 25, 5)
    _, res, records = run(root, "damaged", cfg2)
    restored = [r["step"] for r in records if r.get("event") == "restored"]
    return {
        "set_aside": sorted(p.name for p in (root / "damaged").glob("step20.damaged-*")),
        "resumed_from": restored[-1],
        "completed": res["status"] == 0,
    }


def _nodes(root: Path, name: str, cfg: Path, kill_node1_at: int | None) -> tuple[list[int], float | None]:
    """Two torchrun agents of 2 ranks each, elastic 1:2 nodes; node 1 killed for good at a step."""
    from train.dist import free_port
    from train.faults import tree

    port = free_port()
    env = {**os.environ, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes=1:2", "--nproc-per-node=2", "--max-restarts=3",
        "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={name}", "--monitor-interval=0.1",
        "--shutdown-timeout=5", "--rdzv-conf=last_call_timeout=5", "-m", "train", "--config", str(cfg),
    ]  # fmt: skip
    procs = []
    for i in range(2):
        with open(root / f"{name}-node{i}.log", "w") as log:
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        time.sleep(1)  # node 0 hosts the rendezvous store
    killed_at = None
    try:
        if kill_node1_at is not None:
            job = Job(cfg, root / name)
            job.wait_for(lambda: job.step() >= kill_node1_at, 300, f"step {kill_node1_at}")
            for pid in tree(procs[1].pid):
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            killed_at = time.time()
        codes = [p.wait(600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
    return codes, killed_at


def case_nodeloss(root: Path, data: dict, seed: int) -> dict:
    steps = 40
    ref_cfg = config(root, "nodes-ref", data, steps, 4)
    codes, _ = _nodes(root, "nodes-ref", ref_cfg, None)
    cfg = config(root, "nodeloss", data, steps, 4)
    kill_at = random.Random(seed).randint(5, 9)
    survivor, killed_at = _nodes(root, "nodeloss", cfg, kill_at)
    ref, got = train_losses(root / "nodes-ref"), train_losses(root / "nodeloss")
    rel = max(abs(got[k] - ref[k]) / abs(ref[k]) for k in ref)
    records = read_ledger(root / "nodeloss" / "goodput.jsonl")
    worlds = [r["world_size"] for r in records if r.get("event") == "start"]
    firsts = [r["time"] for r in records if r.get("event") == "first_step" and killed_at and r["time"] > killed_at]
    return {
        "reference_status": codes,
        "node0_status": survivor[0],
        "killed_at_step": kill_at,
        "world_sizes": worlds,
        "steps": sorted(got) == sorted(ref),
        "max_rel_loss_diff": rel,
        "recovered_after_s": firsts[0] - killed_at if firsts and killed_at else None,
    }


def _p90(xs: list[float]) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * 0.9
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(ALL))
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--json", default=None, help="write the results here too")
    ap.add_argument("--keep", action="store_true", help="keep the runs' folders")
    ap.add_argument("--healthy-steps", type=int, default=HEALTHY_STEPS, help="steps of the long healthy run")
    a = ap.parse_args()
    globals()["HEALTHY_STEPS"] = a.healthy_steps
    root = Path(tempfile.mkdtemp(prefix="faults-"))
    data = make_shards(root / "data", n_train_shards=4, docs_per_shard=200)
    results: dict = {"machine": f"{os.cpu_count()} cores", "torch": torch.__version__}
    try:
        for case in a.cases.split(","):
            t0 = time.time()
            if case == "every120":
                results[case] = case_every120(root, data, a.seed, results.get("kills"))
            else:
                results[case] = globals()[f"case_{case}"](root, data, a.seed)
            results[case]["case_s"] = round(time.time() - t0, 1)
            print(json.dumps({case: results[case]}, indent=1, default=str), flush=True)
    finally:
        if a.json:
            Path(a.json).parent.mkdir(parents=True, exist_ok=True)
            Path(a.json).write_text(json.dumps(results, indent=1, default=str))
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"runs kept in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
