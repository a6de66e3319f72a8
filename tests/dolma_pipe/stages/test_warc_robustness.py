"""Malformed payloads found by bench/warc_robustness.py: each one counted with its reason, never a
hung or dead task."""

from __future__ import annotations

import random

import pytest

from tests.support.warc import html_page, paragraphs, read_records, response, run, write_warc


def _task(summary, name: str):
    (phase,) = summary.manifest.phases
    assert not phase.failures
    task = phase.tasks[name]
    c = task.counts
    assert c["records"] == c["written"] + sum(v for k, v in c.items() if k.startswith("skipped_")) + c.get("quarantined", 0)
    return task


def _pages(rng: random.Random, host: str, title: str, n: int) -> list:
    """``n`` pages of two paragraphs each at ``https://<host>.example.org/<i>``, titled ``<title><i>``."""
    return [
        response(f"https://{host}.example.org/{i}", html_page(f"{title}{i}", ps), text=ps)
        for i, ps in enumerate(paragraphs(rng, 2) for _ in range(n))
    ]


def _arc_length(raw: bytes, url: str) -> tuple[int, int]:
    """Where the length field of ``url``'s header line in an uncompressed ARC file starts and ends."""
    head = raw.index(url.encode() + b" ")
    end = raw.index(b"\n", head)
    return raw.rindex(b" ", head, end) + 1, end


def _set_arc_length(raw: bytes, url: str, length: bytes) -> bytes:
    """``raw`` with the length field of ``url``'s ARC header line replaced by ``length``."""
    start, end = _arc_length(raw, url)
    return raw[:start] + length + raw[end:]


@pytest.mark.timeout(20)  # before the fix, a negative chunk size sent the reader back for ever
def test_chunk_sizes_that_are_not_sizes_end(tmp_path):
    paras = paragraphs(random.Random(4), 3)
    body = html_page("Chunks", paras).encode()
    framings = [
        b"-fff\r\n" + body + b"\r\n0\r\n\r\n",  # a negative size, past the payload's start
        b"%x\r\n%s\r\n-3\r\n%s\r\n0\r\n\r\n" % (len(body), body, b"tail" * 10),  # one after a good chunk
        b"%x\r\n%s\r\n%x" % (len(body), body, 40),  # the payload ends in a size line
    ]
    records = [response(f"https://n.example.org/{i}", f, text=paras[:1]) for i, f in enumerate(framings)]
    for r in records:
        r.headers.append(("Transfer-Encoding", "chunked"))
    write_warc(tmp_path / "in" / "chunks.warc.gz", records)
    summary = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(tmp_path / "out"), "processes": 1, "isolate": False})
    task = _task(summary, "chunks.warc.gz")
    assert task.counts["written"] == 3 and task.counts["payload_damaged"] == 3
    docs = read_records(tmp_path / "out" / "documents" / "chunks.jsonl.gz")
    assert all(paras[0] in d["text"] for d in docs)


def test_content_encodings_inflate_under_the_size_cap(tmp_path):
    import gzip
    import zlib

    import brotli

    rng = random.Random(5)
    pages = [paragraphs(rng, 3) for _ in range(5)]
    html = [html_page(f"E{i}", ps).encode() for i, ps in enumerate(pages)]
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    bomb = gzip.compress(b"<html><body>" + b"<p>again</p>" * ((3 << 20) // 12) + b"</body></html>")  # ~3 MB from ~10 kB
    encoded = [
        ("gzip", gzip.compress(html[0]), "written"),
        ("deflate", zlib.compress(html[1]), "written"),
        ("deflate", raw.compress(html[2]) + raw.flush(), "written"),  # raw deflate, as some servers send it
        ("br", brotli.compress(html[3]), "written"),
        ("gzip", gzip.compress(html[4])[:-200], "written"),  # cut short: what inflates is kept
        ("gzip", bomb, "skipped_too_large"),
    ]
    records = []
    for i, (coding, body, expect) in enumerate(encoded):
        r = response(f"https://e.example.org/{i}", body, expect=expect, text=pages[i][:1] if i < 5 else [])
        r.headers.append(("Content-Encoding", coding))
        records.append(r)
    write_warc(tmp_path / "in" / "enc.warc.gz", records)
    out = tmp_path / "out"
    summary = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(out), "processes": 1, "max_record_bytes": 1 << 20})
    task = _task(summary, "enc.warc.gz")
    assert task.counts["written"] == 5 and task.counts["skipped_too_large"] == 1 and task.counts["payload_damaged"] == 1
    docs = {d["metadata"]["warc_url"]: d for d in read_records(out / "documents" / "enc.jsonl.gz")}
    for r in records[:4]:
        assert r.text[0] in docs[r.url]["text"], r.url
    assert records[4].text[0][:60] in docs[records[4].url]["text"]  # the part before the cut


def test_a_childs_start_up_is_not_the_first_pages_time(monkeypatch):
    from dolma_pipe.stages.warc.sandbox import ExtractorNotStarted, Sandbox, class_path
    from tests.support.warc import SLOW_START_ENV, SlowStart

    page = html_page("Slow start", ["A page that takes no time at all to read."])
    monkeypatch.setenv(SLOW_START_ENV, "0.6")
    # Start-up (0.6 s and more) is past max_seconds; the page's extraction is not.
    with Sandbox(class_path(SlowStart), max_seconds=0.5) as sandbox:
        assert "no time at all" in sandbox.extract(page)
        assert sandbox.started == 1
    with Sandbox(class_path(SlowStart), max_seconds=0.5, start_seconds=0.2) as sandbox:
        with pytest.raises(ExtractorNotStarted, match=r"SlowStart\) was not ready after 0.2 s"):
            sandbox.extract(page)
    with Sandbox("tests.support.warc:NoSuchExtractor", max_seconds=0.5) as sandbox:
        with pytest.raises(ExtractorNotStarted, match=r"NoSuchExtractor\) ended before it was ready"):
            sandbox.extract(page)


def test_a_charset_label_that_is_no_name_is_passed_over():
    from dolma_pipe.stages.warc.charset import decode

    page = html_page("Label", ["Caf\u00e9 cr\u00e8me."]).encode()
    for label in ("\xff\xfe\x00", "utf-8\x00", "\x00"):  # codecs.lookup raised ValueError on these: a dead task
        decoded = decode(page, label)
        assert decoded.decided_by == "utf8" and "Caf\u00e9 cr\u00e8me." in decoded.text


def test_damage_in_an_arc_file_costs_the_damaged_record_only(tmp_path):
    from tests.support.warc import gzip_member_offsets, write_arc

    rng = random.Random(6)
    pages = _pages(rng, "arc", "A", 20)
    src = tmp_path / "in"
    write_arc(src / "corrupt.arc.gz", pages)
    data = bytearray((src / "corrupt.arc.gz").read_bytes())
    start = gzip_member_offsets(src / "corrupt.arc.gz")[8]  # member 0 is the filedesc record: page 7
    for i in range(start + 30, start + 60):
        data[i] ^= 0x5A
    (src / "corrupt.arc.gz").write_bytes(bytes(data))
    write_arc(src / "length.arc", pages, compress=False)
    raw = (src / "length.arc").read_bytes()
    (src / "length.arc").write_bytes(_set_arc_length(raw, pages[7].url, b"many"))
    out = tmp_path / "out"
    summary = run({"documents": [str(src / "*")], "destination": str(out), "processes": 1})
    kept = [p.url for p in pages if p.url != pages[7].url]
    for name in ("corrupt", "length"):
        task = _task(summary, f"{name}.arc{'.gz' if name == 'corrupt' else ''}")
        assert task.errors == {"corrupt_record": 1} and task.counts["written"] == 19, name
        assert task.counts["records"] == 21, name  # the damaged record counted once (and the filedesc record)
        docs = read_records(out / "documents" / f"{name}.jsonl.gz")
        assert [d["metadata"]["warc_url"] for d in docs] == kept, name  # every record after the damage is read again


@pytest.mark.parametrize("max_record_bytes", [8 << 20, 4096])  # the swallowed rest read whole (digest mismatch), or past the cap
def test_a_content_length_past_the_next_records_costs_one_record(tmp_path, max_record_bytes):
    import gzip

    rng = random.Random(7)
    pages = _pages(rng, "l", "L", 30)
    src = tmp_path / "in"
    write_warc(src / "length.warc", pages, compress=False)
    raw = (src / "length.warc").read_bytes()
    starts = [i for i in range(len(raw)) if raw.startswith(b"WARC/1.", i)]  # the warcinfo record's, then each page's
    at = raw.index(b"Content-Length: ", starts[6]) + len(b"Content-Length: ")  # page 5's
    raw = raw[:at] + b"999999999" + raw[raw.index(b"\r\n", at) :]
    (src / "length.warc").write_bytes(raw)
    # The same records, a gzip member each (as Common Crawl stores them).
    starts = [i for i in range(len(raw)) if raw.startswith(b"WARC/1.", i)] + [len(raw)]
    (src / "length-gz.warc.gz").write_bytes(b"".join(gzip.compress(raw[a:b], mtime=0) for a, b in zip(starts, starts[1:])))
    out = tmp_path / "out"
    summary = run({"documents": [str(src / "*")], "destination": str(out), "processes": 1, "max_record_bytes": max_record_bytes})
    for name in ("length", "length-gz"):
        task = _task(summary, f"{name}.warc{'.gz' if name.endswith('gz') else ''}")
        assert task.counts["records"] == 31 and task.counts["written"] == 29, name  # no record after page 5 lost
        docs = read_records(out / "documents" / f"{name}.jsonl.gz")
        assert [d["metadata"]["warc_url"] for d in docs] == [p.url for i, p in enumerate(pages) if i != 5], name


def test_bytes_that_are_not_text_are_not_html_whatever_the_header(tmp_path):
    rng = random.Random(8)
    noise = bytes(rng.randrange(256) for _ in range(2000))
    paras = ["Привет мир, 你好世界: a page in UTF-16."]
    utf16 = html_page("U", paras).encode("utf-16-le")
    records = [
        response("https://b.example.org/noise", noise, expect="skipped_content_type"),
        response("https://b.example.org/gzip-noise", noise, expect="skipped_content_type"),  # a Content-Encoding that does not undo
        response("https://b.example.org/utf16-bom", b"\xff\xfe" + utf16, text=paras),
        response("https://b.example.org/utf16", utf16, "text/html; charset=utf-16le", text=paras),
    ]
    records[1].headers.append(("Content-Encoding", "gzip"))
    write_warc(tmp_path / "in" / "b.warc.gz", records)
    summary = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(tmp_path / "out"), "processes": 1, "isolate": False})
    task = _task(summary, "b.warc.gz")
    assert task.counts["written"] == 2 and task.counts["skipped_content_type"] == 2  # they were written: text of noise
    docs = {d["metadata"]["warc_url"]: d for d in read_records(tmp_path / "out" / "documents" / "b.jsonl.gz")}
    assert all(paras[0] in docs[r.url]["text"] for r in records[2:])


def test_utf16_cjk_pages_without_a_mark_are_text(tmp_path):
    rng = random.Random(12)
    zh = "".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(600))  # a tenth of its low bytes are C0
    paras = [zh[:300], zh[300:]]
    records = [
        response(f"https://c.example.org/{codec}/{header}", html_page("U", paras, nav=False).encode(codec), ctype, text=paras)
        for codec in ("utf-16-le", "utf-16-be")
        for header, ctype in (("named", f"text/html; charset={codec.replace('-le', 'le').replace('-be', 'be')}"), ("none", "text/html"))
    ]
    write_warc(tmp_path / "in" / "c.warc.gz", records)
    summary = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(tmp_path / "out"), "processes": 1, "isolate": False})
    assert _task(summary, "c.warc.gz").counts["written"] == 4  # skipped as content_type (not text), all 4
    docs = {d["metadata"]["warc_url"]: d for d in read_records(tmp_path / "out" / "documents" / "c.jsonl.gz")}
    assert all(p in docs[r.url]["text"] for r in records for p in paras)  # with no header: read as windows-1252
    from dolma_pipe.stages.warc.charset import decode

    stray = b"<html><body><p>Hello there, a page with a stray <\x00 in it</p></body></html>"  # "<\0" at an even place
    assert stray.index(b"<\x00") % 2 == 0 and decode(stray, None).charset == "utf-8"  # not read as UTF-16 by chance


def test_a_content_length_that_is_no_number_is_a_corrupt_record(tmp_path):
    rng = random.Random(9)
    pages = _pages(rng, "c", "C", 6)
    write_warc(tmp_path / "in" / "cl.warc", pages, compress=False)
    raw = (tmp_path / "in" / "cl.warc").read_bytes()
    at = raw.index(b"Content-Length: ", raw.index(b"WARC-Target-URI: " + pages[2].url.encode())) + len(b"Content-Length: ")
    (tmp_path / "in" / "cl.warc").write_bytes(raw[:at] + b"many" + raw[raw.index(b"\r\n", at) :])
    summary = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(tmp_path / "out"), "processes": 1, "isolate": False})
    task = _task(summary, "cl.warc")
    assert (
        task.errors == {"corrupt_record": 1} and task.counts["written"] == 5 and task.counts["records"] == 7
    )  # it was skipped as http_status


def test_a_content_length_too_long_without_a_digest_costs_one_record(tmp_path):
    rng = random.Random(10)
    pages = _pages(rng, "d", "D", 12)
    write_warc(tmp_path / "in" / "nodigest.warc", pages, compress=False)
    raw = (tmp_path / "in" / "nodigest.warc").read_bytes()
    head = raw.index(b"WARC-Target-URI: " + pages[3].url.encode())
    digest = raw.index(b"WARC-Payload-Digest: ", head)
    raw = raw[:digest] + raw[raw.index(b"\r\n", digest) + 2 :]  # no digest to check
    at = raw.index(b"Content-Length: ", head) + len(b"Content-Length: ")
    end = raw.index(b"\r\n", at)
    (tmp_path / "in" / "nodigest.warc").write_bytes(raw[:at] + str(int(raw[at:end]) + 3000).encode() + raw[end:])
    summary = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(tmp_path / "out"), "processes": 1, "isolate": False})
    task = _task(summary, "nodigest.warc")
    assert task.counts["records"] == 13 and task.counts["written"] == 12
    docs = read_records(tmp_path / "out" / "documents" / "nodigest.jsonl.gz")
    assert [d["metadata"]["warc_url"] for d in docs] == [p.url for p in pages]
    assert pages[3].text[-1] in docs[3]["text"] and pages[4].text[0] not in docs[3]["text"]  # its own text, not the next page's


def test_a_page_quoting_a_warc_record_is_one_record(tmp_path):
    import gzip
    import re

    rng = random.Random(11)
    quoted = (
        "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:11111111-1111-1111-1111-111111111111>\r\n"
        "WARC-Date: 2024-01-01T00:00:00Z\r\nWARC-Target-URI: http://quoted.example/\r\n"
        "Content-Type: application/http; msgtype=response\r\nContent-Length: 10\r\n\r\n0123456789"
    )
    paras = [paragraphs(rng, 2) for _ in range(5)]
    about = "<html><body><p>A record:</p><pre>\r\n\r\n" + quoted + "\r\n\r\n</pre><p>" + paras[1][0] + "</p></body></html>"
    pages = [response(f"https://q.example.org/{i}", about if i in (1, 3) else html_page(f"Q{i}", ps)) for i, ps in enumerate(paras)]
    write_warc(tmp_path / "q.warc", pages, compress=False)
    raw = (tmp_path / "q.warc").read_bytes()
    starts = [0] + [raw.rindex(b"WARC/1.0", 0, raw.index(p.record_id.encode())) for p in pages] + [len(raw)]
    members = [raw[a:b] for a, b in zip(starts, starts[1:])]  # the warcinfo record, then each page's
    # Page 1 has no digest to check; page 3's digest is wrong (as a crawler's over the dechunked payload).
    members[2] = re.sub(rb"WARC-Payload-Digest: [^\r]*\r\n", b"", members[2])
    members[4] = re.sub(rb"(WARC-Payload-Digest: sha1:)[A-Z2-7]", rb"\g<1>Q", members[4])
    src = tmp_path / "in"
    src.mkdir()
    (src / "about.warc").write_bytes(b"".join(members))
    (src / "about-gz.warc.gz").write_bytes(b"".join(gzip.compress(m, mtime=0) for m in members))
    # The quoting pages with a Content-Length too long too: the next record start is looked for
    # past their quote (a start fastwarc reads, whose own length ends inside the page).
    for i in (2, 4):  # pages 1 and 3
        at = members[i].index(b"Content-Length: ") + len(b"Content-Length: ")
        end = members[i].index(b"\r\n", at)
        members[i] = members[i][:at] + str(int(members[i][at:end]) + 1500).encode() + members[i][end:]
    (src / "about-long.warc").write_bytes(b"".join(members))
    out = tmp_path / "out"
    summary = run({"documents": [str(src / "*")], "destination": str(out), "processes": 1, "isolate": False})
    for name in ("about.warc", "about-gz.warc.gz", "about-long.warc"):
        task = _task(summary, name)
        assert task.counts["records"] == 6, name  # no record read out of the quote (it was 7: a phantom)
        docs = read_records(out / "documents" / f"{name.split('.')[0]}.jsonl.gz")
        assert "http://quoted.example/" not in [d["metadata"]["warc_url"] for d in docs], name
        (page,) = [d for d in docs if d["metadata"]["warc_url"] == pages[1].url]
        assert paras[1][0] in page["text"], name  # the page's text after the quote (cut at the quote before)
        assert pages[2].url not in page["text"], name  # (about-long: nothing of the record it ran over)
    long_docs = read_records(out / "documents" / "about-long.jsonl.gz")
    assert [d["metadata"]["warc_url"] for d in long_docs][-2:] == [pages[2].url, pages[4].url]  # page 3 quarantined (its digest)


def test_a_record_start_is_found_past_many_mentions_of_warc(tmp_path):
    # A page about WARC (the standard's own text names WARC/1.1 on every other line) whose
    # Content-Length runs past the next records: the next record start lay behind more than 64
    # mentions, and every record after the page was lost, uncounted.
    rng = random.Random(13)
    spec = " ".join(f"A WARC/1.1 record, note {i}." for i in range(100))
    pages = [response(f"https://s.example.org/{i}", html_page(f"S{i}", [spec] if i == 2 else paragraphs(rng, 2))) for i in range(8)]
    write_warc(tmp_path / "in" / "spec.warc", pages, compress=False)
    raw = (tmp_path / "in" / "spec.warc").read_bytes()
    head = raw.index(b"WARC-Target-URI: " + pages[2].url.encode())
    digest = raw.index(b"WARC-Payload-Digest: ", head)
    raw = raw[:digest] + raw[raw.index(b"\r\n", digest) + 2 :]  # no digest to check
    at = raw.index(b"Content-Length: ", head) + len(b"Content-Length: ")
    end = raw.index(b"\r\n", at)
    (tmp_path / "in" / "spec.warc").write_bytes(raw[:at] + str(int(raw[at:end]) + 3000).encode() + raw[end:])
    summary = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(tmp_path / "out"), "processes": 1, "isolate": False})
    task = _task(summary, "spec.warc")
    docs = read_records(tmp_path / "out" / "documents" / "spec.jsonl.gz")
    assert [d["metadata"]["warc_url"] for d in docs] == [p.url for p in pages]
    assert task.counts["records"] == 9


def test_a_chunked_compressed_payload_cut_short_keeps_what_inflates(tmp_path):
    # A record cut short (a crawler's size limit, WARC-Truncated) of a chunked, gzip-encoded
    # page: the broken framing left it compressed, sniffed as application/gzip, skipped.
    import gzip

    paras = paragraphs(random.Random(14), 30)
    packed = gzip.compress(html_page("Cut", paras).encode())
    framed = b"%x\r\n%s\r\n0\r\n\r\n" % (len(packed), packed)
    rec = response("https://t.example.org/cut", framed[: len(framed) * 2 // 3], text=paras[:2])
    rec.headers += [("Transfer-Encoding", "chunked"), ("Content-Encoding", "gzip")]
    write_warc(tmp_path / "in" / "t.warc.gz", [rec])
    summary = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(tmp_path / "out"), "processes": 1, "isolate": False})
    task = _task(summary, "t.warc.gz")
    assert task.counts["written"] == 1 and task.counts["payload_damaged"] == 1
    (doc,) = read_records(tmp_path / "out" / "documents" / "t.jsonl.gz")
    assert all(p in doc["text"] for p in paras[:2])


def test_a_member_per_record_file_opening_with_a_page_about_warc_keeps_its_byte_ranges(tmp_path):
    # Its first gzip member holds a blank line and WARC/1.0 (a quoted record): it was taken for a
    # .warc.gz of one gzip stream, every document without warc_offset and warc_length.
    import gzip

    from dolma_pipe.stages.warc.records import member_per_record
    from dolma_pipe.stages.warc.records import read_records as read_warc

    quoted = "WARC/1.0\r\nWARC-Type: resource\r\nWARC-Target-URI: http://quoted.example/\r\nContent-Length: 2\r\n\r\nhi"
    paras = paragraphs(random.Random(15), 2)
    about = "<html><body><pre>\r\n\r\n" + quoted + "\r\n\r\n</pre><p>" + paras[0] + "</p></body></html>"
    pages = [response("https://m.example.org/0", about), response("https://m.example.org/1", html_page("M", paras))]
    write_warc(tmp_path / "q.warc", pages, compress=False)
    raw = (tmp_path / "q.warc").read_bytes()
    # the warcinfo record left out: the quoting page comes first
    first, second = (raw.rindex(b"WARC/1.0", 0, raw.index(p.record_id.encode())) for p in pages)
    path = tmp_path / "q.warc.gz"
    path.write_bytes(gzip.compress(raw[first:second], mtime=0) + gzip.compress(raw[second:], mtime=0))
    assert member_per_record(str(path))
    one_stream = tmp_path / "one.warc.gz"
    one_stream.write_bytes(gzip.compress(raw[first:], mtime=0))
    assert not member_per_record(str(one_stream))
    records = list(read_warc(str(path), 1 << 20))
    assert [(r.offset, r.ranged) for r in records] == [(0, True), (len(gzip.compress(raw[first:second], mtime=0)), True)]


def _set_length(raw: bytes, url: str, delta: int, digest: bytes | None = b"") -> bytes:
    """``raw`` with the Content-Length of ``url``'s record ``delta`` off, and its payload digest
    left (``b""``), dropped (None) or replaced."""
    head = raw.index(b"WARC-Target-URI: " + url.encode())
    at = raw.index(b"WARC-Payload-Digest: ", head)
    if digest is None:
        raw = raw[:at] + raw[raw.index(b"\r\n", at) + 2 :]
    elif digest:
        at += len(b"WARC-Payload-Digest: ")
        raw = raw[:at] + digest + raw[raw.index(b"\r\n", at) :]
    at = raw.index(b"Content-Length: ", head) + len(b"Content-Length: ")
    end = raw.index(b"\r\n", at)
    return raw[:at] + str(int(raw[at:end]) + delta).encode() + raw[end:]


def test_two_damaged_records_in_a_row_are_two(tmp_path):
    # The record start after a damaged record went to the first start whose Content-Length ends it
    # cleanly: a second damaged record right after the first was stepped over, one count for two.
    rng = random.Random(16)
    pages = [response(f"https://w.example.org/{i}", html_page(f"W{i}", paragraphs(rng, 2))) for i in range(8)]
    write_warc(tmp_path / "w.warc", pages, compress=False)
    raw = (tmp_path / "w.warc").read_bytes()
    wrong = b"sha1:" + b"A" * 32  # a digest no payload here has
    src = tmp_path / "in"
    src.mkdir()
    damaged = {  # two pages in a row: {page: (Content-Length off by, digest)}
        "long-long": {3: (3000, b""), 4: (3000, b"")},  # both fail their digests
        "long-short": {3: (3000, b""), 4: (-30, b"")},  # page 3's payload up to page 4 matches its digest
        "short-long": {3: (-30, b""), 4: (200, b"")},
        "wrong-long": {3: (500, wrong), 4: (900, b"")},  # page 4's payload up to page 5 matches its digest
        # (counted before too; kept by the rule that keeps the last quoting page one record)
        "nodigest-last": {6: (3000, None), 7: (200, None)},  # page 7's length runs past the file's end
        "wrongdigest-last": {6: (500, wrong), 7: (900, wrong)},
    }
    # No digests, but the pages' HTTP headers give their Content-Length (most servers' do).
    for page in pages:
        page.headers = [*page.headers[:1], ("Content-Length", str(len(page.body)))]
    write_warc(tmp_path / "h.warc", pages, compress=False)
    sized = (tmp_path / "h.warc").read_bytes()
    damaged["http-length"] = {3: (3000, None), 4: (-30, None)}
    for name, pair in damaged.items():
        data = sized if name == "http-length" else raw
        for i, (delta, digest) in pair.items():
            data = _set_length(data, pages[i].url, delta, digest)
        (src / f"{name}.warc").write_bytes(data)
    out = tmp_path / "out"
    summary = run({"documents": [str(src / "*")], "destination": str(out), "processes": 1, "isolate": False})
    for name, pair in damaged.items():
        task = _task(summary, f"{name}.warc")
        assert task.counts["records"] == 9, name  # 8 before (the first four): the second damaged page lost from the counts
        docs = read_records(out / "documents" / f"{name}.jsonl.gz")
        assert [d["metadata"]["warc_url"] for d in docs if d["metadata"]["warc_url"] not in {pages[i].url for i in pair}] == [
            p.url for i, p in enumerate(pages) if i not in pair
        ], name
    (page6,) = [d for d in read_records(out / "documents" / "nodigest-last.jsonl.gz") if d["metadata"]["warc_url"] == pages[6].url]
    assert pages[7].url not in page6["text"]  # cut where page 7 starts


def test_a_quote_whose_length_runs_past_the_next_record_is_no_record(tmp_path):
    # A page about WARC shows a header whose Content-Length names a payload it does not show: the
    # quote's length runs past the next record, as a real damaged record's would. With no digest
    # to tell them apart, the quote stays in its page (the record after the page is clean).
    quoted = (
        "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:33333333-3333-3333-3333-333333333333>\r\n"
        "WARC-Target-URI: http://quoted.example/\r\nContent-Type: application/http; msgtype=response\r\n"
        "Content-Length: 2000\r\n\r\nHTTP/1.1 200 OK\r\n\r\n[the payload, 1980 bytes]"
    )
    rng = random.Random(19)
    about = "<html><body><pre>\r\n\r\n" + quoted + "\r\n\r\n</pre><p>The end.</p></body></html>"
    pages = [response(f"https://y.example.org/{i}", about if i == 2 else html_page(f"Y{i}", paragraphs(rng, 2))) for i in range(5)]
    write_warc(tmp_path / "y.warc", pages, compress=False)
    raw = (tmp_path / "y.warc").read_bytes()
    src = tmp_path / "in"
    src.mkdir()
    (src / "nodigest.warc").write_bytes(_set_length(raw, pages[2].url, 1500, None))
    (src / "wrongdigest.warc").write_bytes(_set_length(raw, pages[2].url, 1500, b"sha1:" + b"A" * 32))
    out = tmp_path / "out"
    summary = run({"documents": [str(src / "*")], "destination": str(out), "processes": 1, "isolate": False})
    for name in ("nodigest", "wrongdigest"):
        assert _task(summary, f"{name}.warc").counts["records"] == 6, name
        urls = [d["metadata"]["warc_url"] for d in read_records(out / "documents" / f"{name}.jsonl.gz")]
        assert "http://quoted.example/" not in urls and pages[3].url in urls, name


def test_a_last_record_quoting_a_warc_record_with_a_length_too_long_is_one_record(tmp_path):
    # No digest, a Content-Length past the file's end, and a quoted record in its page: the quote
    # was the only record start after it, taken as a record: a phantom, and the page cut there.
    quoted = (
        "WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:22222222-2222-2222-2222-222222222222>\r\n"
        "WARC-Target-URI: http://quoted.example/\r\nContent-Length: 10\r\n\r\n0123456789"
    )
    paras = paragraphs(random.Random(17), 3)
    about = "<html><body><p>A record:</p><pre>\r\n\r\n" + quoted + "\r\n\r\n</pre><p>" + paras[2] + "</p></body></html>"
    pages = [response(f"https://z.example.org/{i}", about if i == 2 else html_page(f"Z{i}", paras[:2])) for i in range(3)]
    write_warc(tmp_path / "z.warc", pages, compress=False)
    src = tmp_path / "in"
    src.mkdir()
    (src / "last.warc").write_bytes(_set_length((tmp_path / "z.warc").read_bytes(), pages[2].url, 1500, None))
    out = tmp_path / "out"
    summary = run({"documents": [str(src / "*")], "destination": str(out), "processes": 1, "isolate": False})
    assert _task(summary, "last.warc").counts["records"] == 4  # 5 before: the quote read as a record
    docs = read_records(out / "documents" / "last.jsonl.gz")
    assert [d["metadata"]["warc_url"] for d in docs] == [p.url for p in pages]
    assert paras[2] in docs[2]["text"]  # the page's text after the quote


def test_an_arc_file_does_not_resynchronise_on_a_quoted_header_line(tmp_path):
    # After damage, the next record start was the first line that looks like an ARC header: in a
    # page that quotes one, a phantom record (its URL, a document) and the record after it lost
    # in a second damage.
    from tests.support.warc import write_arc

    rng = random.Random(18)
    quote = "<pre>\nhttp://quoted.example/page 1.2.3.4 20240101000000 text/html 123\n</pre>"
    pages = [
        response(f"https://aq.example.org/{i}", html_page(f"AQ{i}", paragraphs(rng, 2) + ([quote] if i == 4 else [])), text=[])
        for i in range(8)
    ]
    src = tmp_path / "in"
    write_arc(src / "quote.arc", pages, compress=False)
    raw = (src / "quote.arc").read_bytes()
    (src / "quote.arc").write_bytes(_set_arc_length(raw, pages[4].url, b"many"))  # page 4 damaged
    out = tmp_path / "out"
    summary = run({"documents": [str(src / "*")], "destination": str(out), "processes": 1, "isolate": False})
    task = _task(summary, "quote.arc")
    assert task.errors == {"corrupt_record": 1} and task.counts["records"] == 9  # 10 before: the quote, and page 5 as damage
    docs = read_records(out / "documents" / "quote.jsonl.gz")
    assert [d["metadata"]["warc_url"] for d in docs] == [p.url for i, p in enumerate(pages) if i != 4]


def test_an_arc_length_too_long_loses_no_record_after_it(tmp_path):
    # warcio read the record by its length, swallowing the next one, then skipped on to the next
    # line it could read: the swallowed record lost, uncounted.
    from tests.support.warc import write_arc

    rng = random.Random(20)
    pages = _pages(rng, "al", "AL", 8)
    src = tmp_path / "in"
    write_arc(src / "valid.arc", pages, compress=False)
    raw = (src / "valid.arc").read_bytes()
    start, end = _arc_length(raw, pages[4].url)
    for name, wrong in (("long", int(raw[start:end]) + 900), ("huge", 999999999)):
        (src / f"{name}.arc").write_bytes(_set_arc_length(raw, pages[4].url, b"%d" % wrong))
    out = tmp_path / "out"
    summary = run({"documents": [str(src / "*")], "destination": str(out), "processes": 1, "isolate": False})
    valid = read_records(out / "documents" / "valid.jsonl.gz")
    for name in ("long", "huge"):
        assert _task(summary, f"{name}.arc").counts["records"] == 9, name  # 8 before: page 5 lost
        docs = read_records(out / "documents" / f"{name}.jsonl.gz")
        assert [d["metadata"]["warc_url"] for d in docs] == [p.url for p in pages], name
        assert docs[4]["text"] == valid[4]["text"], name  # page 4's own text, none of page 5's


def test_a_record_whose_version_line_is_damaged_is_counted(tmp_path):
    # fastwarc stops on a header that does not start with WARC/1.x; the reader went on from the next
    # WARC/1. line and the record in between was lost, uncounted (in a .warc.gz it is a damaged member).
    rng = random.Random(21)
    pages = _pages(rng, "v", "V", 8)
    write_warc(tmp_path / "v.warc", pages, compress=False)
    raw = (tmp_path / "v.warc").read_bytes()

    def mangle(data: bytes, *which: int) -> bytes:
        for i in which:
            at = data.rindex(b"WARC/1.0", 0, data.index(b"WARC-Target-URI: " + pages[i].url.encode()))
            data = data[:at] + b"XARC/1.0" + data[at + 8 :]
        return data

    src = tmp_path / "in"
    src.mkdir()
    cases = {"one": (3,), "two": (3, 4), "last": (7,)}
    for name, which in cases.items():
        (src / f"{name}.warc").write_bytes(mangle(raw, *which))
    # A Content-Length too short with no digest: the rest of its payload is no record (counted once).
    (src / "short.warc").write_bytes(_set_length(raw, pages[3].url, -300, None))
    out = tmp_path / "out"
    summary = run({"documents": [str(src / "*")], "destination": str(out), "processes": 1, "isolate": False})
    for name, which in cases.items():
        task = _task(summary, f"{name}.warc")
        assert task.counts["records"] == 9 and task.errors == {"corrupt_record": len(which)}, name  # (8, 7, 8 before)
        docs = read_records(out / "documents" / f"{name}.jsonl.gz")
        assert [d["metadata"]["warc_url"] for d in docs] == [p.url for i, p in enumerate(pages) if i not in which], name
    task = _task(summary, "short.warc")
    assert task.counts["records"] == 9 and not task.errors


def test_two_arc_records_in_a_row_whose_lengths_are_no_numbers_are_two(tmp_path):
    # The next record start after the first was looked for among header lines with a number for
    # a length: the second damaged record was stepped over, one corrupt_record for two.
    from tests.support.warc import write_arc

    rng = random.Random(22)
    pages = _pages(rng, "an", "AN", 8)
    src = tmp_path / "in"
    write_arc(src / "two.arc", pages, compress=False)
    raw = (src / "two.arc").read_bytes()
    for i in (4, 5):
        raw = _set_arc_length(raw, pages[i].url, b"many")
    (src / "two.arc").write_bytes(raw)
    out = tmp_path / "out"
    summary = run({"documents": [str(src / "*")], "destination": str(out), "processes": 1, "isolate": False})
    task = _task(summary, "two.arc")
    assert task.errors == {"corrupt_record": 2} and task.counts["records"] == 9  # 8 before
    docs = read_records(out / "documents" / "two.jsonl.gz")
    assert [d["metadata"]["warc_url"] for d in docs] == [p.url for i, p in enumerate(pages) if i not in (4, 5)]
