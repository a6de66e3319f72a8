"""The charting library the page inlines: Vega, Vega-Lite and vega-embed as one script, from
``vl-convert-python`` (a wheel: no npm, nothing fetched when the page opens).

``vl_convert.javascript_bundle()`` builds the script (about 0.9 MB; it sets ``window.vegaEmbed``,
``window.vega`` and ``window.vegaLite``) in its embedded JavaScript runtime, which takes about
1.5 s of CPU the first time in a process. The script depends only on vl-convert's version, so it is
kept in the user's cache folder (``$XDG_CACHE_HOME/dolma-pipe``, else ``~/.cache/dolma-pipe``)
under that version's name and read from there by every later report; where that folder cannot be
written it is built each time.
"""

from __future__ import annotations

import contextlib
import functools
import os
from importlib import metadata

from dolma_pipe import storage

PACKAGE = "vl-convert-python"
# The script ends by setting these globals (a check that a cached file is whole).
ENDS_WITH = "window.vegaLite=__default1;"


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dolma-pipe")


def _cached_path() -> str:
    return os.path.join(cache_dir(), f"vega-bundle-{metadata.version(PACKAGE)}.js")


def _build() -> str:
    import vl_convert

    # No snippet: the default one sets window.vegaEmbed, vega and vegaLite (the stub marks it required).
    return vl_convert.javascript_bundle()  # type: ignore[call-arg]


@functools.lru_cache(maxsize=1)
def javascript() -> str:
    """The bundle's text (from the cache folder when it is there and whole)."""
    path = _cached_path()
    with contextlib.suppress(OSError, UnicodeDecodeError):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        if text.rstrip().endswith(ENDS_WITH):
            return text
    text = _build()
    # Written aside and renamed: a report killed mid-write leaves no half script to be read. A
    # cache folder that cannot be written only costs the next report the build again.
    with contextlib.suppress(OSError), storage.atomic_local_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    return text
