"""What a mix run tells ``dolma-pipe report``: its streams or sources with their rules compiled as
the run compiled them, and, for one document file, what those rules decide for each document.

The report finds this module through the ``mix`` stage (:meth:`mixers.stage.MixStage.report_groups`
and :meth:`~mixers.stage.MixStage.report_verdicts`), never by importing ``mixers``: the CLI's
registry is the one place that knows every stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dolma_pipe import storage
from dolma_pipe.filters import BatchResult
from dolma_pipe.quarantine import Quarantine
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


def verdicts(rules: StreamRules, path: str) -> tuple[dict[str, int], dict[str, int]]:
    """Per document id of ``path``: the rules it matched (include i as bit i, exclude j as bit
    includes + j); and how many documents matched each combination (mask -> documents)."""
    masks: dict[str, int] = {}
    overlap: dict[str, int] = {}

    def sink(result: BatchResult) -> None:
        for doc_id, mask in zip(result.ids, result.matches):
            masks[doc_id] = mask
            overlap[str(mask)] = overlap.get(str(mask), 0) + 1

    # A quarantine of its own: the report's reading pass counts the file's bad records once.
    mix_file(rules, path, Quarantine(), sink, batch_size=2048, write=False)
    return masks, overlap
