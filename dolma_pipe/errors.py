"""The one base class of every error a user can cause, so the CLI catches one class.

Each error says in its message what is wrong and where (the config key, the
file and line, the tagger option); the CLI prints that message on one line and
exits non-zero, never a traceback.  Subclasses also derive from the builtin
exception that fits (``ValueError``, ``OSError``) so callers that catch those
keep working.
"""

from __future__ import annotations


class DolmaPipeError(Exception):
    """Base of every user-facing dolma-pipe error (config, path, document, tagger, Bloom filter, run)."""
