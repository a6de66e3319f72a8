"""What can go wrong reading a document file as a whole, and the quarantine kind each becomes.

Every reader of document lines (:func:`dolma_pipe.documents.read_documents`, the mixer's line
blocks, dedup's scanner) hands the error that stopped it here, with the line it was about to
read, and asks here whether a file gave no records: so a stage cannot say ``corrupt_archive``
where another says ``truncated_archive``, and ``empty_file`` means the same everywhere.

* :class:`TruncatedArchive` (the last gzip member or zstd frame ends early): ``truncated_archive``
  at the next line;
* any other :class:`DocumentError` (corrupt compressed data): ``corrupt_archive`` at the next line;
* :class:`~dolma_pipe.storage.StorageError` (the file cannot be opened or read): ``unreadable`` at
  line 0;
* a Parquet file pyarrow cannot read on: ``corrupt_parquet`` at the next row;
* no records and none of the above: ``empty_file`` at line 0.

Bad records (malformed JSON, a missing ``id``...) are the line readers' business; these are the
errors after which a file's remaining lines are unknown (:data:`dolma_pipe.quarantine.FILE_KINDS`).
"""

from __future__ import annotations

from dolma_pipe import storage
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.quarantine import Quarantine


class DocumentError(DolmaPipeError, ValueError):
    """A document file could not be read; the message names the file and line."""


class TruncatedArchive(DocumentError):
    pass


class NotJsonLines(DolmaPipeError, ValueError):
    """A reader of JSON lines was handed a Parquet file: a caller's mistake, not a bad file (never quarantined)."""


# What a reader catches to hand to :func:`quarantine_read_error`.
READ_ERRORS = (DocumentError, storage.StorageError)


def quarantine_read_error(quarantine: Quarantine, path: str, error: DocumentError | storage.StorageError, next_line: int) -> None:
    """Quarantine the error that stopped reading ``path``; ``next_line`` is the line it stopped at
    (the one after the last line read)."""
    if isinstance(error, TruncatedArchive):
        quarantine.add(path, next_line, "truncated_archive", str(error), None)
    elif isinstance(error, DocumentError):
        quarantine.add(path, next_line, "corrupt_archive", str(error), None)
    else:
        quarantine.add(path, 0, "unreadable", str(error), None)


def quarantine_corrupt_parquet(quarantine: Quarantine, path: str, rows_read: int, error: Exception) -> None:
    """Quarantine what stopped pyarrow after ``rows_read`` rows of ``path`` (any exception: pyarrow
    raises ArrowInvalid, OSError, ... for a broken file)."""
    quarantine.add(path, rows_read + 1, "corrupt_parquet", f"{path}: unreadable after row {rows_read} ({error})", None)


def quarantine_if_empty(quarantine: Quarantine, path: str, records: int) -> None:
    """``empty_file`` when ``path`` gave no records and no error that stopped its reading did."""
    if records == 0 and not quarantine.has_file_error(path):
        quarantine.add(path, 0, "empty_file", f"{path}: file has no records", None)
