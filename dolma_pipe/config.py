"""Stage configs: typed pydantic models loaded from YAML/JSON plus dotted-key overrides.

Every stage config is a :class:`StrictModel`, so an unknown or mistyped key is
refused at load time.  Problems become one :class:`ConfigError` whose message
names the key (and the file and line for YAML syntax errors); the CLI prints
that message alone, never a traceback.
"""

from __future__ import annotations

import difflib
import os
import types
import typing
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from dolma_pipe.errors import DolmaPipeError


class ConfigError(DolmaPipeError, ValueError):
    """A user's config is wrong; the message says which key and why."""


def absolute_path(path: str) -> str:
    """A local path made absolute where the config is loaded (the driver); URLs unchanged.

    Workers of a Ray cluster run in other working directories: a relative path
    sent to them would name another place.
    """
    if "://" in path and not path.startswith("file://"):
        return path
    local = path[len("file://") :] if path.startswith("file://") else path
    return os.path.abspath(os.path.expanduser(local))


# A local path or glob (made absolute on the driver) or a remote URL (s3://...).
PathStr = Annotated[str, AfterValidator(absolute_path)]


def _module_or_path(module: str) -> str:
    """A ``tagger_modules`` entry: an importable module's name as given; a file (``.py``, or a
    path) made absolute as :func:`absolute_path` makes any path."""
    return absolute_path(module) if module.endswith(".py") or os.sep in module else module


# A module of the user's: an importable name, a local file (made absolute on the driver) or a URL.
ModuleRef = Annotated[str, AfterValidator(_module_or_path)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class RunOptions(StrictModel):
    """How a stage runs, shared by every stage (Dolma's top-level options)."""

    processes: int = Field(
        default_factory=lambda: os.cpu_count() or 1, ge=1, description="worker processes (local executor) or CPUs to request (Ray)"
    )
    ray: bool = Field(False, description="run on a Ray cluster started locally for this run")
    ray_address: str | None = Field(None, description="join the Ray cluster at this address (implies ray)")
    force: bool = Field(False, description="redo input files already marked complete")
    max_errors: int | None = Field(None, ge=0, description="fail the run when more bad records than this are quarantined")
    progress: bool = Field(True, description="show a progress bar on a terminal")
    duplicate_ids: Literal["warn", "fail", "ignore"] = Field(
        "warn", description="documents sharing an id, within a file or across a run: warn, fail the run, or ignore (no check)"
    )


def read_config_file(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: config file is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: invalid YAML/JSON ({problem})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of keys to values, got {type(data).__name__}")
    return data


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """``set_dotted(d, "a.b", 1)`` makes ``d["a"]["b"] == 1``, creating levels as needed; a number
    names an item of a list the config already has (``streams.0.output.path``)."""
    node: Any = data
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        here = ".".join(parts[: i + 1])
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit():
                raise ConfigError(f"key '{'.'.join(parts[:i])}' is a list: '{dotted}' needs an item number there")
            if int(part) >= len(node):
                raise ConfigError(f"config key '{here}': '{'.'.join(parts[:i])}' has {len(node)} item(s), numbered from 0")
            if last:
                node[int(part)] = value
                return
            node = node[int(part)]
            continue
        if not isinstance(node, dict):
            raise ConfigError(f"key '{'.'.join(parts[:i])}' is a value, so '{dotted}' cannot be set inside it")
        if last:
            node[part] = value
            return
        if node.get(part) is None:
            node[part] = {}
        node = node[part]


def _inner_types(annotation: Any) -> list[tuple[Any, bool]]:
    """The types a field's value may hold, each with whether a dict key comes before it in an
    error's ``loc``: ``X | None`` gives ``X``, a list, tuple or set its item type, a dict its value
    type (keyed), ``Annotated[X, ...]`` gives ``X``."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _inner_types(args[0])
    if origin in (typing.Union, types.UnionType):
        return [t for a in args if a is not type(None) for t in _inner_types(a)]
    if origin in (list, tuple, set, frozenset) and args:
        return _inner_types(args[0])
    if origin is dict and len(args) == 2:
        return [(t, True) for t, _ in _inner_types(args[1])]
    return [(annotation, False)]


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The config model at ``loc`` of a validation error (through optional sections, list items
    and dict values), or None when ``loc`` does not lead to exactly one model."""
    current: type[BaseModel] = model
    parts = [p for p in loc if not isinstance(p, int)]  # list indexes: the item's model is taken
    i = 0
    while i < len(parts):
        field = current.model_fields.get(str(parts[i]))
        if field is None:
            return None
        models = [(t, keyed) for t, keyed in _inner_types(field.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
        if len(models) != 1:
            return None
        current, keyed = models[0]
        i += 2 if keyed else 1
    return current


def _home_of(model: type[BaseModel], loc: tuple) -> tuple | None:
    """Where an unknown key nested too deep belongs: the nearest enclosing section that has a field
    of that name (``dedupe.minhash`` -> ``minhash``), or None."""
    name = str(loc[-1])
    for depth in range(len(loc) - 2, -1, -1):
        section = _model_at(model, loc[:depth])
        if section is not None and name in section.model_fields:
            return (*loc[:depth], name)
    return None


def validation_error_lines(model: type[BaseModel], exc: ValidationError, prefix: tuple = ()) -> list[str]:
    """One phrase per problem, naming the key; ``prefix`` is where ``model`` sits in a larger config
    (``("tagger_options", "gopher_v1")`` for a tagger's options model)."""
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        key = ".".join(str(p) for p in (*prefix, *loc))
        if err["type"] == "extra_forbidden":
            parent = _model_at(model, loc[:-1])
            hint = ""
            if parent is not None:
                close = difflib.get_close_matches(str(loc[-1]), list(parent.model_fields), n=1)
                if close:
                    hint = f" (did you mean '{'.'.join([*map(str, (*prefix, *loc[:-1])), close[0]])}'?)"
            home = _home_of(model, loc)
            if home is not None:
                where = "at the top level" if len(home) == 1 and not prefix else f"under '{'.'.join(map(str, (*prefix, *home[:-1])))}'"
                hint = f" (it belongs {where}: '{'.'.join(map(str, (*prefix, *home)))}')"
            lines.append(f"unknown config key '{key}'{hint}")
        elif err["type"] == "missing":
            lines.append(f"config key '{key}' is required")
        else:
            msg = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
            if not key:
                # A check across keys (a model's validator): the message names them; the input is
                # the whole config, which the user just wrote.
                lines.append(msg)
            else:
                lines.append(f"config key '{key}': {msg} (got {_shown(err.get('input'))})")
    return lines


def _shown(value: Any, limit: int = 120) -> str:
    """A value as an error shows it: its repr, cut short when long (a whole section, a long list)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]} ... ({len(text):,} characters)"


def format_validation_error(model: type[BaseModel], exc: ValidationError, source: str) -> str:
    head = f"invalid configuration{f' in {source}' if source else ''}: "
    return head + "; ".join(validation_error_lines(model, exc))


def load_config(
    model: type[BaseModel],
    path: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> Any:
    """Read ``path`` (YAML or JSON), apply dotted ``overrides``, validate into ``model``."""
    data = read_config_file(path) if path else {}
    for key, value in (overrides or {}).items():
        set_dotted(data, key, value)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(model, exc, path or "")) from None
