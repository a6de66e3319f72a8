"""Malformed WARCs: dolma-pipe warc against `dolma warc` and datatrove's WARC reader + trafilatura.

    .venv/bin/python bench/warc_robustness.py [--timeout 120] [--kinds KIND ...] [--tools ours dolma datatrove]

Issue 31's robustness target: no crash and no hang on malformed WARCs, every record accounted for
with a reason. This writes each malformed kind as a file of its own (``bench/_work/warc/robustness/``,
~750 records in all, with tests/support/warc.py's writers: warcio for WARC, by hand for ARC), and a
good control file: truncated (.warc.gz, .warc), wrong Content-Length (short, long, 999999999), bad
chunked framing, bad Content-Encoding (cut short, garbage, gzip bombs), broken WARC and HTTP
headers, corrupt gzip members, ARC (good, a corrupt member, a length that is no number), revisits,
redirects, non-HTML payloads, 5 MB pages, deeply nested markup. Then it runs each tool on each file
in a subprocess of its own (its own virtual environment, one process) under a wall-clock limit,
and prints a table per kind and tool:

- outcome: ``ok``; ``crashed`` (a non-zero exit, with the error it died of); ``hung`` (killed at
  the limit, its process group with it);
- written: the documents in its output, and how many of the file's intact HTML pages have a
  document holding every paragraph of theirs (matched by URL);
- accounted: the records whose fate the tool's own output or logs give (written, or counted with a
  reason), against the records in the file (the file's records as written, before the damage).

How each tool's records are accounted for:

- ``dolma-pipe warc`` (``ours``): the task's counts in ``_manifest.json``; ``records`` must equal
  ``written`` + every ``skipped_<reason>`` + ``quarantined`` (each quarantined record in
  ``_errors/`` with its byte offset); the table says where it does not.
- ``dolma warc`` (Dolma 1.2.1, resiliparse; ``bench/_work/dolma-warc-venv``): it writes documents and
  a progress bar of records read and documents written; a record it does not write has no reason
  anywhere (a warcinfo, request, revisit or metadata record is passed over by the reader's type
  filter without a count). Accounted: what it wrote.
- ``datatrove`` (0.10.1: ``WarcReader`` -> ``Trafilatura`` with FineWeb's settings and 1 s timeout ->
  ``JsonlWriter``, local executor, one task; ``bench/_work/datatrove-venv``): the writer's documents,
  and the extractor step's counts in the run's ``stats`` (``timeout``, ``broken_process``,
  ``clean_error``, ``dropped`` for empty text: reasons). The reader passes over records (not a
  response, not HTML, undecodable) without counting them. Accounted: written + the extractor's
  counted drops.

Nothing here runs in CI; the table and the command are in docs/benchmarks.md ("WARC robustness").
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORK = os.path.join(HERE, "_work", "warc", "robustness")
DATATROVE_PYTHON = os.path.join(HERE, "_work", "datatrove-venv", "bin", "python")
DOLMA_BIN = os.path.join(HERE, "_work", "dolma-warc-venv", "bin", "dolma")
OURS_BIN = os.path.join(ROOT, ".venv", "bin", "dolma-pipe")
TOOLS = ("ours", "dolma", "datatrove")
TOOL_NAMES = {"ours": "dolma-pipe warc", "dolma": "dolma warc", "datatrove": "datatrove + trafilatura"}


# The files --------------------------------------------------------------------------------------


@dataclass
class Made:
    """A kind's file and the records written into it (its first, warcinfo or ARC filedesc, included)."""

    kind: str
    path: str
    records: int
    what: str
    expected: dict[str, list[str]] = field(default_factory=dict)  # an intact page's URL -> paragraphs its text must hold


def _pages(rng, n: int, site: str, first: int = 0) -> list:
    from tests.support.warc import html_page, paragraphs, response

    return [
        response(f"https://{site}.example.org/p/{i}", html_page(f"{site} {i}", ps), text=ps)
        for i, ps in ((i, paragraphs(rng, rng.randint(2, 6))) for i in range(first, first + n))
    ]


def _framed(body: bytes, size: int) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def make_files(folder: str) -> list[Made]:
    """Every kind's file under ``folder`` (written again each run: cheap, and never stale)."""
    from tests.support.warc import Rec, gzip_member_offsets, html_page, paragraphs, response, write_arc, write_warc

    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    made: list[Made] = []

    def warc(kind: str, name: str, records: list, what: str, compress: bool = True) -> str:
        path = os.path.join(folder, kind, name)
        write_warc(Path(path), records, compress=compress)
        made.append(Made(kind, path, len(records) + 1, what, intact(records)))
        return path

    def intact(records: list) -> dict[str, list[str]]:
        return {r.url: r.text for r in records if r.expect == "written" and r.text}

    rng = random.Random(31)
    warc("control", "control.warc.gz", _pages(rng, 60, "control"), "60 good HTML pages (the control)")

    # Truncated: the file ends inside its last record (a .warc.gz cut inside the last gzip member,
    # a .warc inside the last payload).
    recs = _pages(rng, 40, "trunc")
    path = warc("truncated-gz", "truncated.warc.gz", recs, "40 pages, the file cut inside the last record's gzip member")
    made[-1].expected.pop(recs[-1].url)
    data = open(path, "rb").read()
    last = gzip_member_offsets(Path(path))[-1]
    open(path, "wb").write(data[: last + (len(data) - last) // 2])
    recs = _pages(rng, 40, "trunc-plain")
    path = warc("truncated", "truncated.warc", recs, "40 pages, the file cut inside the last payload", compress=False)
    made[-1].expected.pop(recs[-1].url)
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-300])

    # Wrong Content-Length: 3 records 25 bytes short, 2 records 40 bytes long (eating the next record's start).
    recs = _pages(rng, 40, "length")
    path = warc("content-length", "length.warc", recs, "40 pages; 3 Content-Lengths 25 bytes short, 2 40 bytes long", compress=False)
    raw = open(path, "rb").read()
    starts = [i for i in range(len(raw)) if raw.startswith(b"WARC-Type: response", i)]
    for n, delta in ((5, -25), (12, -25), (20, +40), (27, -25), (33, +40)):
        at = raw.index(b"Content-Length: ", starts[n]) + len(b"Content-Length: ")
        end = raw.index(b"\r\n", at)
        new = str(int(raw[at:end]) + delta).encode()
        raw = raw[:at] + new + raw[end:]
        shift = len(new) - (end - at)
        starts = [s + (shift if s > at else 0) for s in starts]
        made[-1].expected.pop(recs[n].url)
    open(path, "wb").write(raw)

    # A Content-Length of 999999999 in the 6th record: by its length, it runs over the file's rest.
    recs = _pages(rng, 40, "huge-length")
    path = warc("huge-content-length", "huge.warc", recs, "40 pages, the 6th with a Content-Length of 999999999", compress=False)
    raw = open(path, "rb").read()
    at = raw.index(b"Content-Length: ", raw.index(b"WARC-Target-URI: " + recs[5].url.encode())) + len(b"Content-Length: ")
    open(path, "wb").write(raw[:at] + b"999999999" + raw[raw.index(b"\r\n", at) :])
    made[-1].expected.pop(recs[5].url)

    # Bad chunking: Transfer-Encoding: chunked with good framing, framing cut short, a size that is
    # not hex, a size larger than what follows, and no framing at all.
    recs = []
    for i in range(40):
        ps = paragraphs(rng, 3)
        body = html_page(f"chunk {i}", ps).encode()
        framed = _framed(body, 97)
        variant = i % 6
        payload = {
            0: framed,
            1: framed[: len(framed) // 2],
            2: b"zz-not-hex\r\n" + body + b"\r\n0\r\n\r\n",
            3: b"%x\r\n" % (len(body) * 3) + body + b"\r\n0\r\n\r\n",
            4: body,
            5: b"-fff\r\n" + body + b"\r\n0\r\n\r\n",  # a negative size
        }[variant]
        r = response(f"https://chunk.example.org/{i}", payload, text=[] if variant == 1 else ps)
        r.headers.append(("Transfer-Encoding", "chunked"))
        recs.append(r)
    warc(
        "bad-chunking",
        "chunking.warc.gz",
        recs,
        "40 chunked pages: good, cut short, a size not hex, a negative size, a size past the end, no framing",
    )

    # Content-Encoding: gzip, deflate and brotli pages; gzip cut short, garbage labelled gzip,
    # plain HTML labelled gzip, and two gzip bombs (100 kB inflating to 100 MB of HTML).
    import zlib

    import brotli

    bomb = gzip.compress(b"<html><body>" + b"<p>again</p>" * (100_000_000 // 12) + b"</body></html>", compresslevel=9)
    recs = []
    for i in range(42):
        ps = paragraphs(rng, 3)
        body = html_page(f"enc {i}", ps).encode()
        variants = [
            ("gzip", gzip.compress(body)),
            ("deflate", zlib.compress(body)),
            ("br", brotli.compress(body)),
            ("gzip", gzip.compress(body)[: len(gzip.compress(body)) * 2 // 3]),  # cut short
            ("gzip", bytes(rng.randrange(256) for _ in range(600))),  # garbage
            ("gzip", body),  # not compressed at all
            ("br", brotli.compress(body)[:-30]),  # cut short
        ]
        coding, payload = ("gzip", bomb) if i >= 40 else variants[i % len(variants)]
        damaged = i >= 40 or variants.index((coding, payload)) in (3, 4, 6)
        r = response(f"https://enc.example.org/{i}", payload, text=[] if damaged else ps)
        r.headers.append(("Content-Encoding", coding))
        recs.append(r)
    warc(
        "content-encoding",
        "encoding.warc.gz",
        recs,
        "40 pages in gzip, deflate, br, cut short, garbage or plain labelled gzip; 2 gzip bombs (100 kB inflating to 100 MB)",
    )

    # Bad headers (a plain .warc edited by hand): a Content-Length that is no number, a header line
    # without a colon, an unknown WARC-Type, no WARC-Target-URI, no WARC-Record-ID, a WARC-Date that
    # is no date, an HTTP status that is no number, no HTTP status line, a charset of bytes that are
    # not text.
    recs = _pages(rng, 40, "headers")
    path = warc("bad-headers", "headers.warc", recs, "40 pages, 9 with a broken WARC or HTTP header", compress=False)
    raw = open(path, "rb").read()

    def edit(raw: bytes, n: int, old: bytes, new: bytes, in_block: bool = False) -> bytes:
        start = raw.rfind(b"WARC/1.", 0, [i for i in range(len(raw)) if raw.startswith(b"WARC-Type: response", i)][n])
        at = raw.index(old, start)
        raw = raw[:at] + new + raw[at + len(old) :]
        if in_block:  # the block's length changed: the Content-Length with it
            cl = raw.index(b"Content-Length: ", start) + len(b"Content-Length: ")
            end = raw.index(b"\r\n", cl)
            raw = raw[:cl] + str(int(raw[cl:end]) + len(new) - len(old)).encode() + raw[end:]
        return raw

    def header(n: int, name: bytes) -> bytes:
        start = raw.rfind(b"WARC/1.", 0, [i for i in range(len(raw)) if raw.startswith(b"WARC-Type: response", i)][n])
        at = raw.index(name, start)
        return raw[at : raw.index(b"\r\n", at) + 2]

    broken = {
        2: (header(2, b"Content-Length: "), b"Content-Length: many\r\n", False),
        6: (b"WARC-Type: response\r\n", b"WARC-Type: response\r\nThis line has no colon\r\n", False),
        10: (b"WARC-Type: response", b"WARC-Type: responze", False),
        14: (header(14, b"WARC-Target-URI: "), b"", False),
        18: (header(18, b"WARC-Record-ID: "), b"", False),
        22: (header(22, b"WARC-Date: "), b"WARC-Date: the day before yesterday\r\n", False),
        26: (b"HTTP/1.1 200 OK", b"HTTP/1.1 2x0 OK", True),
        30: (b"HTTP/1.1 200 OK\r\n", b"", True),
        34: (b"charset=utf-8", b"charset=\xff\xfe\x00", True),
    }
    for n in sorted(broken, reverse=True):  # from the end: earlier offsets stay put
        old, new, in_block = broken[n]
        raw = edit(raw, n, old, new, in_block)
    open(path, "wb").write(raw)
    for n in (2, 10, 14, 26, 30):  # no page is expected of these
        made[-1].expected.pop(recs[n].url)

    # A corrupt gzip member: 30 bytes flipped inside two members, garbage between two others.
    recs = _pages(rng, 60, "gz")
    path = warc(
        "corrupt-gzip", "corrupt.warc.gz", recs, "60 pages; 2 gzip members with 30 bytes flipped, 200 bytes of garbage between two members"
    )
    data = bytearray(open(path, "rb").read())
    offsets = gzip_member_offsets(Path(path))
    for victim in (15, 40):  # member 0 is the warcinfo record's
        made[-1].expected.pop(recs[victim - 1].url)
        for i in range(offsets[victim] + 30, offsets[victim] + 60):
            data[i] ^= 0x5A
    garbage = bytes(random.Random(7).randrange(256) for _ in range(200))
    data[offsets[50] : offsets[50]] = garbage
    open(path, "wb").write(bytes(data))

    # ARC (version 1): pages, an image, a redirect.
    arc_recs = _pages(rng, 40, "arc") + [
        response("https://arc.example.org/logo.png", b"\x89PNG\r\n\x1a\n" + bytes(200), "image/png", expect="skipped_content_type"),
        response("https://arc.example.org/moved", b"", status="302 Found", expect="skipped_redirect"),
    ]
    path = os.path.join(folder, "arc", "old.arc.gz")
    write_arc(Path(path), arc_recs)
    made.append(Made("arc", path, len(arc_recs) + 1, "ARC v1, a gzip member per record: 40 pages, an image, a redirect", intact(arc_recs)))

    # Damaged ARC files: a corrupt gzip member, a record header whose length is no number, a
    # plain .arc cut inside its last record.
    arc_recs = _pages(rng, 30, "arc-gz")
    path = os.path.join(folder, "arc-corrupt", "corrupt.arc.gz")
    write_arc(Path(path), arc_recs)
    made.append(Made("arc-corrupt", path, len(arc_recs) + 1, "ARC, 30 pages, 30 bytes flipped in the 11th gzip member", intact(arc_recs)))
    data = bytearray(open(path, "rb").read())
    offsets = gzip_member_offsets(Path(path))
    for i in range(offsets[11] + 30, offsets[11] + 60):
        data[i] ^= 0x5A
    open(path, "wb").write(bytes(data))
    made[-1].expected.pop(arc_recs[10].url)
    arc_recs = _pages(rng, 30, "arc-len")
    path = os.path.join(folder, "arc-bad-length", "length.arc")
    write_arc(Path(path), arc_recs, compress=False)
    made.append(
        Made(
            "arc-bad-length",
            path,
            len(arc_recs) + 1,
            "plain ARC, 30 pages, the 11th record's length no number, the file cut in its last record",
            intact(arc_recs),
        )
    )
    raw = open(path, "rb").read()
    head = raw.index(arc_recs[10].url.encode() + b" ")
    end = raw.index(b"\n", head)
    line = raw[head:end].rsplit(b" ", 1)[0] + b" many"
    raw = raw[:head] + line + raw[end:]
    open(path, "wb").write(raw[:-200])
    made[-1].expected.pop(arc_recs[10].url)
    made[-1].expected.pop(arc_recs[-1].url)

    # Revisit records: each page crawled again and unchanged.
    recs = []
    for page in _pages(rng, 30, "revisit"):
        recs += [page, Rec("revisit", page.url, headers=[("Content-Type", "text/html")], expect="skipped_revisit")]
    warc("revisit", "revisit.warc.gz", recs, "30 pages, each with a revisit record")

    # Redirects: 301/302/307/308 with a Location, empty or with a small HTML body; plus the targets.
    recs = []
    for i, page in enumerate(_pages(rng, 30, "redirect")):
        status = ("301 Moved Permanently", "302 Found", "307 Temporary Redirect", "308 Permanent Redirect")[i % 4]
        body = b"" if i % 2 else html_page("Moved", [f"This page moved to {page.url}."]).encode()
        r = response(page.url + "/old", body, status=status, expect="skipped_redirect")
        r.headers.append(("Location", page.url))
        recs += [r, page]
    warc("redirects", "redirects.warc.gz", recs, "30 redirects (301/302/307/308, half with an HTML body) and their 30 targets")

    # Non-HTML payloads, some labelled truly, some labelled text/html.
    png = b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(400))
    jpeg = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(rng.randrange(256) for _ in range(400))
    pdf = b"%PDF-1.4\n" + b"1 0 obj << >> endobj\n" * 20 + b"%%EOF\n"
    zipped = b"PK\x03\x04" + bytes(rng.randrange(256) for _ in range(300))
    binary = bytes(rng.randrange(256) for _ in range(600))
    others = [
        ("img.png", png, "image/png"),
        ("photo.jpg", jpeg, "image/jpeg"),
        ("doc.pdf", pdf, "application/pdf"),
        ("data.json", json.dumps({"a": list(range(50))}).encode(), "application/json"),
        ("style.css", b"body { color: red; }\n" * 30, "text/css"),
        ("app.js", b"function f(x) { return x * 2; }\n" * 30, "application/javascript"),
        ("notes.txt", b"Plain text notes, not a page.\n" * 30, "text/plain"),
        ("blob.bin", binary, "application/octet-stream"),
        ("pic-as-html", png, "text/html"),
        ("pdf-as-html", pdf, "text/html; charset=utf-8"),
        ("zip-as-html", zipped, "text/html"),
        ("noise-as-html", binary, "text/html; charset=utf-8"),
        ("feed.xml", b"<?xml version='1.0'?><rss><channel><title>t</title></channel></rss>", "application/rss+xml"),
    ]
    recs = _pages(rng, 20, "mixed")
    for n in range(3):
        for name, body, ctype in others:
            recs.append(response(f"https://mixed.example.org/{n}/{name}", body, ctype, expect="skipped_content_type"))
    warc(
        "non-html", "non-html.warc.gz", recs, "20 pages; 39 images, PDFs, JSON, CSS, JS, text, binary, RSS (12 of them labelled text/html)"
    )

    # 5 MB pages (under the stage's 8 MiB cap) among small ones.
    base = paragraphs(random.Random(5), 9000, words=90)
    recs = _pages(rng, 20, "small")
    for i in range(5):
        ps = base[:]
        random.Random(i).shuffle(ps)
        recs.insert(4 * i + 2, response(f"https://big.example.org/{i}", html_page(f"Big {i}", ps), text=[ps[0], ps[-1]]))
    warc("5mb-pages", "big.warc.gz", recs, "5 pages of 5 MB of HTML among 20 small ones")

    # Deeply nested markup.
    deep = []
    for depth in (5_000, 20_000, 50_000, 100_000):
        deep.append(
            response(
                f"https://deep.example.org/div-{depth}",
                "<html><body>" + "<div>" * depth + "<p>Deep text.</p>" + "</div>" * depth + "</body></html>",
                text=["Deep text."],
            )
        )
    deep.append(
        response("https://deep.example.org/unclosed", "<html><body>" + "<b><i><span>" * 30_000 + "Never closed.", text=["Never closed."])
    )
    deep.append(
        response(
            "https://deep.example.org/tables",
            "<html><body>" + "<table><tr><td>" * 20_000 + "Cell." + "</td></tr></table>" * 20_000 + "</body></html>",
            text=["Cell."],
        )
    )
    recs = _pages(rng, 20, "shallow")
    for i, r in enumerate(deep):
        recs.insert(3 * i + 1, r)
    warc("deep-markup", "deep.warc.gz", recs, "6 pages nested 5,000 to 100,000 deep (divs, unclosed inline tags, tables) among 20")
    return made


# Running a tool ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    tool: str
    kind: str
    status: str  # ok, crashed, hung
    error: str = ""
    written: int = 0
    accounted: int | None = None
    reasons: Counter = field(default_factory=Counter)
    note: str = ""
    wall: float = 0.0
    right: int = 0  # intact pages written with every paragraph of theirs


def _last_error(text: str) -> str:
    """The exception a run died of (the first ``SomeError: ...`` line), else its last error line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if re.match(r"^[A-Za-z_.]*(Error|Exception|Exit|Interrupt)[A-Za-z]*: ", ln):
            return ln[:160]
    for ln in reversed(lines):
        if "error" in ln.lower():
            return ln[:160]
    return lines[-1][:160] if lines else ""


def run_limited(cmd: list[str], limit: float, env: dict | None = None) -> tuple[str, int | None, str, float]:
    """``cmd`` in a process group of its own: (status, exit code, output, wall seconds)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return "hung", None, out.decode(errors="replace"), time.monotonic() - start
    status = "ok" if proc.returncode == 0 else "crashed"
    return status, proc.returncode, out.decode(errors="replace"), time.monotonic() - start


def count_lines(folder: str) -> int:
    """Documents in the .jsonl.gz files under ``folder`` (as far as a file reads, if cut short)."""
    n = 0
    for path in glob.glob(os.path.join(folder, "**", "*.jsonl.gz"), recursive=True):
        try:
            with gzip.open(path, "rt", encoding="utf8", errors="replace") as f:
                for line in f:
                    n += bool(line.strip())
        except (OSError, EOFError):
            pass
    return n


def run_ours(made: Made, out: str, limit: float) -> Outcome:
    cmd = [OURS_BIN, "warc", "--documents", made.path, "--destination", out, "--source_name", "bench", "--processes", "1", "--no-progress"]
    env = dict(os.environ, DOLMA_PIPE_CACHE=os.path.join(out, "_cache"))
    status, code, text, wall = run_limited(cmd, limit, env)
    o = Outcome("ours", made.kind, status, wall=wall)
    if status != "ok":
        o.error = _last_error(text)
    manifest = os.path.join(out, "_manifest.json")
    if not os.path.exists(manifest):
        return o
    with open(manifest) as f:
        m = json.load(f)
    tasks = [t for ph in m["phases"] for t in ph["tasks"].values()] if isinstance(m.get("phases"), list) else []
    counts: Counter = Counter()
    errors: Counter = Counter()
    for t in tasks:
        counts.update({k: v for k, v in t.get("counts", {}).items() if isinstance(v, int)})
        errors.update(t.get("errors", {}))
    if not tasks:
        counts.update({k: v for k, v in m.get("totals", {}).items() if isinstance(v, int)})
    o.written = counts["written"]
    skipped = {k[len("skipped_") :]: v for k, v in counts.items() if k.startswith("skipped_") and v}
    o.accounted = o.written + sum(skipped.values()) + counts["quarantined"]
    o.reasons = Counter(skipped) + errors
    notes = []
    if counts["records"] != o.accounted:
        notes.append(f"UNACCOUNTED: records {counts['records']} != {o.accounted}")
    if counts["quarantined"] != sum(errors.values()):
        notes.append(f"quarantined {counts['quarantined']} but {sum(errors.values())} in errors")
    if counts["records"] != made.records:
        notes.append(f"reader's records {counts['records']}")
    for k in ("payload_damaged", "deep_markup"):
        if counts[k]:
            notes.append(f"{k} {counts[k]}")
    o.note = "; ".join(notes)
    return o


def run_dolma(made: Made, out: str, limit: float) -> Outcome:
    cmd = [DOLMA_BIN, "warc", "--documents", made.path, "--destination", out, "--source_name", "bench"]
    cmd += ["--linearizer", "resiliparse", "--processes", "1"]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    status, code, text, wall = run_limited(cmd, limit, env)
    o = Outcome("dolma", made.kind, status, wall=wall)
    if status == "crashed":
        o.error = _last_error(text)
    o.written = count_lines(out)
    o.accounted = o.written
    return o


def run_datatrove(made: Made, out: str, limit: float) -> Outcome:
    cmd = [DATATROVE_PYTHON, os.path.abspath(__file__), "datatrove", "--file", made.path, "--out", out]
    status, code, text, wall = run_limited(cmd, limit)
    o = Outcome("datatrove", made.kind, status, wall=wall)
    if status == "crashed":
        o.error = _last_error(text)
    o.written = count_lines(os.path.join(out, "output"))
    stats_file = os.path.join(out, "stats.json")
    if os.path.exists(stats_file):
        with open(stats_file) as f:
            steps = json.load(f)
        reader, extractor = steps[0]["stats"], steps[1]["stats"]  # WarcReader, Trafilatura

        def total(v) -> int:
            return v.get("total", 0) if isinstance(v, dict) else int(v or 0)

        drops = {k: total(extractor.get(k, 0)) for k in ("timeout", "broken_process", "clean_error", "dropped")}
        o.reasons = Counter({k: v for k, v in drops.items() if v})
        o.accounted = o.written + sum(drops.values())
        if status == "ok":  # (the reader's count is kept at the file's end)
            o.note = f"reader passed {total(reader.get('documents', 0))} of {made.records} on"
    else:
        o.accounted = o.written
    return o


RUNNERS = {"ours": run_ours, "dolma": run_dolma, "datatrove": run_datatrove}
OUTPUT = {"ours": "documents", "dolma": "", "datatrove": "output"}  # where each writes its documents


def pages_right(made: Made, folder: str) -> int:
    """How many of ``made``'s intact pages have a document holding each of their paragraphs
    (whitespace made single spaces): matched by URL (``warc_url``, or datatrove's ``url``)."""
    texts: dict[str, str] = {}
    for path in glob.glob(os.path.join(folder, "**", "*.jsonl.gz"), recursive=True):
        try:
            with gzip.open(path, "rt", encoding="utf8", errors="replace") as f:
                for line in f:
                    if line.strip():
                        doc = json.loads(line)
                        meta = doc.get("metadata") or {}
                        texts[meta.get("warc_url") or meta.get("url") or ""] = " ".join((doc.get("text") or "").split())
        except (OSError, EOFError, ValueError):
            pass
    return sum(all(" ".join(p.split()) in texts.get(url, "") for p in paras) for url, paras in made.expected.items())


# datatrove's side (run with its environment's python) ----------------------------------------------


def datatrove_main(args: argparse.Namespace) -> int:
    """datatrove's WARC reader -> Trafilatura (FineWeb's settings) -> JsonlWriter on one file;
    the steps' stats to ``out/stats.json`` (written even when a step raises)."""
    from collections import deque

    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers import JsonlWriter

    folder, name = os.path.split(os.path.abspath(args.file))
    steps = [
        WarcReader(folder, glob_pattern=name),
        Trafilatura(favour_precision=True, deduplicate=True, timeout=1),
        JsonlWriter(os.path.join(args.out, "output"), compression="gzip"),
    ]
    # The steps chained as its executor chains them (LocalPipelineExecutor._run_for_rank), here so
    # that their counts are kept when a step raises (the executor saves them only on success).
    try:
        data = None
        for step in steps:
            data = step(data, 0, 1)
        deque(data, maxlen=0)
    finally:
        with open(os.path.join(args.out, "stats.json"), "w") as f:
            json.dump([s.stats.to_dict() for s in steps], f)
    return 0


# The table -----------------------------------------------------------------------------------------


def cell(o: Outcome, made: Made) -> str:
    if o.status == "hung":
        state = f"**hung** (killed at {o.wall:.0f} s)"
    elif o.status == "crashed":
        state = f"**crashed**: `{o.error}`"
    else:
        state = "ok"
    acc = "-" if o.accounted is None else f"{o.accounted}/{made.records}"
    return state, f"{o.written} ({o.right}/{len(made.expected)})", acc


def print_table(made: list[Made], results: dict[tuple[str, str], Outcome], tools: list[str]) -> None:
    print("\n| kind | records | tool | outcome | written (intact pages right) | accounted for | reasons / notes |")
    print("|---|---:|---|---|---:|---:|---|")
    for m in made:
        for tool in tools:
            o = results.get((m.kind, tool))
            if o is None:
                continue
            state, written, acc = cell(o, m)
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(o.reasons.items()))
            extra = "; ".join(x for x in (reasons, o.note) if x)
            print(f"| {m.kind} | {m.records} | {TOOL_NAMES[tool]} | {state} | {written} | {acc} | {extra} |")
    print("\nfiles:")
    for m in made:
        print(f"  {m.kind}: {os.path.relpath(m.path, ROOT)}: {m.records} records ({m.what})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    dt = sub.add_parser("datatrove", help="(inside datatrove's environment) its WARC pipeline on one file")
    dt.add_argument("--file", required=True)
    dt.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=120.0, help="wall-clock seconds a tool may run on one file")
    ap.add_argument("--kinds", nargs="+", help="only these kinds (default: all)")
    ap.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    args = ap.parse_args()
    if args.cmd == "datatrove":
        return datatrove_main(args)
    sys.path.insert(0, ROOT)
    made = make_files(os.path.join(WORK, "warcs"))
    if args.kinds:
        made = [m for m in made if m.kind in args.kinds]
    print(f"{sum(m.records for m in made)} records in {len(made)} files", flush=True)
    results: dict[tuple[str, str], Outcome] = {}
    for m in made:
        for tool in args.tools:
            out = os.path.join(WORK, "out", tool, m.kind)
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            o = RUNNERS[tool](m, out, args.timeout)
            o.right = pages_right(m, os.path.join(out, OUTPUT[tool]))
            results[(m.kind, tool)] = o
            print(
                f"  {m.kind:15} {tool:10} {o.status:8} {o.wall:6.1f} s  written {o.written:4}  accounted {o.accounted}/{m.records}  {o.error} {o.note}",
                flush=True,
            )
    print_table(made, results, args.tools)
    return 0


if __name__ == "__main__":
    sys.exit(main())
