"""The ``report`` config: which runs to read, where the page goes, and how much it shows."""

from __future__ import annotations

from pydantic import Field

from dolma_pipe.config import PathStr, RunOptions


class ReportConfig(RunOptions):
    runs: list[PathStr] = Field(
        ...,
        min_length=1,
        description="run folders, or folders holding runs (every _manifest.json below is read; local or s3://)",
    )
    destination: PathStr = Field(..., description="where report.html, report_data/, markers and the manifest go")
    title: str = Field("dolma-pipe report", description="the page's title")
    samples_per_rule: int = Field(5, ge=0, le=50, description="removed documents shown per filter rule (a seeded sample)")
    sample_chars: int = Field(800, ge=100, le=20_000, description="characters of a sampled document shown")
    largest_clusters: int = Field(5, ge=0, le=50, description="near-duplicate clusters shown with their members")
    members_per_cluster: int = Field(4, ge=2, le=20, description="members of a cluster shown side by side")
    contaminated_samples: int = Field(5, ge=0, le=50, description="contaminated paragraphs shown with the evaluation text they match")
    seed: int = Field(0, description="seeds which documents are sampled (a hash of seed and id)")
    tokenizer: str | None = Field(
        None,
        description="tokenizer for token weights (bytes per token measured on each file); default: the one the tokenize runs used",
    )
    series_points: int = Field(400, ge=10, le=10_000, description="points kept per training curve (evenly thinned)")
