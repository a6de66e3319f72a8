"""PDF text extraction scored on Debian's documentation, shipped both as PDF and as HTML.

    .venv/bin/python bench/pdf_quality.py [--work bench/_work/pdf] [--repeat 3]
                                          [--peers-python bench/_work/pdf/peers-venv/bin/python]

Debian builds several manuals from one DocBook or Sphinx source into both HTML and PDF, and ships
both in one package: the HTML's text is the reference for the PDF's. The packages are fetched with
``apt-get download`` (no root; ``dpkg -x`` into ``<work>/docs``): ``debian-reference-en`` (2.100),
``developers-reference`` (12.18; its one-page HTML), ``maint-guide`` (1.2.53), ``debian-faq``
(11.1), ``debmake-doc`` (1.17-7: English, German, Russian, Japanese and both Chinese, one PDF
each) and ``camlidl-doc`` (1.04). poppler-utils and the libraries this machine lacks for it
(``libpoppler126``, ``libnspr4``) are unpacked the same way into ``<work>/poppler``.

Reference text: each document's HTML files (bag of words: their order does not matter) through
resiliparse's ``extract_plain_text`` with ``main_content=False`` (every text node; the HTML's
navigation links are in it, as the PDF's page headers, footers and contents pages are in the
PDF's text). Metric: WCXB's word F1 (``bench/warc_quality.py``'s ``word_prf``: lower-cased
``\\w+`` words as bags), per document. ``\\w+`` makes a run of CJK characters one word, so the
Japanese and Chinese rows score how line breaks cut runs more than the text: they are shown
apart and left out of the mean.

Extractors, each on the same PDF bytes:

- ``dolma-pipe pdf`` (pypdfium2's text layer, ``dolma_pipe.stages.warc.pdf.PdfText``): the texts
  are those the stage wrote (``dolma-pipe pdf`` run on the PDFs, its extractor in its child
  process); its CPU time is ``PdfText.extract`` in this process (the extraction call alone) and,
  in its own row, the whole stage's run (this process and its children, start-up included).
- ``pdftotext`` (poppler 22.12, Debian's ``poppler-utils``): one process per PDF, its CPU time
  from ``RUSAGE_CHILDREN``.
- ``pypdf`` and ``pdfminer.six`` (the versions in ``--peers-python``'s environment; pure Python),
  each PDF timed around its ``extract_text`` call in that process.

CPU time is the smallest of ``--repeat`` runs per document (``--peers-repeat`` for pypdf and
pdfminer.six); the table's speed is pages per
CPU-second over all documents. The machine may be shared: CPU seconds, side by side in one run.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from peers import run_measured
from warc_quality import word_prf

DEFAULT_WORK = os.path.join(HERE, "_work", "pdf")
DOC_PACKAGES = ["debian-reference-en", "developers-reference", "maint-guide", "debian-faq", "debmake-doc", "camlidl-doc"]
POPPLER_PACKAGES = ["poppler-utils", "libpoppler126", "libnspr4"]
CJK = {"ja", "zh-cn", "zh-tw"}


@dataclass
class Pair:
    name: str
    pdf: str  # under <work>/docs (.pdf or .pdf.gz)
    html: list[str]  # globs under <work>/docs
    lang: str = "en"
    pages: int = 0
    texts: dict[str, str] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)


def pairs() -> list[Pair]:
    out = [
        Pair("debian-reference", "usr/share/debian-reference/debian-reference.en.pdf", ["usr/share/debian-reference/*.en.html"]),
        Pair(
            "developers-reference",
            "usr/share/developers-reference/developers-reference.pdf",
            ["usr/share/developers-reference/developers-reference.html"],
        ),
        Pair("maint-guide", "usr/share/doc/maint-guide/maint-guide.en.pdf", ["usr/share/doc/maint-guide/html/*.en.html"]),
        Pair("debian-faq", "usr/share/doc/debian/FAQ/debian-faq.en.pdf.gz", ["usr/share/doc/debian/FAQ/*.en.html"]),
        Pair("camlidl", "usr/share/doc/camlidl/camlidl-1.04.doc.pdf", ["usr/share/doc/camlidl/html/*.html"]),
    ]
    for lang in ("en", "de", "ru", "ja", "zh-cn", "zh-tw"):
        out.append(
            Pair(
                f"debmake-doc.{lang}",
                f"usr/share/doc/debmake-doc/debmake-doc.{lang}.pdf",
                [f"usr/share/doc/debmake-doc/html/*.{lang}.html"],
                lang,
            )
        )
    return out


def fetch(work: str) -> None:
    """The .deb files (apt-get download, once) unpacked into <work>/docs and <work>/poppler."""
    debs = os.path.join(work, "debs")
    os.makedirs(debs, exist_ok=True)
    for packages, dest in ((DOC_PACKAGES, "docs"), (POPPLER_PACKAGES, "poppler")):
        missing = [p for p in packages if not glob.glob(os.path.join(debs, f"{p}_*.deb"))]
        if missing:
            subprocess.run(["apt-get", "download", *missing], cwd=debs, check=True)
        target = os.path.join(work, dest)
        if not os.path.isdir(target):
            for p in packages:
                (deb,) = glob.glob(os.path.join(debs, f"{p}_*.deb"))
                subprocess.run(["dpkg", "-x", deb, target], check=True)


def reference(html_files: list[str]) -> str:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    parts = []
    for path in html_files:
        with open(path, "rb") as fh:
            tree = HTMLTree.parse_from_bytes(fh.read())
        parts.append(extract_plain_text(tree, main_content=False, alt_texts=False, links=True))
    return "\n\n".join(parts)


def prepare(work: str, chosen: list[Pair]) -> str:
    """Each PDF as <work>/pairs/<name>.pdf and its reference text as <name>.ref.txt."""
    import pypdfium2 as pdfium

    folder = os.path.join(work, "pairs")
    os.makedirs(folder, exist_ok=True)
    docs = os.path.join(work, "docs")
    for pair in chosen:
        target = os.path.join(folder, pair.name + ".pdf")
        source = os.path.join(docs, pair.pdf)
        opener = gzip.open if source.endswith(".gz") else open
        with opener(source, "rb") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        html = sorted(f for g in pair.html for f in glob.glob(os.path.join(docs, g)))
        if not html:
            raise SystemExit(f"{pair.name}: no HTML matches {pair.html}")
        with open(os.path.join(folder, pair.name + ".ref.txt"), "w", encoding="utf-8") as fh:
            fh.write(reference(html))
        doc = pdfium.PdfDocument(target)
        pair.pages = len(doc)
        doc.close()
    return folder


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_ours(work: str, folder: str, chosen: list[Pair], repeat: int) -> float:
    """``dolma-pipe pdf`` on the PDFs (its texts), measured as a process tree; PdfText.extract timed
    in this process. Returns the stage's CPU seconds (start-up, its worker and extractor child)."""
    from dolma_pipe.documents import read_documents
    from dolma_pipe.stages.warc.pdf import PdfText

    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    pattern = os.path.join(folder, "*.pdf")
    cmd = [sys.executable, "-m", "dolma_pipe", "pdf", "--documents", pattern, "--destination", out, "--source_name", "debian-docs"]
    stage = run_measured([*cmd, "--processes", "1"], cwd=REPO)
    # Several PDFs to an output file (files_per_task): each document found by its metadata.path.
    texts = {}
    for name in sorted(os.listdir(os.path.join(out, "documents"))):
        for _, doc in read_documents(os.path.join(out, "documents", name)):
            texts[doc["metadata"]["path"]] = doc["text"]
    for pair in chosen:
        pair.texts["dolma-pipe pdf"] = texts.get(pair.name + ".pdf", "")
    reader = PdfText()
    for pair in chosen:
        with open(os.path.join(folder, pair.name + ".pdf"), "rb") as fh:
            data = fh.read()
        times = []
        for _ in range(repeat):
            t = time.process_time()
            text = reader.extract(data)
            times.append(time.process_time() - t)
        assert text == pair.texts["dolma-pipe pdf"], pair.name  # the stage wrote what the extractor gives
        pair.cpu["dolma-pipe pdf"] = min(times)
    return stage.cpu


def run_pdftotext(work: str, folder: str, chosen: list[Pair], repeat: int) -> str:
    root = os.path.join(work, "poppler")
    binary = os.path.join(root, "usr", "bin", "pdftotext")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(root, "usr", "lib", "x86_64-linux-gnu"))
    version = subprocess.run([binary, "-v"], env=env, capture_output=True, text=True).stderr.splitlines()[0]
    for pair in chosen:
        times = []
        for _ in range(repeat):
            before = cpu_children()
            proc = subprocess.run(
                [binary, "-enc", "UTF-8", os.path.join(folder, pair.name + ".pdf"), "-"], env=env, capture_output=True, check=True
            )
            times.append(cpu_children() - before)
        pair.texts["pdftotext"] = proc.stdout.decode("utf-8", "replace")
        pair.cpu["pdftotext"] = min(times)
    return version


PEERS = r"""
import json, sys, time
import pypdf, pdfminer
from pdfminer.high_level import extract_text
paths, repeat = sys.argv[1:-1], int(sys.argv[-1])
def with_pypdf(path):
    reader = pypdf.PdfReader(path)
    return "\n".join(page.extract_text() or "" for page in reader.pages)
for name, fn, version in (("pypdf", with_pypdf, pypdf.__version__), ("pdfminer.six", extract_text, pdfminer.__version__)):
    for path in paths:
        times = []
        for _ in range(repeat):
            t = time.process_time()
            try:
                text = fn(path)
            except Exception as exc:
                text = ""
                print(f"{name} {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
            times.append(time.process_time() - t)
        print(json.dumps({"extractor": name, "version": version, "path": path, "text": text, "cpu": min(times)}), flush=True)
"""


def run_peers(python: str, folder: str, chosen: list[Pair], repeat: int) -> dict[str, str]:
    paths = [os.path.join(folder, p.name + ".pdf") for p in chosen]
    proc = subprocess.run([python, "-c", PEERS, *paths, str(repeat)], capture_output=True, text=True, check=True)
    by_path = {os.path.join(folder, p.name + ".pdf"): p for p in chosen}
    versions = {}
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        pair = by_path[row["path"]]
        pair.texts[row["extractor"]] = row["text"]
        pair.cpu[row["extractor"]] = row["cpu"]
        versions[row["extractor"]] = row["version"]
    return versions


def table(chosen: list[Pair], folder: str, extractors: list[str], stage_cpu: float) -> str:
    refs = {p.name: open(os.path.join(folder, p.name + ".ref.txt"), encoding="utf-8").read() for p in chosen}
    lines = [
        "| document | pages | " + " | ".join(f"{e} F1" for e in extractors) + " |",
        "|---|---:|" + "---:|" * len(extractors),
    ]
    f1: dict[str, list[float]] = {e: [] for e in extractors}
    for pair in sorted(chosen, key=lambda p: (p.lang in CJK, p.name)):
        row = []
        for e in extractors:
            score = word_prf(pair.texts.get(e, ""), refs[pair.name])[2]
            row.append(f"{score:.3f}")
            if pair.lang not in CJK:
                f1[e].append(score)
        mark = " (CJK)" if pair.lang in CJK else ""
        lines.append(f"| {pair.name}{mark} | {pair.pages} | " + " | ".join(row) + " |")
    lines.append("| **mean, not CJK** | | " + " | ".join(f"**{statistics.mean(f1[e]):.3f}**" for e in extractors) + " |")
    pages = sum(p.pages for p in chosen)
    speed = {e: pages / sum(p.cpu[e] for p in chosen) for e in extractors}
    lines.append(f"| **pages per CPU-second** ({pages} pages) | | " + " | ".join(f"**{speed[e]:.0f}**" for e in extractors) + " |")
    lines.append("")
    lines.append(
        f"`dolma-pipe pdf` as a whole run (1 process, its extractor's child, start-up included): {pages / stage_cpu:.0f} pages per CPU-second"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default=DEFAULT_WORK, help="where the packages, PDFs and outputs go (git-ignored)")
    parser.add_argument(
        "--peers-python",
        default=os.path.join(DEFAULT_WORK, "peers-venv", "bin", "python"),
        help="a Python with pypdf and pdfminer.six ('' to skip)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="CPU time is the least of this many runs per document")
    parser.add_argument("--peers-repeat", type=int, default=1, help="--repeat for pypdf and pdfminer.six (slow)")
    parser.add_argument("--only", nargs="*", help="documents by name (default: all)")
    args = parser.parse_args()
    fetch(args.work)
    chosen = [p for p in pairs() if not args.only or p.name in args.only]
    folder = prepare(args.work, chosen)
    stage_cpu = run_ours(args.work, folder, chosen, args.repeat)
    extractors = ["dolma-pipe pdf"]
    version = run_pdftotext(args.work, folder, chosen, args.repeat)
    extractors.append("pdftotext")
    versions = {"pdftotext": version}
    if args.peers_python and os.path.exists(args.peers_python):
        versions.update(run_peers(args.peers_python, folder, chosen, args.peers_repeat))
        extractors += ["pypdf", "pdfminer.six"]
    from pypdfium2.version import PDFIUM_INFO, PYPDFIUM_INFO

    versions["dolma-pipe pdf"] = f"pypdfium2 {PYPDFIUM_INFO} (pdfium {PDFIUM_INFO})"
    print(table(chosen, folder, extractors, stage_cpu))
    print()
    for e in extractors:
        print(f"- {e}: {versions[e]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
