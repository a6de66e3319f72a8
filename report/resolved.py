"""What a report run resolves (:meth:`report.stage.ReportStage.resolve`): the runs it found, the mix
rules it evaluates, the tokenizer that weighs tokens, the near-duplicate clusters it shows and the
contamination attributes it counts.

The manifest records :meth:`ReportResolved.as_json` and the fingerprint hashes it, so a run redone
or added below the report's folders redoes what depends on it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from dolma_pipe.stage import Resolved


class _Fixed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TokenizerFile(_Fixed):
    """The tokenizer file that weighs tokens (bytes per token), and its digest."""

    path: str
    digest: str


class ClusterMember(_Fixed):
    """One row of a dedup run's ``_clusters.jsonl.gz``, as the dedup wrote it."""

    id: str
    file: str  # relative to the dedup's documents
    line: int
    cluster: int
    size: int
    survivor: bool
    survivor_id: str


class Cluster(_Fixed):
    """One of the largest clusters, with its first members (the survivor first)."""

    cluster: int
    size: int
    members: tuple[ClusterMember, ...]


class Clusters(_Fixed):
    """A MinHash dedup run's clusters: how many per size (the size as text), and the largest."""

    sizes: dict[str, int]
    largest: tuple[Cluster, ...]


class ReportResolved(Resolved):
    """``runs``: (folder, stage, status, fingerprint) of every run found; ``rules``: each mix group's
    rules digest; ``clusters``: by dedup run name; ``contamination``: the decontamination attributes."""

    # Not when a run finished: a rerun that redid nothing rewrites its manifest. What a task reads
    # beside its document file (attribute files) is in its params.
    runs: tuple[tuple[str, str, str, str], ...]
    rules: dict[str, str]
    tokenizer: TokenizerFile | None
    clusters: dict[str, Clusters]
    contamination: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        # Without a tokenizer the report has always recorded ``"tokenizer": null``: kept (no field
        # here is None otherwise), so a run's manifest and fingerprint are those it had.
        return self.model_dump(mode="json")
