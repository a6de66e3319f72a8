"""The order in which ``make test``'s two pytest-xdist workers are handed the suite's scopes.

``--dist loadscope`` keeps a module's tests (a class's, where a module has classes) on one worker,
and hands the scopes out one at a time as workers free up. By default xdist hands them out by
their number of tests, most first: the scopes of a few long tests (a docs page that trains models,
the Ray cluster modules, the trainer's multi-node tests) came last, and the run ended with one
worker on them while the other had nothing left. The workers order their collection heaviest
first instead, and xdist hands the scopes out in that order (the longest-processing-time-first
rule, near the best split for two workers): a test marked ``slow`` (5 s or more) weighs as much
as ``SLOW_WEIGHT`` others. A module's scopes stay together, so that its module-scoped fixtures
still start once on a worker that runs them all.

The scopes with a test that joins the session's Ray cluster in the worker's own process (the
``ray_address`` fixture) come after all the others: once ``ray`` is imported in a process, the
local executor starts its pools by spawn instead of fork (fork is unsafe beside Ray's threads), and
every later multi-process run in that worker pays a new interpreter per pool worker (measured: the
local tests of the modules that have Ray tests, 132 s of CPU with fork, 284 s after ``import ray``).
So a module keeps such tests in a class of their own (``TestOnRay``), a scope that its other tests
do not wait for; its module fixtures are made again for it where it runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

# A `slow` test takes 5 s to minutes, most others well under a second: about 20 of them.
SLOW_WEIGHT = 20
# The session's in-process Ray cluster (tests/conftest.py): every test that joins Ray in the
# worker's own process asks for it (the others start Ray in processes of their own).
RAY_FIXTURE = "ray_address"


def xdist_scope(nodeid: str) -> str:
    """The scope pytest-xdist's loadscope gives a test: its module, or its class."""
    return nodeid.rsplit("::", 1)[0]


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def joins_ray(item: pytest.Item) -> bool:
    """Whether the test joins the session's Ray cluster from the worker's process (imports ray there)."""
    return RAY_FIXTURE in getattr(item, "fixturenames", ())


def heaviest_first(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """``items``: scopes that never join Ray first; then by their module's weight, then their
    scope's, heaviest first; a scope's Ray tests after its others; in their order otherwise."""
    module: Counter[str] = Counter()
    scope: Counter[str] = Counter()
    ray_scopes: set[str] = set()
    first: dict[str, int] = {}  # a module's or a scope's first test
    for i, item in enumerate(items):
        weight = SLOW_WEIGHT if item.get_closest_marker("slow") else 1
        module[module_of(item.nodeid)] += weight
        scope[xdist_scope(item.nodeid)] += weight
        first.setdefault(module_of(item.nodeid), i)
        first.setdefault(xdist_scope(item.nodeid), i)
        if joins_ray(item):
            ray_scopes.add(xdist_scope(item.nodeid))

    def key(item: pytest.Item) -> tuple[bool, int, int, int, int, bool]:
        name, within = module_of(item.nodeid), xdist_scope(item.nodeid)
        return (within in ray_scopes, -module[name], first[name], -scope[within], first[within], joins_ray(item))

    return sorted(items, key=key)
