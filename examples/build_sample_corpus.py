#!/usr/bin/env python3
"""Build the bundled sample corpus under ``examples/sample/`` from Debian documentation packages.

The corpus is small (a few thousand documents, ~3 MB compressed) but made of REAL text in several
languages, in the Dolma document format (see docs/runs.md)::

    <output>/documents/<source>/part-0000.jsonl.gz     (one source is written as .jsonl.zst)
    <output>/planted.json                              ground truth for what was planted (below)

Each line is ``{"id", "text", "source", "added", "created", "metadata": {...}}``; ``metadata``
records the provenance (Debian package, its version, the file path inside the package, the
licence) and, for the planted test content, what was done to the document.

Debian packages needed (Debian 12 "bookworm"; install them before running)::

    apt-get update
    apt-get install -y --no-install-recommends \\
        debian-handbook linux-doc-6.1 python3.11-doc dict-gcide \\
        fortunes fortunes-min fortunes-de fortunes-es fortunes-it

``python examples/build_sample_corpus.py --print-apt`` prints that command.

Sources (one folder each under ``documents/``):

* ``debian-handbook``  The Debian Administrator's Handbook, HTML, 9 languages, one document per
                       chapter/section page, HTML stripped to paragraphs separated by blank lines.
* ``linux-doc``        Linux kernel 6.1 documentation (reStructuredText / plain text, plus some of
                       its it_IT / zh_CN / zh_TW / ja_JP / ko_KR translations).
* ``python-doc``       The Python 3.11 documentation, HTML pages stripped to text.
* ``gcide``            GNU Collaborative International Dictionary of English, runs of
                       consecutive dictionary entries grouped into documents.
* ``fortunes``         fortune(6) cookies (English, German, Spanish, Italian; the offensive
                       sections are never read), consecutive cookies grouped into documents.
                       Written as ``.jsonl.zst`` to exercise that format.

Planted test content (all deterministic, all recorded in ``metadata`` and ``planted.json``):

* low-quality / boilerplate pages: tables of contents, index pages (Python ``genindex``),
  toctree-only ``index.rst`` files, very short pages, symbol-heavy text (ASCII art fortunes,
  dictionary markup); for a subset of HTML pages the site navigation is kept
  (``metadata.boilerplate == ["navigation"]``).
* exact duplicates: copies of documents under a new id, in the same file and in other files of
  the same source (``metadata.duplicate_of``).
* near-duplicates: copies with a few words changed (``metadata.near_duplicate_of``).
* duplicated paragraphs: real ones (the Python documentation footer, SPDX licence lines, kept
  navigation, untranslated English paragraphs shared between handbook languages).
* PII: real e-mail addresses (copyright and author lines) plus synthetic contact lines with
  example.com/.org/.net e-mails and international phone numbers, inserted into some documents;
  their exact character spans are in ``metadata.pii`` (start, end: code-point offsets, end
  exclusive).

The build is deterministic: inputs are sorted, all randomness comes from one seeded
``random.Random``, timestamps are fixed or taken from the package files, gzip is written with
``mtime=0`` and zstd with a fixed level, so a rerun with the same package versions produces
byte-identical files.  Only the standard library and ``zstandard`` are used.
"""

from __future__ import annotations

import argparse
import collections
import datetime as _dt
import gzip
import hashlib
import io
import json
import os
import random
import re
import subprocess
import sys
from html.parser import HTMLParser

SEED = 20240601
ADDED = "2024-06-01T00:00:00.000Z"  # fixed "added" timestamp for every document

APT_PACKAGES = [
    "debian-handbook",
    "linux-doc-6.1",
    "python3.11-doc",
    "dict-gcide",
    "fortunes",
    "fortunes-min",
    "fortunes-de",
    "fortunes-es",
    "fortunes-it",
]

HANDBOOK_DIR = "/usr/share/doc/debian-handbook/html"
HANDBOOK_LANGS = ["en-US", "de-DE", "fr-FR", "es-ES", "it-IT", "pt-BR", "ja-JP", "zh-CN", "ru-RU"]
HANDBOOK_PAGES_PER_LANG = 20
LINUX_DIR = "/usr/share/doc/linux-doc-6.1/Documentation"
LINUX_DOCS = 520
LINUX_TRANSLATED_PER_LANG = 25
PYTHON_DIR = "/usr/share/doc/python3.11/html"
PYTHON_DOCS = 190
GCIDE_DICT = "/usr/share/dictd/gcide.dict.dz"
GCIDE_INDEX = "/usr/share/dictd/gcide.index"
GCIDE_DOCS = 600
FORTUNE_DIR = "/usr/share/games/fortunes"
FORTUNE_DOCS = {"en": 600, "de": 360, "es": 190, "it": 190}
FORTUNE_ASCII_ART = ("ascii-art", "de/asciiart", "it/banner")  # always included: symbol-heavy

MAX_CHARS = 12_000  # longer pages are cut at a paragraph boundary (metadata.truncated = true)

LICENSES = {
    "debian-handbook": "GPL-2.0-or-later OR CC-BY-SA-3.0",
    "linux-doc-6.1": "GPL-2.0",
    "python3.11-doc": "PSF-2.0",
    "dict-gcide": "GPL-2.0-or-later",
    "fortunes": "BSD-3-Clause (fortune-mod, Regents of the University of California)",
    "fortunes-min": "BSD-3-Clause (fortune-mod, Regents of the University of California)",
    "fortunes-de": "GPL-2.0-or-later",
    "fortunes-es": "GPL-2.0-or-later (code); fortunes presumed public domain",
    "fortunes-it": 'public domain ("Consider this package freeware (public domain)")',
}

# Source name -> (number of part files, compression)
LAYOUT = {
    "debian-handbook": (3, "gz"),
    "linux-doc": (3, "gz"),
    "python-doc": (2, "gz"),
    "gcide": (2, "gz"),
    "fortunes": (3, "zst"),
}


# --------------------------------------------------------------------------------------------
# helpers


def doc_id(source: str, key: str) -> str:
    return hashlib.sha1(f"{source}|{key}".encode()).hexdigest()[:20]


def iso_mtime(path: str) -> str:
    t = int(os.stat(path).st_mtime)
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


_versions: dict[str, str] = {}


def pkg_version(pkg: str) -> str:
    if pkg not in _versions:
        try:
            out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            out = "unknown"
        _versions[pkg] = out
    return _versions[pkg]


def pkg_files(pkg: str) -> list[str]:
    out = subprocess.run(["dpkg-query", "-L", pkg], capture_output=True, text=True, check=True).stdout
    return sorted(p for p in out.splitlines() if p.strip())


_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_OVERSTRIKE = re.compile(r".\x08")


def clean_text(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _OVERSTRIKE.sub("", text)  # nroff-style bold/underline in old fortune files
    text = _CTRL.sub("", text)
    lines = [ln.rstrip() for ln in text.split("\n")]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n")


def truncate(text: str, limit: int = MAX_CHARS, keep_last: bool = False) -> tuple[str, bool]:
    """Cut ``text`` at a paragraph boundary before ``limit`` characters; ``keep_last`` re-appends
    the last paragraph (a page footer)."""
    if len(text) <= limit:
        return text, False
    if keep_last and "\n\n" in text:
        body, footer = text.rsplit("\n\n", 1)
        body, _ = truncate(body, max(limit - len(footer) - 2, limit // 2))
        return body + "\n\n" + footer, True
    cut = text.rfind("\n\n", 0, limit)
    if cut < limit // 2:
        cut = text.rfind("\n", 0, limit)
    if cut <= 0:
        cut = limit
    return text[:cut].rstrip(), True


def make_doc(source, key, text, created, meta) -> dict:
    return {
        "id": doc_id(source, key),
        "text": text,
        "source": source,
        "added": ADDED,
        "created": created,
        "metadata": meta,
    }


# --------------------------------------------------------------------------------------------
# HTML to text


_BLOCK = {
    "p",
    "div",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "li",
    "pre",
    "tr",
    "dt",
    "dd",
    "table",
    "ul",
    "ol",
    "dl",
    "blockquote",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "title",
    "form",
    "figure",
    "figcaption",
    "caption",
    "hr",
}
_VOID = {"br", "img", "meta", "link", "input", "hr", "col", "area", "base", "wbr", "source"}


class TextExtractor(HTMLParser):
    """Turns an HTML page into paragraphs separated by blank lines.

    ``skip(tag, attrs) -> bool`` decides which elements (with everything inside) are dropped.
    ``<pre>`` keeps its whitespace; elsewhere whitespace is collapsed.
    """

    def __init__(self, skip):
        super().__init__(convert_charrefs=True)
        self.skip_fn = skip
        self.stack: list[tuple[str, bool]] = []  # (tag, skipping)
        self.skipping = 0
        self.in_pre = 0
        self.paras: list[tuple[str, bool]] = []  # (text, is_list_item)
        self.buf: list[str] = []
        self.in_li = 0
        self.title = ""
        self._in_title = False

    def flush(self):
        s = "".join(self.buf)
        self.buf = []
        if self.in_pre:
            s = s.strip("\n")
        else:
            s = re.sub(r"[ \t\r\n\f\v]+", " ", s).strip()
        if s:
            self.paras.append((s, s.startswith("- ") and bool(self.in_li)))

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in _VOID:
            if tag == "br" and not self.skipping:
                self.buf.append("\n" if self.in_pre else " ")
            return
        skip = bool(self.skipping) or bool(self.skip_fn(tag, attrs))
        self.stack.append((tag, skip))
        if skip:
            self.skipping += 1
            return
        if tag == "title":
            self._in_title = True
        if tag in _BLOCK:
            self.flush()
        if tag == "pre":
            self.in_pre += 1
        if tag == "li":
            self.in_li += 1
            self.buf.append("- ")
        if tag in ("td", "th") and self.buf:
            self.buf.append(" | ")

    def handle_endtag(self, tag):
        if tag in _VOID:
            return
        if not any(t == tag for t, _ in self.stack):
            return
        while self.stack:
            t, skip = self.stack.pop()
            if skip:
                self.skipping -= 1
            else:
                if t in _BLOCK:
                    self.flush()
                if t == "pre":
                    self.in_pre -= 1
                if t == "li":
                    self.in_li -= 1
                if t == "title":
                    self._in_title = False
            if t == tag:
                break

    def handle_data(self, data):
        if self._in_title:
            self.title += data
            return
        if not self.skipping:
            self.buf.append(data)

    def text(self) -> str:
        self.flush()
        out = []
        prev_li = False
        for s, is_li in self.paras:  # consecutive list items: one per line, no blank line
            if out:
                out.append("\n" if (is_li and prev_li) else "\n\n")
            out.append(s)
            prev_li = is_li
        return "".join(out)


def html_to_text(raw: str, skip) -> tuple[str, str]:
    p = TextExtractor(skip)
    p.feed(raw)
    p.close()
    return clean_text(p.text()), re.sub(r"\s+", " ", p.title).strip()


def _classes(attrs) -> set[str]:
    return set((attrs.get("class") or "").split())


def handbook_skip(keep_nav: bool):
    def skip(tag, attrs):
        if tag in ("script", "style"):
            return True
        if keep_nav:
            return False
        if attrs.get("id") in ("banner", "title"):
            return True
        if tag == "ul" and "docnav" in _classes(attrs):
            return True
        return False

    return skip


def python_skip(keep_nav: bool):
    def skip(tag, attrs):
        if tag in ("script", "style"):
            return True
        c = _classes(attrs)
        if "headerlink" in c or tag == "form":
            return True
        if "mobile-nav" in c or "menu-wrapper" in c or attrs.get("id") == "sidebarbutton":
            return True
        if keep_nav:
            return False
        return bool(c & {"related", "sphinxsidebar"})

    return skip


# --------------------------------------------------------------------------------------------
# sources


def build_handbook(rng: random.Random) -> list[dict]:
    pkg = "debian-handbook"
    docs = []
    for locale in HANDBOOK_LANGS:
        d = os.path.join(HANDBOOK_DIR, locale)
        pages = sorted(f for f in os.listdir(d) if f.endswith(".html"))
        forced = [p for p in ("index.html",) if p in pages]  # the table of contents
        rest = [p for p in pages if p not in forced]
        chosen = sorted(forced + rng.sample(rest, HANDBOOK_PAGES_PER_LANG - len(forced)))
        for page in chosen:
            path = os.path.join(d, page)
            keep_nav = rng.random() < 0.15
            with open(path, encoding="utf-8") as f:
                raw = f.read()
            text, title = html_to_text(raw, handbook_skip(keep_nav))
            text, cut = truncate(text)
            if not text:
                continue
            meta = {
                "package": pkg,
                "package_version": pkg_version(pkg),
                "path": path,
                "license": LICENSES[pkg],
                "language": locale.split("-")[0],
                "locale": locale,
                "title": title,
                "format": "html",
            }
            if keep_nav:
                meta["boilerplate"] = ["navigation"]
            if page == "index.html":
                meta["page_kind"] = "table_of_contents"
            if cut:
                meta["truncated"] = True
            docs.append(make_doc("debian-handbook", f"{locale}/{page}", text, iso_mtime(path), meta))
    return docs


_LINUX_LANG = {"it_IT": "it", "zh_CN": "zh", "zh_TW": "zh", "ja_JP": "ja", "ko_KR": "ko"}


def build_linux(rng: random.Random) -> list[dict]:
    pkg = "linux-doc-6.1"
    base, translated = [], collections.defaultdict(list)
    for root, dirs, files in os.walk(LINUX_DIR):
        dirs.sort()
        for fn in sorted(files):
            if not fn.endswith(".gz"):
                continue
            path = os.path.join(root, fn)
            rel = os.path.relpath(path, LINUX_DIR)
            stem = fn[:-3]
            if not (stem.endswith(".rst") or stem.endswith(".txt") or rel.startswith("ABI/")):
                continue
            if os.path.islink(path):
                continue
            if rel.startswith("translations/"):
                if os.path.getsize(path) <= 12000:
                    translated[rel.split("/")[1]].append(path)
            elif os.path.getsize(path) <= 6000:  # ~<15 KB uncompressed
                base.append(path)
    chosen = rng.sample(base, LINUX_DOCS)
    for lang in sorted(translated):  # every translation language, at most N files each
        chosen += rng.sample(translated[lang], min(LINUX_TRANSLATED_PER_LANG, len(translated[lang])))
    chosen.sort()
    docs = []
    for path in chosen:
        rel = os.path.relpath(path, LINUX_DIR)
        with gzip.open(path, "rb") as f:
            text = clean_text(f.read().decode("utf-8", errors="replace"))
        text, cut = truncate(text)
        if len(text.strip()) == 0:
            continue
        lang = "en"
        if rel.startswith("translations/"):
            lang = _LINUX_LANG.get(rel.split("/")[1], "en")
        spdx = re.search(r"SPDX-License-Identifier:\s*([^\s*]+(?: (?:OR|AND|WITH) [^\s*]+)*)", text[:400])
        meta = {
            "package": pkg,
            "package_version": pkg_version(pkg),
            "path": path,
            # the file's own SPDX tag when it has one, else the package licence (GPL-2)
            "license": spdx.group(1) if spdx else LICENSES[pkg],
            "language": lang,
            "title": "Documentation/" + rel[:-3],
            "format": "rst" if rel.endswith(".rst.gz") else "text",
        }
        if os.path.basename(rel) == "index.rst.gz":
            meta["page_kind"] = "toctree_index"
        if cut:
            meta["truncated"] = True
        docs.append(make_doc("linux-doc", rel[:-3], text, iso_mtime(path), meta))
    return docs


def build_python(rng: random.Random) -> list[dict]:
    pkg = "python3.11-doc"
    pages = []
    for root, dirs, files in os.walk(PYTHON_DIR):
        dirs[:] = sorted(d for d in dirs if not d.startswith("_"))
        pages += [os.path.join(root, f) for f in sorted(files) if f.endswith(".html")]
    pages.sort()
    rels = [os.path.relpath(p, PYTHON_DIR) for p in pages]
    forced = [
        r
        for r in (
            "index.html",
            "contents.html",
            "genindex-A.html",
            "genindex-Q.html",
            "genindex-Symbols.html",
            "py-modindex.html",
            "search.html",
            "copyright.html",
            "license.html",
            "glossary.html",
        )
        if r in rels
    ]
    rest = [r for r in rels if r not in forced and not r.startswith("genindex")]
    chosen = sorted(forced + rng.sample(rest, PYTHON_DOCS - len(forced)))
    docs = []
    for rel in chosen:
        path = os.path.join(PYTHON_DIR, rel)
        keep_nav = rng.random() < 0.12
        with open(path, encoding="utf-8") as f:
            raw = f.read()
        text, title = html_to_text(raw, python_skip(keep_nav))
        text, cut = truncate(text, keep_last=not keep_nav)
        if not text:
            continue
        meta = {
            "package": pkg,
            "package_version": pkg_version(pkg),
            "path": path,
            "license": LICENSES[pkg],
            "language": "en",
            "title": title,
            "format": "html",
        }
        if keep_nav:
            meta["boilerplate"] = ["navigation"]
        if rel.startswith("genindex") or rel == "py-modindex.html":
            meta["page_kind"] = "index"
        elif rel in ("contents.html", "index.html"):
            meta["page_kind"] = "table_of_contents"
        if cut:
            meta["truncated"] = True
        docs.append(make_doc("python-doc", rel, text, iso_mtime(path), meta))
    return docs


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _b64num(s: str) -> int:
    n = 0
    for ch in s:
        n = n * 64 + _B64.index(ch)
    return n


def build_gcide(rng: random.Random) -> list[dict]:
    pkg = "dict-gcide"
    with gzip.open(GCIDE_DICT, "rb") as f:  # dictzip is gzip-compatible
        data = f.read()
    entries = {}
    info = []
    with open(GCIDE_INDEX, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                continue
            word, off, ln = parts[0], _b64num(parts[1]), _b64num(parts[2])
            if word.startswith("00-database"):
                info.append((off, ln, word))
                continue
            entries.setdefault((off, ln), word)
    ordered = sorted(entries.items())  # by offset: dictionary order
    block = 20
    nblocks = len(ordered) // block
    chosen = sorted(rng.sample(range(nblocks), GCIDE_DOCS))
    created = iso_mtime(GCIDE_DICT)
    docs = []

    def meta_for(title):
        return {
            "package": pkg,
            "package_version": pkg_version(pkg),
            "path": GCIDE_DICT,
            "license": LICENSES[pkg],
            "language": "en",
            "title": title,
            "format": "dictd",
        }

    # the database header: licence/boilerplate text, with a real e-mail address
    info_text = "\n\n".join(clean_text(data[o : o + n].decode("utf-8", errors="replace")) for o, n, _ in sorted(info))
    m = meta_for("GCIDE database information")
    m["page_kind"] = "boilerplate_header"
    docs.append(make_doc("gcide", "00-database-info", info_text, created, m))

    for b in chosen:
        k = rng.randint(3, 10)
        group = ordered[b * block : b * block + k]
        texts = [clean_text(data[o : o + n].decode("utf-8", errors="replace")) for (o, n), _ in group]
        text = "\n\n".join(t for t in texts if t)
        first, last = group[0][1], group[-1][1]
        m = meta_for(f"GCIDE entries {first} .. {last}")
        m["entries"] = len(group)
        m["byte_range"] = [group[0][0][0], group[-1][0][0] + group[-1][0][1]]
        docs.append(make_doc("gcide", f"block-{b}-{k}", text, created, m))
    return docs


def _fortune_files() -> list[tuple[str, str, str]]:
    """(package, language, path) of every non-offensive fortune file, sorted."""
    out = []
    lang_of = {"fortunes": "en", "fortunes-min": "en", "fortunes-de": "de", "fortunes-es": "es", "fortunes-it": "it"}
    for pkg, lang in lang_of.items():
        for p in pkg_files(pkg):
            if not p.startswith(FORTUNE_DIR + "/") or "/off/" in p or p.endswith("/off"):
                continue
            if p.endswith((".dat", ".u8", "-pre")) or os.path.islink(p) or not os.path.isfile(p):
                continue
            out.append((pkg, lang, p))
    return sorted(out, key=lambda t: t[2])


def build_fortunes(rng: random.Random) -> list[dict]:
    groups_by_lang = collections.defaultdict(list)
    for pkg, lang, path in _fortune_files():
        with open(path, "rb") as f:
            raw = f.read().decode("utf-8", errors="replace")
        cookies = [clean_text(c) for c in re.split(r"\n%\n", "\n" + raw + "\n")]
        cookies = [c for c in cookies if c.strip() and c.strip() != "%"]
        i = 0
        while i < len(cookies):
            k = rng.choice([1, 3, 5, 8, 10, 12, 15])
            groups_by_lang[lang].append((pkg, path, i, cookies[i : i + k]))
            i += k
    docs = []
    for lang in sorted(groups_by_lang):
        groups = groups_by_lang[lang]
        art = [i for i, g in enumerate(groups) if os.path.relpath(g[1], FORTUNE_DIR) in FORTUNE_ASCII_ART]
        rest = [i for i in range(len(groups)) if i not in set(art)]
        picked = sorted(art + rng.sample(rest, min(FORTUNE_DOCS[lang] - len(art), len(rest))))
        for gi in picked:
            pkg, path, start, cookies = groups[gi]
            name = os.path.relpath(path, FORTUNE_DIR)
            meta = {
                "package": pkg,
                "package_version": pkg_version(pkg),
                "path": path,
                "license": LICENSES[pkg],
                "language": lang,
                "title": f"fortune {name} #{start}-{start + len(cookies) - 1}",
                "format": "fortune",
                "cookies": len(cookies),
            }
            if name in FORTUNE_ASCII_ART:
                meta["page_kind"] = "ascii_art"
            text = "\n\n".join(cookies)
            docs.append(make_doc("fortunes", f"{name}:{start}", text, iso_mtime(path), meta))
    return docs


# --------------------------------------------------------------------------------------------
# planted content


PEOPLE = [
    ("Maria Schneider", "maria.schneider@example.com"),
    ("John Carter", "j.carter@example.org"),
    ("Aiko Tanaka", "aiko.tanaka@example.net"),
    ("Luca Bianchi", "luca.bianchi@example.com"),
    ("Sophie Martin", "sophie.martin@example.org"),
    ("Carlos Pérez", "carlos.perez@example.com"),
    ("Oliver Smith", "oliver.smith+docs@example.co.uk"),
    ("Ana Souza", "ana.souza@example.com.br"),
    ("Wei Zhang", "wei.zhang@example.cn"),
    ("Ivan Petrov", "ivan.petrov@example.ru"),
]
PHONES = [
    "+49 30 1234567",
    "(555) 123-4567",
    "+44 20 7946 0958",
    "+33 1 23 45 67 89",
    "+1 415-555-0132",
    "030 12345678",
    "+81 3-1234-5678",
    "+34 912 345 678",
    "+39 06 1234 5678",
    "+55 11 91234-5678",
    "+7 495 123-45-67",
    "+86 10 8765 4321",
    "555.867.5309",
    "+49 (0)89 987654-0",
    "+1 (212) 555-0199",
]
CONTACT_TEMPLATES = {
    "en": "For questions about this page, contact {name} at {email} or call {phone}.",
    "de": "Bei Fragen zu dieser Seite wenden Sie sich an {name} ({email}) oder rufen Sie {phone} an.",
    "fr": "Pour toute question, contactez {name} à l'adresse {email} ou au {phone}.",
    "es": "Si tiene preguntas, escriba a {name} ({email}) o llame al {phone}.",
    "it": "Per domande contattare {name} all'indirizzo {email} oppure al numero {phone}.",
    "pt": "Em caso de dúvidas, fale com {name} pelo e-mail {email} ou pelo telefone {phone}.",
    "ja": "このページに関するお問い合わせは {name}（{email}、電話 {phone}）までご連絡ください。",
    "zh": "如有疑问，请联系 {name}，邮箱 {email}，电话 {phone}。",
    "ru": "По вопросам обращайтесь к {name}: {email}, тел. {phone}.",
    "ko": "문의 사항은 {name}({email}, 전화 {phone})에게 연락하십시오.",
}
SIGNATURE = "--\n{name}\nPhone: {phone}\nMail: <{email}>"


PII_PER_SOURCE = {"debian-handbook": 14, "linux-doc": 10, "python-doc": 8, "gcide": 6, "fortunes": 10}


def inject_pii(by_source: dict[str, list[dict]], rng: random.Random) -> list[str]:
    picked = []
    for src, n in PII_PER_SOURCE.items():
        cands = [d for d in by_source[src] if len(d["text"]) >= 300]
        picked += rng.sample(cands, n)
    for d in picked:
        name, email = rng.choice(PEOPLE)
        phone = rng.choice(PHONES)
        lang = d["metadata"].get("language", "en")
        sig = rng.random() < 0.3
        tmpl = SIGNATURE if sig else CONTACT_TEMPLATES.get(lang, CONTACT_TEMPLATES["en"])
        line = tmpl.format(name=name, email=email, phone=phone)
        paras = d["text"].split("\n\n")
        pos = len(paras) if sig else rng.randint(1, len(paras))
        prefix = "\n\n".join(paras[:pos]) + "\n\n"
        text = prefix + line + ("\n\n" + "\n\n".join(paras[pos:]) if paras[pos:] else "")
        base = len(prefix)
        spans = []
        for kind, val in (("email", email), ("phone", phone), ("name", name)):
            s = base + line.index(val)
            spans.append({"type": kind, "value": val, "start": s, "end": s + len(val)})
            assert text[s : s + len(val)] == val
        d["text"] = text
        d["metadata"]["pii"] = sorted(spans, key=lambda x: x["start"])
        d["metadata"]["planted"] = d["metadata"].get("planted", []) + ["pii"]
    return [d["id"] for d in picked]


_WORD = re.compile(r"[^\W\d_]{4,}", re.UNICODE)


def make_near_duplicate(doc: dict, rng: random.Random, n: int) -> dict:
    text = doc["text"]
    words = list(_WORD.finditer(text))
    vocab = sorted({m.group(0) for m in words})
    edits = sorted(rng.sample(words, min(n, len(words))), key=lambda m: m.start(), reverse=True)
    changed = []
    for m in edits:
        op = rng.random()
        if op < 0.6:
            new = rng.choice(vocab)
        elif op < 0.8:
            new = m.group(0).upper()
        else:
            new = ""
        text = text[: m.start()] + new + text[m.end() :]
        changed.append([m.group(0), new])
    nd = json.loads(json.dumps(doc))
    nd["text"] = re.sub(r"  +", " ", text)
    nd["id"] = doc_id(doc["source"], "near|" + doc["id"])
    nd["metadata"]["near_duplicate_of"] = doc["id"]
    nd["metadata"]["edits"] = changed[::-1]
    nd["metadata"]["planted"] = nd["metadata"].get("planted", []) + ["near_duplicate"]
    return nd


def make_exact_duplicate(doc: dict, copy_no: int) -> dict:
    nd = json.loads(json.dumps(doc))
    nd["id"] = doc_id(doc["source"], f"dup{copy_no}|" + doc["id"])
    nd["metadata"]["duplicate_of"] = doc["id"]
    nd["metadata"]["planted"] = nd["metadata"].get("planted", []) + ["exact_duplicate"]
    return nd


# --------------------------------------------------------------------------------------------
# writing and verification


def write_source(out_dir: str, source: str, docs: list[dict], nparts: int, comp: str) -> list[str]:
    import zstandard  # installed in the project venv

    os.makedirs(os.path.join(out_dir, source), exist_ok=True)
    paths = []
    parts = [[] for _ in range(nparts)]
    for d in docs:
        parts[d.pop("_part")].append(d)
    for i, part in enumerate(parts):
        payload = "".join(json.dumps(d, ensure_ascii=False, sort_keys=False) + "\n" for d in part)
        raw = payload.encode("utf-8")
        name = f"part-{i:04d}.jsonl.{comp}"
        path = os.path.join(out_dir, source, name)
        tmp = path + ".tmp"
        if comp == "gz":
            buf = io.BytesIO()
            with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as g:
                g.write(raw)
            blob = buf.getvalue()
        else:
            blob = zstandard.ZstdCompressor(level=19, write_checksum=True).compress(raw)
        with open(tmp, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
        paths.append(path)
    return paths


def read_docs(path: str):
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as f:
            raw = f.read()
    else:
        import zstandard

        with open(path, "rb") as f:
            raw = zstandard.ZstdDecompressor().decompressobj().decompress(f.read())
    for n, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        yield n, json.loads(line)


def verify(doc_root: str) -> dict:
    files = []
    for root, _, fs in os.walk(doc_root):
        files += [os.path.join(root, f) for f in fs if ".jsonl." in f]
    files.sort()
    ids = set()
    stats = collections.OrderedDict()
    text_count = collections.Counter()
    para_docs = collections.Counter()
    short = 0
    for path in files:
        source = os.path.basename(os.path.dirname(path))
        s = stats.setdefault(source, {"files": 0, "docs": 0, "bytes": 0, "text_bytes": 0, "languages": collections.Counter()})
        s["files"] += 1
        s["bytes"] += os.path.getsize(path)
        for n, d in read_docs(path):
            for k in ("id", "text", "source", "added", "created", "metadata"):
                assert k in d, f"{path}:{n}: missing {k}"
            assert isinstance(d["id"], str) and d["id"], f"{path}:{n}: bad id"
            assert isinstance(d["text"], str) and d["text"].strip(), f"{path}:{n}: empty text"
            assert d["id"] not in ids, f"{path}:{n}: duplicate id {d['id']}"
            ids.add(d["id"])
            for sp in d["metadata"].get("pii", []):
                assert d["text"][sp["start"] : sp["end"]] == sp["value"], f"{path}:{n}: bad pii span"
            s["docs"] += 1
            s["text_bytes"] += len(d["text"].encode("utf-8"))
            s["languages"][d["metadata"].get("language", "?")] += 1
            text_count[hashlib.sha1(d["text"].encode()).hexdigest()] += 1
            for p in {p.strip() for p in d["text"].split("\n\n") if len(p.strip()) >= 40}:
                para_docs[hashlib.sha1(p.encode()).hexdigest()] += 1
            if len(d["text"]) < 200:
                short += 1
    return {
        "files": len(files),
        "docs": len(ids),
        "per_source": stats,
        "texts_with_exact_copies": sum(1 for c in text_count.values() if c > 1),
        "redundant_exact_copies": sum(c - 1 for c in text_count.values() if c > 1),
        "paragraphs_in_3plus_docs": sum(1 for c in para_docs.values() if c >= 3),
        "docs_under_200_chars": short,
    }


_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--output", default=os.path.join(here, "sample"), help="output folder (documents/ and planted.json go inside)")
    ap.add_argument("--print-apt", action="store_true", help="print the apt-get command and exit")
    ap.add_argument("--verify-only", action="store_true", help="only verify an existing corpus")
    args = ap.parse_args(argv)

    if args.print_apt:
        print("apt-get update && apt-get install -y --no-install-recommends " + " ".join(APT_PACKAGES))
        return 0
    doc_root = os.path.join(args.output, "documents")
    if not args.verify_only:
        missing = [p for p in APT_PACKAGES if pkg_version(p) in ("", "unknown")]
        if missing:
            print("missing Debian packages: " + " ".join(missing), file=sys.stderr)
            print("install with: apt-get install -y --no-install-recommends " + " ".join(missing), file=sys.stderr)
            return 2
        build(args.output, doc_root)

    summary = verify(doc_root)
    print(f"{'source':<17}{'files':>6}{'docs':>7}{'MB text':>9}{'KB on disk':>12}  languages")
    for src, s in summary["per_source"].items():
        langs = ",".join(f"{k}:{v}" for k, v in sorted(s["languages"].items()))
        print(f"{src:<17}{s['files']:>6}{s['docs']:>7}{s['text_bytes'] / 1e6:>9.2f}{s['bytes'] / 1024:>12.0f}  {langs}")
    tot_b = sum(s["bytes"] for s in summary["per_source"].values())
    tot_t = sum(s["text_bytes"] for s in summary["per_source"].values())
    print(f"{'total':<17}{summary['files']:>6}{summary['docs']:>7}{tot_t / 1e6:>9.2f}{tot_b / 1024:>12.0f}")
    print(
        f"texts with exact copies: {summary['texts_with_exact_copies']} "
        f"(redundant copies: {summary['redundant_exact_copies']}); "
        f"paragraphs (>=40 chars) in 3+ docs: {summary['paragraphs_in_3plus_docs']}; "
        f"docs under 200 chars: {summary['docs_under_200_chars']}"
    )
    print("OK: every line parses, ids are unique, texts are non-empty, PII spans match")
    return 0


def build(out_dir: str, doc_root: str) -> None:
    rng = random.Random(SEED)
    by_source = {
        "debian-handbook": build_handbook(random.Random(SEED + 1)),
        "linux-doc": build_linux(random.Random(SEED + 2)),
        "python-doc": build_python(random.Random(SEED + 3)),
        "gcide": build_gcide(random.Random(SEED + 4)),
        "fortunes": build_fortunes(random.Random(SEED + 5)),
    }
    # synthetic PII (before copies, so duplicates carry it too)
    pii_ids = inject_pii(by_source, rng)

    planted = {
        "exact_duplicates": [],
        "near_duplicates": [],
        "pii_injected": pii_ids,
        "low_quality": collections.defaultdict(list),
        "real_email_matches": 0,
    }
    for src in LAYOUT:
        docs = by_source[src]
        nparts = LAYOUT[src][0]
        rng.shuffle(docs)
        for i, d in enumerate(docs):
            d["_part"] = i * nparts // len(docs)
        # exact duplicates: ~2% of the source, same file or another file, some twice
        n_dup = max(6, len(docs) // 50)
        extra = []
        for j, d in enumerate(rng.sample(docs, n_dup)):
            copies = 2 if j % 5 == 0 else 1
            for c in range(copies):
                nd = make_exact_duplicate(d, c + 1)
                nd["_part"] = d["_part"] if (j + c) % 2 == 0 else rng.randrange(nparts)
                extra.append(nd)
                planted["exact_duplicates"].append(
                    {"id": nd["id"], "duplicate_of": d["id"], "source": src, "same_file": nd["_part"] == d["_part"]}
                )
        # near duplicates: ~1.5% of the source, never of PII-injected docs
        n_near = max(5, len(docs) * 3 // 200)
        cands = [d for d in docs if "pii" not in d["metadata"] and len(d["text"]) >= 400]
        for d in rng.sample(cands, n_near):
            nd = make_near_duplicate(d, rng, rng.randint(3, 8))
            nd["_part"] = rng.randrange(nparts)
            extra.append(nd)
            planted["near_duplicates"].append(
                {"id": nd["id"], "near_duplicate_of": d["id"], "source": src, "edits": len(nd["metadata"]["edits"])}
            )
        for nd in extra:  # insert copies at seeded positions
            docs.insert(rng.randrange(len(docs) + 1), nd)
        # keep a stable order within each part: the shuffled order
        for d in docs:
            m = d["metadata"]
            if m.get("boilerplate"):
                planted["low_quality"]["navigation_kept"].append(d["id"])
            if m.get("page_kind"):
                planted["low_quality"][m["page_kind"]].append(d["id"])
            if len(d["text"]) < 200:
                planted["low_quality"]["under_200_chars"].append(d["id"])
            planted["real_email_matches"] += len(_EMAIL.findall(d["text"])) - sum(1 for p in m.get("pii", []) if p["type"] == "email")
        write_source(doc_root, src, docs, nparts, LAYOUT[src][1])

    planted["counts"] = {k: (len(v) if isinstance(v, list) else v) for k, v in planted.items() if k != "low_quality"}
    planted["counts"].update({f"low_quality.{k}": len(v) for k, v in planted["low_quality"].items()})
    planted["seed"] = SEED
    planted["packages"] = {p: pkg_version(p) for p in APT_PACKAGES}
    with open(os.path.join(out_dir, "planted.json"), "w", encoding="utf-8") as f:
        json.dump(planted, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
