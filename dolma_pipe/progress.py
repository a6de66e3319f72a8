"""Progress of a phase: a tqdm bar on a terminal, a log line every 30 s otherwise."""

from __future__ import annotations

import time
from typing import Any, TextIO


class LogProgress:
    """Progress for logs (no terminal): one line every ``interval`` seconds, not a redrawn bar."""

    def __init__(self, name: str, total: int, stream: TextIO, unit: str = "file", interval: float = 30.0):
        self.name, self.total, self.stream, self.unit, self.interval = name, total, stream, unit, interval
        self.n = 0
        self.postfix: dict[str, str] = {}
        self._last = time.perf_counter()

    def update(self, n: int) -> None:
        self.n += n
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self._last = now
            extra = ", ".join(f"{k.replace('_', '/')} {v}" for k, v in self.postfix.items())
            print(
                f"dolma-pipe {self.name}: {self.n:,}/{self.total:,} {self.unit}s{', ' + extra if extra else ''}",
                file=self.stream,
                flush=True,
            )

    def set_postfix(self, refresh: bool = False, **kv: str) -> None:
        self.postfix = kv

    def close(self) -> None:
        pass


class NoProgress:
    """``--no-progress``: the same calls, nothing shown."""

    def update(self, n: int) -> None:
        pass

    def set_postfix(self, refresh: bool = False, **kv: str) -> None:
        pass

    def close(self) -> None:
        pass


def progress(name: str, total: int, enabled: bool, stream: TextIO, unit: str = "file") -> Any:
    """A progress bar (tqdm on a terminal, :class:`LogProgress` otherwise, silent when disabled)."""
    if not enabled:
        return NoProgress()
    if not stream.isatty():
        return LogProgress(name, total, stream, unit)
    from tqdm import tqdm  # imported on a terminal only

    return tqdm(total=total, unit=unit, file=stream, dynamic_ncols=True, desc=name)
