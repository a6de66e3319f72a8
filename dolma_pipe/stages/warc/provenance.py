"""Where a document came from: its id, its times and the record's coordinates, as Dolma writes them.

- ``id``: the WARC record id (``<urn:uuid:X>`` -> ``X``), unique per record. (Dolma uses the payload
  digest, which repeats for every copy of a page.)
- ``created``: the record's ``WARC-Date``; ``added``: the run's time, fixed once in the run's
  manifest (:class:`~.run.WarcResolved`), so a rerun writes the same bytes. Both in Dolma's form,
  ``2024-05-01T12:34:56.789Z``.
- ``metadata``: Dolma's keys (``url`` normalised as Dolma does, ``warc_url``, ``warc_date``,
  ``warc_filename``, ``content_type``, ``html`` when asked) and ours: ``warc_record_id``,
  ``warc_offset`` / ``warc_length`` (the stored bytes of the record alone: read that range and a
  WARC reader gives the record back; null in a ``.warc.gz`` compressed as one stream, where no
  range holds one record), ``payload_digest``, ``http_status``, ``charset`` and
  ``charset_decided_by`` (null for a PDF), ``extractor``. ``warc_filename`` is the file read (Dolma records the
  warcinfo record's id there).
"""

from __future__ import annotations

import hashlib
from typing import Any

from .charset import Decoded
from .records import Record
from .times import dolma_time
from .urls import normalise


def document_id(record: Record, rel: str) -> str:
    """The record's id without ``<urn:uuid:`` and ``>``; a record without one (ARC): a hash of the
    file's relative name and the record's offset."""
    rid = record.record_id.strip().strip("<>")
    if rid.lower().startswith("urn:uuid:"):
        rid = rid[len("urn:uuid:") :]
    return rid or hashlib.sha1(f"{rel}@{record.offset}".encode()).hexdigest()


def build_document(
    record: Record,
    doc_id: str,
    path: str,
    source: str,
    added: str,
    content_type: str,
    decoded: Decoded | None,
    text: str,
    extractor: str,
    html: str | None,
) -> dict[str, Any]:
    """The Dolma document of a record (fields in Dolma's order)."""
    created = dolma_time(record.date) if record.date is not None else added
    url = record.target_uri or ""
    metadata: dict[str, Any] = {
        "warc_url": url,
        "url": normalise(url),
        "warc_date": created,
        "warc_filename": path,
        "content_type": content_type,
        "warc_record_id": record.record_id,
        "warc_offset": record.offset if record.ranged else None,
        "warc_length": record.length if record.ranged else None,
        "payload_digest": record.payload_digest,
        "http_status": record.http_status,
        "charset": None if decoded is None else decoded.charset,  # None: a PDF, no charset to decide
        "charset_decided_by": None if decoded is None else decoded.decided_by,
        "extractor": extractor,
    }
    if html is not None:
        metadata["html"] = html
    return {
        "id": doc_id,
        "text": text,
        "source": source,
        "added": added,
        "created": created,
        "metadata": metadata,
    }
