"""The optional parts of the package (pip extras) and the one line that names one when it is missing.

``pip install dolma-pipe`` installs what ``tag``, ``dedup``, ``mix``, ``tokenize`` and the other
curation commands import. The trainer's libraries (torch and what exports a checkpoint to Hugging
Face) come with the ``train`` extra only, ``pip install 'dolma-pipe[train]'``: a command that
reaches one without it says so in one line (:func:`require` before the work, the CLI's
:func:`missing_extra` for an import it meets on the way) instead of a traceback.

``tests/test_packaging.py`` holds :data:`EXTRA_OF_MODULE` to ``pyproject.toml``'s extras and every
import of the product to a declared dependency.
"""

from __future__ import annotations

import importlib.util

from dolma_pipe.errors import DolmaPipeError

# Top-level module -> the extra that installs it (the modules the product imports from extras only).
EXTRA_OF_MODULE: dict[str, str] = {"torch": "train", "safetensors": "train", "transformers": "train"}


class MissingExtraError(DolmaPipeError):
    """A module of an extra that is not installed; the message says which ``pip install`` adds it."""


def message(module: str, what: str | None = None) -> str:
    """``[<what> ]needs <module>, which the '<extra>' extra installs: pip install 'dolma-pipe[<extra>]'``
    for a module of :data:`EXTRA_OF_MODULE`."""
    top = module.split(".")[0]
    extra = EXTRA_OF_MODULE[top]
    return f"{what + ' ' if what else ''}needs {top}, which the '{extra}' extra installs: pip install 'dolma-pipe[{extra}]'"


def require(module: str, what: str) -> None:
    """Raises :class:`MissingExtraError` when ``module`` (of an extra) is not installed."""
    if importlib.util.find_spec(module.split(".")[0]) is None:
        raise MissingExtraError(message(module, what))


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The one line for an import of an extra's module that failed, or None for any other module
    (a bug or a broken install: its traceback is worth more than a line)."""
    name = exc.name or ""
    return message(name) if name.split(".")[0] in EXTRA_OF_MODULE else None
