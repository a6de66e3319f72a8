"""WARC files for the warc stage's tests, written with warcio (the stage reads WARC with fastwarc,
so writer and reader are independent; warcio reads only its ARC files): pages in several
languages and charsets, non-HTML payloads, redirects, revisits, and the damaged kinds a crawl
holds; ARC files written by hand."""

from __future__ import annotations

import gzip
import io
import os
import random
import signal
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from dolma_pipe.config import load_config
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.warc import WarcConfig, WarcStage
from dolma_pipe.stages.warc.extract import Resiliparse

WORDS = (
    "river stone garden window music paper table light winter summer forest valley letter bridge "
    "market harbor candle mirror silver orange planet signal engine ladder pocket shadow meadow"
).split()

# Text in the languages of legacy charsets: (Python codec, the label a server or a tag names, text).
LEGACY = [
    ("cp1251", "windows-1251", "Привет, мир. Это страница на русском языке о реках, садах и зимних вечерах."),
    ("koi8_r", "koi8-r", "Здравствуйте. Мы пишем о книгах, письмах и старых мостах через широкую реку."),
    ("cp1252", "windows-1252", "Café au lait, déjà vu, naïve façade: über die Straße zum Fluss, señor."),
    ("iso8859_7", "iso-8859-7", "Γειά σου κόσμε. Αυτή είναι μια ελληνική σελίδα για ποτάμια και κήπους."),
    ("cp1255", "windows-1255", "שלום עולם. זהו דף בעברית על נהרות, גנים וערבי חורף ארוכים."),
    ("cp1256", "windows-1256", "مرحبا بالعالم. هذه صفحة باللغة العربية عن الأنهار والحدائق والشتاء."),
    ("gb18030", "gb2312", "你好，世界。这是一个关于河流、花园和冬天夜晚的中文网页。"),
    ("big5", "big5", "你好，世界。這是一個關於河流、花園和冬天夜晚的繁體中文網頁。"),
    ("shift_jis", "shift_jis", "こんにちは世界。これは川と庭と冬の夜についての日本語のページです。"),
    ("euc_jp", "euc-jp", "こんにちは。これは古い本と手紙と橋についての日本語の文章です。"),
    ("iso2022_jp", "iso-2022-jp", "こんにちは。これは雪と山と古い寺についての日本語の電子メールの文章です。"),  # 7-bit: ESC sequences
    ("euc_kr", "euc-kr", "안녕하세요 세계. 이것은 강과 정원과 겨울 밤에 관한 한국어 페이지입니다."),
    ("cp874", "windows-874", "สวัสดีชาวโลก นี่คือหน้าภาษาไทยเกี่ยวกับแม่น้ำ สวน และคืนฤดูหนาว"),
    ("cp1254", "windows-1254", "Merhaba dünya. Bu sayfa nehirler, bahçeler ve kış geceleri hakkında Türkçe yazılmıştır."),
    # Latin-2 without a true header or a meta tag: uchardet tells it from windows-1252 on a text
    # this long (on a few words it may not: docs/warc.md).
    ("iso8859_2", "iso-8859-2", "Dzień dobry. To jest polska strona o rzekach, ogrodach i zimowych wieczorach."),
]


def paragraphs(rng: random.Random, n: int, words: int = 40) -> list[str]:
    return [" ".join(rng.choices(WORDS, k=words)).capitalize() + "." for _ in range(n)]


def html_page(title: str, paras: list[str], meta_charset: str | None = None, nav: bool = True) -> str:
    meta = f'<meta charset="{meta_charset}">' if meta_charset else ""
    body = "".join(f"<p>{p}</p>\n" for p in paras)
    menu = "<nav><ul><li><a href='/'>Home</a></li><li><a href='/about'>About</a></li></ul></nav>" if nav else ""
    return (
        f"<!DOCTYPE html><html><head>{meta}<title>{title}</title></head><body>{menu}"
        f"<article><h1>{title}</h1>\n{body}</article><footer>Copyright footer text</footer></body></html>"
    )


@dataclass
class Rec:
    """One record to write: what it is, and what the stage should make of it."""

    kind: str  # response, resource, revisit, request, metadata
    url: str
    body: bytes = b""
    status: str = "200 OK"
    headers: list[tuple[str, str]] = field(default_factory=list)
    expect: str = "written"  # written, or the skip reason / quarantine kind
    text: list[str] = field(default_factory=list)  # paragraphs the extracted text must hold
    record_id: str = ""


def response(url: str, html: str | bytes, content_type: str = "text/html; charset=utf-8", **kw) -> Rec:
    body = html.encode("utf-8") if isinstance(html, str) else html
    return Rec("response", url, body, headers=[("Content-Type", content_type)], **kw)


def write_warc(path: Path, records: list[Rec], compress: bool = True, date: str = "2024-05-01T12:00:00Z") -> list[Rec]:
    """Writes ``records`` after a warcinfo record (ids made from the path and place: stable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=compress)
        writer.write_record(writer.create_warcinfo_record(path.name, {"software": "tests"}))
        for i, rec in enumerate(records):
            rec.record_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{path.name}/{i}"))
            headers = {"WARC-Record-ID": f"<urn:uuid:{rec.record_id}>", "WARC-Date": date}
            if rec.kind in ("response", "request", "revisit"):
                http = StatusAndHeaders(rec.status if rec.kind != "request" else "GET / HTTP/1.1", rec.headers, protocol="HTTP/1.1")
                if rec.kind == "request":
                    http = StatusAndHeaders("GET / HTTP/1.1", [("Host", "x")], is_http_request=True)
            else:
                http = None
            if rec.kind == "revisit":
                r = writer.create_revisit_record(rec.url, "sha1:AAAA", rec.url, date, http_headers=http, warc_headers_dict=headers)
            elif rec.kind in ("resource", "conversion"):
                ctype = dict(rec.headers).get("Content-Type", "text/html")
                r = writer.create_warc_record(
                    rec.url, rec.kind, payload=io.BytesIO(rec.body), warc_content_type=ctype, warc_headers_dict=headers
                )
            else:
                r = writer.create_warc_record(rec.url, rec.kind, payload=io.BytesIO(rec.body), http_headers=http, warc_headers_dict=headers)
            writer.write_record(r)
    return records


def crawl_records(seed: int, pages: int, big_paragraphs: int = 0) -> list[Rec]:
    """A crawl's worth of records: mostly HTML pages, with every kind the stage skips."""
    rng = random.Random(seed)
    out: list[Rec] = []
    for i in range(pages):
        paras = paragraphs(rng, rng.randint(2, 8))
        url = f"https://www.site{seed}-{i % 17}.example.org/page/{i}"
        out.append(response(url, html_page(f"Page {seed}-{i}", paras), text=paras))
        if i % 10 == 3:
            out.append(Rec("request", url, expect="skipped_record_type"))
        if i % 25 == 5:
            out.append(response(url + "/old", b"", status="301 Moved Permanently", expect="skipped_redirect"))
        if i % 25 == 7:
            out.append(
                response(url + "/gone", html_page("Not found", ["Nothing here."]), status="404 Not Found", expect="skipped_http_status")
            )
        if i % 30 == 11:
            out.append(
                response(
                    url + "/logo.png",
                    b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(300)),
                    "image/png",
                    expect="skipped_content_type",
                )
            )
            # A PDF that claims to be HTML: sniffed, not believed.
            out.append(response(url + "/doc", b"%PDF-1.4\n" + b"0" * 200, "text/html", expect="skipped_content_type"))
        if i % 30 == 13:
            out.append(Rec("revisit", url, headers=[("Content-Type", "text/html")], expect="skipped_revisit"))
            out.append(response(url + "/empty", "<html><body><script>var x=1;</script></body></html>", expect="skipped_empty_text"))
            # HTML sent as application/octet-stream: sniffed as HTML.
            paras2 = paragraphs(rng, 3)
            out.append(response(url + "/sniffed", html_page("Sniffed", paras2), "application/octet-stream", text=paras2))
        if i % 40 == 17:
            paras3 = paragraphs(rng, 3)
            out.append(
                Rec(
                    "resource",
                    url + "/resource",
                    html_page("Resource", paras3).encode(),
                    headers=[("Content-Type", "text/html")],
                    text=paras3,
                )
            )
            # A conversion record labelled text/plain over HTML bytes: sniffed as HTML.
            paras4 = paragraphs(rng, 2)
            out.append(
                Rec(
                    "conversion",
                    url + "/converted",
                    html_page("Converted", paras4).encode(),
                    headers=[("Content-Type", "text/plain")],
                    text=paras4,
                )
            )
    if big_paragraphs:
        paras = paragraphs(rng, big_paragraphs, words=60)
        out.append(response(f"https://big{seed}.example.org/long", html_page("Long", paras), text=paras[:3] + paras[-3:]))
    return out


def legacy_records(meta: bool, header: str) -> list[Rec]:
    """Each legacy text in its charset: ``header`` is ``right`` (the true label), ``none`` or
    ``lying`` (iso-8859-1, a server's default); with or without the page's meta tag."""
    out = []
    for codec, label, text in LEGACY:
        paras = [text, text[::-1][: len(text) // 2] + " " + text]
        html = html_page("T", paras, meta_charset=label if meta else None).encode(codec)
        ctype = {"right": f"text/html; charset={label}", "none": "text/html", "lying": "text/html; charset=iso-8859-1"}[header]
        out.append(response(f"https://{codec}.example.org/{header}/{int(meta)}", html, ctype, text=paras))
    return out


def read_records(path: Path) -> list[dict]:
    from dolma_pipe.documents import read_documents

    return [row for _, row in read_documents(str(path))] if path.exists() else []


def gzip_member_offsets(path: Path) -> list[int]:
    """Where each gzip member of a .warc.gz starts (one member per record)."""
    data = path.read_bytes()
    offsets, pos = [], 0
    while pos < len(data):
        offsets.append(pos)
        d = __import__("zlib").decompressobj(16 + 15)
        d.decompress(data[pos:])
        pos = len(data) - len(d.unused_data)
    return offsets


def gunzip(data: bytes) -> bytes:
    return gzip.decompress(data)


def write_arc(path: Path, records: list[Rec], compress: bool = True, date: str = "20240501120000") -> list[Rec]:
    """An ARC file (version 1, the Internet Archive's format before WARC) of response records, by
    hand: no maintained library writes ARC. Each record its own gzip member when ``compress``."""
    desc = b"1 0 InternetArchive\nURL IP-address Archive-date Content-type Archive-length\n"
    parts = [f"filedesc://{path.name} 0.0.0.0 {date} text/plain {len(desc)}\n".encode() + desc + b"\n"]
    for rec in records:
        head = f"HTTP/1.1 {rec.status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in rec.headers) + "\r\n"
        block = head.encode("latin-1") + rec.body
        ctype = dict(rec.headers).get("Content-Type", "text/html").split(";")[0]
        parts.append(f"{rec.url} 192.0.2.1 {date} {ctype} {len(block)}\n".encode() + block + b"\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(gzip.compress(p, mtime=0) for p in parts) if compress else b"".join(parts))
    return records


class Flaky(Resiliparse):
    """resiliparse, but its process dies on a page holding ``CRASH-HERE`` (as a segfault in C
    code would kill it) and never ends on one holding ``HANG-HERE``."""

    def extract(self, html: str, deep: bool = False, url: str | None = None) -> str:
        if "CRASH-HERE" in html:
            os.kill(os.getpid(), signal.SIGSEGV)
        if "HANG-HERE" in html:
            while True:
                pass
        return super().extract(html, deep)


def make_pdf(pages: list[list[str]]) -> bytes:
    """A PDF of ``pages``, each lines of ASCII text in Helvetica (written by hand: PDF's own syntax)."""
    objs = ["<< /Type /Catalog /Pages 2 0 R >>", ""]
    kids = []
    for lines in pages:
        body = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({line}) Tj T*" for line in lines) + " ET"
        page_no, content_no = len(objs) + 1, len(objs) + 2
        kids.append(f"{page_no} 0 R")
        objs.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_no} 0 R /Resources << /Font << /F1 {{font}} 0 R >> >> >>"
        )
        objs.append(f"<< /Length {len(body)} >>\nstream\n{body}\nendstream")
    objs.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    font = len(objs)
    objs[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    out = b"%PDF-1.4\n"
    offsets = []
    for i, obj in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{obj.replace('{font}', str(font))}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode() + b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    return out + f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()


def run(overrides: dict, executor=None):
    """``dolma-pipe warc`` in this process with ``overrides`` on a config whose source is ``cc``."""
    config = load_config(WarcConfig, None, {"source_name": "cc", "progress": False, **overrides})
    return run_stage(WarcStage(config), executor=executor)


SLOW_START_ENV = "DOLMA_PIPE_TEST_SLOW_START"


class SlowStart(Resiliparse):
    """resiliparse made ``$DOLMA_PIPE_TEST_SLOW_START`` seconds late (a loaded machine's start-up)."""

    def __init__(self) -> None:
        __import__("time").sleep(float(os.environ.get(SLOW_START_ENV, "0")))
        super().__init__()
