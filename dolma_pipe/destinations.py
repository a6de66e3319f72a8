"""Whose a destination is: a run never writes over another run.

Every stage writes its outputs, markers and ``_manifest.json`` under one output root. Before a run
writes anything there, :func:`check_destination` refuses, in one line naming the config key to
change:

- a root that holds another stage's run (its ``_manifest.json`` names another stage): ``index``
  into a ``tokenize`` folder would replace tokenize's manifest, ``dedup`` under the attribute name
  a ``tag`` run used would replace its attribute files;
- a root inside another run's folder that holds that run's outputs (an index built into the
  token shards' own ``train/`` folder, documents converted into a tokenize run's ``val/``).

A run of the same stage into its own root is a rerun (it resumes, or redoes what changed), and
a folder nested in another run's without touching its files is allowed: Dolma's layout keeps
attributes (``X/attributes/<name>/``) inside the corpus folder ``X`` that ``convert`` wrote.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from dolma_pipe import storage
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.manifest import MANIFEST


class DestinationTaken(DolmaPipeError, ValueError):
    """A run's destination holds another run; the message names it and the key to change."""


def _manifest_at(folder: str) -> dict[str, Any] | None:
    """The manifest a run left in ``folder``, as plain data (any version's), or None."""
    path = storage.join(folder, MANIFEST)
    try:
        data = orjson.loads(storage.read_bytes(path))
    except (FileNotFoundError, storage.StorageError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("stage"), str):
        return None
    return data


def _parents(root: str) -> list[str]:
    """The folders above ``root``, nearest first (up to the file system's root, or the bucket)."""
    if storage.is_remote(root):
        scheme, rest = root.split("://", 1)
        parts = rest.rstrip("/").split("/")
        return [f"{scheme}://" + "/".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]
    out = []
    here = os.path.abspath(storage.local_path(root))
    while os.path.dirname(here) != here:
        here = os.path.dirname(here)
        out.append(here)
    return out


def _outputs_under(manifest: dict[str, Any], owner: str, root: str) -> list[str]:
    """The files ``manifest``'s run (whose root is ``owner``) recorded that lie under ``root``."""
    if storage.is_remote(root):
        rel = root.rstrip("/")[len(owner.rstrip("/")) + 1 :]
    else:
        rel = os.path.relpath(os.path.abspath(storage.local_path(root)), owner)
    prefix = rel.rstrip("/") + "/"
    found = []
    for phase in manifest.get("phases") or []:
        for task in (phase.get("tasks") or {}).values():
            for path in task.get("outputs") or {}:
                if path.startswith(prefix):
                    found.append(path)
    return sorted(found)


def _describe(manifest: dict[str, Any]) -> str:
    status = manifest.get("status", "?")
    started = str(manifest.get("started", ""))[:19].replace("T", " ")
    return f"{_a(manifest['stage'])} run ({status}{f', started {started}' if started else ''})"


def _a(name: str) -> str:
    return ("an " if name[:1] in "aeiou" else "a ") + name


def check_destination(stage_name: str, root: str, key: str) -> None:
    """Refuse ``root`` as the output root of a ``stage_name`` run when it holds another run
    (see the module's docstring); ``key`` is the config key that chose it."""
    here = _manifest_at(root)
    if here is not None and here["stage"] != stage_name:
        raise DestinationTaken(
            f"{root} holds {_describe(here)}; {_a(stage_name)} run would write over it: change '{key}' "
            f"(every run needs a folder of its own)"
        )
    for folder in _parents(root):
        owner = _manifest_at(folder)
        if owner is None:
            continue
        clash = _outputs_under(owner, folder, root)
        if clash:
            shown = ", ".join(clash[:2]) + (f" and {len(clash) - 2:,} more" if len(clash) > 2 else "")
            raise DestinationTaken(
                f"{root} is inside the folder of {_describe(owner)} at {folder} and holds its outputs ({shown}); "
                f"{_a(stage_name)} run must not write among them: change '{key}'"
            )
