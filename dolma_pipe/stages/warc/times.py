"""Times as the warc and pdf stages read and write them: ISO 8601 in, Dolma's form out.

Its own module (it imports nothing of the package) so that the configs, which validate ``added``,
and the documents' provenance share one parser.
"""

from __future__ import annotations

from datetime import datetime, timezone


def dolma_time(when: datetime) -> str:
    """Dolma's timestamp form (UTC, milliseconds, ``Z``)."""
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] + "Z"


def parse_time(value: str) -> datetime:
    """An ISO 8601 time (``Z`` allowed); a time without a zone is UTC."""
    when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
