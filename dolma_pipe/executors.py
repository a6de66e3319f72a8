"""Executors: run one function over a plan of tasks, locally or on Ray, behind one interface.

``local`` uses a process pool (or runs inline with one process, which keeps
tracebacks and debuggers simple); ``ray`` submits one Ray task per item, on a
Ray started for the run or on an existing cluster (``ray_address``).  Both
yield ``(item, result, error)`` as tasks finish, so one failed task does not
stop the others, and both keep a bounded number of tasks in flight so a plan
of a million files does not become a million pending futures.
"""

from __future__ import annotations

import multiprocessing
import sys
from abc import ABC, abstractmethod
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Iterator

Outcome = tuple[Any, Any, BaseException | None]


def _top_up(pending: dict[Any, Any], queue: Iterator[Any], limit: int, submit: Callable[[Any], Any]) -> None:
    """Submit items from ``queue`` until ``limit`` are in flight (handle -> item in ``pending``)."""
    while len(pending) < limit:
        item = next(queue, None)
        if item is None:
            return
        pending[submit(item)] = item


class Executor(ABC):
    name: str
    workers: int

    @abstractmethod
    def run(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Outcome]:
        """Yield ``(item, result, None)`` or ``(item, None, exception)`` in completion order."""

    def close(self) -> None:
        pass

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, processes: int):
        self.workers = max(1, processes)
        self._pool: ProcessPoolExecutor | None = None

    def run(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Outcome]:
        if self.workers == 1 or len(items) <= 1:
            for item in items:
                try:
                    yield item, fn(item), None
                except Exception as exc:  # the runner reports it with the item's name
                    yield item, None, exc
            return
        # fork starts workers in milliseconds; only fall back to spawn where fork is unsafe.
        method = "fork" if sys.platform == "linux" and "ray" not in sys.modules else "spawn"
        self._pool = ProcessPoolExecutor(
            max_workers=min(self.workers, len(items)), mp_context=multiprocessing.get_context(method)
        )
        pending: dict[Any, Any] = {}
        queue = iter(items)
        limit = 2 * self.workers
        try:
            while True:
                try:
                    _top_up(pending, queue, limit, lambda item: self._pool.submit(fn, item))
                except BrokenProcessPool as exc:
                    # A worker died (OOM killer, SIGKILL): what is left cannot run in this pool.
                    for item in [*pending.values(), *queue]:
                        yield item, None, exc
                    return
                if not pending:
                    return
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    item = pending.pop(fut)
                    exc = fut.exception()
                    yield (item, None, exc) if exc else (item, fut.result(), None)
        finally:
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            try:
                self._pool.shutdown(wait=True, cancel_futures=True)
            except BrokenProcessPool:
                pass
            self._pool = None


class RayExecutor(Executor):
    name = "ray"

    def __init__(self, processes: int, address: str | None = None):
        import ray

        self.workers = max(1, processes)
        self.address = address
        self._started_here = False
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=True, include_dashboard=False)
            else:
                # A Ray started for one run serves this machine only: keep it on loopback.
                ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=True, _node_ip_address="127.0.0.1")
                self._started_here = True

    def run(self, fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Outcome]:
        import ray

        remote = ray.remote(num_cpus=1, max_retries=0)(_apply)
        pending: dict[Any, Any] = {}
        queue = iter(items)
        limit = 2 * max(self.workers, int(ray.cluster_resources().get("CPU", 1)))
        try:
            while True:
                _top_up(pending, queue, limit, lambda item: remote.remote(fn, item))
                if not pending:
                    return
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    item = pending.pop(ref)
                    try:
                        yield item, ray.get(ref), None
                    except ray.exceptions.RayTaskError as exc:
                        yield item, None, exc.as_instanceof_cause()
                    except Exception as exc:  # worker died, object lost, ...
                        yield item, None, exc
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        if self._started_here:
            import ray

            ray.shutdown()
            self._started_here = False


def _apply(fn: Callable[[Any], Any], item: Any) -> Any:
    """Ray remotes must be plain functions; this one applies any picklable callable."""
    return fn(item)


def make_executor(processes: int, ray: bool = False, ray_address: str | None = None) -> Executor:
    if ray or ray_address:
        return RayExecutor(processes, ray_address)
    return LocalExecutor(processes)
