"""Where bytes live: local paths and object storage (``s3://``) behind one small API.

Opening goes through smart-open, listing and metadata through the filesystem or
boto3.  Writes are atomic at the level of one file: a local file is written under
a temporary name in its own directory and renamed when closed without error, and
an S3 object only appears when its (multipart) upload completes, so a killed run
never leaves an output that looks finished.  The S3 endpoint follows boto3's
usual configuration (``AWS_ENDPOINT_URL``, profiles, ...).
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import glob as _glob
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from dolma_pipe.errors import DolmaPipeError


class StorageError(DolmaPipeError, OSError):
    """A path could not be read, listed or written; the message names the path."""


def is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def local_path(path: str) -> str:
    """A local path without its ``file://`` prefix."""
    return path[len("file://") :] if path.startswith("file://") else path


_local = local_path


def _check_remote(path: str) -> None:
    if not path.startswith("s3://"):
        raise StorageError(f"unsupported remote path {path!r}: only local paths and s3:// are supported")


def split_s3(path: str) -> tuple[str, str]:
    """(bucket, key) of an ``s3://`` path; StorageError for any other remote scheme."""
    _check_remote(path)
    bucket, _, key = path[len("s3://") :].partition("/")
    return bucket, key


_S3_CLIENT = None


def s3_client():
    """One boto3 client per process (clients are thread-safe and costly to build)."""
    global _S3_CLIENT
    if _S3_CLIENT is None:
        import boto3

        _S3_CLIENT = boto3.client("s3")
    return _S3_CLIENT


def _transport_params(path: str) -> dict | None:
    return {"client": s3_client()} if path.startswith("s3://") else None


def join(base: str, *parts: str) -> str:
    out = base.rstrip("/")
    for part in parts:
        if part:
            out = f"{out}/{part.strip('/')}"
    return out


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    mtime: float
    # S3's ETag (a digest of the content): S3 times have whole seconds, so an object rewritten
    # with the same size in the same second has the same size and mtime. "" for local files.
    etag: str = ""


def stat(path: str) -> FileInfo:
    if is_remote(path):
        bucket, key = split_s3(path)
        try:
            head = s3_client().head_object(Bucket=bucket, Key=key)
        except Exception as exc:  # botocore raises many types; all mean "cannot stat"
            raise StorageError(f"{path}: cannot stat remote object ({exc})") from exc
        return FileInfo(path, int(head["ContentLength"]), head["LastModified"].timestamp(), head.get("ETag", ""))
    try:
        st = os.stat(_local(path))
    except OSError as exc:
        raise StorageError(f"{path}: {exc.strerror}") from exc
    return FileInfo(path, st.st_size, st.st_mtime)


def exists(path: str) -> bool:
    try:
        stat(path)
        return True
    except StorageError:
        return False


def open_read(path: str) -> IO[bytes]:
    """Raw bytes of a file, no decompression (formats decide that themselves)."""
    try:
        if is_remote(path):
            _check_remote(path)
            import smart_open  # imported on first remote use: it loads every transport (~0.2 s)

            return smart_open.open(path, "rb", compression="disable", transport_params=_transport_params(path))
        return open(_local(path), "rb")
    except Exception as exc:
        raise StorageError(f"{path}: cannot open for reading ({exc})") from exc


_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


@contextlib.contextmanager
def open_write_atomic(path: str) -> Iterator[IO[bytes]]:
    """Write raw bytes to ``path`` so that it only ever appears complete."""
    if is_remote(path):
        _check_remote(path)
        import smart_open

        # smart-open aborts the multipart upload if the block raises.
        with smart_open.open(path, "wb", compression="disable", transport_params=_transport_params(path)) as fh:
            yield fh
        return
    final = _local(path)
    directory = os.path.dirname(final) or "."
    tmp = os.path.join(directory, f".{os.path.basename(final)}.tmp-{uuid.uuid4().hex[:12]}")
    try:
        os.makedirs(directory, exist_ok=True)
        fh = open(tmp, "wb")
    except OSError as exc:
        raise StorageError(f"{final}: cannot write ({exc.strerror or exc})") from exc
    try:
        try:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()
            os.replace(tmp, final)
        except OSError as exc:
            # A full disk, a quota, a read-only filesystem: one line naming the file. Other OS
            # errors raised inside the block (reading another file) are that file's to name.
            if exc.errno in _WRITE_ERRNOS or exc.filename in (tmp, final):
                raise StorageError(f"{final}: cannot write ({exc.strerror or exc})") from exc
            raise
    except BaseException:
        with contextlib.suppress(OSError):  # closing flushes what is buffered: a full disk again
            fh.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class ScratchFull(StorageError):
    """The node's local scratch space (``TMPDIR``) has no room for what a task copies there."""


@contextlib.contextmanager
def local_scratch(what: str, need: int | None = None) -> Iterator[None]:
    """A block that copies remote files into the node's local scratch space (``TMPDIR``: S3 work
    files mapped, shards staged before upload). A full or read-only scratch becomes one line
    saying it is the local scratch, where, how much ``what`` needs there and what to do."""
    try:
        yield
    except OSError as exc:
        cause = exc.__cause__ if isinstance(exc, StorageError) else exc
        if not isinstance(cause, OSError) or cause.errno not in _WRITE_ERRNOS:
            raise
        import tempfile

        where = tempfile.gettempdir()
        try:
            free = f", {shutil.disk_usage(where).free:,} bytes free"
        except OSError:
            free = ""
        needs = f" needs about {need:,} bytes there{free}" if need else f" needs more room there{free}"
        raise ScratchFull(
            f"the local scratch space {where} (TMPDIR) cannot hold what {what} copies there ({cause.strerror or cause}): "
            f"it{needs}; set TMPDIR to a local folder with room and rerun"
        ) from exc


def write_bytes(path: str, data: bytes) -> None:
    with open_write_atomic(path) as fh:
        fh.write(data)


def read_bytes(path: str) -> bytes:
    with open_read(path) as fh:
        return fh.read()


@contextlib.contextmanager
def atomic_local_path(path: str) -> Iterator[str]:
    """For a writer that needs a path, not a file object (a Rust kernel, a library's ``save``, a
    download): a hidden temporary path beside the local file ``path``, renamed to it when the block
    ends cleanly and removed when it raises, so ``path`` only ever appears whole."""
    final = local_path(path)
    directory = os.path.dirname(final) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(final)}.tmp-{uuid.uuid4().hex[:12]}")
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


COPY_CHUNK = 16 << 20


def download(path: str, local: str, *, durable: bool = False) -> None:
    """The file or object at ``path`` copied into the local file ``local`` (for readers that need a
    local file: memory maps, ``train.shards``); ``durable`` syncs it to disk before returning."""
    with open_read(path) as src, open(local, "wb") as dst:
        shutil.copyfileobj(src, dst, COPY_CHUNK)
        if durable:
            dst.flush()
            os.fsync(dst.fileno())


def upload(local: str, path: str) -> None:
    """A local file copied to ``path`` (local or remote) as :func:`open_write_atomic` writes: it
    appears whole or not at all."""
    with open(local, "rb") as src, open_write_atomic(path) as dst:
        shutil.copyfileobj(src, dst, COPY_CHUNK)


def remove(path: str) -> None:
    if is_remote(path):
        bucket, key = split_s3(path)
        s3_client().delete_object(Bucket=bucket, Key=key)
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_local(path))


def _s3_glob(pattern: str) -> list[FileInfo]:
    bucket, key_pattern = split_s3(pattern)
    # List from the longest literal prefix, then match the rest ourselves.
    prefix = re.split(r"[*?\[]", key_pattern, maxsplit=1)[0]
    regex = _glob_to_regex(key_pattern)
    out = []
    paginator = s3_client().get_paginator("list_objects_v2")
    try:
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                # Keys ending in "/" are the console's folder placeholders, not files.
                if not obj["Key"].endswith("/") and regex.fullmatch(obj["Key"]):
                    # The listing carries size and mtime: no HEAD request per file.
                    info = FileInfo(f"s3://{bucket}/{obj['Key']}", int(obj["Size"]), obj["LastModified"].timestamp(), obj.get("ETag", ""))
                    out.append(info)
    except Exception as exc:
        raise StorageError(f"{pattern}: cannot list remote objects ({exc})") from exc
    return out


def _glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Glob with ``**`` crossing directory levels and ``*`` staying within one."""
    parts = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            parts.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            parts.append(".*")
            i += 2
        elif pattern[i] == "*":
            parts.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            parts.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i)
            if end == -1:
                parts.append(re.escape(pattern[i]))
                i += 1
            else:
                parts.append(fnmatch.translate(pattern[i : end + 1])[4:-3])
                i = end + 1
        else:
            parts.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(parts))


def glob_info(pattern: str) -> list[FileInfo]:
    """Files matching ``pattern`` (``**`` recurses) with size and mtime, sorted by path.

    A pattern without wildcards matches itself if it exists.  Hidden files
    (such as in-progress temporaries) are not matched by wildcards.
    """
    if is_remote(pattern):
        if re.search(r"[*?\[]", pattern):
            return sorted(_s3_glob(pattern), key=lambda f: f.path)
        return [stat(pattern)] if exists(pattern) else []
    matches = _glob.glob(local_path(pattern), recursive=True)
    return [stat(p) for p in sorted(matches) if os.path.isfile(p)]


def glob(pattern: str) -> list[str]:
    """Sorted paths of the files matching ``pattern`` (see :func:`glob_info`)."""
    return [f.path for f in glob_info(pattern)]


def sizes(paths: list[str]) -> dict[str, int | None]:
    """The size of each file, or None where there is none: one stat a local file, one listing a
    remote folder (not a request per object)."""
    out: dict[str, int | None] = {}
    remote: dict[str, list[str]] = {}
    for path in paths:
        if is_remote(path):
            remote.setdefault(path.rsplit("/", 1)[0], []).append(path)
            continue
        try:
            out[path] = os.stat(_local(path)).st_size
        except OSError:
            out[path] = None
    for folder, wanted in remote.items():
        listed = {f.path: f.size for f in _s3_glob(_glob.escape(folder) + "/*")}
        for path in wanted:
            out[path] = listed.get(path)
    return out
