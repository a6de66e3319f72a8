"""``warc``: web crawls (WARC, WARC.gz, ARC files) into Dolma documents, every record accounted for.

Dolma's ``dolma warc`` config runs unchanged (``documents``, ``destination``, ``source_name``,
``linearizer``, ``pre.taggers``, ``post.taggers``, ``store_html_in_metadata``, ``processes``);
one task per WARC file on the runner (resume, manifest, quarantine, Ray, S3).

Modules, in the order a record meets them: :mod:`.records` (fastwarc; byte ranges, damage,
payload digests), :mod:`.payload` (transfer/content encodings, Content-Type sniffing),
:mod:`.arc` (ARC files, through warcio), :mod:`.urls` (Dolma's URL normal form, the offline
URL filter), :mod:`.charset` (the fixed decoding order), :mod:`.extractor` (the linearizers'
interface), :mod:`.extract` (the linearizers, the depth and time caps), :mod:`.refine` (the
line model over resiliparse), :mod:`.pdf` (PDF records' text layer), :mod:`.sandbox` (extraction in a
child process), :mod:`.tagging` (pre/post taggers), :mod:`.provenance` (ids, times, the
record's coordinates), :mod:`.times` (ISO 8601 in, Dolma's form out), :mod:`.files` (the phase),
:mod:`.config`, :mod:`.errors` (the run's error), :mod:`.run` and :mod:`.stage`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import WarcConfig
    from .errors import WarcError
    from .stage import WarcStage

__all__ = ["WarcConfig", "WarcError", "WarcStage"]
_WHERE = {"WarcConfig": ".config", "WarcError": ".errors", "WarcStage": ".stage"}


def __getattr__(name: str) -> Any:
    # Imported on first use: the extraction child (``-m`` .sandbox) starts without the stage,
    # its taggers and the runner.
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
