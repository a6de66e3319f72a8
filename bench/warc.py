"""WARC extraction, quality and speed: dolma-pipe against trafilatura with FineWeb's settings and Dolma.

    .venv/bin/python bench/warc.py [--benchmarks scrapinghub wcxb-test wcxb-dev] [--processes 2]
                                   [--speed-copies 8] [--repeat 3] [--skip-end-to-end] [--skip-speed]

What it does (issue 31's targets; ``bench/warc_quality.py --check`` tests the metrics):

1. Quality. Loads the pages of the public benchmarks (ScrapingHub's 181 articles, WCXB's test and
   dev splits; ``bench/warc_quality.py`` says where from and how each benchmark scores) and packs
   each benchmark into one WARC of HTTP response records (``bench/_work/warc/warcs/``).
2. Extraction alone, on the same decoded pages: each of dolma-pipe's extractors through the warc
   stage's ``Extractor`` interface (``dolma_pipe.stages.warc.extract.EXTRACTORS``), in this
   process; trafilatura with FineWeb's settings (datatrove 0.10.1's ``Trafilatura``, 1 s timeout)
   in ``bench/_work/datatrove-venv``; Dolma 1.2.1's ``resiliparse`` linearizer in
   ``bench/_work/dolma-warc-venv`` (``bench/warc_peers.py extract`` there). Each page is timed in
   CPU seconds around the extraction call only; the table gives F1 per benchmark (each
   benchmark's own metric) and pages per CPU-second, with ratios to trafilatura-FineWeb and Dolma.
3. End to end, on each benchmark's WARC: ``dolma-pipe warc`` (with each ``linearizer`` the stage
   has), Dolma's ``dolma warc`` (resiliparse)
   and datatrove's pipeline (``WarcReader`` -> ``Trafilatura`` -> ``JsonlWriter``), one process
   each, CPU seconds of the whole process tree (``peers.run_measured``), start-up included; the
   documents each wrote are matched to the pages by record id (``warc_record_id``, datatrove's
   ``id``) or URL (Dolma's ``warc_url``: its id is the payload digest) and scored the same way.
4. Speed on a Common-Crawl-like crawl (``--speed-copies``: every benchmark page repeated with
   distinct URLs and record ids, in ``2 x --processes`` WARC files): ``dolma-pipe warc`` with a URL
   blocklist (datatrove's UT1 domains) and ``ft_lang_id_en_doc_v2`` as post-tagger (and again with
   ``cld2_en_doc_v2``: like for like with ``dolma warc`` below), ``dolma warc``
   (resiliparse, Dolma's offline ``cld2_en_doc_v2`` post-tagger; and again with its
   ``ft_lang_id_en_doc_v2``, whose model it would download, given our lid.176.ftz in a private
   cache folder where it looks first: the same tagger and model as ours) and datatrove's
   FineWeb pipeline (``URLFilter`` and ``LanguageFilter`` added, the same lid.176 model as ours),
   the same process count: records per CPU-second, peak resident memory of the largest process,
   ratios. ``dolma-pipe warc`` runs with the URL list already compiled in its cache (as every run
   after a machine's first), once more with an empty cache (the run compiles it), and once
   without the URL list (Dolma has no URL filter: the like-for-like row against it). With ``--repeat N``
   every tool runs N times, in rounds (each tool once a round); a row is the run with the median
   CPU time, all runs' range beside it, and each dolma-pipe row's ratio to each peer is also
   given round by round (the two runs of a round share the machine's spell) with its median.

The peers' environments are made on first use (PyPI; Dolma's with the boto stack pinned). Nothing
here runs in CI; the numbers and the command are in docs/benchmarks.md ("WARC extraction").
"""

from __future__ import annotations

import argparse
import glob
import gzip
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

import peers
import warc_quality as wq

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORK = os.path.join(HERE, "_work", "warc")
DATATROVE_VENV = os.path.join(HERE, "_work", "datatrove-venv")
DATATROVE_REQUIREMENTS = [
    "datatrove[processing]==0.10.1",
    "trafilatura",
    "lxml_html_clean",
    "warcio",
    "faust-cchardet",
    "python-magic",
    "orjson",
    "tldextract",
    "fasteners",
    "pyahocorasick",
    "aiohttp",
]
DOLMA_WARC_VENV = os.path.join(HERE, "_work", "dolma-warc-venv")
DOLMA_WARC_REQUIREMENTS = ["dolma[resiliparse]==1.2.1", "dateparser", "boto3==1.28.17", "botocore==1.31.17", "aiobotocore==2.5.4", "pycld2"]
PEERS_SCRIPT = os.path.join(HERE, "warc_peers.py")
LID_MODEL = os.path.join(ROOT, "taggers", "assets", "lid.176.ftz")
BENCHMARKS = ("scrapinghub", "wcxb-test", "wcxb-dev")
FINEWEB = "trafilatura-fineweb"
DOLMA = "dolma-resiliparse"
NO_LIST = "dolma-pipe warc, no URL list"  # the speed run's row without the 4.5M-domain list (Dolma has no URL filter)
DOLMA_FT = "dolma warc, fastText"  # the speed run's `dolma warc` with our language-id tagger and model (like for like)
DOLMA_FT_URL = "https://dl.fbaipublicfiles.com/fasttext/supervised-models/lid.176.bin"  # where Dolma's tagger fetches its model
COLD = "dolma-pipe warc, list compiled in the run"  # the speed run's row with an empty URL-list cache
CLD2 = "dolma-pipe warc, cld2"  # the speed run's row with Dolma's cld2_en_doc_v2 post-tagger (like for like with `dolma warc`)
SPEED_TOOLS = ["dolma-pipe warc", CLD2, COLD, NO_LIST, "dolma warc", DOLMA_FT, "datatrove"]


def ensure_venv(venv: str, requirements: list[str]) -> str:
    """``venv``'s python, the environment made with ``requirements`` once."""
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(os.path.join(venv, ".installed")):
        print(f"installing {' '.join(requirements)} into {venv} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", *requirements], check=True)
        open(os.path.join(venv, ".installed"), "w").close()
    return python


@dataclass
class Result:
    tool: str
    level: str  # "extractor" or "end to end"
    pages: int
    cpu: float
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # benchmark -> f1/precision/recall
    peak_rss_mb: float = 0.0
    runs: int = 0  # end to end: commands run (each paid the tool's start-up once)
    startup: float = 0.0  # end to end: CPU-s of one run on a one-page WARC

    def speed(self, less_startup: bool = False) -> float:
        """Pages per CPU-second; ``less_startup``: the one-page run's CPU and page taken off each run."""
        pages, cpu = self.pages, self.cpu
        if less_startup:
            pages, cpu = pages - self.runs, cpu - self.runs * self.startup
        return pages / cpu if cpu > 0 else 0.0


# Inputs ------------------------------------------------------------------------------------------


def benchmark_warc(bench: str, pages: list[wq.Page]) -> str:
    folder = os.path.join(WORK, "warcs", bench)
    path = os.path.join(folder, f"{bench}.warc.gz")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        wq.write_warc(pages, path)
    return path


# Extraction alone ----------------------------------------------------------------------------------


def ours_extract(name: str, pages: list[wq.Page]) -> tuple[dict[str, str], float]:
    """Page id -> text and the extraction's CPU seconds, through the stage's Extractor interface
    (given the page's URL, as the stage gives the record's target URI)."""
    from dolma_pipe.stages.warc.extract import EXTRACTORS

    extractor = EXTRACTORS[name]()
    texts, cpu = {}, 0.0
    for page in pages:
        html = page.html.decode("utf-8", "replace")
        start = time.process_time()
        texts[page.id] = extractor.extract(html, url=page.url) or ""
        cpu += time.process_time() - start
    return texts, cpu


def peer_extract(tool: str, warc: str, pages: list[wq.Page]) -> tuple[dict[str, str], float]:
    python = ensure_venv(*((DATATROVE_VENV, DATATROVE_REQUIREMENTS) if tool == FINEWEB else (DOLMA_WARC_VENV, DOLMA_WARC_REQUIREMENTS)))
    out = os.path.join(WORK, "out", f"{tool}.{os.path.basename(warc)}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    subprocess.run([python, PEERS_SCRIPT, "extract", "--tool", tool, "--out", out, warc], check=True, env=peers.dolma_env())
    with open(out, encoding="utf8") as f:
        data = json.load(f)
    ids = wq.record_map(pages)
    return {ids[k]: v for k, v in data["texts"].items()}, data["cpu"]


# End to end ------------------------------------------------------------------------------------------


def documents_folder(tool: str, out: str) -> str:
    """Where ``tool`` wrote its documents under ``out`` (dolma-pipe's attributes sit beside them)."""
    return os.path.join(out, "documents" if tool.startswith("dolma-pipe warc") else "output" if tool == "datatrove" else "")


def read_documents(folder: str) -> list[dict]:
    docs = []
    for path in sorted(glob.glob(os.path.join(folder, "**", "*.jsonl.gz"), recursive=True)):
        with gzip.open(path, "rt", encoding="utf8") as f:
            docs.extend(json.loads(line) for line in f if line.strip())
    return docs


def page_of(doc: dict, ids: dict[str, str]) -> str | None:
    meta = doc.get("metadata") or {}
    for key in (meta.get("warc_record_id"), doc.get("id"), meta.get("warc_url"), meta.get("url")):
        if key in ids:
            return ids[key]
    return None


def end_to_end(tool: str, warcs: list[str], out: str, processes: int, fineweb: bool = False) -> peers.Measured:
    """One tool over ``warcs`` into ``out`` (emptied first), measured."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    if tool.startswith("dolma-pipe warc"):
        cmd = [os.path.join(ROOT, ".venv", "bin", "dolma-pipe"), "warc", "--documents", *warcs, "--destination", out]
        cmd += ["--source_name", "bench", "--processes", str(processes), "--no-progress"]
        if " --linearizer " in tool:  # "dolma-pipe warc --linearizer NAME": another of the stage's extractors
            cmd += ["--linearizer", tool.rsplit(" ", 1)[1]]
        if fineweb:
            cmd += ["--post.taggers", "cld2_en_doc_v2" if tool == CLD2 else "ft_lang_id_en_doc_v2"]
        if fineweb and tool != NO_LIST:
            cmd += ["--urls.blocklists", ut1_domains()]
        env = peers.our_env()
        if fineweb and tool == COLD:  # an empty cache: the run compiles the list (once, the other process waits)
            env["DOLMA_PIPE_CACHE"] = os.path.join(out, "_url-list-cache")
        elif fineweb and tool != NO_LIST:  # the list compiled before the run, as for every run after a machine's first
            env["DOLMA_PIPE_CACHE"] = compiled_list_cache()
        return peers.run_measured(cmd, env=env)
    if tool in ("dolma warc", DOLMA_FT):
        python = ensure_venv(DOLMA_WARC_VENV, DOLMA_WARC_REQUIREMENTS)
        cmd = [os.path.join(os.path.dirname(python), "dolma"), "warc", "--documents", *warcs, "--destination", out]
        cmd += ["--source_name", "bench", "--linearizer", "resiliparse", "--processes", str(processes)]
        env = peers.dolma_env()
        if fineweb and tool == DOLMA_FT:
            cmd += ["--post.taggers", "ft_lang_id_en_doc_v2"]
            env["XDG_CACHE_HOME"] = dolma_model_cache()
        elif fineweb:
            cmd += ["--post.taggers", "cld2_en_doc_v2"]
        return peers.run_measured(cmd, env=env)
    python = ensure_venv(DATATROVE_VENV, DATATROVE_REQUIREMENTS)
    folder = os.path.join(out, "_in")
    os.makedirs(folder)
    for w in warcs:
        os.symlink(os.path.abspath(w), os.path.join(folder, os.path.basename(w)))
    cmd = [python, PEERS_SCRIPT, "datatrove", "--warcs", folder, "--out", out, "--tasks", str(len(warcs)), "--workers", str(processes)]
    if fineweb:
        cmd += ["--fineweb", "--lid-model", LID_MODEL]
    return peers.run_measured(cmd, env=peers.dolma_env())


def compiled_list_cache() -> str:
    """A cache folder of dolma-pipe's with the UT1 list already compiled in it."""
    from dolma_pipe.stages.warc import urls

    folder = os.path.join(WORK, "url-list-cache")
    previous = os.environ.get(urls.CACHE_ENV)
    os.environ[urls.CACHE_ENV] = folder
    try:
        path = ut1_domains()
        urls.compiled(path, urls.list_digest(path))
    finally:
        os.environ.pop(urls.CACHE_ENV)
        if previous is not None:
            os.environ[urls.CACHE_ENV] = previous
    return folder


def dolma_model_cache() -> str:
    """An XDG cache folder where Dolma's ``cached_path`` finds its fastText language-id model
    already "downloaded": our lid.176.ftz under the name Dolma gives lid.176.bin's URL (sha256 of
    the URL, then what follows the name's first dot: ``.176.bin``), so both tools run the same
    model and nothing is fetched."""
    folder = os.path.join(WORK, "dolma-xdg-cache")
    model = os.path.join(folder, "dolma", hashlib.sha256(DOLMA_FT_URL.encode()).hexdigest() + ".176.bin")
    if not os.path.exists(model):
        os.makedirs(os.path.dirname(model), exist_ok=True)
        shutil.copyfile(LID_MODEL, model)
    return folder


def ut1_domains() -> str:
    """datatrove's shipped UT1 blocked-domain list as one file (the same list both tools use)."""
    path = os.path.join(WORK, "ut1-domains.txt")
    if not os.path.exists(path):
        python = ensure_venv(DATATROVE_VENV, DATATROVE_REQUIREMENTS)
        code = (
            "import tarfile,sys,os;from datatrove.pipeline.filters.url_filter import ASSETS_PATH as A;"
            "t=tarfile.open(os.path.join(A,'url_filterblacklistsv0_3_0.tar.gz'));"
            "m=[x for x in t.getmembers() if x.name.endswith('domains')][0];sys.stdout.buffer.write(t.extractfile(m).read())"
        )
        data = subprocess.run([python, "-c", code], check=True, capture_output=True).stdout
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
    return path


# Tables ----------------------------------------------------------------------------------------------


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


def print_quality(results: list[Result], benches: list[str]) -> None:
    head = " | ".join(f"{b} F1 (P / R)" for b in benches)
    print(f"\n| tool | level | {head} | pages | CPU-s | pages/CPU-s | less start-up | vs {FINEWEB} | vs Dolma |")
    print("|" + "---|" * (len(benches) + 8))
    speed = {(r.level, r.tool): r.speed(less_startup=r.level != "extractor") for r in results}
    for r in results:
        ref_fw = speed.get((r.level, FINEWEB if r.level == "extractor" else "datatrove"), 0.0)
        ref_dolma = speed.get((r.level, DOLMA if r.level == "extractor" else "dolma warc"), 0.0)
        cells = " | ".join(
            f"{r.scores[b]['f1']:.3f} ({r.scores[b]['precision']:.3f} / {r.scores[b]['recall']:.3f})" if b in r.scores else "-"
            for b in benches
        )
        s = speed[(r.level, r.tool)]
        net = f"{s:.1f}" if r.level != "extractor" else "-"
        print(
            f"| {r.tool} | {r.level} | {cells} | {r.pages} | {r.cpu:.1f} | {r.speed():.1f} | {net} | {ratio(s, ref_fw)} | {ratio(s, ref_dolma)} |"
        )
    print("(ratios: extraction alone, and end to end less each tool's start-up)")


def startup_cpu(tool: str, page: wq.Page) -> float:
    """CPU-s of ``tool`` end to end on a one-page WARC: its start-up and teardown."""
    warc = benchmark_warc("one-page", [page])
    return end_to_end(tool, [warc], os.path.join(WORK, "e2e", tool.replace(" ", "-"), "one-page"), 1).cpu


def quality(args: argparse.Namespace) -> None:
    from dolma_pipe.stages.warc.extract import EXTRACTORS

    results: dict[tuple[str, str], Result] = {}

    def add(tool: str, level: str, bench: str, pages: list[wq.Page], texts: dict[str, str], cpu: float, rss: float = 0.0) -> None:
        r = results.setdefault((level, tool), Result(tool, level, 0, 0.0))
        r.pages += len(pages)
        r.cpu += cpu
        r.peak_rss_mb = max(r.peak_rss_mb, rss)
        r.scores[bench] = wq.scores(pages, texts)

    for bench in args.benchmarks:
        pages = wq.load(bench, args.scrapinghub, args.wcxb)
        warc = benchmark_warc(bench, pages)
        print(f"{bench}: {len(pages)} pages, {warc}", flush=True)
        for name in sorted(EXTRACTORS):
            add(f"dolma-pipe {name}", "extractor", bench, pages, *ours_extract(name, pages))
        for tool in (FINEWEB, DOLMA):
            add(tool, "extractor", bench, pages, *peer_extract(tool, warc, pages))
        if args.skip_end_to_end:
            continue
        ids = wq.record_map(pages)
        ours = ["dolma-pipe warc"] + [f"dolma-pipe warc --linearizer {name}" for name in sorted(EXTRACTORS) if name != "resiliparse"]
        for tool in (*ours, "dolma warc", "datatrove"):
            out = os.path.join(WORK, "e2e", tool.replace(" ", "-"), bench)
            m = end_to_end(tool, [warc], out, 1)
            texts = {}
            for doc in read_documents(documents_folder(tool, out)):
                page = page_of(doc, ids)
                if page is not None:
                    texts[page] = doc.get("text") or ""
            add(tool, "end to end", bench, pages, texts, m.cpu, m.peak_rss_mb)
            r = results[("end to end", tool)]
            r.runs += 1
            if not r.startup:
                r.startup = startup_cpu(tool, pages[0])
    print_quality(list(results.values()), args.benchmarks)


# Speed on a larger crawl ------------------------------------------------------------------------------


def crawl(copies: int, files: int, args: argparse.Namespace) -> tuple[list[str], int]:
    """Every benchmark page ``copies`` times (distinct URLs, record ids) in ``files`` WARCs, once."""
    folder = os.path.join(WORK, "crawl", f"{copies}x{files}")
    paths = [os.path.join(folder, f"crawl-{i:03d}.warc.gz") for i in range(files)]
    count_file = os.path.join(folder, "records")
    if not os.path.exists(count_file):
        os.makedirs(folder, exist_ok=True)
        pages = [p for b in BENCHMARKS for p in wq.load(b, args.scrapinghub, args.wcxb)]
        pairs = [(c, p) for c in range(copies) for p in pages]
        n = sum(write_copies(pairs[i::files], path) for i, path in enumerate(paths))
        with open(count_file, "w") as f:
            f.write(str(n))
    with open(count_file) as f:
        return paths, int(f.read())


def write_copies(chunk: list[tuple[int, wq.Page]], path: str) -> int:
    """One WARC of (copy number, page) records; a copy's URL and record id carry its number."""
    copies = [wq.Page(p.bench, f"{p.id}#copy-{c}", f"{p.url}#copy-{c}", p.html, p.truth) for c, p in chunk]
    return wq.write_warc(copies, path)


def speed(args: argparse.Namespace) -> None:
    files = 2 * args.processes
    warcs, n = crawl(args.speed_copies, files, args)
    size = sum(os.path.getsize(w) for w in warcs) / 1e6
    print(f"\ncrawl: {n} records in {files} WARC files ({size:.0f} MB), {args.processes} processes", flush=True)
    # Rounds of every tool in turn (--repeat): a slow spell of a shared machine then falls on each
    # tool alike, and each row is the run with the median CPU time, its range beside it.
    runs: dict[str, list[tuple[peers.Measured, int]]] = {tool: [] for tool in args.speed_tools}
    for round_ in range(args.repeat):
        for tool in args.speed_tools:
            out = os.path.join(WORK, "speed", tool.replace(" ", "-").replace(",", ""))
            m = end_to_end(tool, warcs, out, args.processes, fineweb=True)
            kept = len(read_documents(documents_folder(tool, out)))
            runs[tool].append((m, kept))
            print(
                f"  {tool} (run {round_ + 1}/{args.repeat}): {m.cpu:.1f} CPU-s, {m.wall:.1f} s wall, "
                f"peak RSS {m.peak_rss_mb:.0f} MB, {kept} documents written",
                flush=True,
            )
    rows = []
    for tool, done in runs.items():
        ordered = sorted(done, key=lambda run: run[0].cpu)
        m, kept = ordered[(len(ordered) - 1) // 2]
        rows.append((tool, m, kept, f"{ordered[0][0].cpu:.1f}-{ordered[-1][0].cpu:.1f}"))
    by = {t: n / m.cpu for t, m, _, _ in rows}
    for tool in ("datatrove", "dolma warc", DOLMA_FT):
        by.setdefault(tool, 0.0)
    head = (
        "| tool | records | CPU-s | CPU-s, all runs | wall s | records/CPU-s | peak RSS MB | documents "
        "| vs datatrove | vs dolma warc | vs dolma warc, fastText |"
    )
    print(f"\n{head}\n{'|---' * 11}|")
    for tool, m, kept, spread in rows:
        s = by[tool]
        print(
            f"| {tool} | {n} | {m.cpu:.1f} | {spread} | {m.wall:.1f} | {s:.1f} | {m.peak_rss_mb:.0f} | {kept} "
            f"| {ratio(s, by['datatrove'])} | {ratio(s, by['dolma warc'])} | {ratio(s, by[DOLMA_FT])} |"
        )
    if args.repeat > 1:
        print(paired_ratios(runs))


def paired_ratios(runs: dict[str, list[tuple[peers.Measured, int]]]) -> str:
    """Each dolma-pipe row against each peer's, round by round: both ran within the same minutes,
    so a slow spell of the machine falls on both, where the medians of the rows above may come
    from different rounds. Records per CPU-second are in the ratio of the CPU times (the same crawl)."""
    lines = ["\nround by round (their CPU-s over ours; median, then each round):"]
    for ours in (t for t in runs if t.startswith("dolma-pipe")):
        for peer in (t for t in runs if not t.startswith("dolma-pipe")):
            each = [theirs[0].cpu / mine[0].cpu for mine, theirs in zip(runs[ours], runs[peer])]
            listed = ", ".join(f"{r:.2f}x" for r in each)
            lines.append(f"  {ours} vs {peer}: {statistics.median(each):.2f}x ({listed})")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS), choices=BENCHMARKS, help="benchmarks scored")
    ap.add_argument("--processes", type=int, default=2, help="processes of each tool in the speed run")
    ap.add_argument("--speed-copies", type=int, default=1, help="copies of every benchmark page in the speed run's crawl")
    ap.add_argument(
        "--skip-end-to-end", action="store_true", help="score the extractors alone (no dolma-pipe warc / dolma warc / datatrove runs)"
    )
    ap.add_argument(
        "--speed-tools",
        nargs="+",
        default=SPEED_TOOLS,
        choices=SPEED_TOOLS,
        help="tools of the speed run (the ratios need datatrove and the dolma warc rows)",
    )
    ap.add_argument(
        "--repeat", type=int, default=1, help="rounds of the speed run (each row: the run with the median CPU time, and the range)"
    )
    ap.add_argument("--skip-quality", action="store_true", help="only the speed run")
    ap.add_argument("--skip-speed", action="store_true", help="no speed run on the larger crawl")
    ap.add_argument("--scrapinghub", default=wq.DEFAULT_SCRAPINGHUB, help="clone of scrapinghub/article-extraction-benchmark")
    ap.add_argument("--wcxb", default=wq.DEFAULT_WCXB, help="clone of Murrough-Foley/web-content-extraction-benchmark")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat: at least 1")
    if not args.skip_quality:
        quality(args)
    if not args.skip_speed:
        speed(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
