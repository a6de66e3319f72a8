"""The trainer's checkpoints in tests: a run's step copied into another run's folder."""

from __future__ import annotations

import shutil
from pathlib import Path


def copy_checkpoint(src_run: Path, step: int, dst_run: Path) -> None:
    """``src_run/step<step>`` copied to ``dst_run/step<step>``, ``dst_run`` made new."""
    dst_run.mkdir(parents=True)
    shutil.copytree(src_run / f"step{step}", dst_run / f"step{step}")
