"""What keeps the suite honest: under CI a skip for a missing dependency fails (tests/conftest.py),
other skips stay skips; a hung test fails with its name (pytest-timeout, configured in pyproject.toml)."""

from __future__ import annotations

import pytest

SUITE = {
    "test_module_level": """
        import pytest
        pytest.importorskip("dolma_pipe_no_such_module")

        def test_never_runs():
            pass
    """,
    "test_in_tests": """
        import pytest
        from tests.support.skips import skip_missing

        @pytest.fixture
        def needs_it():
            pytest.importorskip("dolma_pipe_no_such_module")

        def test_importorskip_in_a_fixture(needs_it):
            pass

        def test_skip_missing():
            skip_missing("a language-id model")

        def test_skipped_by_design():
            pytest.skip("compares both backends once")

        @pytest.mark.skipif(True, reason="not this platform")
        def test_skipif():
            pass

        @pytest.mark.xfail(reason="known bug")
        def test_xfail():
            raise AssertionError("could not import this")

        def test_passes():
            pass
    """,
}


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest("from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401")
    pytester.makepyfile(**SUITE)
    return pytester


@pytest.mark.parametrize("value", ["true", "1", "True"])
def test_dependency_skips_fail_under_ci(suite, monkeypatch, value):
    monkeypatch.setenv("CI", value)
    # At module level: a collection error, which stops the run (as an import error would).
    result = suite.runpytest("-p", "no:cacheprovider", "test_module_level.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting test_module_level.py*",
            f"skipped for a missing dependency under CI={value}: could not import 'dolma_pipe_no_such_module'*",
        ]
    )
    assert result.ret != 0
    # In a fixture (an error in setup) or a test (a failure); other skips and xfail untouched.
    result = suite.runpytest("-p", "no:cacheprovider", "-rfE", "test_in_tests.py")
    result.assert_outcomes(passed=1, failed=1, errors=1, skipped=2, xfailed=1)
    result.stdout.fnmatch_lines(
        [
            "FAILED test_in_tests.py::test_skip_missing - skipped for a missing dependency*missing: a language-id model*",
            "ERROR test_in_tests.py::test_importorskip_in_a_fixture - skipped for a missing dependency*could not import*",
        ],
        consecutive=False,
    )
    assert result.ret != 0


@pytest.mark.parametrize("value", [None, "", "0", "false"])
def test_dependency_skips_are_skips_outside_ci(suite, monkeypatch, value):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    result = suite.runpytest("-p", "no:cacheprovider")
    # The module's skip counts as one.
    result.assert_outcomes(passed=1, skipped=5, xfailed=1)
    assert result.ret == 0


def test_a_hung_test_fails_with_its_name(pytestconfig, pytester):
    # The suite's own limit is generous; here one second stands for it.
    assert float(pytestconfig.getini("timeout")) == 300
    pytester.makepyfile(
        test_hang="""
        import subprocess
        import sys
        import threading

        def test_waits_for_a_peer_that_never_comes():
            threading.Event().wait()  # a barrier whose other side died

        def test_waits_for_a_child_that_never_ends():
            subprocess.run([sys.executable, "-c", "import time; time.sleep(600)"])
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-o", "timeout=1", "-rf")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "FAILED test_hang.py::test_waits_for_a_peer_that_never_comes - Failed: Timeout*",
            "FAILED test_hang.py::test_waits_for_a_child_that_never_ends - Failed: Timeout*",
        ]
    )
