"""Skips for a missing dependency (what `make test` installs): under CI they fail instead, so CI
never passes quietly without it (the hooks in ``tests/conftest.py`` apply :func:`fail_dependency_skip`)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

# Prefix of a skip reason that means "something `make test` installs is missing": under CI the
# conftest hook turns such a skip into a failure, as it does pytest.importorskip's "could not import".
MISSING = "missing: "
DEPENDENCY_SKIP_PREFIXES = (MISSING, "could not import ")


def running_in_ci() -> bool:
    """Whether the suite runs in CI (``CI`` set, as CI services do, and not 0/false/no)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_missing(what: str, allow_module_level: bool = False) -> NoReturn:
    """Skip because ``what`` (a dependency `make test` installs) is missing; under CI this fails
    the test instead (see ``tests/conftest.py``), so CI never passes quietly without it."""
    pytest.skip(MISSING + what, allow_module_level=allow_module_level)


def fail_dependency_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    """Under CI, turns ``report``'s skip for a missing dependency (pytest.importorskip's "could not
    import ...", :func:`skip_missing`'s "missing: ...") into a failure; other skips and xfails stay."""
    if not report.skipped or hasattr(report, "wasxfail") or not isinstance(report.longrepr, tuple):
        return
    reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    if reason.startswith(DEPENDENCY_SKIP_PREFIXES) and running_in_ci():
        report.outcome = "failed"
        report.longrepr = f"skipped for a missing dependency under CI={os.environ['CI']}: {reason} (make test installs it; a skip here would pass quietly)"
