"""The tagger registry: names to classes, built-ins discovered, user modules loaded.

Built-in taggers live one module each in :mod:`taggers.builtin`; every module
there is imported on first use, so adding a tagger is adding a file.  Users add
their own with ``--tagger-modules my_taggers.py`` (a file path or an importable
module name) whose classes use the same :func:`register` decorator.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import pkgutil
import sys
from typing import Callable, TypeVar

from taggers.base import Tagger, TaggerError

T = TypeVar("T", bound=type[Tagger])

_REGISTRY: dict[str, type[Tagger]] = {}
_BUILTINS_LOADED = False


def register(name: str | None = None) -> Callable[[T], T]:
    """Class decorator: ``@register("my_tagger")`` (or the class's ``name`` attribute)."""

    def wrap(cls: T) -> T:
        key = name or cls.name
        if not key:
            raise TaggerError(f"{cls.__qualname__}: a tagger needs a name")
        existing = _REGISTRY.get(key)
        if existing is not None and (existing.__module__, existing.__qualname__) != (cls.__module__, cls.__qualname__):
            raise TaggerError(f"tagger name {key!r} is taken by {existing.__module__}.{existing.__qualname__}")
        cls.name = key
        _REGISTRY[key] = cls
        return cls

    return wrap


def load_builtins() -> None:
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    import taggers.builtin as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{pkg.__name__}.{info.name}")
    _BUILTINS_LOADED = True


def load_modules(modules: list[str]) -> None:
    """Import user tagger modules given as file paths or module names.

    Built-ins load first, so a user tagger reusing a built-in's name is refused
    rather than silently shadowed (or shadowing).
    """
    load_builtins()
    for mod in modules:
        try:
            if mod.endswith(".py") or os.sep in mod:
                path = os.path.abspath(mod)
                if not os.path.isfile(path):
                    raise TaggerError(f"tagger module {mod} does not exist")
                # One module per file path: two files both called taggers.py must not collide.
                digest = hashlib.sha1(path.encode()).hexdigest()[:10]
                name = f"dolma_pipe_user_taggers_{os.path.splitext(os.path.basename(path))[0]}_{digest}"
                if name in sys.modules:
                    continue
                spec = importlib.util.spec_from_file_location(name, path)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
            else:
                importlib.import_module(mod)
        except TaggerError:
            raise
        except Exception as exc:  # the user's module failed to import: say which and why
            raise TaggerError(f"cannot load tagger module {mod}: {type(exc).__name__}: {exc}") from exc


def get(name: str) -> type[Tagger]:
    load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise TaggerError(f"unknown tagger {name!r}{hint}; `dolma-pipe list` shows them all") from None


def available() -> dict[str, type[Tagger]]:
    load_builtins()
    return dict(sorted(_REGISTRY.items()))
