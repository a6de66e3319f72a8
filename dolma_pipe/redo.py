"""The redo of finished tasks whose files are missing, cut short or damaged.

A task's record lists the files it wrote with their sizes (:func:`written_sizes`). A rerun redoes
a finished task whose files are gone or changed size (:func:`changed_outputs`), and a task or
driver-side step that finds a work file missing or damaged
(:class:`dolma_pipe.workdir.WorkFileError`) makes the run drop the marker of the task that wrote
it and go on from that task's phase (:meth:`TasksToRedo.plan`). Each redo is said in one line and
kept in the manifest's ``redone``; a task is redone at most once a run.
"""

from __future__ import annotations

from typing import TextIO

from dolma_pipe import storage, workdir
from dolma_pipe.lock import command_line
from dolma_pipe.manifest import Manifest, Redo, TaskRecord, relative_to_root, under_root
from dolma_pipe.markers import marker_path, phase_dir
from dolma_pipe.run_summary import RunFailed
from dolma_pipe.stage import Phase, Stage
from dolma_pipe.workdir import WorkFileError


def written_sizes(root: str, outputs: list[str]) -> dict[str, int]:
    """The sizes of the declared outputs a task wrote (one it did not write is left out). One stat
    each: a task writes a few files, into folders that may hold many others' (no listing)."""
    out = {}
    for path in outputs:
        try:
            out[relative_to_root(root, path)] = storage.stat(path).size
        except storage.StorageError:
            continue
    return out


def changed_outputs(root: str, records: list[TaskRecord], skip: workdir.WorkDir | None) -> dict[str, tuple[str, str]]:
    """Finished tasks whose recorded files are gone or changed size: {key: (path, problem)}.

    Files under ``skip`` (a work directory its complete run removed on purpose) are not looked for.
    """
    wanted = {under_root(root, rel): size for r in records for rel, size in r.outputs.items()}
    if skip is not None:
        wanted = {p: n for p, n in wanted.items() if not skip.contains(p)}
    found = storage.sizes(list(wanted))
    out: dict[str, tuple[str, str]] = {}
    for r in records:
        for rel, size in r.outputs.items():
            path = under_root(root, rel)
            if path not in wanted or r.key in out:
                continue
            now = found.get(path)
            if now is None:
                out[r.key] = (path, "missing")
            elif now != size:
                out[r.key] = (path, "truncated" if now < size else "changed")
    return out


def _command(force: bool = True) -> str:
    """The command of this run, with ``--force`` (what starts it over)."""
    cmd = command_line()
    return cmd if not force or "--force" in cmd else f"{cmd} --force"


class TasksToRedo:
    """Finished tasks to redo because a file they wrote is missing, cut short or damaged."""

    def __init__(self, stage: Stage, phases: list[Phase], manifest: Manifest, root: str, stream: TextIO):
        self.stage, self.phases, self.manifest, self.root, self.stream = stage, phases, manifest, root, stream
        self.redone: set[tuple[str, str]] = set()

    def _writer(self, path: str, upto: int) -> tuple[int, TaskRecord] | None:
        """The phase and record of the finished task that wrote ``path`` (phases up to ``upto``)."""
        for j in range(upto, -1, -1):
            for r in self.manifest.phases[j].tasks.values():
                if path in {under_root(self.root, rel) for rel in r.outputs} or (r.ids_file and path == under_root(self.root, r.ids_file)):
                    return j, r
        return None

    def note(self, phase: str, key: str, path: str, problem: str) -> None:
        self.redone.add((phase, key))
        self.manifest.redone.append(Redo(phase=phase, key=key, path=path, problem=problem))
        print(f"dolma-pipe {self.stage.name}: redoing {phase} task {key!r}: its file {path} is {problem}", file=self.stream, flush=True)

    def _drop(self, j: int, record: TaskRecord, path: str, problem: str) -> None:
        self.forget(self.manifest.phases[j].name, record, path, problem)  # a phase, or a repeated phase's round

    def forget(self, phase: str, record: TaskRecord, path: str, problem: str) -> None:
        """Removes a finished task's marker and what it wrote, to redo it: a cache or a resumable
        writer must not reuse what is left of it, and a run that goes back past the task (to redo
        an earlier writer) must not find it finished, and say so, once more."""
        storage.remove(marker_path(self.root, record.key, phase_dir(self.phases, phase)))
        for rel in record.outputs:
            storage.remove(under_root(self.root, rel))
        self.note(phase, record.key, path, problem)

    def plan(self, index: int, damaged: list[WorkFileError]) -> int:
        """Drops the markers of the tasks that wrote the damaged files; the phase to go on from.
        Phases are counted as the manifest lists them (a repeated phase's rounds each one).

        Other finished tasks of the same phase whose files are gone too (a work directory removed
        after the run completed) are redone with it, in one go rather than one round each.
        """
        restart = index
        now: set[tuple[str, str]] = set()  # several readers may find the same file damaged
        for exc in damaged:
            found = self._writer(exc.path, index)
            if found is None:
                raise RunFailed(f"{exc}; no finished task of this run wrote it, so it cannot be redone: start over with {_command()}")
            j, record = found
            phase = self.manifest.phases[j].name
            if (phase, record.key) in now:
                continue
            now.add((phase, record.key))
            if (phase, record.key) in self.redone:
                raise RunFailed(f"{exc}, again after its {phase} task {record.key!r} was redone in this run: start over with {_command()}")
            self._drop(j, record, exc.path, exc.problem)
            tasks = self.manifest.phases[j].tasks
            for key, (path, problem) in changed_outputs(self.root, [r for r in tasks.values() if r.key != record.key], None).items():
                if (phase, key) not in self.redone:
                    now.add((phase, key))
                    self._drop(j, tasks[key], path, problem)
            restart = min(restart, j)
        return restart
