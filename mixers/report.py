"""What a mix run tells ``dolma-pipe report``: its streams or sources with their rules compiled as
the run compiled them, and, for one document file, what those rules decide for each document.

The report (:mod:`report.discover`) imports this module: it sits above the stages it reads
(docs/development.md, Layers); nothing in ``mixers`` knows the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dolma_pipe import storage
from dolma_pipe.filters import BatchResult
from dolma_pipe.manifest import under_root
from dolma_pipe.quarantine import Quarantine
from mixers import verdicts as mix_verdicts
from mixers.config import MixConfig
from mixers.layout import make_groups
from mixers.reading import mix_file
from mixers.rules import StreamRules


@dataclass
class RuleGroup:
    """One stream or source of a mix run, the files it read, and its compiled rules."""

    index: int
    name: str
    kind: str  # "stream" or "source"
    rules: StreamRules
    files: list[str]


def rule_groups(config: dict[str, Any], inputs: set[str]) -> list[RuleGroup]:
    """A mix run's groups from its manifest's config; ``inputs``: the files the run read.
    ConfigError (or another DolmaPipeError) when the rules cannot be compiled again."""
    cfg = MixConfig.model_validate(config)
    kind = "stream" if cfg.streams else "source"
    out = []
    for g in make_groups(cfg):
        files = sorted({f for p in g.patterns for f in storage.glob(storage.local_path(p)) if f in inputs})
        out.append(RuleGroup(g.index, g.name, kind, g.rules, files))
    return out


def stored_verdicts(root: str, manifest: Any) -> dict[str, str]:
    """Per input file of a mix run: where its task kept its verdicts (:mod:`mixers.verdicts`);
    files whose task kept none (a run from before verdicts were kept) are left out."""
    out: dict[str, str] = {}
    for phase in manifest.phases:
        if phase.name not in ("filter", "count"):
            continue
        for record in phase.tasks.values():
            rel = record.data.get("verdicts")
            if rel and record.inputs:
                out[record.inputs[0].path] = under_root(root, rel)
    return out


def verdicts(rules: StreamRules, path: str, stored: str | None = None) -> tuple[dict[int, int], dict[str, int]]:
    """Per line of ``path`` that holds a good document: the rules it matched (include i as bit i,
    exclude j as bit includes + j); and how many documents matched each combination (mask ->
    documents). From the verdicts the mix kept (``stored``) when it kept them, else the rules are
    evaluated again by the mix's own engine."""
    kept = mix_verdicts.load(stored) if stored else None
    if kept is not None:
        lines, masks = kept
        values, counts = np.unique(masks, return_counts=True)
        return dict(zip(lines.tolist(), masks.tolist())), {str(int(v)): int(n) for v, n in zip(values, counts)}
    masks_by_line: dict[int, int] = {}
    overlap: dict[str, int] = {}

    def sink(result: BatchResult) -> None:
        for line, mask in zip(result.lines, result.matches):
            masks_by_line[line] = mask
            overlap[str(mask)] = overlap.get(str(mask), 0) + 1

    # A quarantine of its own: the report's reading pass counts the file's bad records once.
    mix_file(rules, path, Quarantine(), sink, batch_size=2048, write=False)
    return masks_by_line, overlap
