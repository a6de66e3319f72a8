"""Extraction in a child process of its own, so that a page that crashes or hangs the extractor
costs that page, never the task.

resiliparse and lxml-based extractors run C code: a segfault there would kill the worker (the
whole file's task fails, and fails again on every rerun), and a C loop cannot be interrupted by
any timer in the process running it. So one :class:`Sandbox` per task starts one child (this
module run with ``-m``), sends it each page over a pipe and waits at most ``max_seconds`` for the
text. A child past its time is killed (the page is ``too_slow``); a child that dies answers
nothing (the page is quarantined as ``extractor_crash``); either way the next page starts a new
child. One child per task, not one per page, and pages go in batches, one round trip each (a
round trip per page cost ~0.3 ms of CPU here, as much as extracting a small page): a batch that
crashes the child or runs past ``max_seconds`` is sent again one page at a time, so that only the
page at fault is lost.

A child's start-up (the interpreter, the extractor's imports, making it) is not a page's time: the
child says :data:`READY` once its extractor is made and has read a small page, and only then are
pages sent and their clock started. Start-up has its own, generous limit (``start_seconds``, 120 s:
a loaded machine, a cold disk); a child that exits or stays silent that long fails the task with
:class:`ExtractorNotStarted`, naming the extractor (an environment that cannot run it at all is
not a property of any page).

Messages: to the child ``>I`` (pages), then per page ``>IBH`` (length, kind: 0 HTML, 1 HTML whose
markup is deep, 2 a PDF; the URL's length), the page's URL in UTF-8 and the page (HTML in UTF-8,
a PDF's bytes); back, first :data:`READY` once, then per batch ``>I`` and per page ``>BIB`` (0 text, 1 an error message; its length; the
length of the name of what made the text, the documents' ``extractor``), that name and the
UTF-8 bytes. The child reads a whole batch before it answers (no pipe fills up both ways).
"""

from __future__ import annotations

import importlib
import os
import select
import struct
import subprocess
import sys
import time

from .errors import WarcError
from .extract import Extractor, TooSlow
from .pdf import PdfOnly, PdfText

_COUNT = struct.Struct(">I")
HTML, DEEP, PDF = 0, 1, 2  # a page's kind byte: HTML, HTML with deep markup, a PDF
_TO_CHILD = struct.Struct(">IBH")
_FROM_CHILD = struct.Struct(">BIB")
Sent = tuple[bytes, int, str]  # a page to the child: its bytes, its kind, its URL
Answer = tuple[str, str]  # a page's text and what made it (Extractor.extract_by)
READY = b"DPX\x01"  # the child's first bytes: its extractor is made, pages may come
STARTUP_SECONDS = 120.0  # how long a child may take to say READY
_WARM_UP = "<html><body><p>Ready.</p></body></html>"  # read by a new child before it says READY


class ExtractorCrash(Exception):
    """The child died on a page (a crash in the extractor's C code)."""


class ExtractorFailed(Exception):
    """The extractor raised on a page; the message is the child's."""


class ExtractorNotStarted(WarcError):
    """The extractor's process exited, or said nothing, before it was ready for pages."""


def class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


class Sandbox:
    """Pages to text in a child process running the extractor class ``spec`` (``module:Class``)."""

    def __init__(self, spec: str, max_seconds: float, start_seconds: float = STARTUP_SECONDS):
        self.spec = spec
        self.max_seconds = max_seconds
        self.start_seconds = start_seconds
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0  # children started (1 unless pages crashed or hung)

    def _start(self) -> subprocess.Popen[bytes]:
        """A new child, once it has said :data:`READY` (its start-up on a clock of its own)."""
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        cmd = [sys.executable, "-m", "dolma_pipe.stages.warc.sandbox", self.spec]
        self.started += 1
        self.proc = proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        assert proc.stdout is not None
        what = f"the extractor's process ({self.spec})"
        try:
            said = self._read(proc.stdout.fileno(), len(READY), time.monotonic() + self.start_seconds)
        except TooSlow:
            raise ExtractorNotStarted(f"{what} was not ready after {self.start_seconds:g} s (start-up limit)") from None
        except ExtractorCrash as exc:
            raise ExtractorNotStarted(f"{what} ended before it was ready: {exc}; its error output is above") from None
        if said != READY:
            self._stop()
            raise ExtractorNotStarted(f"{what} began with {said!r}, not its ready message")
        return proc

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()
            self.proc = None

    def close(self) -> None:
        self._stop()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def extract(self, html: str, deep: bool = False, url: str | None = None) -> str:
        """One page's text; :class:`TooSlow`, :class:`ExtractorCrash` or :class:`ExtractorFailed`."""
        (result,) = self.extract_many([(html.encode("utf-8", "surrogatepass"), DEEP if deep else HTML, url or "")])
        if isinstance(result, Exception):
            raise result
        return result[0]

    def extract_many(self, pages: list[Sent]) -> list[Answer | Exception]:
        """Each page's text and what made it, or the exception that says why there is none. A
        page is its bytes (HTML in UTF-8, or a PDF), its kind (:data:`HTML`, :data:`DEEP`,
        :data:`PDF`) and its URL ("" for none)."""
        try:
            return self._round_trip(pages)
        except (TooSlow, ExtractorCrash) as exc:
            if len(pages) == 1:
                return [exc]
        out: list[Answer | Exception] = []
        for page in pages:  # again one by one: only the page at fault is lost
            out.extend(self.extract_many([page]))
        return out

    def _round_trip(self, pages: list[Sent]) -> list[Answer | Exception]:
        if self.proc is None or self.proc.poll() is not None:
            self._stop()
            self._start()
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        parts = [_COUNT.pack(len(pages))]
        for data, kind, url in pages:
            address = url.encode("utf-8", "surrogatepass")
            address = address if len(address) <= 0xFFFF else b""  # a URL past 64 KiB: sent as none
            parts += [_TO_CHILD.pack(len(data), kind, len(address)), address, data]
        try:
            self.proc.stdin.write(b"".join(parts))
            self.proc.stdin.flush()
        except BrokenPipeError:
            self._stop()
            raise ExtractorCrash("the extractor's process died") from None
        deadline = time.monotonic() + self.max_seconds
        fd = self.proc.stdout.fileno()
        (count,) = _COUNT.unpack(self._read(fd, _COUNT.size, deadline))
        out: list[Answer | Exception] = []
        for _ in range(count):
            status, size, by_size = _FROM_CHILD.unpack(self._read(fd, _FROM_CHILD.size, deadline))
            by = self._read(fd, by_size, deadline).decode("utf-8")
            body = self._read(fd, size, deadline).decode("utf-8", "surrogatepass")
            out.append(ExtractorFailed(body) if status else (body, by))
        return out

    def _read(self, fd: int, size: int, deadline: float) -> bytes:
        chunks: list[bytes] = []
        need = size
        while need:
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                self._stop()
                raise TooSlow()
            chunk = os.read(fd, min(need, 1 << 20))
            if not chunk:
                code = self.proc.wait() if self.proc is not None else None
                self._stop()
                raise ExtractorCrash(f"the extractor's process died (exit status {code})")
            chunks.append(chunk)
            need -= len(chunk)
        return b"".join(chunks)


def _read_exactly(stream, size: int) -> bytes | None:
    data = stream.read(size)
    return data if len(data) == size else None


def _answer(extractor: Extractor, pdf: PdfText | None, data: bytes, kind: int, url: str) -> tuple[bytes, bytes, int]:
    """The page's text, what made it, and 0; or an error message, b"" and 1."""
    try:
        if kind == PDF:
            assert pdf is not None
            text, by = pdf.extract(data), pdf.name
        else:
            text, by = extractor.extract_by(data.decode("utf-8", "surrogatepass"), kind == DEEP, url or None)
        return text.encode("utf-8", "surrogatepass"), by.encode("utf-8"), 0
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"), b"", 1


def serve(spec: str) -> None:
    """The child's loop: batches of pages in on stdin, their texts out on stdout, until stdin closes."""
    # Whatever an extractor prints (from Python or C, at import or later) must not mix with the
    # answers: they go out on a copy of stdout, and stdout itself is made stderr.
    inp, out = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    module, _, name = spec.partition(":")
    extractor: Extractor = getattr(importlib.import_module(module), name)()
    try:
        extractor.extract_by(_WARM_UP, False, None)  # what a first call loads lazily, loaded now
    except Exception:
        pass  # a page that fails says so when it comes
    pdf: PdfText | None = None
    if isinstance(extractor, PdfOnly):  # a child for PDFs alone: pdfium loaded before it is ready
        import pypdfium2  # noqa: F401

        pdf = PdfText()
    out.write(READY)
    out.flush()
    while True:
        head = _read_exactly(inp, _COUNT.size)
        if head is None:
            return
        pages = []
        for _ in range(_COUNT.unpack(head)[0]):
            size, kind, url_size = _TO_CHILD.unpack(_read_exactly(inp, _TO_CHILD.size) or b"\0" * _TO_CHILD.size)
            url = (_read_exactly(inp, url_size) or b"").decode("utf-8", "surrogatepass")
            pages.append((_read_exactly(inp, size) or b"", kind, url))
        answers = [_COUNT.pack(len(pages))]
        for data, kind, url in pages:
            if kind == PDF and pdf is None:
                pdf = PdfText()
            answer, by, status = _answer(extractor, pdf, data, kind, url)
            answers += [_FROM_CHILD.pack(status, len(answer), len(by)), by, answer]
        out.write(b"".join(answers))
        out.flush()


if __name__ == "__main__":
    serve(sys.argv[1])
