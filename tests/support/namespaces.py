"""Mount namespaces: a node that shares no disk (a ``/tmp`` of its own) on this machine."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.repo import REPO_ROOT


def kept_under_tmp(*keep: str | Path) -> list[str]:
    """The folders :func:`private_tmp` keeps visible: the checkout, the Python environment and
    ``keep``, those under ``/tmp`` (outermost only)."""
    paths = {Path(p).resolve() for p in (REPO_ROOT, sys.prefix, *keep)}
    under = sorted(str(p) for p in paths if Path("/tmp") in p.parents)
    return [p for p in under if not any(p != q and p.startswith(q + "/") for q in under)]


def private_tmp(*keep: str | Path) -> str:
    """Shell commands (``&&``-joined, for a shell that ``unshare --mount --propagation private``
    started) that give the namespace a tmpfs of its own on ``/tmp``: a node that shares no disk.
    The checkout, the Python environment and ``keep`` stay visible where they are when they lie
    under ``/tmp`` (a CI clone may): each is bind-mounted aside, then moved back onto the new
    tmpfs; nothing else of the host's ``/tmp`` shows."""
    tops = kept_under_tmp(*keep)
    steps = [f'keep{i}=$(mktemp -d /run/dolma-pipe-keep.XXXXXX) && mount --bind {shlex.quote(p)} "$keep{i}"' for i, p in enumerate(tops)]
    steps.append("mount -t tmpfs tmpfs /tmp")
    steps += [f'mkdir -p {shlex.quote(p)} && mount --move "$keep{i}" {shlex.quote(p)} && rmdir "$keep{i}"' for i, p in enumerate(tops)]
    return " && ".join(steps)


def can_unshare_mount() -> bool:
    """Whether this process may make a mount namespace (``unshare --mount``: root, and unshare(1))."""
    try:
        return subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False
