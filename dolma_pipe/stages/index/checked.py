"""An index's files on this machine, checked against its record before a query reads them.

A query memory-maps every part's files and the token shards they index, so they must be local
files, and the ones the build described:

- a local index's part files are read in place, each hashed (xxh3, on threads) against the
  digest the build recorded; a local token shard is hashed against the source's digest, a copy
  of an S3 shard (kept in the index) too, and the S3 object is asked (one HEAD) whether it is
  still the one indexed;
- an index on S3 is read through a local cache folder (``cache``, by default
  ``dolma-pipe-index-cache`` in the temporary directory): each part file, and each S3 shard it
  indexes, is downloaded once, hashed, and kept under its digest; a later query re-hashes the
  cached copy (a copy that no longer matches is fetched again).

A file that does not match is an :class:`IndexQueryError` naming the part (or shard) and saying
to rerun ``dolma-pipe index``, which rebuilds only what is damaged (:mod:`.files`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from dolma_pipe import storage, suffix
from dolma_pipe.errors import DolmaPipeError

from .files import HASH_THREADS, hash_files
from .format import FORMAT, IndexInfo, Part, Source, hexdigest, part_path

CACHE = "dolma-pipe-index-cache"


class IndexQueryError(DolmaPipeError, ValueError):
    """An index cannot answer as asked (missing, changed since it was built, damaged, a text for an
    index without a tokenizer...); the message says why."""


@dataclass(frozen=True)
class _Want:
    """A file the query reads: where it is here, what it must hash to, and whose it is."""

    local: str
    digest: str
    remote: str | None  # fetched from here into ``local`` when missing or not matching
    # A source indexed (a shard; it changed: rebuild) or one of the index's own files (named by
    # ``what``, e.g. "part train/part-00000"; it is damaged: a rerun rebuilds it).
    source: str | None = None
    what: str = ""

    def damaged(self, root: str) -> str:
        if self.source is not None:
            return _changed(self.source, root)
        shown = self.remote or self.local
        return f"{root}: {self.what} is damaged ({shown} is not the file its build wrote): rerun dolma-pipe index to rebuild it (it rebuilds damaged parts only)"

    def missing(self, root: str) -> str:
        if self.source is not None:
            return f"{self.source} is gone since the index {root} was built from it; rebuild the index with dolma-pipe index"
        return f"{root}: {self.what}: {self.local} is missing; rerun dolma-pipe index to rebuild it"


@dataclass(frozen=True)
class LocalFiles:
    """Where a query reads each file: part files by (part name, suffix), each source's text."""

    parts: dict[tuple[str, str], str]
    sources: list[str]

    def part(self, part: Part, suffix: str) -> str:
        return self.parts[(part.name, suffix)]


def default_cache() -> str:
    return os.path.join(tempfile.gettempdir(), CACHE)


def local_files(root: str, info: IndexInfo, *, verify: bool, cache: str | None, part_files: tuple[str, ...]) -> LocalFiles:
    """Every file the index's queries read, as local paths, checked (see the module docstring)."""
    if info.format != FORMAT:
        raise IndexQueryError(
            f"{root}: built by an older dolma-pipe (index format {info.format}, no checksums of its parts): "
            "rerun dolma-pipe index to rebuild it"
        )
    remote = storage.is_remote(root)
    here = _cache_folder(root, cache) if remote else storage.local_path(root)
    wants: list[_Want] = []
    parts: dict[tuple[str, str], str] = {}
    for p in info.parts:
        for s in part_files:
            if s not in p.files:
                raise IndexQueryError(f"{root}: part {p.name} records no checksum of its {s} file: rerun dolma-pipe index to rebuild it")
            local = part_path(here, p.name, s)
            parts[(p.name, s)] = local
            wants.append(_Want(local, p.files[s], part_path(root, p.name, s) if remote else None, what=f"part {p.name}"))
    sources = []
    for i, source in enumerate(info.sources):
        text, more = _source_files(root, here, i, source, info.kind)
        sources.append(text)
        wants += more
    _check(root, wants, verify)
    return LocalFiles(parts, sources)


def _cache_folder(root: str, cache: str | None) -> str:
    """A folder of this machine for the index at ``root`` (an S3 URL): one per index."""
    key = hashlib.sha256(root.rstrip("/").encode()).hexdigest()[:16]
    return os.path.join(cache or default_cache(), f"{root.rstrip('/').rsplit('/', 1)[-1]}-{key}")


def _source_files(root: str, here: str, i: int, source: Source, kind: str) -> tuple[str, list[_Want]]:
    """The local file a query reads a source's text from (a token shard; none for documents,
    whose text is in the parts), and the checks it takes."""
    wants: list[_Want] = []
    for f in (source, source.sidecar):
        if f is None or not storage.is_remote(f.path):
            continue
        # The S3 object indexed must still be the one indexed (the copy answers for it).
        try:
            now = storage.stat(f.path)
        except storage.StorageError:
            raise IndexQueryError(f"{f.path} is gone since the index {root} was built from it; rebuild the index") from None
        if now.size != f.size or (f.etag and now.etag != f.etag):
            raise IndexQueryError(_changed(f.path, root))
    if kind != "tokens":
        if not storage.is_remote(source.path) and source.xxh3:
            wants.append(_Want(source.path, source.xxh3, None, source=source.path))
        return source.path, wants
    sidecar = source.sidecar
    if source.local_copy is not None:  # an S3 shard copied into a local index
        text = os.path.join(here, source.local_copy)
        side = text[: -len(".npy")] + ".csv.gz"
        wants.append(_Want(text, source.xxh3, None, what=f"its copy of {source.path}"))
        if sidecar is not None:
            wants.append(_Want(side, sidecar.xxh3, None, what=f"its copy of {sidecar.path}"))
        return text, wants
    if storage.is_remote(source.path):  # an S3 index of S3 shards: fetched into the cache
        text = os.path.join(here, "sources", f"{i:05d}-{source.path.rsplit('/', 1)[-1]}")
        wants.append(_Want(text, source.xxh3, source.path, source=source.path))
        if sidecar is not None:
            wants.append(_Want(text[: -len(".npy")] + ".csv.gz", sidecar.xxh3, sidecar.path, source=sidecar.path))
        return text, wants
    for f in (source, sidecar):
        if f is not None:
            wants.append(_Want(f.path, f.xxh3, None, source=f.path))
    return source.path, wants


def _changed(path: str, root: str) -> str:
    return (
        f"{path} changed since the index {root} was built from it (its checksum differs); "
        "this index does not describe it any more: rebuild it with dolma-pipe index"
    )


def _check(root: str, wants: list[_Want], verify: bool) -> None:
    """Each file present and (when ``verify``, or fetched now) hashing to its digest; a remote
    one fetched when missing or not matching."""
    missing = [w for w in wants if not os.path.exists(w.local)]
    gone = next((w for w in missing if w.remote is None), None)
    if gone is not None:
        raise IndexQueryError(gone.missing(root))
    found = hash_files(w.local for w in wants if w not in missing) if verify else {}
    for w in wants:
        if w.remote is None and verify and found[w.local] != w.digest:
            raise IndexQueryError(w.damaged(root))
    stale = [w for w in wants if w.remote is not None and (w in missing or (verify and found[w.local] != w.digest))]
    if stale:
        with ThreadPoolExecutor(min(HASH_THREADS, len(stale))) as pool:
            for w, got in zip(stale, pool.map(_fetch, stale)):
                if got != w.digest:
                    raise IndexQueryError(w.damaged(root))


def _fetch(w: _Want) -> str:
    """Downloads ``w.remote`` to ``w.local`` (under a temporary name, renamed when whole); its digest."""
    assert w.remote is not None
    with storage.atomic_local_path(w.local) as tmp:
        storage.download(w.remote, tmp)
    return hexdigest(suffix.file_xxh3(w.local))
