"""What a report run is fixed to when its phases are built, the one value they read.

:class:`ReportRun` holds the config, the resolved values (:class:`~.resolved.ReportResolved`),
the runs found below the report's folders and the mix rules evaluated on their documents. The
stage builds it after :meth:`~dolma_pipe.stage.Stage.prepare`; the phase classes
(:mod:`.phases`) hold it, never the stage.
"""

from __future__ import annotations

from dataclasses import dataclass

from dolma_pipe import storage
from report import page
from report.config import ReportConfig
from report.discover import RunSet
from report.resolved import ReportResolved
from report.summarize import RuleSet


@dataclass(frozen=True)
class ReportRun:
    """The config, the resolved values, the runs found and each mix group's rules (by its key,
    ``"<run> / <group>"``)."""

    config: ReportConfig
    resolved: ReportResolved
    found: RunSet
    rule_sets: dict[str, RuleSet]

    @property
    def root(self) -> str:
        return self.config.destination

    @property
    def page_path(self) -> str:
        return storage.join(self.root, page.PAGE)

    @property
    def data_dir(self) -> str:
        return storage.join(self.root, page.DATA_DIR)

    @property
    def sample_limits(self) -> dict[str, int]:
        """How many samples of each kind the merged summary keeps."""
        return {"removed": self.config.samples_per_rule, "contaminated": self.config.contaminated_samples}
