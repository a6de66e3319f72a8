"""Language id with and without lower-casing: ``ft_lang_id`` on the Debian handbook's translations.

    .venv/bin/python bench/langid.py [--paragraphs 300] [--documents 40] [--html DIR]

Dolma's language taggers lower-case the text before fastText reads it; ``ft_lang_id`` (ours) has
its ``lowercase`` option.  This bench measures what each choice costs on real text of known
language, in its original case, in ALL CAPS and in Title Case (``str.upper()`` / ``str.title()``
of the same pieces), so the default is chosen by numbers.

The corpus is the Debian Administrator's Handbook (package ``debian-handbook``, Debian 12: one
book in 26 locales).  Without ``--html``, it uses ``/usr/share/doc/debian-handbook/html`` when
the package is installed, else downloads the package with ``apt-get download`` into
``bench/_work/langid`` and unpacks it there (``dpkg-deb -x``; nothing is installed).

The truth is the locale's directory (``de-DE`` is ``de``; ``nb-NO`` is fastText's ``no``;
``zh-CN`` and ``zh-TW`` are both ``zh``).  Translations are partial (some locales are mostly
English, some of it from an older edition), so a paragraph of a translation is dropped as
untranslated English, a judgement made without fastText, when it is also a paragraph of the English
book (the same words once lower-cased, punctuation ignored) or when 5 % or more of its words are
English function words (:data:`ENGLISH`; English prose has 7 % or more).  Paragraphs are the book's
``<div class="para">`` blocks, without ``<pre>`` blocks (commands and program output carry no
language), of at least ``--min-chars`` characters.  Pieces, sampled with a fixed seed:

* paragraph-sized: up to ``--paragraphs`` kept paragraphs per locale;
* document-sized: a page's kept paragraphs joined (blank lines between) and cut into pieces of
  about ``--doc-chars`` characters, up to ``--documents`` per locale.

A locale with fewer than 20 kept paragraphs (an almost untranslated book: Danish, in Debian 12) is
left out.  Every piece is tagged by ``ft_lang_id`` (``granularity: document``, so a piece is
predicted as one text, with the tagger's own ``max_chars`` windows) three ways: ``true`` and
``false`` are its ``lowercase`` option; ``upper`` is ``lowercase: false`` after the bench has
lower-cased the pieces whose cased words are mostly upper-case (:func:`mostly_upper`), the
alternative to lower-casing everything.  Printed per piece size, variant and setting: top-1
accuracy, the mean score of the true language (0 when it is not among the scores above 0.001) and
the seconds spent tagging (wall time); then the top-1 accuracy per locale, with its number of
pieces.  Languages without letter case (ar, fa, ja, ko, zh) barely change in ALL CAPS; they are in
every number.
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import re
import subprocess
import sys
import time
from html.parser import HTMLParser
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORK = os.path.join(HERE, "_work", "langid")
INSTALLED = "/usr/share/doc/debian-handbook/html"
SEED = 20260415
MIN_PARAGRAPHS = 20
# lid.176's label where it is not the locale's language subtag.
LABEL = {"nb": "no"}
VARIANTS = {"original": lambda t: t, "ALL CAPS": str.upper, "Title Case": str.title}
SHORT = {"original": "orig", "ALL CAPS": "CAPS", "Title Case": "Title"}
SETTINGS = ("true", "false", "upper")
SIZES = ("paragraph", "document")
# English function words (none of them common in the book's other languages: not "is" (nl), "for"
# (da, nb), "also" (de), "will" (de)), and the share of a paragraph's words from which on a paragraph
# of a translation counts as untranslated English (measured on the handbook's English paragraphs:
# 5th percentile ~7 %).
ENGLISH = frozenset(
    "the and of that this which are from with you your these there when their have been should would it can not into only".split()
)
MAX_ENGLISH = 0.05


class _Paragraphs(HTMLParser):
    """The text of every ``<div class="para">`` (innermost owns its text), ``<pre>`` skipped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, list[str] | None]] = []  # (tag, text of a para opened by it)
        self.skip = 0
        self.paragraphs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "img", "meta", "link", "hr", "input", "col"):
            return
        is_para = tag == "div" and "para" in (dict(attrs).get("class") or "").split()
        self.stack.append((tag, [] if is_para else None))
        self.skip += tag in ("pre", "script", "style")

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            open_tag, text = self.stack.pop()
            self.skip -= open_tag in ("pre", "script", "style")
            if text is not None:
                para = re.sub(r"\s+", " ", "".join(text)).strip()
                if para:
                    self.paragraphs.append(para)
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.skip:
            return
        for _, text in reversed(self.stack):
            if text is not None:
                text.append(data)
                return


def paragraphs(path: str) -> list[str]:
    parser = _Paragraphs()
    with open(path, encoding="utf-8") as f:
        parser.feed(f.read())
    parser.close()
    return parser.paragraphs


def _key(paragraph: str) -> str:
    return " ".join(re.findall(r"\w+", paragraph.lower()))


def english_share(paragraph: str) -> float:
    words = re.findall(r"\w+", paragraph.lower())
    return sum(w in ENGLISH for w in words) / len(words) if words else 0.0


def handbook_html(arg: str | None) -> str:
    """The handbook's html/ directory: given, installed, or unpacked under bench/_work/langid."""
    if arg:
        return arg
    if os.path.isdir(INSTALLED):
        return INSTALLED
    unpacked = os.path.join(WORK, "root", INSTALLED.lstrip("/"))
    if not os.path.isdir(unpacked):
        os.makedirs(WORK, exist_ok=True)
        print("downloading debian-handbook with apt-get download into", WORK, flush=True)
        subprocess.run(["apt-get", "download", "debian-handbook"], cwd=WORK, check=True)
        (deb,) = glob.glob(os.path.join(WORK, "debian-handbook_*.deb"))
        subprocess.run(["dpkg-deb", "-x", deb, os.path.join(WORK, "root")], check=True)
    return unpacked


def chunk(paras: list[str], target: int) -> list[str]:
    """Consecutive paragraphs joined by blank lines into pieces of at least ``target`` characters;
    a tail of half that or more is a piece, a shorter one is joined to the last piece (or dropped)."""
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for p in paras:
        cur.append(p)
        size += len(p) + 2
        if size >= target:
            out.append("\n\n".join(cur))
            cur, size = [], 0
    if cur:
        if out and size < target // 2:
            out[-1] += "\n\n" + "\n\n".join(cur)
        elif size >= target // 2:
            out.append("\n\n".join(cur))
    return out


def build(html: str, n_paragraphs: int, n_documents: int, min_chars: int, doc_chars: int) -> dict[str, dict[str, list[str]]]:
    """{locale: {"paragraph": [...], "document": [...]}} of translated text (see the module doc)."""
    locales = sorted(d for d in os.listdir(html) if re.fullmatch(r"[a-z]{2}-[A-Z]{2}", d))
    pages = sorted(os.path.basename(p) for p in glob.glob(os.path.join(html, "en-US", "*.html")))
    english = {_key(p) for page in pages for p in paragraphs(os.path.join(html, "en-US", page))}
    rng = random.Random(SEED)
    out: dict[str, dict[str, list[str]]] = {}
    for locale in locales:
        paras: list[str] = []
        docs: list[str] = []
        for page in sorted(os.path.basename(p) for p in glob.glob(os.path.join(html, locale, "*.html"))):
            kept = [p for p in paragraphs(os.path.join(html, locale, page)) if len(p) >= min_chars]
            if locale != "en-US":
                kept = [p for p in kept if _key(p) not in english and english_share(p) < MAX_ENGLISH]
            paras += kept
            docs += chunk(kept, doc_chars)
        if len(paras) < MIN_PARAGRAPHS:
            print(f"{locale}: {len(paras)} translated paragraphs, left out", file=sys.stderr)
            continue
        out[locale] = {
            "paragraph": rng.sample(paras, min(n_paragraphs, len(paras))),
            "document": rng.sample(docs, min(n_documents, len(docs))),
        }
    return out


def truth(locale: str) -> str:
    lang = locale.split("-")[0]
    return LABEL.get(lang, lang)


def mostly_upper(text: str) -> bool:
    """More than half of the words that have letter case are all upper-case."""
    words = [w for w in text.split() if w.lower() != w.upper()]
    return sum(w.isupper() for w in words) * 2 > len(words)


class Result(NamedTuple):
    accuracy: float
    true_score: float
    seconds: float
    per_locale: dict[str, tuple[int, float]]  # locale: (pieces, top-1 accuracy)


def measure(corpus: dict[str, dict[str, list[str]]], size: str, variant: str, setting: str) -> Result:
    """Top-1 accuracy, mean score of the true language, tagging time and per-locale accuracy of
    ``ft_lang_id`` on one piece size, variant and lowercase setting."""
    from taggers.base import Document
    from taggers.registry import get

    # Every language above 0.001, so the true one's score is there unless it is below that.
    tagger = get("ft_lang_id")(granularity="document", top_k=176, min_score=0.001, lowercase=setting == "true")
    change = VARIANTS[variant]
    right = total = 0
    score = seconds = 0.0
    per: dict[str, tuple[int, float]] = {}
    for locale, pieces in corpus.items():
        lang = f"doc_{truth(locale)}"
        texts = [change(t) for t in pieces[size]]
        if setting == "upper":
            texts = [t.lower() if mostly_upper(t) else t for t in texts]
        docs = [Document(f"{locale}/{i}", t) for i, t in enumerate(texts)]
        t0 = time.perf_counter()
        results = tagger.predict_batch(docs)
        seconds += time.perf_counter() - t0
        ok = sum(bool(spans) and spans[0].type == lang for spans in results)
        score += sum(next((s.score for s in spans if s.type == lang), 0.0) for spans in results)
        right += ok
        total += len(docs)
        if docs:
            per[locale] = (len(docs), ok / len(docs))
    return Result(right / total, score / total, seconds, per)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--html", help="the handbook's html/ directory (default: installed, else downloaded into bench/_work/langid)")
    ap.add_argument("--paragraphs", type=int, default=300, help="paragraph-sized pieces per locale (300)")
    ap.add_argument("--documents", type=int, default=40, help="document-sized pieces per locale (40)")
    ap.add_argument("--min-chars", type=int, default=60, help="shortest paragraph kept, in characters (60)")
    ap.add_argument("--doc-chars", type=int, default=3000, help="document-sized pieces: about this many characters (3000)")
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)

    t0 = time.perf_counter()
    corpus = build(handbook_html(args.html), args.paragraphs, args.documents, args.min_chars, args.doc_chars)
    print(f"debian-handbook, {len(corpus)} locales, built in {time.perf_counter() - t0:.0f} s:")
    for size in SIZES:
        lengths = sorted(len(t) for c in corpus.values() for t in c[size])
        print(f"  {size}-sized pieces: {len(lengths):,}, {sum(lengths):,} characters (median {lengths[len(lengths) // 2]:,})")
    print("  lowercase: true / false is ft_lang_id's option; upper: false, but a piece whose cased words are")
    print("  mostly upper-case is lower-cased first.  true score: mean probability of the right language.\n")

    results = {
        (size, variant, setting): measure(corpus, size, variant, setting) for size in SIZES for variant in VARIANTS for setting in SETTINGS
    }
    print(f"{'pieces':<10} {'variant':<11} {'lowercase':<9} {'top-1':>7} {'true score':>10} {'tagging s':>9}")
    for (size, variant, setting), r in results.items():
        print(f"{size:<10} {variant:<11} {setting:<9} {r.accuracy:>7.2%} {r.true_score:>10.4f} {r.seconds:>9.2f}")
    for size in SIZES:
        columns = [key for key in results if key[0] == size]
        print(f"\n{size}-sized pieces, top-1 accuracy per locale (variant/lowercase)")
        print(f"{'locale':<7} {'pieces':>6}" + "".join(f" {SHORT[v] + '/' + c:>11}" for _, v, c in columns))
        for locale in corpus:
            cells = [results[c].per_locale.get(locale) for c in columns]
            if cells[0] is None:
                print(f"{locale:<7} {0:>6}")
                continue
            print(f"{locale:<7} {cells[0][0]:>6}" + "".join(f" {c[1]:>11.1%}" for c in cells if c))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
