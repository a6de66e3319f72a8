"""The warc stage's run-level error, apart from the config (pydantic): the extraction child
(``-m .sandbox``), which raises it, starts without the config's imports (~0.25 CPU-s a WARC file)."""

from __future__ import annotations

from dolma_pipe.errors import DolmaPipeError


class WarcError(DolmaPipeError, RuntimeError):
    """A warc run that cannot go on (an unreadable blocklist, a tagger that does not exist)."""
