"""``python -m train.launch``: a training run that starts itself again until it is done.

Two layers of recovery, as Olmo Hybrid's run had (a resubmit-until-done loop around the job,
restarts inside it):

- **Inside one attempt**, torchrun's own agent restarts every rank of a node when one of them
  dies (an exception, a non-zero exit, SIGKILL, the OOM killer, the step watchdog's exit), up to
  ``--max-restarts`` times; every restart resumes from the newest complete checkpoint in
  ``save_dir``. The launcher exports ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` for torchrun: by
  default its agent lends the ranks its rendezvous store, and after a restart a rank reads the
  previous attempt's addresses from it (pytorch/pytorch#135712; here: gloo's "connectFullMesh
  failed ... Connection refused" on the first restart, a hang on the second).
- **Across attempts**, this loop starts torchrun again (after ``--backoff`` seconds) when it
  exits with a status worth retrying: a failure torchrun could not absorb (its restarts spent,
  its agent killed, a node lost), a hang, a pre-flight verdict "retry" or "cordon". Statuses that
  say "do not retry" end the loop: ``EXIT_FATAL`` and the trainer's user-mistake statuses 1-3 (a
  config, checkpoint or data error). With ``--slurm`` an attempt is one ``srun`` step over the
  allocation's nodes, less the cordoned ones.
- **Across jobs** (``--slurm --resubmit N``), when this job ends with the run not finished (its
  attempts spent, no healthy node left, or SLURM's SIGTERM before the time limit), the launcher
  submits the same batch script again with ``sbatch --dependency=singleton`` (one job of the name
  at a time: a requeue by SLURM and a resubmission never train together) and ``--exclude`` the
  cordoned nodes, up to N times over the run (the ledger's ``resubmit`` records count them).

A node that fails pre-flight with "cordon" is recorded in the goodput ledger (a ``cordon``
record: host, check, message); every later attempt leaves the ledger's cordoned hosts out. The
launcher records its attempts there too (``launch``, ``launch_exit``), so ``python -m
train.goodput`` counts the time between them.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from train.config import load_config
from train.errors import EXIT_CORDON, EXIT_FATAL, EXIT_HANG, EXIT_RETRY, ConfigError, TrainError, report
from train.launch.torchrun import RESTART_GRACE_S
from train.ledger import Ledger, read_ledger

# the trainer's exit statuses after which another attempt cannot help: its user mistakes
# (train.errors: 1-3) and EXIT_FATAL. torchrun itself exits 1 for any failed rank, so the
# launcher reads the trainer's status from its ``exit`` record in the ledger.
DO_NOT_RETRY = {1, 2, 3, EXIT_FATAL}
REASONS = {0: "finished", EXIT_RETRY: "retry", EXIT_CORDON: "cordon", EXIT_HANG: "hang", EXIT_FATAL: "fatal"}


@dataclass
class Launch:
    """What every attempt runs: the trainer's config and overrides, and how to start the ranks."""

    config: str
    sets: list[str] = field(default_factory=list)
    nproc_per_node: int = 1
    max_restarts: int = 3  # torchrun's, inside one attempt
    attempts: int = 10  # this loop's
    backoff: float = 5.0
    slurm: bool = False
    rdzv_port: int = 29500
    monitor_interval: float = 0.5
    shutdown_timeout: float = 110.0
    restart_grace: float = RESTART_GRACE_S  # SIGTERM to SIGKILL when torchrun stops ranks to restart them
    module: str = "train"  # the entry point torchrun runs, with its own arguments (tests wrap the trainer)
    resubmit: int = 0  # sbatch the job again when it ends unfinished, up to this many times
    resubmit_argv: str = ""  # the batch script and its arguments, shell-quoted (slurm.sbatch gives them)

    def save_dir(self) -> Path:
        return Path(load_config(self.config, self.sets).checkpoint.save_dir)


def cordoned_hosts(ledger_path: Path) -> dict[str, str]:
    """Host -> why, from the ledger's ``cordon`` records."""
    if not ledger_path.exists():
        return {}
    return {r["host"]: f"{r.get('check', '?')}: {r.get('message', '')}" for r in read_ledger(ledger_path) if r.get("event") == "cordon"}


def _preflight_cordons(records: list[dict], since: float) -> list[dict]:
    """The "cordon" failures of the newest pre-flight record written since ``since``, if the
    attempt ended on it (a torchrun restart whose pre-flight passed clears an earlier one)."""
    recent = [r for r in records if r.get("time", 0) >= since and r.get("event") in ("preflight", "exit")]
    exits = [r for r in recent if r["event"] == "exit"]
    checks = [r for r in recent if r["event"] == "preflight"]
    if not exits or not checks or exits[-1].get("reason") != "preflight" or exits[-1].get("status") != EXIT_CORDON:
        return []
    return [f for f in checks[-1].get("failures", []) if f.get("verdict") == "cordon"]


def _slurm_nodes() -> list[str]:
    listing = subprocess.run(
        ["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]], capture_output=True, text=True, check=True
    ).stdout
    return [n for n in listing.split() if n]


def torchrun_command(launch: Launch, nodes: list[str], attempt: int) -> list[str]:
    """One attempt's command: torchrun on this host, or srun starting one torchrun per node."""
    trainer = ["-m", *shlex.split(launch.module), "--config", launch.config, *(a for s in launch.sets for a in ("--set", s))]
    common = [
        f"--nproc-per-node={launch.nproc_per_node}",
        f"--max-restarts={launch.max_restarts}",
        f"--monitor-interval={launch.monitor_interval}",
        f"--shutdown-timeout={launch.shutdown_timeout:g}",
    ]
    torchrun = [sys.executable, "-m", "train.launch.torchrun", f"--restart-grace={launch.restart_grace:g}"]
    if not launch.slurm:
        return [*torchrun, "--standalone", *common, *trainer]
    job = os.environ.get("SLURM_JOB_ID", "local")
    return [
        "srun", "--kill-on-bad-exit=1", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}", "--ntasks-per-node=1",
        f"--nodelist={','.join(nodes)}",
        *torchrun, f"--nnodes={len(nodes)}", *common,
        f"--rdzv-id={job}-{attempt}", "--rdzv-backend=c10d", f"--rdzv-endpoint={nodes[0]}:{launch.rdzv_port}",
        *trainer,
    ]  # fmt: skip


class Launcher:
    """The loop over attempts (see the module docstring)."""

    def __init__(self, launch: Launch):
        self.launch = launch
        self.save_dir = launch.save_dir()
        self.save_dir.mkdir(parents=True, exist_ok=True)
        self.ledger = Ledger(self.save_dir, host=socket.gethostname())
        self._child: subprocess.Popen | None = None
        self._stopping = False
        self._finished = False
        self._hopeless = False  # the trainer said "do not retry": no new job can help either

    def nodes(self) -> list[str]:
        """This attempt's nodes: the allocation's (``--slurm``) or this host, less the cordoned."""
        cordoned = cordoned_hosts(self.ledger.path)
        every = _slurm_nodes() if self.launch.slurm else [socket.gethostname()]
        return [n for n in every if n not in cordoned]

    def run(self) -> int:
        if self.launch.resubmit and not (self.launch.slurm and self.launch.resubmit_argv):
            raise ConfigError("--resubmit: needs --slurm and --resubmit-argv (the batch script and its arguments)")
        status = self._attempts()
        if self.launch.resubmit and not self._finished and not self._hopeless:
            self._resubmit(status)
        return status

    def _attempts(self) -> int:
        signal.signal(signal.SIGTERM, self._forward)
        status = EXIT_RETRY
        for attempt in range(1, self.launch.attempts + 1):
            nodes = self.nodes()
            if not nodes:
                cordoned = cordoned_hosts(self.ledger.path)
                self._say(f"no node left to run on: cordoned {', '.join(f'{h} ({why})' for h, why in cordoned.items())}")
                return EXIT_CORDON
            started = time.time()
            status = self._attempt(attempt, nodes)
            ended = self._last_exit(started)
            self._finished = status == 0 and ended is not None and ended.get("reason") == "finished"
            if status == 0 or self._stopping:
                # finished, or preempted: a SIGTERM that reached the ranks (SLURM's --signal goes
                # to the job's steps) means the job is ending; its requeue or resubmission resumes
                return status
            # torchrun says 1 for any failed rank: the trainer's own exit record says why
            said = ended.get("status") if ended else None
            if ended is not None and isinstance(said, int) and said in DO_NOT_RETRY:
                self._hopeless = True
                self._say(
                    f"attempt {attempt}: the trainer exited with status {said} ({ended.get('reason')}): starting again cannot help; stopping"
                )
                return said
            if attempt < self.launch.attempts:
                why = ended.get("reason") if ended else "killed"
                self._say(f"attempt {attempt} ended with status {status} ({why}): starting again in {self.launch.backoff:g} s")
                time.sleep(self.launch.backoff)
        self._say(f"{self.launch.attempts} attempts failed; stopping")
        return status if status else EXIT_RETRY

    def _resubmit(self, status: int) -> None:
        """The next job of the run: the same script, the cordoned nodes excluded (see the module
        docstring); at most ``--resubmit`` of them over the whole run."""
        records = self._records()
        done = sum(1 for r in records if r.get("event") == "resubmit")
        if done >= self.launch.resubmit:
            self._say(
                f"the run is not finished, but it was resubmitted {done} times already (--resubmit {self.launch.resubmit}): not again"
            )
            return
        cordoned = sorted(cordoned_hosts(self.ledger.path))
        cmd = ["sbatch", "--parsable", "--dependency=singleton", f"--job-name={os.environ.get('SLURM_JOB_NAME', 'dolma-pipe-train')}"]
        if os.environ.get("SLURM_JOB_NUM_NODES"):
            cmd.append(f"--nodes={os.environ['SLURM_JOB_NUM_NODES']}")
        if cordoned:
            cmd.append(f"--exclude={','.join(cordoned)}")
        cmd += shlex.split(self.launch.resubmit_argv)
        try:
            r = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            self._say(f"resubmitting failed: {e}")
            return
        if r.returncode != 0:
            self._say(f"resubmitting failed (sbatch exited {r.returncode}): {r.stderr.strip()[-500:]}")
            return
        job = r.stdout.strip().split(";")[0]
        self.ledger.write("resubmit", job=job, after=os.environ.get("SLURM_JOB_ID"), status=status, excluded=cordoned, count=done + 1)
        self._say(f"the run is not finished (status {status}): resubmitted as job {job} ({done + 1} of {self.launch.resubmit})")

    def _records(self) -> list[dict]:
        """The ledger's records so far (none before the first is written)."""
        return read_ledger(self.ledger.path) if self.ledger.path.exists() else []

    def _last_exit(self, since: float) -> dict | None:
        """The newest trainer ``exit`` record written since ``since`` (rank 0 writes one unless
        it was killed)."""
        exits = [r for r in self._records() if r.get("event") == "exit" and r.get("time", 0) >= since]
        return exits[-1] if exits else None

    def _attempt(self, attempt: int, nodes: list[str]) -> int:
        cordoned = sorted(cordoned_hosts(self.ledger.path))
        self.ledger.write("launch", launch_attempt=attempt, nodes=nodes, cordoned=cordoned)
        started = time.time()
        cmd = torchrun_command(self.launch, nodes, attempt)
        env = {**os.environ, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "DOLMA_PIPE_LAUNCH_ATTEMPT": str(attempt)}
        self._say(f"attempt {attempt} on {len(nodes)} node(s): {shlex.join(cmd)}")
        self._child = subprocess.Popen(cmd, env=env)
        status = self._child.wait()
        self._child = None
        status = 128 - status if status < 0 else status  # killed by a signal: as a shell says it
        self.ledger.write("launch_exit", launch_attempt=attempt, status=status, reason=REASONS.get(status, "failure"))
        records = self._records()
        for f in _preflight_cordons(records, started):
            self.ledger.write("cordon", host=f["host"], check=f.get("check"), message=f.get("message", ""), rank=f.get("rank"))
            self._say(f"cordoned {f['host']}: {f.get('check')}: {f.get('message', '')}")
        return status

    def _forward(self, signum, frame) -> None:
        # a preemption reaches the launcher: pass it on (the ranks save and exit 0), then stop
        self._stopping = True
        if self._child is not None:
            self._child.send_signal(signum)

    def _say(self, msg: str) -> None:
        print(f"train.launch: {msg}", flush=True)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m train.launch", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--nproc-per-node", type=int, default=1)
    ap.add_argument("--max-restarts", type=int, default=3, help="torchrun's restarts inside one attempt (default 3)")
    ap.add_argument("--attempts", type=int, default=10, help="attempts of this loop (default 10)")
    ap.add_argument("--backoff", type=float, default=5.0, help="seconds between attempts (default 5)")
    ap.add_argument("--slurm", action="store_true", help="run each attempt as an srun step over the allocation's healthy nodes")
    ap.add_argument("--rdzv-port", type=int, default=int(os.environ.get("MASTER_PORT", 29500)))
    ap.add_argument("--monitor-interval", type=float, default=0.5, help="torchrun's check of its ranks, seconds")
    ap.add_argument("--shutdown-timeout", type=float, default=110.0, help="torchrun's grace on a signal (SLURM's preemption), seconds")
    ap.add_argument(
        "--restart-grace", type=float, default=RESTART_GRACE_S,
        help=f"SIGTERM to SIGKILL when torchrun stops ranks to restart them, seconds (default {RESTART_GRACE_S:g})",
    )  # fmt: skip
    ap.add_argument("--resubmit", type=int, default=0, help="with --slurm: sbatch the job again when it ends unfinished, up to N times")
    ap.add_argument("--resubmit-argv", default="", help="the batch script and its arguments, shell-quoted (slurm.sbatch passes them)")
    ap.add_argument("--module", default="train", help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    launch = Launch(
        a.config, a.sets, a.nproc_per_node, a.max_restarts, a.attempts, a.backoff, a.slurm, a.rdzv_port,
        a.monitor_interval, a.shutdown_timeout, a.restart_grace, a.module, a.resubmit, a.resubmit_argv,
    )  # fmt: skip
    try:
        return Launcher(launch).run()
    except TrainError as e:
        return report(e)
