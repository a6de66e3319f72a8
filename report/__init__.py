"""``dolma-pipe report``: one offline HTML page showing what every stage did to the corpus, and the
data folder behind it (see :mod:`.stage`)."""

from report.stage import ReportStage

__all__ = ["ReportStage"]
