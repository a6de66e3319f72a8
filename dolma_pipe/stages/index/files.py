"""The files of an index, checked: what one build task writes, what a rerun and a query check.

A build task writes its part files through :class:`TaskFiles`: each under a hidden temporary
name renamed when whole (a killed task leaves no whole-looking file), with the xxh3-64 of the
bytes as written (the suffix array's from Rust as it packs it, the others' from memory). Before
the task calls its parts done, :meth:`TaskFiles.verify` reads every file back and compares: what
the record says is what is on disk. An index on S3 is built in a local scratch folder and then
uploaded through the storage layer (:meth:`TaskFiles.publish`), each object's ETag recorded.

:func:`damaged_parts` finds a finished task's files that no longer match (a flipped bit that a
size cannot show; an S3 object replaced since): the runner redoes those tasks. The query side
(:mod:`.query`) checks the same digests when it opens an index.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dolma_pipe import storage, suffix
from dolma_pipe.errors import DolmaPipeError

from .format import INFO, hexdigest

# Files hashed at once: hashing runs without the GIL, and a part's files are read from the page
# cache or the disk at their speed; a few threads keep a disk busy.
HASH_THREADS = min(8, os.cpu_count() or 1)


class SuffixIndexError(DolmaPipeError, ValueError):
    """An index cannot be built or used as asked; the message says why and what to do."""


def hash_files(paths: Iterable[str]) -> dict[str, str | None]:
    """The xxh3-64 (hex) of each local file, read on threads; None for a file that is not there."""

    def one(path: str) -> str | None:
        try:
            return hexdigest(suffix.file_xxh3(path))
        except (OSError, ValueError):
            return None

    paths = list(dict.fromkeys(paths))
    if not paths:
        return {}
    with ThreadPoolExecutor(min(HASH_THREADS, len(paths))) as pool:
        return dict(zip(paths, pool.map(one, paths)))


class TaskFiles:
    """The files one build task writes under the index ``root`` (paths relative to it)."""

    def __init__(self, root: str):
        self.root = root
        self.remote = storage.is_remote(root)
        # An S3 index is built here, then uploaded; a local one in place.
        self.local_root = tempfile.mkdtemp(prefix="dolma-pipe-index-") if self.remote else storage.local_path(root)
        self.digests: dict[str, str] = {}  # rel -> xxh3 hex of the bytes written
        self.kept: list[str] = []  # rels published with the index (not scratch)

    def local(self, rel: str) -> str:
        return os.path.join(self.local_root, rel)

    def path(self, rel: str) -> str:
        """Where ``rel`` ends up: in the index (local or S3)."""
        return storage.join(self.root, rel)

    def write(self, rel: str, write: Callable[[str], Any], digest: Callable[[Any], int], *, keep: bool = True) -> Any:
        """``write(tmp)`` writes the file and returns what ``digest`` turns into the xxh3-64 of its
        bytes; renamed to ``rel`` when whole. Returns what ``write`` returned."""
        with storage.atomic_local_path(self.local(rel)) as tmp:
            result = write(tmp)
        self.digests[rel] = hexdigest(digest(result))
        if keep:
            self.kept.append(rel)
        return result

    def write_bytes(self, rel: str, data: bytes, *, keep: bool = True) -> None:
        def write(tmp: str) -> bytes:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            return data

        self.write(rel, write, suffix.bytes_xxh3, keep=keep)

    def rename(self, old: str, new: str) -> None:
        os.makedirs(os.path.dirname(self.local(new)), exist_ok=True)
        os.replace(self.local(old), self.local(new))
        self.digests[new] = self.digests.pop(old)
        self.kept = [new if r == old else r for r in self.kept]

    def verify(self) -> None:
        """Every file read back from disk hashes to what was written; else the task fails (and a
        rerun redoes it), naming the file."""
        found = hash_files(self.local(rel) for rel in self.digests)
        for rel, want in self.digests.items():
            got = found[self.local(rel)]
            if got != want:
                what = "is gone" if got is None else f"hashes to {got}, not the {want} of the bytes written"
                raise SuffixIndexError(
                    f"{self.path(rel)}: the file written {what} (a disk or a writer beside this one?); rerun dolma-pipe index"
                )

    def publish(self) -> dict[str, str]:
        """An S3 index: uploads the kept files (their ETags by rel); a local one is in place."""
        if not self.remote:
            return {}
        etags = {}
        for rel in self.kept:
            storage.upload(self.local(rel), self.path(rel))
            etags[rel] = storage.stat(self.path(rel)).etag
        return etags

    def close(self) -> None:
        if self.remote:
            shutil.rmtree(self.local_root, ignore_errors=True)

    def __enter__(self) -> TaskFiles:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def damaged_parts(root: str, tasks: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Finished build tasks (key -> their recorded ``data``) whose files no longer match what the
    build wrote: ``{key: (path, problem)}``. A local index's files are hashed (on threads); an S3
    index's objects are listed and their ETags compared with those recorded at upload."""
    out: dict[str, tuple[str, str]] = {}
    wanted: dict[str, dict[str, str]] = {}  # key -> {path: digest or ETag}
    for key, data in tasks.items():
        files = data.get("files")
        if not files:  # recorded by a build without checksums (index format 1)
            out[key] = (storage.join(root, INFO), "without checksums (built by an older dolma-pipe)")
            continue
        recorded = data.get("etags", {}) if storage.is_remote(root) else files
        wanted[key] = {storage.join(root, rel): value for rel, value in recorded.items()}
    if storage.is_remote(root):
        listed = {f.path: f.etag for f in storage.glob_info(storage.join(root, "**"))}
        now: dict[str, str | None] = {p: listed.get(p) for w in wanted.values() for p in w}
    else:
        now = hash_files(storage.local_path(p) for w in wanted.values() for p in w)
        now = {p: now[storage.local_path(p)] for w in wanted.values() for p in w}
    for key, files in wanted.items():
        for path, value in sorted(files.items()):
            if now[path] is None:
                out[key] = (path, "missing")
                break
            if now[path] != value:
                out[key] = (path, "damaged (its checksum differs from the one recorded when it was built)")
                break
    return out


def changed_sources(tasks: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Finished build tasks whose S3 source (a shard, its sidecar, a document file) was rewritten
    since it was indexed: ``{key: (path, problem)}``. Told by the object's ETag, recorded at build:
    an S3 time has whole seconds, so a rewrite in the same second keeps the size and time the
    runner compares."""
    out: dict[str, tuple[str, str]] = {}
    for key, data in tasks.items():
        source = data.get("source") or {}
        for f in (source, source.get("sidecar") or {}):
            path, etag = f.get("path", ""), f.get("etag", "")
            if not etag or not storage.is_remote(path):
                continue
            try:
                now = storage.stat(path).etag
            except storage.StorageError:
                now = None
            if now != etag:
                out[key] = (path, "missing" if now is None else "changed since it was indexed (its ETag differs)")
                break
    return out
