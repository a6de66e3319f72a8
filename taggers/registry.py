"""The tagger registry: names to classes, built-ins discovered, user modules loaded.

Built-in taggers live one module each in :mod:`taggers.builtin`; every module
there is imported on first use, so adding a tagger is adding a file.  Users add
their own with ``--tagger-modules my_taggers.py`` (a file path, a file on object storage,
``s3://...``, or an importable module name) whose classes use the same :func:`register` decorator.

:func:`describe` and :func:`options_table` render a tagger's options (name,
type, default, help) from its ``Options`` model for ``dolma-pipe list``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import pkgutil
import sys
import types
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel

from dolma_pipe import storage
from taggers.base import Tagger, TaggerError, TaggerOptions

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
    """Import user tagger modules given as file paths, files on object storage (``s3://``) or
    module names.

    Built-ins load first, so a user tagger reusing a built-in's name is refused
    rather than silently shadowed (or shadowing).
    """
    load_builtins()
    for mod in modules:
        try:
            if storage.is_remote(mod):
                _load_remote(mod)
            elif mod.endswith(".py") or os.sep in mod:
                path = os.path.abspath(mod)
                if not os.path.isfile(path):
                    raise TaggerError(f"tagger module {mod} does not exist")
                name = _module_name(path)
                if name in sys.modules:
                    continue
                spec = importlib.util.spec_from_file_location(name, path)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                with _installed(name, module):
                    spec.loader.exec_module(module)
            else:
                importlib.import_module(mod)
        except TaggerError:
            raise
        except Exception as exc:  # the user's module failed to import: say which and why
            raise TaggerError(f"cannot load tagger module {mod}: {type(exc).__name__}: {exc}") from exc


def _module_name(where: str) -> str:
    """The module name of a user's file (a local path or a URL): one module per place, so that two
    files both called taggers.py do not collide."""
    digest = hashlib.sha1(where.encode()).hexdigest()[:10]
    return f"dolma_pipe_user_taggers_{os.path.splitext(os.path.basename(where))[0]}_{digest}"


def _load_remote(url: str) -> None:
    """A module file on object storage (``s3://...``): read and run as the module a local file
    is, so that workers on nodes that share no disk with the driver load the same taggers."""
    name = _module_name(url)
    if name in sys.modules:
        return
    source = storage.read_bytes(url)
    module = types.ModuleType(name)
    module.__file__ = url
    with _installed(name, module):
        exec(compile(source, url, "exec"), module.__dict__)


@contextlib.contextmanager
def _installed(name: str, module: types.ModuleType) -> Iterator[None]:
    """``module`` in ``sys.modules`` while its code runs (its classes look themselves up there),
    and out of it again if the code fails: a later load runs it again instead of finding half a
    module and skipping it."""
    sys.modules[name] = module
    try:
        yield
    except BaseException:
        del sys.modules[name]
        raise


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


# -- rendering options for `dolma-pipe list` --------------------------------------------------

OptionRow = tuple[str, str, str, str]  # (name, type, default, help)

_CONSTRAINTS = (
    (annotated_types.Ge, "ge", ">= {}"),
    (annotated_types.Gt, "gt", "> {}"),
    (annotated_types.Le, "le", "<= {}"),
    (annotated_types.Lt, "lt", "< {}"),
    (annotated_types.MinLen, "min_length", "length >= {}"),
)


def _type_name(annotation: Any) -> str:
    """``int``, ``str | null``, ``'document' | 'both'``, ``dict[str, list[str]]``, as a user reads them."""
    if annotation is type(None):
        return "null"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_type_name(a) for a in args)}]"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation)


def _value(value: Any) -> str:
    """A default as it is written in a YAML/JSON config (null, true, 0.3, "x", [])."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _model_rows(model: type[BaseModel], prefix: str) -> list[OptionRow]:
    rows: list[OptionRow] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, TaggerOptions):
            rows.extend(_model_rows(annotation, f"{prefix}{name}."))  # a group: gopher's thresholds.<rule>
            continue
        kind = _type_name(annotation)
        limits = [fmt.format(getattr(m, attr)) for m in field.metadata for cls, attr, fmt in _CONSTRAINTS if isinstance(m, cls)]
        limits = ["non-empty" if limit == "length >= 1" else limit for limit in limits]
        if limits:
            kind += f" ({', '.join(limits)})"
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if "shown_default" in extra:
            default = str(extra["shown_default"])
        elif field.is_required():
            default = "required"
        else:
            default = _value(field.get_default(call_default_factory=True))
        rows.append((prefix + name, kind, default, field.description or ""))
    return rows


def options_table(cls: type[Tagger]) -> list[OptionRow]:
    """``(name, type, default, help)`` for each option of a tagger class, in declaration order.

    Options of a group are dotted (``thresholds.word_count_min``); a default is
    written as in a config (``null``, ``true``, ``"x"``) or is ``required``.  A
    user tagger without an ``Options`` model is read from its ``__init__``
    signature (types as annotated, no help).
    """
    model = cls.options_model()
    if model is not None:
        return _model_rows(model, "")
    rows: list[OptionRow] = []
    for param in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        kind = (
            ""
            if param.annotation is param.empty
            else param.annotation
            if isinstance(param.annotation, str)
            else _type_name(param.annotation)
        )
        default = "required" if param.default is param.empty else _value(param.default)
        rows.append((param.name, kind, default, ""))
    return rows


def option_names(cls: type[Tagger]) -> list[str]:
    """The top-level option names of a tagger class (for a one-line listing)."""
    model = cls.options_model()
    if model is not None:
        return list(model.model_fields)
    return [name for name, *_ in options_table(cls)]


def describe(name: str) -> str:
    """A tagger in detail, for ``dolma-pipe list --tagger NAME``: description, granularity,
    the span types always written, and every option with its type, default and help."""
    cls = get(name)
    lines = [f"{name}  ({cls.granularity})", f"  {cls.description}" if cls.description else "  (no description)"]
    if cls.defaults:
        lines.append(f"  always writes: {', '.join(cls.defaults)}")
    rows = options_table(cls)
    if not rows:
        lines.append("options: none")
        return "\n".join(lines)
    if cls.options_model() is None:
        lines.append(f"options (tagger_options.{name}.<option>; from its __init__, checked only when it is built):")
    else:
        lines.append(f"options (tagger_options.{name}.<option>):")
    for option, kind, default, help_text in rows:
        typed = f": {kind}" if kind else ""
        lines.append(f"  {option}{typed} (required)" if default == "required" else f"  {option}{typed} = {default}")
        if help_text:
            lines.append(f"      {help_text}")
    return "\n".join(lines)
