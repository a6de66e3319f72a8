"""Writes the demo's crawl: the bundled sample corpus's documents as the HTML pages of a web crawl.

    python examples/build_sample_warc.py [--sample examples/sample/documents] OUTPUT

For every sample file ``<sample>/<source>/part-NNNN.jsonl.*`` it writes
``OUTPUT/<source>/part-NNNN.warc.gz`` (``examples/run_demo.sh`` reads them with ``dolma-pipe warc``):
one ``warcinfo`` record, then for each document a ``request`` and a ``response`` record holding an
HTML page: the document's text as the page's body (a paragraph per ``<p>``, or ``<pre>`` where its
line breaks and indentation are the text: code, verse, dictionary entries), inside what a site
wraps a page in and an extractor has to remove (a header with a search form, breadcrumbs, a
sidebar of links, a cookie notice, a footer). Its URL comes from the document's provenance (the
package's file it was made from, ``metadata.path``, and the document's id). Each file also holds
what a crawl holds besides pages: a redirect, an image, a ``robots.txt`` and a stylesheet, which
the stage skips with their reasons.

Deterministic: record ids are UUIDs derived from the document ids, dates come from the documents,
and warcio's gzip members carry no time, so every run writes the same bytes.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import hashlib
import html
import io
import json
import os
import re
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import zstandard
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

HERE = os.path.dirname(os.path.abspath(__file__))
# The namespace of the record ids (uuid5 of the document id and the record's kind).
NAMESPACE = uuid.UUID("5b0d0c62-7a0e-4c3e-9d3a-2f1e1c6a9b41")
# Hosts for the sources' pages (the documents' metadata.path is the path on them); .example is
# reserved (RFC 2606): the crawl is a demo, not a copy of a real site.
SITE = "{source}.sample.example"
CRAWL_DATE = "2024-06-01T00:00:00Z"


def read_documents(path: str) -> Iterator[dict[str, Any]]:
    """The documents of one sample file (``.jsonl.gz`` or ``.jsonl.zst``)."""
    with open(path, "rb") as raw:
        stream = zstandard.ZstdDecompressor().stream_reader(raw) if path.endswith(".zst") else gzip.GzipFile(fileobj=raw)
        with io.TextIOWrapper(stream, encoding="utf-8") as text:
            for line in text:
                if line.strip():
                    yield json.loads(line)


def is_preformatted(paragraph: str) -> bool:
    """Whether a paragraph's line breaks or indentation belong to its text (an HTML ``<p>`` would
    fold them into single spaces)."""
    return "\n" in paragraph.strip("\n") or paragraph[:1] in (" ", "\t") or "  " in paragraph or "\t" in paragraph


def body(text: str) -> str:
    """The document's text as HTML blocks: a ``<p>`` per paragraph (blank-line separated), a
    ``<pre>`` per run of preformatted paragraphs (one ``<pre>`` each would lose the blank line
    between them: an extractor ends a ``<pre>`` with one line break, a ``<p>`` with two)."""
    blocks: list[tuple[bool, list[str]]] = []
    for paragraph in text.split("\n\n"):
        if not paragraph.strip():
            continue
        pre = is_preformatted(paragraph)
        if pre and blocks and blocks[-1][0]:
            blocks[-1][1].append(paragraph.strip("\n"))
        else:
            blocks.append((pre, [paragraph.strip("\n") if pre else paragraph.strip()]))
    html_blocks = []
    for pre, parts in blocks:
        inner = html.escape("\n\n".join(parts), quote=False)
        html_blocks.append(f"<pre>{inner}</pre>" if pre else f"<p>{inner}</p>")
    return "".join(html_blocks)  # no text between blocks: an extractor keeps a line of it before a <pre>


def url(doc: dict[str, Any]) -> str:
    """The page's URL: the source's host, the file the document came from, the document's id."""
    path = str(doc.get("metadata", {}).get("path") or f"/{doc['id']}")
    return f"https://{SITE.format(source=doc['source'])}{path}?doc={doc['id']}"


def page(doc: dict[str, Any]) -> str:
    """A whole HTML page around the document's text, with the boilerplate a site adds."""
    meta = doc.get("metadata", {})
    source, title = doc["source"], html.escape(str(meta.get("title") or doc["id"]))
    lang = html.escape(str(meta.get("language") or "en"))
    home = f"https://{SITE.format(source=source)}/"
    related = "".join(f'<li><a href="{home}{k}/">{k.capitalize()} pages</a></li>' for k in ("recent", "popular", "random"))
    template = f"""<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} | {source}</title>
<link rel="stylesheet" href="/static/site.css">
<script>window.dataLayer = window.dataLayer || []; function track(e) {{ dataLayer.push(e); }}</script>
</head>
<body>
<header class="site-header">
<a class="logo" href="{home}">{source} documentation archive</a>
<form class="search" action="/search" role="search"><input type="search" name="q" placeholder="Search the archive"><button>Search</button></form>
<nav class="menu"><ul><li><a href="{home}">Home</a></li><li><a href="{home}browse/">Browse</a></li><li><a href="{home}about/">About</a></li><li><a href="{home}contact/">Contact</a></li></ul></nav>
</header>
<nav class="breadcrumbs" aria-label="Breadcrumb"><a href="{home}">Home</a> &rsaquo; <a href="{home}browse/">{source}</a> &rsaquo; <span>{title}</span></nav>
<div class="layout">
<main id="content">
<article>\0</article>
</main>
<aside class="sidebar"><h2>See also</h2><ul>{related}</ul></aside>
</div>
<div class="cookie-banner" role="dialog"><p>This site uses cookies to remember your preferences.</p><button>Accept</button><button>Decline</button></div>
<footer class="site-footer">
<ul><li><a href="{home}privacy/">Privacy policy</a></li><li><a href="{home}terms/">Terms of use</a></li><li><a href="{home}feed.xml">RSS feed</a></li></ul>
<p>Licence: {html.escape(str(meta.get("license") or "see the package"))}. Mirrored from Debian packages.</p>
</footer>
</body>
</html>
"""
    # No whitespace between the tags: an extractor keeps a line of it ahead of a first <pre>. The
    # body goes in after (at the NUL, a character no page text holds), its own whitespace intact.
    return re.sub(r">\n<", "><", template).replace("\0", body(doc["text"]), 1)


def record_id(key: str) -> str:
    return f"<urn:uuid:{uuid.uuid5(NAMESPACE, key)}>"


def warc_date(doc: dict[str, Any]) -> str:
    """The crawl's time of a page: the document's ``created`` time (to the second), else the crawl's."""
    created = str(doc.get("created") or "")
    return created[:19] + "Z" if len(created) >= 19 else CRAWL_DATE


class Crawl:
    """One WARC.gz being written: pages and the other records a crawler fetches."""

    def __init__(self, fh: Any, name: str):
        self.writer = WARCWriter(fh, gzip=True)
        self.name = name
        info = self.writer.create_warcinfo_record(name, {"software": "examples/build_sample_warc.py", "format": "WARC File Format 1.1"})
        info.rec_headers.replace_header("WARC-Record-ID", record_id(f"{name}/warcinfo"))
        info.rec_headers.replace_header("WARC-Date", CRAWL_DATE)
        self.writer.write_record(info)

    def fetch(
        self, target: str, key: str, date: str, status: str, ctype: str, payload: bytes, extra: tuple[tuple[str, str], ...] = ()
    ) -> None:
        """A ``request`` record and its ``response`` (ids from ``key``)."""
        parts = urlsplit(target)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        request = f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUser-Agent: dolma-pipe-demo-crawler/1.0\r\n\r\n".encode()
        req = self.writer.create_warc_record(target, "request", payload=io.BytesIO(request), warc_headers_dict={"WARC-Date": date})
        req.rec_headers.replace_header("WARC-Record-ID", record_id(f"{key}/request"))
        headers = [("Content-Type", ctype), ("Content-Length", str(len(payload))), *extra]
        http = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
        resp = self.writer.create_warc_record(
            target,
            "response",
            payload=io.BytesIO(payload),
            http_headers=http,
            warc_headers_dict={"WARC-Date": date, "WARC-Concurrent-To": req.rec_headers.get_header("WARC-Record-ID")},
        )
        resp.rec_headers.replace_header("WARC-Record-ID", record_id(f"{key}/response"))
        self.writer.write_record(req)
        self.writer.write_record(resp)

    def page(self, doc: dict[str, Any]) -> None:
        self.fetch(url(doc), doc["id"], warc_date(doc), "200 OK", "text/html; charset=utf-8", page(doc).encode("utf-8"))

    def noise(self, source: str, n: int) -> None:
        """What else a crawl of a site fetches: a redirect, an image, robots.txt, a stylesheet."""
        home = f"https://{SITE.format(source=source)}"
        key = f"{self.name}/noise"
        self.fetch(
            f"{home}/part-{n}", f"{key}/redirect", CRAWL_DATE, "301 Moved Permanently", "text/html", b"", (("Location", f"{home}/browse/"),)
        )
        png = b"\x89PNG\r\n\x1a\n" + hashlib.sha256(key.encode()).digest() * 8
        self.fetch(f"{home}/static/logo-{n}.png", f"{key}/image", CRAWL_DATE, "200 OK", "image/png", png)
        self.fetch(
            f"{home}/robots.txt?part={n}", f"{key}/robots", CRAWL_DATE, "200 OK", "text/plain", b"User-agent: *\nDisallow: /search\n"
        )
        css = b"body { font-family: sans-serif; }\n.cookie-banner { position: fixed; bottom: 0; }\n"
        self.fetch(f"{home}/static/site.css?part={n}", f"{key}/css", CRAWL_DATE, "200 OK", "text/css", css)


def build(sample: str, output: str) -> tuple[list[str], int]:
    """Writes one WARC.gz per sample file that has none yet; returns every path and how many
    pages were written now."""
    paths, pages = [], 0
    for path in sorted(glob.glob(os.path.join(sample, "*", "part-*.jsonl.*"))):
        source, name = path.split(os.sep)[-2], os.path.basename(path).split(".")[0]
        target = os.path.join(output, source, f"{name}.warc.gz")
        paths.append(target)
        if os.path.exists(target):  # whole (written under another name, then renamed): kept, so a rerun resumes
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        partial = target + ".partial"
        with open(partial, "wb") as fh:
            crawl = Crawl(fh, f"{source}/{name}.warc.gz")
            for i, doc in enumerate(read_documents(path)):
                crawl.page(doc)
                pages += 1
                if i == 5:  # the site's other files, among its pages
                    crawl.noise(source, int(name.rsplit("-", 1)[-1]))
        os.replace(partial, target)
    if not paths:
        raise SystemExit(f"build_sample_warc: no sample files under {sample}/<source>/part-*.jsonl.*")
    return paths, pages


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("output", help="folder for <source>/part-NNNN.warc.gz")
    ap.add_argument("--sample", default=os.path.join(HERE, "sample", "documents"), help="the sample corpus's documents folder")
    args = ap.parse_args()
    paths, pages = build(args.sample, args.output)
    if pages:
        print(
            f"crawl: {len(paths)} WARC files in {args.output} ({pages:,} pages written now, with their requests and a site's other files)"
        )
    else:
        print(f"crawl: {len(paths)} WARC files in {args.output}, all there already")


if __name__ == "__main__":
    main()
