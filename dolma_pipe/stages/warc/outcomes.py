"""What becomes of a record (or, in the pdf stage, a file) that is not written: ``Skip``, a count
with its reason, or ``Bad``, quarantined with its kind and what is wrong. Shared by the warc and
pdf stages, which count both the same way."""

from __future__ import annotations


class Skip(Exception):
    """A record the stage does not write, and why (a count, not an error)."""

    def __init__(self, reason: str):
        self.reason = reason


class Bad(Exception):
    """A record quarantined: its kind and what is wrong."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        self.message = message
