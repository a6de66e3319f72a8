"""Executors: run one function over a plan of tasks, locally or on Ray, behind one interface.

``local`` uses a process pool (or runs inline with one process, which keeps
tracebacks and debuggers simple); ``ray`` submits one Ray task per item, on a
Ray started for the run or on an existing cluster (``ray_address``).  Both
yield ``(item, result, error)`` as tasks finish, so one failed task does not
stop the others; both keep a bounded number of tasks in flight so a plan of a
million files does not become a million pending futures; and both account for
every item: each is yielded once, with a result or an error, unless ``stop()``
said to submit no more (then items never submitted are not yielded, and tasks
in flight are still waited for and yielded).

Pool workers die with the process that started them (a parent-death signal),
so killing a run never leaves workers running under PID 1.

A joined Ray cluster of more than one node is taken to share no disk: :func:`refuse_local_paths`
refuses a run whose config gives a local path that tasks read or write (inputs, outputs, work
files), naming the config key, before any task runs; ``DOLMA_PIPE_SHARED_FS=1`` says the local
paths are on a filesystem mounted on every node (NFS, Lustre) and lifts the refusal.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import socket
import sys
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from dolma_pipe import storage
from dolma_pipe.config import absolute_path
from dolma_pipe.errors import DolmaPipeError

Outcome = tuple[Any, Any, BaseException | None]
_NOTHING = object()


class ExecutorError(DolmaPipeError, RuntimeError):
    """The executor cannot start (e.g. a Ray cluster that cannot be joined); the message says why."""


class _Queue:
    """Items not yet submitted; an item whose submission failed goes back to the front."""

    def __init__(self, items: list[Any]):
        self._items = list(reversed(items))

    def pop(self) -> Any:
        return self._items.pop() if self._items else _NOTHING

    def push_back(self, item: Any) -> None:
        self._items.append(item)

    def drain(self) -> list[Any]:
        out = list(reversed(self._items))
        self._items.clear()
        return out


def _top_up(pending: dict[Any, Any], queue: _Queue, limit: int, submit: Callable[[Any], Any]) -> None:
    """Submit items until ``limit`` are in flight (handle -> item in ``pending``); never loses an item."""
    while len(pending) < limit:
        item = queue.pop()
        if item is _NOTHING:
            return
        try:
            pending[submit(item)] = item
        except BaseException:
            queue.push_back(item)
            raise


class Executor(ABC):
    name: str
    workers: int

    @abstractmethod
    def run(self, fn: Callable[[Any], Any], items: list[Any], stop: Callable[[], bool] = lambda: False) -> Iterator[Outcome]:
        """Yield ``(item, result, None)`` or ``(item, None, exception)`` in completion order.

        Once ``stop()`` is true no more items are submitted; those in flight are still yielded.
        """

    def close(self) -> None:  # noqa: B027 - an optional hook: most executors hold nothing
        pass

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _die_with_parent(parent: int) -> None:
    """Pool worker initializer: be killed when the parent dies, however it dies (Linux)."""
    if sys.platform == "linux":
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
    # The parent decides how a run ends; a terminal's Ctrl-C reaches the workers too.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, processes: int):
        self.workers = max(1, processes)
        self._pool: ProcessPoolExecutor | None = None

    def run(self, fn: Callable[[Any], Any], items: list[Any], stop: Callable[[], bool] = lambda: False) -> Iterator[Outcome]:
        if self.workers == 1 or len(items) <= 1:
            for item in items:
                if stop():
                    return
                try:
                    yield item, fn(item), None
                except Exception as exc:  # the runner reports it with the item's name
                    yield item, None, exc
            return
        # fork starts workers in milliseconds; only fall back to spawn where fork is unsafe.
        method = "fork" if sys.platform == "linux" and "ray" not in sys.modules else "spawn"
        pool = self._pool = ProcessPoolExecutor(
            max_workers=min(self.workers, len(items)),
            mp_context=multiprocessing.get_context(method),
            initializer=_die_with_parent,
            initargs=(os.getpid(),),
        )
        pending: dict[Any, Any] = {}
        queue = _Queue(items)
        limit = 2 * self.workers
        try:
            while True:
                try:
                    if not stop():
                        _top_up(pending, queue, limit, lambda item: pool.submit(fn, item))
                except BrokenProcessPool as exc:
                    # A worker died (OOM killer, SIGKILL): what is left cannot run in this pool.
                    for item in [*pending.values(), *queue.drain()]:
                        yield item, None, exc
                    return
                if not pending:
                    return
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    item = pending.pop(fut)
                    error = fut.exception()
                    yield (item, None, error) if error else (item, fut.result(), None)
        except BaseException:
            # Interrupted: stop the workers now instead of waiting for their tasks (outputs are
            # atomic, so a killed task leaves nothing that looks finished).
            self.close(kill=True)
            raise
        finally:
            self.close()

    def close(self, kill: bool = False) -> None:
        if self._pool is not None:
            if kill:
                for proc in list((self._pool._processes or {}).values()):
                    proc.kill()
            try:
                self._pool.shutdown(wait=True, cancel_futures=True)
            except BrokenProcessPool:
                pass
            self._pool = None


def _check_reachable(address: str) -> None:
    """Fail in a second with the address and the cause, instead of Ray's minutes of retries."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", a ray:// client address, ...: let Ray resolve it
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            pass
    except OSError as exc:
        raise ExecutorError(
            f"cannot connect to the Ray cluster at {address}: {exc.strerror or exc}; start it with "
            f"`ray start --head --port {port}` on that machine (see docs/cluster.md) or fix --ray-address"
        ) from None


class RayExecutor(Executor):
    name = "ray"

    def __init__(self, processes: int, address: str | None = None):
        import ray

        self.workers = max(1, processes)
        self.address = address
        self._started_here = False
        if ray.is_initialized():
            return
        if address:
            _check_reachable(address)
            try:
                ray.init(address=address, log_to_driver=True, include_dashboard=False)
            except Exception as exc:
                cause = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise ExecutorError(
                    f"cannot join the Ray cluster at {address}: {cause}; if the cluster uses token "
                    "authentication (RAY_AUTH_MODE=token), set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or "
                    "RAY_AUTH_TOKEN_PATH) to the cluster's token (`ray get-auth-token` on the head node)"
                ) from None
        else:
            # A Ray started for one run serves this machine only: keep it on loopback.
            ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=True, _node_ip_address="127.0.0.1")
            self._started_here = True

    def run(self, fn: Callable[[Any], Any], items: list[Any], stop: Callable[[], bool] = lambda: False) -> Iterator[Outcome]:
        import ray

        remote = ray.remote(num_cpus=1, max_retries=0)(_apply)
        pending: dict[Any, Any] = {}
        queue = _Queue(items)
        limit = 2 * max(self.workers, int(ray.cluster_resources().get("CPU", 1)))
        try:
            while True:
                if not stop():
                    _top_up(pending, queue, limit, lambda item: remote.remote(fn, item))
                if not pending:
                    return
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    item = pending.pop(ref)
                    try:
                        yield item, ray.get(ref), None
                    except ray.exceptions.RayTaskError as exc:
                        yield item, None, _cause(exc)
                    except Exception as exc:  # worker died, object lost, ...
                        yield item, None, exc
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    def nodes(self) -> int:
        """How many nodes of the cluster are alive."""
        import ray

        return sum(1 for node in ray.nodes() if node.get("Alive"))

    def close(self) -> None:
        if self._started_here:
            import ray

            ray.shutdown()
            self._started_here = False


def _cause(exc: Any) -> BaseException:
    """The task's own exception, not Ray's wrapper: the wrapper's message is the worker's whole
    traceback (dozens of lines where the user's error is one). The traceback stays with it, as
    ``remote_traceback``, for the run's failures log."""
    cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc.as_instanceof_cause()
    # ray.get raises a class made of RayTaskError and the cause's class, whose message is the
    # traceback (the plain RayTaskError keeps it as traceback_str).
    with contextlib.suppress(AttributeError, TypeError):  # an exception type that takes no attributes
        cause.remote_traceback = getattr(exc, "traceback_str", None) or str(exc)
    return cause


def _apply(fn: Callable[[Any], Any], item: Any) -> Any:
    """Ray remotes must be plain functions; this one applies any picklable callable."""
    return fn(item)


def make_executor(processes: int, ray: bool = False, ray_address: str | None = None) -> Executor:
    if ray or ray_address:
        return RayExecutor(processes, ray_address)
    return LocalExecutor(processes)


# ---- paths every node must reach ---------------------------------------------------------------

SHARED_FS_ENV = "DOLMA_PIPE_SHARED_FS"


def _is_path_type(tp: Any) -> bool:
    """Whether a config field's type holds :data:`dolma_pipe.config.PathStr` values (a path made
    absolute on the driver): the config's paths, as opposed to names, globs of names or ids."""
    if typing.get_origin(tp) is typing.Annotated:
        return any(getattr(m, "func", None) is absolute_path for m in tp.__metadata__)
    return False


def _paths_in(value: Any, tp: Any, key: str, driver: frozenset[str]) -> Iterator[tuple[str, str]]:
    from pydantic import BaseModel

    if value is None:
        return
    if isinstance(value, BaseModel):
        yield from _fields(value, key + ".", driver)
        return
    if isinstance(value, str):
        if _is_path_type(tp) or any(_is_path_type(a) for a in typing.get_args(tp)):
            yield key, value
        return
    args = typing.get_args(tp)
    # Unions (X | None): the member that is a container says what its items are.
    inner = [a for a in args if typing.get_origin(a) in (list, tuple, dict)]
    if inner:
        yield from _paths_in(value, inner[0], key, driver)
        return
    if isinstance(value, (list, tuple)):
        item = args[0] if args else Any
        for i, v in enumerate(value):
            yield from _paths_in(v, item, f"{key}.{i}", driver)
    elif isinstance(value, dict):
        item = args[-1] if args else Any
        for k, v in value.items():
            yield from _paths_in(v, item, f"{key}.{k}", driver)


def config_paths(config: Any) -> Iterator[tuple[str, str]]:
    """``(config key, path)`` of every path a config gives (its ``PathStr`` fields, nested sections
    and lists included), but those its model's ``driver_paths`` names (dotted keys of paths only
    the driver reads, such as a file read while planning)."""
    yield from _fields(config, "", frozenset(getattr(type(config), "driver_paths", ())))


def _fields(config: Any, prefix: str, driver: frozenset[str]) -> Iterator[tuple[str, str]]:
    for name, field in type(config).model_fields.items():
        key = prefix + name
        if key in driver:
            continue
        value = getattr(config, name)
        if any(getattr(m, "func", None) is absolute_path for m in field.metadata):
            if isinstance(value, str):
                yield key, value
            continue
        yield from _paths_in(value, field.annotation, key, driver)


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _named(path: str, keyed: list[tuple[str, str]], what: str) -> tuple[str, str]:
    """A path the stage derives (its output root, its work directory) named by the config key it
    comes from: the longest config path that holds it."""
    holders = [key for key, value in keyed if path == value or path.startswith(value.rstrip("/") + "/")]
    best = max(holders, key=lambda k: len(dict(keyed)[k]), default=None)
    return (f"config key '{best}'" if best else what), path


def refuse_local_paths(executor: Executor, config: Any, derived: Iterable[tuple[str, str]] = ()) -> None:
    """On a joined Ray cluster of more than one node, refuse a local path that tasks read or write:
    the config's paths (:func:`config_paths`) and the ``derived`` ones ``(what, path)``, such as
    the output root and the work directory; its nodes share no disk.

    Nothing is asked of Ray when every path is remote, on the local executor, on a Ray started for
    the run (one machine), or with ``DOLMA_PIPE_SHARED_FS=1`` (a filesystem every node mounts).
    """
    if not isinstance(executor, RayExecutor) or not executor.address or _env_true(SHARED_FS_ENV):
        return
    keyed = list(config_paths(config))
    named = [(f"config key '{key}'", path) for key, path in keyed] + [_named(path, keyed, what) for what, path in derived]
    local = list(dict.fromkeys((where, path) for where, path in named if not storage.is_remote(path)))
    if not local:
        return
    nodes = executor.nodes()
    if nodes < 2:
        return
    where, path = local[0]
    more = f" (and {len(local) - 1} other local path(s))" if len(local) > 1 else ""
    raise ExecutorError(
        f"{where}: {path} is on this machine's disk{more}, but the Ray cluster at {executor.address} has "
        f"{nodes} nodes that share no disk: give an s3:// path (or set {SHARED_FS_ENV}=1 if it is a shared "
        "filesystem mounted on every node; see docs/cluster.md)"
    )
