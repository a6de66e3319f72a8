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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

# A `slow` test takes 5 s to minutes, most others well under a second: about 20 of them.
SLOW_WEIGHT = 20


def xdist_scope(nodeid: str) -> str:
    """The scope pytest-xdist's loadscope gives a test: its module, or its class."""
    return nodeid.rsplit("::", 1)[0]


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def heaviest_first(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """``items`` by their module's weight, then their scope's, heaviest first; in their order otherwise."""
    module: Counter[str] = Counter()
    scope: Counter[str] = Counter()
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        weight = SLOW_WEIGHT if item.get_closest_marker("slow") else 1
        module[module_of(item.nodeid)] += weight
        scope[xdist_scope(item.nodeid)] += weight
        first.setdefault(module_of(item.nodeid), i)
    return sorted(items, key=lambda it: (-module[module_of(it.nodeid)], first[module_of(it.nodeid)], -scope[xdist_scope(it.nodeid)]))
