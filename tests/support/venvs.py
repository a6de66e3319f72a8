"""A new virtual environment that holds exactly what a wheel declares, taken from this one.

``tests/test_packaging.py`` installs the built wheel with pip into a new environment to show that
the package needs nothing it does not declare. Downloading and unpacking its dependencies from
PyPI (ray, scipy, scikit-learn, pyarrow: most of a minute on 2 cores, every CI run) proves no more
than linking this environment's copies in, which ``make setup`` installed from PyPI by the same
declarations: the new environment gets the wheel's ``Requires-Dist`` and theirs, resolved as pip
resolves them (markers, extras), each distribution's recorded files hard-linked (copied across
file systems) into its ``site-packages``, and nothing else (no torch, no test tools, no product).
pip then installs the wheel with ``--no-index``: it resolves the wheel's requirements against what
is installed there, and fails where one is missing or of the wrong version.
"""

from __future__ import annotations

import email.parser
import errno
import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def wheel_requirements(wheel: Path) -> list[str]:
    """The ``Requires-Dist`` lines of the wheel's own metadata."""
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        meta = email.parser.Parser().parsestr(z.read(name).decode())
    return meta.get_all("Requires-Dist") or []


def _wanted(requirement: str, extras: frozenset[str]) -> Requirement | None:
    """The requirement if it applies to an install with ``extras`` (none: the plain install)."""
    req = Requirement(requirement)
    if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
        return req
    return None


def closure(requirements: list[str]) -> dict[str, importlib.metadata.Distribution]:
    """Normalized name -> this environment's distribution, for ``requirements`` and everything
    they need, with the extras each is asked for."""
    found: dict[str, importlib.metadata.Distribution] = {}
    extras_of: dict[str, frozenset[str]] = {}
    todo = [(req, "the wheel") for r in requirements if (req := _wanted(r, frozenset()))]
    while todo:
        req, by = todo.pop()
        key = canonicalize_name(req.name)
        asked = extras_of.get(key, frozenset()) | frozenset(req.extras)
        if key in found and asked == extras_of[key]:
            continue
        try:
            dist = found.get(key) or importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            raise AssertionError(f"{req.name} (required by {by}) is not installed in this environment: `make setup` installs it") from None
        found[key], extras_of[key] = dist, asked
        todo += [(sub, req.name) for r in dist.requires or [] if (sub := _wanted(r, asked))]
    return found


def link_into(dists: list[importlib.metadata.Distribution], site_packages: Path) -> int:
    """Each distribution's recorded files under its ``site-packages``, hard-linked into
    ``site_packages`` (scripts and other files outside it left out); returns how many."""
    count = 0
    for dist in dists:
        base = Path(str(dist.locate_file("")))
        assert dist.files is not None, f"{dist.metadata['Name']} has no RECORD: its files are unknown"
        for file in dist.files:
            rel = os.path.normpath(file)
            source, target = base / rel, site_packages / rel
            if rel.startswith("..") or not source.is_file() or os.path.lexists(target):
                continue  # outside site-packages, not there, or recorded by two distributions (a namespace's __init__)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, target)
            except OSError as e:
                if e.errno != errno.EXDEV:
                    raise
                shutil.copy2(source, target)  # another file system
            count += 1
    return count


def venv_with_declared(venv: Path, wheel: Path) -> Path:
    """A new environment at ``venv`` holding pip and the wheel's declared dependencies (and
    theirs) from this environment; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], check=True, capture_output=True, text=True
    ).stdout.strip()
    dists = closure(wheel_requirements(wheel))
    dists.pop("pip", None)
    link_into([importlib.metadata.distribution("pip"), *dists.values()], Path(site))
    return python
