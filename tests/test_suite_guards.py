"""What keeps the suite honest: under CI a skip for a missing dependency fails (tests/conftest.py),
other skips stay skips; a hung test fails with its name (pytest-timeout, configured in pyproject.toml);
test support lives in one place, ``tests/support/`` (docs/development.md, "Test support"); two
xdist workers get the heaviest scopes first, those that join Ray in-process last
(``tests/support/scheduling.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.repo import REPO_ROOT
from tests.support.scheduling import heaviest_first, xdist_scope

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


# -- test support in one place -----------------------------------------------------------------
# Under tests/: test modules, package markers, conftest.py files (fixtures and hooks), the support
# package and data; a helper module anywhere else is support out of its place.
SUPPORT = "support"
DATA = "data"
ALLOWED_NAMES = ("__init__.py", "conftest.py")


def stray_files(tests: Path) -> list[str]:
    """Files under ``tests`` that are neither a test module (``test_*.py``), an ``__init__.py``, a
    ``conftest.py``, in ``support/`` (test support, no test module), nor under a ``data/`` folder."""
    stray = []
    for path in sorted(tests.rglob("*")):
        rel = path.relative_to(tests)
        if not path.is_file() or any(part == "__pycache__" or part.startswith(".") for part in rel.parts):
            continue
        if DATA in rel.parts[:-1]:
            continue
        if rel.parts[0] == SUPPORT and len(rel.parts) > 1:
            if path.name.startswith("test_"):
                stray.append(str(rel))
            continue
        if not (path.name in ALLOWED_NAMES or (path.name.startswith("test_") and path.suffix == ".py")):
            stray.append(str(rel))
    return stray


def imports_of_test_modules(tests: Path) -> list[str]:
    """``module: imported test module`` for every import of a test module (``tests.….test_*``)
    by a module under ``tests``: what several test files share goes in ``tests/support/``."""
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found += [
                f"{path.relative_to(tests)}: {n}" for n in names if n.startswith("tests.") and n.rsplit(".", 1)[-1].startswith("test_")
            ]
    return found


def test_test_support_lives_in_tests_support():
    tests = REPO_ROOT / "tests"
    assert (tests / SUPPORT / "__init__.py").is_file()
    assert not stray_files(tests), (
        f"modules under tests/ that are no test, conftest.py or data: move them to tests/support/: {stray_files(tests)}"
    )
    assert not imports_of_test_modules(tests), (
        f"test modules imported by others (move what they share to tests/support/): {imports_of_test_modules(tests)}"
    )


def test_the_support_guard_finds_a_stray_module(tmp_path):
    for name in (
        "__init__.py",
        "conftest.py",
        "test_a.py",
        "support/__init__.py",
        "support/corpora.py",
        "pkg/data/maker.py",
        "pkg/data/x.json",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert stray_files(tmp_path) == []
    for name in ("helpers.py", "pkg/thing_support.py", "pkg/notes.txt", "support/test_b.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert stray_files(tmp_path) == ["helpers.py", "pkg/notes.txt", "pkg/thing_support.py", "support/test_b.py"]
    (tmp_path / "test_c.py").write_text("from tests.pkg.test_a import helper\nimport tests.test_a\nfrom tests.support.corpora import x\n")
    assert imports_of_test_modules(tmp_path) == [
        "test_c.py: tests.pkg.test_a",
        "test_c.py: tests.test_a",
    ]


# -- the order of the xdist workers' scopes ---------------------------------------------------------


class _Item:
    def __init__(self, nodeid: str, slow: bool = False, ray: bool = False):
        self.nodeid, self.slow = nodeid, slow
        self.fixturenames = ["tmp_path", "ray_address"] if ray else ["tmp_path"]

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "slow" and self.slow else None


def test_scopes_are_ordered_heaviest_first_a_modules_scopes_together_those_joining_ray_last():
    items = [
        *(_Item(f"tests/test_many.py::test_{i}") for i in range(30)),  # many fast tests: first by xdist's count
        _Item("tests/test_ray.py::test_on_ray", slow=True, ray=True),  # the heaviest module, but it joins Ray
        _Item("tests/test_ray.py::test_local_a", slow=True),
        _Item("tests/test_ray.py::test_local_b", slow=True),
        _Item("tests/test_docs.py::test_fast"),
        _Item("tests/test_docs.py::TestPage::test_page_runs[x]", slow=True),
        *(_Item(f"tests/test_docs.py::TestBig::test_{i}", slow=True) for i in range(2)),
        _Item("tests/test_one.py::test_long", slow=True),
        _Item("tests/test_two.py::test_a[p::q]"),  # xdist's scope of a test whose id holds '::' (its rsplit)
        _Item("tests/test_small_ray.py::test_on_ray", ray=True),
        _Item("tests/test_mixed.py::TestOnRay::test_on_ray", slow=True, ray=True),  # a scope of its own: last
        _Item("tests/test_mixed.py::test_local"),
    ]
    order = [i.nodeid for i in heaviest_first(items)]  # type: ignore[arg-type]
    assert order[:4] == [
        "tests/test_docs.py::TestBig::test_0",
        "tests/test_docs.py::TestBig::test_1",
        "tests/test_docs.py::TestPage::test_page_runs[x]",
        "tests/test_docs.py::test_fast",
    ]
    assert [xdist_scope(n) for n in order[:4]] == ["tests/test_docs.py::TestBig"] * 2 + [
        "tests/test_docs.py::TestPage",
        "tests/test_docs.py",
    ]
    assert order[4:] == [
        *(f"tests/test_many.py::test_{i}" for i in range(30)),
        "tests/test_mixed.py::test_local",  # its module weighs 21 (its class's slow test counts)
        "tests/test_one.py::test_long",
        "tests/test_two.py::test_a[p::q]",
        "tests/test_ray.py::test_local_a",
        "tests/test_ray.py::test_local_b",
        "tests/test_ray.py::test_on_ray",
        "tests/test_mixed.py::TestOnRay::test_on_ray",
        "tests/test_small_ray.py::test_on_ray",
    ]
