"""A repeated phase (``Phase.repeat``): the runner runs it round after round while the data asks
for another, records each round as a phase (``<phase>-NN``: its markers, its manifest record, its
step), resumes a killed run at the round and task where it stopped, and stops a run whose last
allowed round still asks for another.

The stage here counts its files' documents, then divides the count by ``divisor`` round after
round until it reaches 0 (60 documents, divisor 4: 15, 3, 0, three rounds), then writes what
each round found. ``python -m tests.dolma_pipe.test_repeated_phase CONFIG_JSON`` runs it (for the
kill); ``LOOPED_STAGE_DELAY`` (seconds) slows each task of round 3 and later.
"""

from __future__ import annotations

import io
import os
import re
import sys
import time
from pathlib import Path

import orjson
import pytest
from pydantic import Field

from dolma_pipe import storage, workdir
from dolma_pipe.config import PathStr, RunOptions, load_config
from dolma_pipe.documents import read_documents, write_documents
from dolma_pipe.manifest import TaskRecord, read_manifest
from dolma_pipe.quarantine import Quarantine
from dolma_pipe.runner import RunFailed, run_stage
from dolma_pipe.stage import Phase, Repeat, RunContext, Stage, StepResult, Task, TaskOutput, file_task, round_name
from dolma_pipe.workdir import WorkDir
from tests.support.documents import make_docs
from tests.support.outputs import done_markers, stage_outputs
from tests.support.processes import kill_when

PARTS = 2  # tasks per round
ROUNDS = ["divide-01", "divide-02", "divide-03"]
PHASES = ["count", *ROUNDS, "result"]
EXHAUSTED = "the count did not reach 0 in the rounds allowed"


class LoopedConfig(RunOptions):
    documents: list[PathStr] = Field(..., min_length=1)
    destination: PathStr
    divisor: int = Field(4, ge=2)
    limit: int = Field(10, ge=1)


class LoopedStage(Stage[LoopedConfig]):
    name = "looped-test"
    config_model = LoopedConfig
    depends_on_input_set = True
    run_keys = frozenset({"limit"})  # how far a run may go, not what it writes

    @property
    def output_root(self) -> str:
        return self.config.destination

    def phases(self) -> list[Phase]:
        return [
            Phase("count", plan=self._plan_files, run=self._count, outputs=self._count_outputs, unit="file"),
            Phase(
                "divide",
                plan=self._plan_parts,
                run=self._divide,
                outputs=self._divide_outputs,
                after=self._value,
                repeat=Repeat(self.config.limit, self._again, EXHAUSTED),
            ),
            Phase("result", plan=self._plan_one, run=self._result, outputs=self._result_outputs),
        ]

    @property
    def work(self) -> WorkDir:
        return WorkDir(storage.join(self.output_root, "_work"))  # removed when the run completes

    # count: each file's documents
    def _plan_files(self, ctx: RunContext) -> list[Task]:
        return [file_task(f) for f in ctx.inputs]

    def _count_outputs(self, task: Task) -> list[str]:
        return [self.work.path("count", task.rel)]

    def _count(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        n = sum(1 for _ in read_documents(task.path, quarantine))
        workdir.write(self._count_outputs(task)[0], orjson.dumps(n))
        return TaskOutput(docs_in=n, counts={"documents": n})

    # divide, round n: the last round's value (round 1: the documents) divided, in PARTS shares
    def _plan_parts(self, ctx: RunContext) -> list[Task]:
        return [Task(key=f"part-{p}", params={"part": p, "round": ctx.round}) for p in range(PARTS)]

    def _share_path(self, round: int, part: int) -> str:
        return self.work.path(round_name("divide", round), f"part-{part}")

    def _divide_outputs(self, task: Task) -> list[str]:
        return [self._share_path(task.params["round"], task.params["part"])]

    def _divide(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        assert ctx.round == task.params["round"]
        delay = float(os.environ.get("LOOPED_STAGE_DELAY", "0"))
        if delay and ctx.round >= 3:
            time.sleep(delay)
        if ctx.round == 1:
            before = [self.work.path("count", f.rel) for f in ctx.inputs]
        else:
            before = [self._share_path(ctx.round - 1, p) for p in range(PARTS)]
        value = sum(orjson.loads(workdir.read(path)) for path in before) // self.config.divisor
        share = value // PARTS + (value % PARTS if task.params["part"] == PARTS - 1 else 0)
        workdir.write(self._divide_outputs(task)[0], orjson.dumps(share))
        return TaskOutput(counts={"shares": share}, data={"share": share})

    def _value(self, records: list[TaskRecord], ctx: RunContext) -> StepResult:
        return StepResult(data={"value": sum(r.data["share"] for r in records)})

    def _again(self, ctx: RunContext, round: int) -> bool:
        return ctx.steps[round_name("divide", round)].data["value"] > 0

    # result: every round's value, read back from its shares
    def _plan_one(self, ctx: RunContext) -> list[Task]:
        rounds = [name for name in ctx.steps if name.startswith("divide-")]
        return [Task(key="all", params={"rounds": len(rounds)})]

    def _result_outputs(self, task: Task) -> list[str]:
        return [storage.join(self.output_root, "result.json")]

    def _result(self, task: Task, quarantine: Quarantine, ctx: RunContext) -> TaskOutput:
        values = [
            sum(orjson.loads(workdir.read(self._share_path(r, p))) for p in range(PARTS)) for r in range(1, task.params["rounds"] + 1)
        ]
        storage.write_bytes(self._result_outputs(task)[0], orjson.dumps({"values": values}))
        return TaskOutput()


def make_stage(overrides: dict) -> LoopedStage:
    return LoopedStage(load_config(LoopedConfig, None, overrides))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("looped")
    for f in range(3):
        write_documents(str(root / "documents" / f"part-{f}.jsonl.gz"), make_docs(20, seed=f, words=10))
    return root


def _overrides(corpus: Path, out: Path, **extra) -> dict:
    return {"documents": [f"{corpus}/documents/*"], "destination": str(out), "progress": False, **extra}


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("reference") / "out"
    summary = run_stage(make_stage(_overrides(corpus, out, processes=2)), stream=io.StringIO())
    manifest = summary.manifest
    assert [p.name for p in manifest.phases] == PHASES  # the rounds that ran, each a phase
    assert [p.step for p in manifest.phases[1:4]] == [{"value": 15}, {"value": 3}, {"value": 0}]
    assert orjson.loads((out / "result.json").read_bytes()) == {"values": [15, 3, 0]}
    assert sorted(p.name for p in (out / "_done").iterdir()) == sorted(PHASES)
    assert all(len(done_markers(out / "_done" / name)) == PARTS for name in ROUNDS)
    return stage_outputs(out)


def test_a_run_killed_in_the_loop_resumes_at_the_round_and_task_where_it_stopped(corpus, reference, tmp_path):
    out = tmp_path / "out"
    overrides = _overrides(corpus, out, processes=1)
    round_3 = out / "_done" / "divide-03"
    kill_when(
        "tests.dolma_pipe.test_repeated_phase",
        [orjson.dumps(overrides).decode()],
        lambda: bool(done_markers(round_3)),
        env={"LOOPED_STAGE_DELAY": "0.4"},
    )
    killed = read_manifest(str(out))
    assert killed.status == "running" and len(done_markers(round_3)) == 1
    assert [(p.name, p.status) for p in killed.phases] == [
        ("count", "complete"),
        ("divide-01", "complete"),
        ("divide-02", "complete"),
        ("divide-03", "running"),
        ("result", "pending"),
    ]
    err = io.StringIO()
    summary = run_stage(make_stage(overrides), stream=err)
    phases = {p.name: p for p in summary.manifest.phases}
    assert list(phases) == PHASES
    for name in ("count", "divide-01", "divide-02"):
        assert all(r.skipped for r in phases[name].tasks.values()), name
    assert sorted(r.skipped for r in phases["divide-03"].tasks.values()) == [False, True]
    assert not any(r.skipped for r in phases["result"].tasks.values())
    assert f"divide-03 tasks  {PARTS} (1 processed, 1 already done, 0 failed)" in err.getvalue()
    assert stage_outputs(out) == reference


def test_a_loop_past_its_limit_stops_and_a_rerun_allowed_more_goes_on_from_its_rounds(corpus, tmp_path):
    out = tmp_path / "out"
    # Divided by 2: 30, 15, 7, 3, 1, 0: six rounds, three allowed.
    err = io.StringIO()
    with pytest.raises(RunFailed, match=f"^{EXHAUSTED}$"):
        run_stage(make_stage(_overrides(corpus, out, processes=1, divisor=2, limit=3)), stream=err)
    stopped = read_manifest(str(out))
    assert stopped.status == "failed" and stopped.stopped == EXHAUSTED
    assert [(p.name, p.status) for p in stopped.phases] == [*((name, "complete") for name in ["count", *ROUNDS]), ("result", "pending")]
    assert re.search(r"\n  not reached +1 phase\(s\) after the stop \(result\)\n", err.getvalue())
    summary = run_stage(make_stage(_overrides(corpus, out, processes=1, divisor=2, limit=6)), stream=io.StringIO())
    rounds = [p for p in summary.manifest.phases if p.name.startswith("divide-")]
    assert [p.name for p in rounds] == [round_name("divide", n) for n in range(1, 7)]
    assert [all(r.skipped for r in p.tasks.values()) for p in rounds] == [True] * 3 + [False] * 3
    assert orjson.loads((out / "result.json").read_bytes()) == {"values": [30, 15, 7, 3, 1, 0]}


def test_work_files_a_round_needs_again_are_redone_going_back_into_the_loop(corpus, reference, tmp_path):
    """A complete run removed its work files; its result gone, the rerun's result task finds the
    rounds' files missing: the runner goes back to each round that wrote one (the rounds after it
    leave the run until the loop asks for them again), redoing each task once."""
    out = tmp_path / "out"
    overrides = _overrides(corpus, out, processes=1)
    run_stage(make_stage(overrides), stream=io.StringIO())
    assert not (out / "_work").exists()
    (out / "result.json").unlink()
    err = io.StringIO()
    summary = run_stage(make_stage(overrides), stream=err)
    assert [p.name for p in summary.manifest.phases] == PHASES
    redone = [(r.phase, r.key) for r in summary.manifest.redone]
    assert sorted(redone) == sorted(
        [
            ("result", "all"),
            *(("count", f"part-{f}.jsonl.gz") for f in range(3)),
            *((name, f"part-{p}") for name in ROUNDS for p in range(PARTS)),
        ]
    )
    assert len(set(redone)) == len(redone)  # each once
    assert "redoing divide-02 task 'part-0': its file" in err.getvalue()
    assert stage_outputs(out) == reference


def test_a_round_is_its_phase_under_the_rounds_name():
    stage = make_stage({"documents": ["x"], "destination": "y", "limit": 12})
    count, divide, _ = stage.phases()
    assert count.at(0) is count and count.runs_as("count") and not count.runs_as("count-01")
    assert divide.at(12).name == "divide-12" and divide.at(12).run == divide.run
    assert divide.runs_as("divide-03") and not divide.runs_as("divide") and not divide.runs_as("divide-x")
    with pytest.raises(ValueError, match="rounds 1 to 12, not 13"):
        divide.at(13)


if __name__ == "__main__":
    run_stage(make_stage(orjson.loads(sys.argv[1])))
