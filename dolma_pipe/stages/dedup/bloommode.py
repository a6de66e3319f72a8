"""Bloom mode: Dolma's ``bloom_filter`` section, deterministic.

Dolma's workers test-and-set one shared filter in whatever order they run, so which copy is
"first" changes from run to run. Here the keys are hashed in parallel by the scan (one task per
file) and tested-and-set in the global order by one task (``bloom``): file after file, line
after line, so the same copy survives on every run and for any number of processes; then the
filter is saved. A read-only filter needs no order: the scan looks keys up directly.

The filter file (``dolma_pipe.bloom`` format: magic, parameters, hash seed, checksums) gets a
sidecar ``<file>.dedup.json`` naming the kind of key it holds (documents by which key, or
paragraphs by which separator and n-grams). A file that is not a filter, is corrupt (checksum),
holds another kind of key, or (when it is extended) has another size or number of hash
functions than the config asks for is refused with a message naming it.

Keys inserted are 16-byte digests of the key text (the same digests exact mode compares), so a
filter made by ``dolma-pipe dedup`` is read by ``dolma-pipe dedup``. A false positive marks a
first occurrence as a duplicate, so in this mode a group can lose every copy with about the
filter's false-positive rate; exact mode (no ``bloom_filter``) cannot.

Resuming: the filter as it was before the run is remembered (its checksum, and a copy under the
work directory when it existed), so a rerun after the result was published redoes nothing, and
``--force`` redoes the run from the same starting filter. That record is written before the file
is replaced (a kill while publishing cannot make the run's own result look like its start); a
filter whose sidecar names this run while the record is gone (work files deleted) is refused,
since extending it again would mark every key it holds as a duplicate.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import orjson

from dolma_pipe import storage, workdir
from dolma_pipe._rust import BloomSetter, bloom_file_header, bucketed_file
from dolma_pipe.bloom import DEFAULT_SEED, BloomFileError, BloomFilter
from dolma_pipe.config import ConfigError
from dolma_pipe.stage import RunContext, StepResult, Task, TaskOutput
from dolma_pipe.workdir import WorkFileError

from .config import DedupConfig, shape
from .workfiles import DOC, DUP, PARA, Layout, read_slice

SIDECAR_SUFFIX = ".dedup.json"
FORMAT = "dolma-pipe dedup bloom keys 1"


def key_kind(config: DedupConfig) -> dict[str, Any]:
    """What the filter's keys are: the same kind is required to use a filter again."""
    d = config.dedupe
    if d.documents is not None:
        return {"keys": "documents", "key": d.documents.key}
    assert d.paragraphs is not None
    ng = d.paragraphs.by_ngram
    kind: dict[str, Any] = {"keys": "paragraphs", "separator": d.paragraphs.paragraph_separator}
    if ng is not None and ng.ngram_length > 0:
        kind.update(ngram_length=ng.ngram_length, stride=max(ng.stride, 1))
    return kind


def header(path: str) -> dict[str, int]:
    """The fields of a filter file's header, read by the format's own code (the Rust crate's)."""
    return {k: int(v) for k, v in bloom_file_header(path).items()}


def _copy(src: Any, dst: Any) -> None:
    """``shutil.copyfileobj``, done by the kernel (sendfile) when both ends are local files: a
    filter is tens of MiB, and the copy then never passes through this process's memory."""
    try:
        fin, fout = src.fileno(), dst.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        shutil.copyfileobj(src, dst, 1 << 20)
        return
    dst.flush()
    size = os.fstat(fin).st_size
    done = 0
    try:
        while done < size and (sent := os.sendfile(fout, fin, done, size - done)):
            done += sent
    except OSError:
        if done:
            raise
    if done < size:  # no sendfile for these files: the copy by hand
        src.seek(done)
        shutil.copyfileobj(src, dst, 1 << 20)


def local_copy(path: str) -> str:
    """A local path holding the filter at ``path`` (remote filters are downloaded once per machine)."""
    if not storage.is_remote(path):
        return storage.local_path(path)
    info = storage.stat(path)
    tag = hashlib.sha256(f"{path}\0{info.size}\0{info.mtime}\0{info.etag}".encode()).hexdigest()[:16]
    local = os.path.join(tempfile.gettempdir(), "dolma-pipe-bloom", f"{tag}.bloom")
    if not os.path.exists(local):
        with storage.atomic_local_path(local) as tmp, storage.open_read(path) as src, open(tmp, "wb") as dst:
            _copy(src, dst)
    return local


@contextlib.contextmanager
def named_as(path: str, local: str) -> Iterator[None]:
    """Errors about ``local``, the downloaded copy of ``path``, name ``path``: the file the user gave."""
    try:
        yield
    except BloomFileError as e:
        if local == path or local not in str(e):
            raise
        raise BloomFileError(str(e).replace(local, path)) from None


def _sidecar(path: str) -> dict[str, Any] | None:
    try:
        return orjson.loads(storage.read_bytes(path + SIDECAR_SUFFIX))
    except (FileNotFoundError, storage.StorageError):
        return None
    except orjson.JSONDecodeError:
        raise BloomFileError(f"{path}{SIDECAR_SUFFIX}: damaged (not JSON); delete the filter and its sidecar to start over") from None


def check_filter(config: DedupConfig, path: str, local: str, bits: int, hashes: int) -> tuple[dict[str, int], dict[str, Any]]:
    """Refuses a filter file that is not a filter, is corrupt, or was made for other keys or sizes;
    its header fields and its sidecar."""
    bf = config.bloom_filter
    assert bf is not None
    with named_as(path, local):
        with BloomFilter.open_shared(local, readonly=True, verify=True) as f:
            if not f.sealed:
                raise BloomFileError(f"{path}: not a usable Bloom filter file: it is unsealed (a writer crashed or is still running)")
        head = header(local)
    side = _sidecar(path)
    if side is None or side.get("format") != FORMAT:
        raise BloomFileError(
            f"{path}: has no {os.path.basename(path)}{SIDECAR_SUFFIX} saying which keys it holds; it was not made by "
            "dolma-pipe dedup (or the sidecar was lost): rebuild it"
        )
    want = key_kind(config)
    if side.get("kind") != want:
        raise BloomFileError(f"{path}: stale: it holds {side.get('kind')}, this config asks for {want}; use another file")
    if not bf.read_only:
        if (head["num_bits"], head["num_hashes"]) != (bits, hashes):
            raise BloomFileError(
                f"{path}: stale: made with {head['num_bits']} bits and {head['num_hashes']} hash functions, this config asks for "
                f"{bits} and {hashes}; give the same bloom_filter sizes or another file"
            )
    if head["seed"] != DEFAULT_SEED:
        raise BloomFileError(f"{path}: stale: made with hash seed {head['seed']:#x}, dolma-pipe dedup uses {DEFAULT_SEED:#x}")
    return head, side


class FilterState:
    """The filter a run starts from: its identity for the fingerprint, and where to load it."""

    def __init__(self, config: DedupConfig, layout: Layout, root: str):
        bf = config.bloom_filter
        assert bf is not None
        self.config = config
        self.layout = layout
        self.path = bf.file
        # The size of the filter the run makes or extends, by Dolma's sizing rule: resolved here,
        # once (the run records it). A read-only filter is used at the size it has.
        self.bits, self.hashes = (0, 0) if bf.read_only else shape(bf)
        self.published = _published(layout)
        if not storage.is_remote(self.path) and os.path.isdir(storage.local_path(self.path)):
            raise ConfigError(f"bloom_filter.file {self.path} is a directory; give the path of a filter file (made if missing)")
        exists = storage.exists(self.path)
        if bf.read_only and not exists:
            raise ConfigError(f"bloom_filter.file {self.path} does not exist (read_only: true needs a filter made earlier)")
        self.current: int | None = None
        side: dict[str, Any] = {}
        if exists:
            self.local = local_copy(self.path)
            head, side = check_filter(config, self.path, self.local, self.bits, self.hashes)
            self.current = head["checksum"]
        if not bf.read_only and self.published is not None and self.current == self.published["checksum"]:
            # The file is this run's own published result: the run started from `initial`.
            self.initial: int | None = self.published["initial"]
        else:
            self.initial = self.current
        if not bf.read_only and self.published is None and side.get("run") == root:
            # This run published the file, and the record of where it started is gone: extending
            # its own result again would mark every key it holds as a duplicate.
            raise ConfigError(
                f"bloom_filter.file {self.path} was published by this run ({root}), whose work files "
                f"({self.layout.single('bloom/published.json')}) are gone, so the filter it started from is unknown; "
                "delete the filter and its .dedup.json sidecar to start over, or give another bloom_filter.file or destination"
            )

    def identity(self) -> dict[str, Any]:
        return {"file": self.path, "initial_checksum": self.initial, "kind": key_kind(self.config)}

    def load_initial(self) -> BloomSetter:
        """The filter the run starts from, ready for test-and-set (a new one when there is none)."""
        bits, hashes = self.bits, self.hashes
        if self.initial is None:
            return BloomSetter(None, bits, hashes, DEFAULT_SEED)
        kept = self.layout.single("bloom/initial.bloom")
        if self.current == self.initial:
            # Keep the starting filter: publishing replaces the file, and a redo starts from here.
            if not storage.exists(kept):
                with storage.open_read(self.path) as src, storage.open_write_atomic(kept) as dst:
                    _copy(src, dst)
            with named_as(self.path, local := local_copy(self.path)):
                return BloomSetter(local, bits, hashes, DEFAULT_SEED)
        if not storage.exists(kept):
            raise ConfigError(
                f"bloom_filter.file {self.path}: the filter this run started from is gone ({kept} was removed); "
                "delete the work directory to start over from the current filter"
            )
        with named_as(kept, local := local_copy(kept)):
            return BloomSetter(local, bits, hashes, DEFAULT_SEED)


def _published(layout: Layout) -> dict[str, Any] | None:
    try:
        return orjson.loads(workdir.read(layout.single("bloom/published.json")))
    except (WorkFileError, storage.StorageError, orjson.JSONDecodeError):
        return None  # gone, or damaged: as good as gone (see FilterState)


def run_bloom(config: DedupConfig, layout: Layout, state: FilterState, task: Task, ctx: RunContext, skip_removed: bool) -> TaskOutput:
    """Test-and-set every key in the global order; each file's duplicates go to ``bloom/<rel>``."""
    from .exact import removed_documents

    kind, size = ("docs", DOC) if config.dedupe.documents is not None else ("paras", PARA)
    setter = state.load_initial()
    inserted = dups_total = 0
    for f in ctx.inputs:
        records = read_slice(layout.scan(f.rel, kind), 0)
        skip = removed_documents(layout, f.rel) if skip_removed else []
        dups, keys = setter.insert(records, size, skip)
        workdir.write(layout.per_file("bloom", f.rel), bucketed_file(dups, DUP))
        inserted += keys
        dups_total += len(dups) // DUP
    final = layout.single("bloom/filter.bloom")
    if storage.is_remote(final):
        with tempfile.TemporaryDirectory() as tmp:
            local = os.path.join(tmp, "filter.bloom")
            setter.save(local)
            with open(local, "rb") as src, storage.open_write_atomic(final) as dst:
                _copy(src, dst)
    else:
        os.makedirs(os.path.dirname(storage.local_path(final)), exist_ok=True)
        setter.save(storage.local_path(final))
    fp = setter.current_fp_rate()
    return TaskOutput(
        counts={"bloom_keys": inserted, "bloom_duplicates": dups_total},
        data={"keys": inserted, "duplicates": dups_total, "fp_rate": fp},
    )


def bloom_outputs(layout: Layout, ctx: RunContext) -> list[str]:
    return [layout.per_file("bloom", f.rel) for f in ctx.inputs] + [layout.single("bloom/filter.bloom")]


def publish(config: DedupConfig, layout: Layout, state: FilterState, root: str) -> StepResult:
    """Driver side, after the ``bloom`` task: the saved filter becomes ``bloom_filter.file``."""
    bf = config.bloom_filter
    assert bf is not None
    final = layout.single("bloom/filter.bloom")
    if not storage.exists(final):
        published = _published(layout)
        if published is None or state.current != published["checksum"]:
            raise WorkFileError(final, "missing")  # the runner redoes the bloom task
        # Published by an earlier run of this one, whose work files are gone since: nothing to do.
        return _published_step(bf.file, header(local_copy(bf.file)))
    local_final = local_copy(final)
    head = header(local_final)
    # The record of what is published (and from which filter the run started), then the sidecar,
    # then the file: a run killed at any point still knows, when rerun, whether the file is its own
    # result, and never finds a new filter without its sidecar.
    workdir.write(layout.single("bloom/published.json"), orjson.dumps({"checksum": head["checksum"], "initial": state.initial}))
    side = {
        "format": FORMAT,
        "kind": key_kind(config),
        **{k: head[k] for k in ("num_bits", "num_hashes", "seed", "count", "checksum")},
        "run": root,
    }
    storage.write_bytes(bf.file + SIDECAR_SUFFIX, orjson.dumps(side, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    if state.current != head["checksum"]:
        with storage.open_read(final) as src, storage.open_write_atomic(bf.file) as dst:
            _copy(src, dst)
    state.current = head["checksum"]
    return _published_step(bf.file, head)


def _published_step(file: str, head: dict[str, int]) -> StepResult:
    return StepResult(
        data={
            "filter": {
                "file": file,
                "checksum": f"{head['checksum']:016x}",
                "num_bits": head["num_bits"],
                "num_hashes": head["num_hashes"],
                "keys": head["count"],
            }
        }
    )
