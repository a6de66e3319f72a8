"""What an index of token shards is built from, and where it may go.

- :func:`list_shards`: every shard under the paths given, local or on S3, by the one rule of
  ``train.shards`` (:func:`~train.shards.select_shards`: no hidden or ``_`` names, nothing under
  another run's folder; :func:`~train.shards.check_shard_runs`: no shards of an unfinished run),
  each named by its path below the folder the given paths share, so shards of equal names in two
  folders (``tok/train`` and ``tok/val``) are ``train/part-00000.npy`` and
  ``val/part-00000.npy``, and one folder's shards keep their own names;
- :func:`refuse_destination_among_shards`: an index goes in a folder of its own.
"""

from __future__ import annotations

import os

from dolma_pipe import storage
from dolma_pipe.destinations import DestinationTaken
from train.shards import TOKENS_SUFFIX, ShardError, check_shard_runs, find_shards, select_shards


def shard_folders(given: list[str]) -> list[str]:
    """The folder of each path given as shards: itself, or a shard file's folder."""
    return [_parent(p) if p.endswith(TOKENS_SUFFIX) else p.rstrip("/") for p in given]


def _parent(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[0]


def _normalized(path: str) -> str:
    """A path to compare: a local one with its links resolved; a URL as it is."""
    return path.rstrip("/") if storage.is_remote(path) else os.path.realpath(storage.local_path(path))


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _common_folder(folders: list[str]) -> str:
    """The longest folder holding all of ``folders`` (``/``-joined components; a URL's too)."""
    split = [f.rstrip("/").split("/") for f in folders]
    n = 0
    while all(len(s) > n and s[n] == split[0][n] for s in split):
        n += 1
    return "/".join(split[0][:n])


def _found_shards(given: list[str]) -> list[storage.FileInfo]:
    """Every shard under the paths given (local or remote), each once, by ``train.shards``' rule."""
    found: dict[str, storage.FileInfo] = {}
    local = [p for p in given if not storage.is_remote(p)]
    if local:
        for path, _ in find_shards(local):
            found.setdefault(str(path), storage.stat(str(path)))
    remote = []
    for p in (p for p in given if storage.is_remote(p)):
        if p.endswith(TOKENS_SUFFIX):
            if not storage.exists(p):
                raise ShardError(f"data path {p!r} does not exist")
            remote.append(storage.stat(p))
            continue
        listing = {f.path: f for f in storage.glob_info(storage.join(p, "**"))}
        selected = select_shards(p, list(listing), _read_remote)
        if not selected:
            raise ShardError(f"no {TOKENS_SUFFIX} token shards under {p}")
        remote += [listing[f] for f in selected]
    check_shard_runs([f.path for f in remote], _read_remote)
    for info in remote:
        found.setdefault(info.path, info)
    return list(found.values())


def _read_remote(path: str) -> bytes | None:
    return storage.read_bytes(path) if storage.exists(path) else None


def list_shards(given: list[str]) -> list[tuple[storage.FileInfo, str]]:
    """Every shard under the paths given (see the module docstring) with its name, sorted by name."""
    common = _common_folder(shard_folders(given))
    return sorted(((info, info.path[len(common) :].lstrip("/")) for info in _found_shards(given)), key=lambda x: x[1])


def refuse_destination_among_shards(destination: str, shards: list[str], runs: list[str]) -> None:
    """An index in the folder of the shards it indexes (or of the tokenize runs in ``runs`` that
    wrote them), or holding them, would put its files where readers of shards look, and its
    manifest over the tokenize run's: refused before anything is written, as the runner refuses
    a destination that holds another run (:mod:`dolma_pipe.destinations`), and further: an index
    inside those folders is refused even where it would touch no file of theirs."""
    dest = _normalized(destination)
    folders = []
    for f in shard_folders(shards):
        run = next((r for r in runs if _within(_normalized(f), _normalized(r))), None)
        folders.append((f, "of the shards it indexes" + (f" (written by the tokenize run in {run})" if run else "")))
    folders += [(r, "of the tokenize run that wrote the shards") for r in runs]
    relations = (
        ("is", lambda where: dest == where),
        ("is inside", lambda where: _within(dest, where)),
        ("holds", lambda where: _within(where, dest)),
    )
    for how, holds in relations:  # the closest relation named first
        for folder, what in folders:
            if holds(_normalized(folder)):
                raise DestinationTaken(
                    f"config key 'destination': {destination} {how} the folder {folder} {what}; "
                    "an index goes in a folder of its own, outside the shards' folders"
                )
