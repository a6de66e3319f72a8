"""What a stage is: a function over one input file plus a plan of files.

A :class:`Stage` names its output root, plans one :class:`FileTask` per input
file, and processes one task at a time, writing its outputs atomically and
returning counts.  Everything around that (executors, markers, quarantine
files, manifests, progress, summaries) is the runner's job, so a new stage is
one small class.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from dolma_pipe import paths, storage
from dolma_pipe.config import RunOptions
from dolma_pipe.quarantine import Quarantine


@dataclass(frozen=True)
class FileTask:
    path: str
    rel: str
    size: int
    mtime: float


@dataclass
class TaskResult:
    rel: str
    path: str
    counts: dict[str, int]
    errors: dict[str, int]
    seconds: float
    size: int = 0
    mtime: float = 0.0
    skipped: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def error_total(self) -> int:
        return sum(self.errors.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "rel": self.rel,
            "path": self.path,
            "size": self.size,
            "mtime": self.mtime,
            "counts": self.counts,
            "errors": self.errors,
            "seconds": round(self.seconds, 6),
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], skipped: bool = False) -> "TaskResult":
        return cls(
            rel=data["rel"],
            path=data["path"],
            counts=dict(data.get("counts", {})),
            errors=dict(data.get("errors", {})),
            seconds=float(data.get("seconds", 0.0)),
            size=int(data.get("size", 0)),
            mtime=float(data.get("mtime", 0.0)),
            skipped=skipped,
            extra=dict(data.get("extra", {})),
        )


class Stage(ABC):
    """One stage of the pipeline; subclasses set ``name`` and implement the abstract parts."""

    name: ClassVar[str]
    # Folder under the output root holding the per-input outputs named by ``output_name``.
    output_dir: ClassVar[str] = ""

    def __init__(self, config: Any):
        self.config = config

    @property
    @abstractmethod
    def output_root(self) -> str:
        """Directory (or prefix) holding this run's outputs, markers, errors and manifest."""

    def input_patterns(self) -> list[str]:
        return list(self.config.documents)

    def output_name(self, rel: str) -> str | None:
        """The main output's relative name for input ``rel``, if the stage writes one per input."""
        return None

    def output_path(self, rel: str) -> str | None:
        """Where the main output of input ``rel`` goes (``output_root/output_dir/output_name``)."""
        name = self.output_name(rel)
        return None if name is None else storage.join(self.output_root, self.output_dir, name)

    def fingerprint(self) -> str:
        """Hash of the settings that shape outputs (not how the run is executed).

        Stored in each completion marker: a file finished under other settings is redone.
        """
        run_keys = set(RunOptions.model_fields)
        shaping = {k: v for k, v in self.config.model_dump(mode="json").items() if k not in run_keys}
        shaping.pop("documents", None)  # which files are inputs does not change a file's output
        return hashlib.sha256(orjson.dumps({"stage": self.name, **shaping}, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]

    def plan(self) -> list[FileTask]:
        tasks = []
        outputs: dict[str, str] = {}
        for path, rel, info in paths.expand(self.input_patterns(), exclude_under=self.output_root):
            out = self.output_name(rel)
            if out is not None:
                if out in outputs:
                    raise paths.PathError(
                        f"inputs {outputs[out]!r} and {path!r} would both be written to {out!r}; "
                        "rename one or convert them separately"
                    )
                outputs[out] = path
            tasks.append(FileTask(path=path, rel=rel, size=info.size, mtime=info.mtime))
        return tasks

    @abstractmethod
    def process(self, task: FileTask, quarantine: Quarantine) -> dict[str, int] | tuple[dict[str, int], dict[str, Any]]:
        """Process one file; return counts (and optionally extra per-file results)."""

    def finish(self, results: list[TaskResult]) -> dict[str, Any]:
        """A global step after every file is done (aggregation); returns manifest extras."""
        return {}
