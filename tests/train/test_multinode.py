"""The trainer past one node, on loopback: real torchrun agents joined by a c10d rendezvous on
127.0.0.1, two ranks each (4 gloo ranks), every node in its own mount namespace with a tmpfs on
/tmp and its working directory there, so the nodes share no /tmp and no working directory; shards
and checkpoints live in a folder both reach (under the repository's ignored ``test-artifacts/``,
outside /tmp). Covered: a 2-node run and its checkpoints; a save_dir or data that a node does not
share is refused; a SIGTERM to one node's torchrun mid-run and the resume, bit-identical to the
uninterrupted run; resumes on another node count and under hybrid sharding (``train.data_parallel:
hsdp``); ``train/launch/slurm.sbatch`` with stand-in ``srun`` and ``scontrol``.

A test stops only what it started: every node is a session of its own, and what is left of it
(its bash, its torchrun, the workers torchrun starts in sessions of their own) is found by walking
/proc from its first process and killed by pid; a node's mount namespace goes with its last process.

The SIGTERM test's ranks run ``python -m tests.support.train_pausing`` (``python -m train``
pausing after a step until released), so that the test signals a node while no step is in flight.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.support.checkpoints import copy_checkpoint  # noqa: E402
from tests.support.namespaces import can_unshare_mount, kept_under_tmp, private_tmp  # noqa: E402
from tests.support.processes import free_port  # noqa: E402
from tests.support.repo import REPO_ROOT  # noqa: E402
from train.testing import make_shards, read_metrics, tiny_config, train_losses, write_config  # noqa: E402

pytestmark = pytest.mark.train
_needs_unshare = pytest.mark.skipif(not can_unshare_mount(), reason="needs `unshare --mount` (root) to give each node its own /tmp")


def multinode(test):
    """A test that starts nodes: slow, and only where a mount namespace can be made."""
    return pytest.mark.slow(_needs_unshare(test))


# Shared storage must not be under /tmp (each node mounts its own tmpfs there, hiding pytest's
# tmp_path): a folder of the repository's ignored test-artifacts/ (or $DOLMA_PIPE_ARTIFACTS).
ARTIFACTS = Path(os.environ.get("DOLMA_PIPE_ARTIFACTS", REPO_ROOT / "test-artifacts")).resolve()
PYTHON = sys.executable
NODE_TIMEOUT = 150  # a generous bound that only a hang reaches


# -- nodes -----------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _tree(pid: int) -> list[int]:
    """``pid`` and every descendant (torchrun starts its workers in sessions of their own, so a
    process group does not reach them; their parentage does)."""
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += _children(p)
    return seen


def _kill_tree(pid: int) -> None:
    for p in _tree(pid):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class Node:
    index: int
    proc: subprocess.Popen
    log: Path
    tmp_listing: Path

    def agent(self) -> int | None:
        """The torchrun agent: the node's bash runs it as its one child."""
        kids = _children(self.proc.pid)
        return kids[0] if kids else None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self, timeout: float = NODE_TIMEOUT) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(self.proc.pid)
            self.proc.wait()
            raise AssertionError(f"node {self.index} did not finish in {timeout:.0f} s:\n{self.output()[-4000:]}") from None


_started: list[Node] = []


def _stop_started_nodes() -> None:
    while _started:
        node = _started.pop()
        if node.proc.poll() is None:
            _kill_tree(node.proc.pid)
            node.proc.wait()


@pytest.fixture(autouse=True)
def _stop_leftover_nodes():
    yield
    _stop_started_nodes()


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}


def _node_script(cmd: list[str], listing: Path, prepare: str = "") -> str:
    """A node: a private tmpfs on /tmp, a working directory on it, then the command; what the
    run left in the node's /tmp is listed (into shared storage) after it."""
    # The checkout and the environment, kept visible when they lie under /tmp, are not the run's,
    # nor the folders above them that private_tmp made to hold them (a clone at /tmp/a/b/clone).
    kept = [os.path.relpath(p, "/tmp") for p in kept_under_tmp()]
    above = sorted({str(q) for k in kept for q in Path(k).parents if str(q) != "."})
    skip = " ".join([*(f"-not -path {shlex.quote('./' + k + '*')}" for k in kept), *(f"-not -path {shlex.quote('./' + a)}" for a in above)])
    return f"""set -u
{private_tmp()}
mkdir /tmp/node && cd /tmp/node
{prepare}
{shlex.join(cmd)}
rc=$?
(cd /tmp && find . -mindepth 1 -maxdepth 2 {skip} | sort) > {shlex.quote(str(listing))}
exit $rc
"""


def start_nodes(
    run_dir: Path,
    config: Path,
    nodes: int = 2,
    nproc: int = 2,
    sets: tuple[str, ...] = (),
    module: str = "train",
    module_args: tuple[str, ...] = (),
    prepare: tuple[str, ...] = (),
) -> list[Node]:
    """``nodes`` torchrun agents (``nproc`` ranks each) joined by a c10d rendezvous on
    127.0.0.1, each in its own mount namespace; ``prepare[i]`` is shell run first on node i (in
    its working directory). Logs and /tmp listings go to ``run_dir``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    port, rdzv_id = free_port(), uuid.uuid4().hex[:12]
    cmd = [
        PYTHON, "-m", "torch.distributed.run", f"--nnodes={nodes}", f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={rdzv_id}",
        "--shutdown-timeout=110", "-m", module, *module_args, "--config", str(config),
    ]  # fmt: skip
    for s in sets:
        cmd += ["--set", s]
    out = []
    for i in range(nodes):
        log, listing = run_dir / f"node{i}.log", run_dir / f"node{i}.tmp"
        script = _node_script(cmd, listing, prepare[i] if prepare else "")
        with open(log, "w") as f:
            proc = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
                stdout=f, stderr=subprocess.STDOUT, env=_env(), cwd=run_dir, start_new_session=True,
            )  # fmt: skip
        node = Node(i, proc, log, listing)
        _started.append(node)
        out.append(node)
    return out


def run_nodes(run_dir: Path, config: Path, **kw) -> tuple[list[int], str]:
    """Start the nodes, wait for all; their exit statuses and their output (node 0 first)."""
    nodes = start_nodes(run_dir, config, **kw)
    codes = [n.wait() for n in nodes]
    return codes, "\n".join(f"--- node {n.index} ---\n{n.output()}" for n in nodes)


# -- shared storage, the reference run -------------------------------------------------------


@pytest.fixture(scope="module")
def shared():
    """A folder outside /tmp that every node sees (deleted at the end)."""
    # The checkout and the environment stay visible on every node (tests.support.namespaces.private_tmp); a
    # shared folder elsewhere under /tmp would not.
    if Path("/tmp") in ARTIFACTS.parents and REPO_ROOT not in ARTIFACTS.parents:
        pytest.skip(f"{ARTIFACTS} is under /tmp, which each node's own tmpfs hides (DOLMA_PIPE_ARTIFACTS sets the shared folder)")
    root = ARTIFACTS / f"multinode-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    root.mkdir(parents=True)
    yield root
    _stop_started_nodes()  # e.g. the reference's, had its fixture failed
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def reference(shared):
    """The uninterrupted run: 2 nodes x 2 ranks, FSDP over the 4, 6 steps, checkpoints at
    steps 3 (async) and 6, evaluation at the end."""
    data = make_shards(shared / "data")
    raw = tiny_config(shared / "ref", data)
    cfg = write_config(shared / "ref.yaml", raw)
    codes, out = run_nodes(shared / "ref-nodes", cfg)
    assert codes == [0, 0], out
    return {"data": data, "raw": raw, "config": cfg, "save_dir": shared / "ref", "out": out, "nodes": shared / "ref-nodes"}


def _config(shared: Path, name: str, data: dict, **sections) -> tuple[Path, Path]:
    save_dir = shared / name
    return write_config(shared / f"{name}.yaml", tiny_config(save_dir, data, **sections)), save_dir


def _model_weights(step_dir: Path, scratch: Path) -> dict:
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    out = scratch / f"{step_dir.parent.name}-{step_dir.name}.pt"
    dcp_to_torch_save(step_dir, out)
    return torch.load(out, weights_only=False)["model"]


def _state(step_dir: Path) -> dict:
    return json.loads((step_dir / "trainer_state.json").read_text())


def _close(a: dict[int, float], b: dict[int, float], steps) -> None:
    """Same batches, same math, another reduction order (ranks, mesh): equal to float precision."""
    for s in steps:
        assert a[s] == pytest.approx(b[s], rel=1e-5, abs=1e-6), (s, a[s], b[s])


# -- tests -----------------------------------------------------------------------------------


def test_hsdp_keys_are_checked_when_the_config_loads():
    from train.config import ConfigError, check_for_training, from_dict

    with pytest.raises(ConfigError, match="train.data_parallel: expected one of fsdp, hsdp, got 'ddp'"):
        from_dict({"train": {"data_parallel": "ddp"}})
    with pytest.raises(ConfigError, match="train.shard_group_size: only used with train.data_parallel: hsdp"):
        from_dict({"train": {"shard_group_size": 2}})
    with pytest.raises(ConfigError, match="train.shard_group_size: must be at least 1, got 0"):
        from_dict({"train": {"data_parallel": "hsdp", "shard_group_size": 0}})
    cfg = from_dict(
        {
            "data": {"paths": ["x"]},
            "train": {"data_parallel": "hsdp", "shard_group_size": 3, "global_batch_size": 12, "micro_batch_size": 1},
        }
    )
    check_for_training(cfg, 6)
    with pytest.raises(ConfigError, match="train.shard_group_size: 3 does not divide the 4 ranks of this run"):
        check_for_training(cfg, 4)


@multinode
@pytest.mark.timeout(240)
def test_two_nodes_train_and_write_complete_checkpoints(reference):
    out, save_dir = reference["out"], reference["save_dir"]
    assert "4 rank(s), 2 node(s), fsdp" in out
    losses = train_losses(save_dir)
    assert sorted(losses) == [1, 2, 3, 4, 5, 6] and losses[6] < losses[1] - 0.5
    for step in (3, 6):
        d = save_dir / f"step{step}"
        # every rank of both nodes wrote its shards; rank 0 the metadata and the state
        assert sorted(p.name for p in d.glob("*.distcp")) == [f"__{r}_0.distcp" for r in range(4)]
        assert (d / ".metadata").exists() and _state(d)["step"] == step and len(_state(d)["rng"]) == 4
        assert _state(d)["mesh"] == {"data_parallel": "fsdp", "shape": [4]}
    assert [m["step"] for m in read_metrics(save_dir) if "eval/loss" in m] == [6]
    # nothing of the run is node-local: each node's /tmp holds torchrun's own log folder, torch's
    # (empty, per-process) compile cache folder and the node's working directory, left empty
    for i in (0, 1):
        entries = (reference["nodes"] / f"node{i}.tmp").read_text().split()
        assert "./node" in entries and not [e for e in entries if not e.startswith(("./node", "./torchelastic_", "./torchinductor_"))], (
            entries
        )
        assert [e for e in entries if e.startswith("./node/")] == []
    assert sorted(p.name for p in save_dir.iterdir() if p.name.startswith(".")) == []  # the share probe is gone


@multinode
@pytest.mark.timeout(120)
def test_a_save_dir_or_data_a_node_does_not_share_is_refused(reference, shared):
    """A relative save_dir resolves in each node's own working directory: two folders, each
    holding a part of every checkpoint. Refused before the first step, in one line. Likewise
    data paths that name other files on another node."""
    cfg, _ = _config(shared, "unshared", reference["data"], checkpoint={"save_dir": "run"})
    codes, out = run_nodes(shared / "unshared-nodes", cfg, nproc=1)
    assert codes == [1, 1], out  # torchrun's status for a failed rank
    assert out.count("config error: checkpoint.save_dir: run is not the same folder on every rank") == 1, out
    assert "cannot see" in out and "storage all nodes reach" in out
    assert f'File "{REPO_ROOT}/train/' not in out  # one line, no traceback of the trainer
    # each node reads ./data, a copy of other shards on each node
    other = make_shards(shared / "other-data", seed=5)
    cfg, _ = _config(shared, "unshared-data", {"train": "data/train", "val": reference["data"]["val"]})
    prepare = tuple(
        f"cp -r {shlex.quote(d)} data" for d in (reference["data"]["train"].removesuffix("/train"), str(Path(other["train"]).parent))
    )
    codes, out = run_nodes(shared / "unshared-data-nodes", cfg, nproc=1, prepare=prepare)
    assert codes == [1, 1], out
    assert out.count("data error: data.paths / data.val_paths: rank ") == 1, out
    assert "see(s) other shards than rank 0" in out and f'File "{REPO_ROOT}/train/' not in out


def _wait_for(cond, what: str, nodes: list[Node], timeout: float = NODE_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(n.output()[-3000:] for n in nodes))
        time.sleep(0.02)


@multinode
@pytest.mark.timeout(240)
def test_sigterm_to_one_node_then_resume_is_bit_identical(reference, shared):
    """SIGTERM to node 0's torchrun while every rank is paused after step 2: the agent forwards
    it to node 0's two ranks; their flag reaches node 1's ranks through step 3's all-reduce and
    all four save step 3 together. Node 0's torchrun then exits 1 (torchrun's own status when
    signalled), node 1's ranks exit 0 and its agent waits in torchrun's exit barrier for node
    0's agent, which never comes (300 s, fixed in torchrun, deaf to SIGTERM while it blocks in
    the store's wait) unless node 0's agent held the rendezvous store; so, as ``srun
    --kill-on-bad-exit`` does after its KillWait, node 1's agent is killed once node 0 has
    failed and node 1's ranks are gone. The same 2-node command then resumes; every loss, the
    learning rates and the final weights equal the uninterrupted run's."""
    cfg, save_dir = _config(shared, "preempt", reference["data"])
    hooks = shared / "preempt-hooks"
    hooks.mkdir()
    nodes = start_nodes(
        shared / "preempt-nodes", cfg, module="tests.support.train_pausing", module_args=("--pause-after", "2", "--hook-dir", str(hooks))
    )
    _wait_for(lambda: len(list(hooks.glob("paused-*"))) == 4, "all 4 ranks paused after step 2", nodes)
    agent = nodes[0].agent()
    assert agent is not None
    node0_ranks = _children(agent)
    assert len(node0_ranks) == 2
    os.kill(agent, signal.SIGTERM)
    _wait_for(lambda: len(list(hooks.glob("sigterm-*"))) == 2, "node 0's ranks to get the forwarded SIGTERM", nodes)
    (hooks / "release").touch()
    assert nodes[0].wait() == 1, nodes[0].output()
    # node 1: its ranks exit 0 after the save; then its agent waits in the exit barrier (or has
    # already ended, if node 0's agent held the store and the barrier failed at once)
    agent1 = nodes[1].agent()
    assert agent1 is not None
    _wait_for(lambda: nodes[1].proc.poll() is not None or not _children(agent1), "node 1's ranks to exit", nodes)
    if nodes[1].proc.poll() is None and agent1 in _children(nodes[1].proc.pid):
        os.kill(agent1, signal.SIGKILL)  # a SIGTERM would wait: the barrier blocks in C++
    assert nodes[1].wait() in (0, 128 + signal.SIGKILL), nodes[1].output()
    out = nodes[0].output() + nodes[1].output()
    signalled = sorted(int(p.name.split("-")[1]) for p in hooks.glob("sigterm-*"))
    assert "SIGTERM: saving step 3 and exiting" in out and "ChildFailedError" not in out, out
    assert sorted(p.name for p in save_dir.glob("step*")) == ["step3"]
    assert _state(save_dir / "step3")["step"] == 3 and len(list((save_dir / "step3").glob("*.distcp"))) == 4
    assert len(signalled) == 2
    # the same command resumes
    codes, out = run_nodes(shared / "preempt-resume-nodes", cfg)
    assert codes == [0, 0], out
    assert "resumed from" in out and "steps 3->6" in out
    assert train_losses(save_dir) == train_losses(reference["save_dir"])  # bit-identical, every step
    lrs = {m["step"]: m["lr"] for m in read_metrics(save_dir) if "lr" in m}
    assert lrs == {m["step"]: m["lr"] for m in read_metrics(reference["save_dir"]) if "lr" in m}
    mine, ref = _model_weights(save_dir / "step6", shared), _model_weights(reference["save_dir"] / "step6", shared)
    assert mine.keys() == ref.keys() and all(torch.equal(mine[k], ref[k]) for k in ref)


@multinode
@pytest.mark.timeout(240)
def test_resume_across_node_counts_and_sharding_layouts(reference, shared):
    """The reference's step-3 checkpoint (2 nodes, FSDP over 4 ranks) resumed on the same 2
    nodes with hybrid sharding (sharded within a node, replicated across the two; micro-batches
    of 1, so gradients are accumulated without sync, then reduced once) to step 4;
    that checkpoint on 1 node of 2 ranks under FSDP to step 6. DCP reshards each load. The data
    continue exactly: a step's instances are the next ``global_batch_size`` of the seeded order
    after the instances consumed, whatever the ranks, so each step trains on the reference's
    batch and its loss equals the reference's to float precision (the ranks and the mesh change
    the order of the reductions, so not bit for bit; another batch would differ in the second
    decimal). Tokens and the consumed-instance count are exact."""
    cfg, save_dir = _config(shared, "layouts", reference["data"])
    copy_checkpoint(reference["save_dir"], 3, save_dir)
    ref = train_losses(reference["save_dir"])

    codes, out = run_nodes(
        shared / "layouts-a", cfg, nodes=2, sets=("train.stop_at_step=4", "train.data_parallel=hsdp", "train.micro_batch_size=1")
    )
    assert codes == [0, 0], out
    assert "4 rank(s), 2 node(s), hsdp 2 x 2 (replicate x shard)" in out and "grad accum 2" in out and "steps 3->4" in out
    assert _state(save_dir / "step4")["mesh"] == {"data_parallel": "hsdp", "shape": [2, 2]}
    codes, out = run_nodes(shared / "layouts-b", cfg, nodes=1)
    assert codes == [0], out
    assert "2 rank(s), 1 node(s), fsdp" in out and "grad accum 2" in out and "steps 4->6" in out

    losses = train_losses(save_dir)
    assert sorted(losses) == [4, 5, 6]
    _close(losses, ref, (4, 5, 6))
    tokens = {m["step"]: m["tokens"] for m in read_metrics(save_dir) if "loss" in m}
    assert tokens == {s: s * 8 * 32 for s in (4, 5, 6)}
    assert [_state(save_dir / f"step{s}")["data"]["instances_seen"] for s in (4, 6)] == [32, 48]
    mine, theirs = _model_weights(save_dir / "step6", shared), _model_weights(reference["save_dir"] / "step6", shared)
    for k in theirs:
        torch.testing.assert_close(mine[k], theirs[k], rtol=1e-4, atol=1e-5)


# -- the SLURM template ----------------------------------------------------------------------

# srun as train.launch uses it: one task per node of --nodelist (else of the allocation), each with
# the SLURM_* variables of its node, in its own mount and UTS namespaces (its own /tmp and its own
# host name, node<i>, which FAKE_SLURM_HOSTS maps to 127.0.0.1 in its /etc/hosts), in the submit
# directory (srun keeps the working directory); --kill-on-bad-exit: once a task fails, the
# others get SIGTERM, and SIGKILL KillWait seconds later (SLURM's default 30; FAKE_SRUN_KILL_WAIT).
# Output goes to srun's own (the job log).
FAKE_SRUN = r"""#!/bin/bash
set -u
kill_on_bad_exit=0 nodelist=
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    --kill-on-bad-exit|--kill-on-bad-exit=1) kill_on_bad_exit=1 ;;
    --nodelist=*) nodelist=${1#--nodelist=} ;;
  esac
  shift
done
if [[ -n $nodelist ]]; then IFS=, read -ra names <<< "$nodelist"
else names=(); for ((i = 0; i < SLURM_JOB_NUM_NODES; i++)); do names+=(node$i); done; fi
echo "stand-in srun: ${names[*]}"
pids=()
for ((i = 0; i < ${#names[@]}; i++)); do
  SLURM_NODEID=$i SLURM_PROCID=$i SLURM_LOCALID=0 SLURM_STEP_NUM_NODES=${#names[@]} \
    SLURM_STEP_NUM_TASKS=${#names[@]} SLURMD_NODENAME=${names[$i]} NODE_NAME=${names[$i]} \
    unshare --mount --uts --propagation private bash -c \
      'hostname "$NODE_NAME" && mount --bind "$FAKE_SLURM_HOSTS" /etc/hosts && PRIVATE_TMP && exec "$@"' srun-task "$@" &
  pids+=($!)
done
status=0 killer=
for ((left = ${#pids[@]}; left > 0; left--)); do
  wait -n "${pids[@]}"; rc=$?
  if [[ $rc -ne 0 && $status -eq 0 ]]; then
    status=$rc
    if [[ $kill_on_bad_exit -eq 1 ]]; then
      kill -TERM "${pids[@]}" 2>/dev/null
      (sleep "${FAKE_SRUN_KILL_WAIT:-30}"; kill -KILL "${pids[@]}" 2>/dev/null) &
      killer=$!
    fi
  fi
done
[[ -n $killer ]] && kill "$killer" 2>/dev/null
exit $status
"""

FAKE_SCONTROL = r"""#!/bin/bash
# scontrol show hostnames NODELIST: one line per node of the allocation
[[ "$1 $2" == "show hostnames" ]] || { echo "stand-in scontrol: only 'show hostnames'" >&2; exit 1; }
for ((i = 0; i < SLURM_JOB_NUM_NODES; i++)); do echo node$i; done
"""


def _slurm(shared: Path, name: str) -> tuple[Path, dict[str, str]]:
    """A job folder and the environment of a 2-node SLURM job of 2 GPUs a node (here 2 CPU
    ranks), with the stand-ins for srun and scontrol first on PATH."""
    bin_dir, job = shared / f"{name}-bin", shared / f"{name}-job"
    bin_dir.mkdir()
    job.mkdir()
    for tool, text in (("srun", FAKE_SRUN.replace("PRIVATE_TMP", private_tmp())), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / tool).write_text(text)
        (bin_dir / tool).chmod(0o755)
    hosts = shared / f"{name}-hosts"
    hosts.write_text(Path("/etc/hosts").read_text() + "\n127.0.0.1 node0 node1\n")
    env = {
        **_env(),
        "PATH": f"{bin_dir}{os.pathsep}{Path(PYTHON).parent}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SLURM_HOSTS": str(hosts),
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NAME": "dolma-pipe-train",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_NNODES": "2",
        "SLURM_JOB_NODELIST": "node[0-1]",
        "SLURM_GPUS_ON_NODE": "2",
        "SLURM_CPUS_PER_TASK": "1",
        "SLURM_NODEID": "0",
        "SLURM_PROCID": "0",
        "MASTER_PORT": str(free_port()),
        "OMP_NUM_THREADS": "1",
    }
    return job, env


def _sbatch(job: Path, env: dict[str, str], args: list[str]) -> Node:
    log = job / "job.out"
    with open(log, "w") as f:
        proc = subprocess.Popen(
            ["bash", str(REPO_ROOT / "train" / "launch" / "slurm.sbatch"), *args],
            stdout=f, stderr=subprocess.STDOUT, env=env, cwd=job, start_new_session=True,
        )  # fmt: skip
    node = Node(0, proc, log, job / "unused")
    _started.append(node)
    return node


@multinode
@pytest.mark.timeout(180)
def test_slurm_template_on_two_nodes(reference, shared):
    """``bash train/launch/slurm.sbatch CONFIG --set ...`` as SLURM runs it in a 2-node
    allocation of 2 GPUs each (here 2 CPU ranks), with stand-ins for srun and scontrol first on
    PATH: a fresh run with hybrid sharding (``--set`` reaches the trainer), 3 steps. Its first
    loss is the reference's exactly (the same initial weights, sharded another way), the next
    ones and the step-3 weights equal the reference's to float precision."""
    cfg, save_dir = _config(shared, "slurm", reference["data"])
    job, env = _slurm(shared, "slurm")
    node = _sbatch(job, env, [str(cfg), "--set", "train.data_parallel=hsdp", "--set", "train.stop_at_step=3"])
    assert node.wait() == 0, node.output()
    out = node.output()
    assert "nodes=2 gpus/node=2 master=node0:" in out and "stand-in srun: node0 node1" in out
    assert "4 rank(s), 2 node(s), hsdp 2 x 2 (replicate x shard)" in out and "steps 0->3" in out
    assert (job / "logs").is_dir()
    ref, losses = train_losses(reference["save_dir"]), train_losses(save_dir)
    assert sorted(losses) == [1, 2, 3] and losses[1] == ref[1]
    _close(losses, ref, (2, 3))
    assert sorted(p.name for p in save_dir.glob("step*")) == ["step3"]
    assert _state(save_dir / "step3")["mesh"] == {"data_parallel": "hsdp", "shape": [2, 2]}
    mine, theirs = _model_weights(save_dir / "step3", shared), _model_weights(reference["save_dir"] / "step3", shared)
    for k in theirs:
        torch.testing.assert_close(mine[k], theirs[k], rtol=1e-4, atol=1e-5)
    # outside a SLURM job: one line naming the mistake
    bare = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
    r = subprocess.run(
        ["bash", str(REPO_ROOT / "train" / "launch" / "slurm.sbatch"), str(cfg)], capture_output=True, text=True, env=bare, cwd=job
    )
    assert r.returncode == 1 and "SLURM_JOB_NUM_NODES: not in a SLURM job: submit this script with sbatch" in r.stderr, r.stderr


@multinode
@pytest.mark.timeout(240)
def test_slurm_job_leaves_a_node_that_fails_preflight_out_and_completes(reference, shared):
    """The template's launcher in a 2-node job where node1's ranks (2 and 3) compute a wrong
    matmul: pre-flight says "cordon node1" (exit status 76), the launcher records the cordon in
    the ledger and starts its next attempt on node0 alone (2 ranks), which trains the run to
    its end; the goodput report names the cordoned node."""
    from train.errors import EXIT_CORDON
    from train.goodput import summarize
    from train.ledger import read_ledger

    cfg, save_dir = _config(shared, "cordon", reference["data"], train={"stop_at_step": 3})
    job, env = _slurm(shared, "cordon")
    env.update(MAX_RESTARTS="0")
    # the ranks run the trainer through the pre-flight faults' wrapper (patched from outside)
    node = _sbatch(job, env, [str(cfg), "--module", "tests.support.preflight_faults --wrong-matmul 2 --entry train", "--backoff", "0"])
    assert node.wait(220) == 0, node.output()
    out = node.output()
    assert "stand-in srun: node0 node1" in out and "stand-in srun: node0" + "\n" in out
    assert "train.launch: cordoned node1: matmul" in out, out[-3000:]
    assert "2 rank(s), 1 node(s)" in out and sorted(train_losses(save_dir)) == [1, 2, 3]
    records = read_ledger(save_dir / "goodput.jsonl")
    exits = [r for r in records if r["event"] == "launch_exit"]
    assert [r["launch_attempt"] for r in exits] == [1, 2] and exits[1]["status"] == 0
    assert [r["host"] for r in records if r["event"] == "cordon"] == ["node1"]
    launches = [r for r in records if r["event"] == "launch"]
    assert launches[1]["nodes"] == ["node0"] and launches[1]["cordoned"] == ["node1"]
    failed = [r for r in records if r["event"] == "exit" and r["reason"] == "preflight"]
    assert failed and failed[0]["status"] == EXIT_CORDON
    assert summarize(records)["cordoned"]
