"""The peers' side of bench/warc.py: run inside a peer's own virtual environment, never imported.

    bench/_work/datatrove-venv/bin/python bench/warc_peers.py extract --tool trafilatura-fineweb --out t.json a.warc.gz
    bench/_work/dolma-warc-venv/bin/python bench/warc_peers.py extract --tool dolma-resiliparse --out r.json a.warc.gz
    bench/_work/datatrove-venv/bin/python bench/warc_peers.py datatrove --warcs DIR --out DIR --tasks 2 --workers 2 [--fineweb]

``extract`` reads every response record of the WARCs (warcio where the environment has it, else
fastwarc), decodes the payload as datatrove's reader does (UTF-8, else the detector) and runs one
extractor on it in this process, timing each page in CPU seconds (``time.process_time``): the
extraction alone, what bench/warc.py compares with dolma-pipe's extractors called the same way.

- ``trafilatura-fineweb``: datatrove 0.10.1's ``Trafilatura`` step's own ``extract`` with FineWeb's
  settings (``favour_precision=True``, ``deduplicate=True``, no comments); datatrove drops a page
  whose extraction passes its 1 s ``timeout``, and so does this (the page scores as empty).
- ``trafilatura-default``: ``trafilatura.extract(html)`` with its defaults, as the benchmarks'
  READMEs ran it; ``trafilatura-recall``: with ``favor_recall=True`` (the metrics' cross-check).
- ``dolma-resiliparse``: Dolma 1.2.1's ``resiliparse`` linearizer (``LinearizerRegistry``).

It writes ``{"texts": {record id: text}, "cpu": seconds, "pages": n, "dropped": n, "failed": n}``
(``failed``: the extractor raised; the first error is printed, and a run where every page fails
exits non-zero).

``datatrove`` runs datatrove's own pipeline on a folder of WARCs with its local executor:
``WarcReader`` -> [``URLFilter``] -> ``Trafilatura`` (FineWeb's settings, 1 s timeout in its
sandbox process) -> [``LanguageFilter``] -> ``JsonlWriter``; ``--fineweb`` adds the two filters, as
FineWeb's pipeline has them. The language filter's fastText model is lid.176 (``--lid-model``: a
local file copied into datatrove's asset cache under the name it would download, since nothing
is downloaded here). The process makes itself its tree's subreaper and reaps every orphan before it
exits, so that the CPU time of the extractor's sandbox processes is counted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator


def records(paths: list[str]) -> Iterator[tuple[str, bytes]]:
    """(WARC-Record-ID, HTTP payload) of every response record."""
    try:
        from warcio.archiveiterator import ArchiveIterator
    except ImportError:
        from fastwarc.warc import ArchiveIterator as FastIterator
        from fastwarc.warc import WarcRecordType

        for path in paths:
            with open(path, "rb") as f:
                for rec in FastIterator(f, record_types=WarcRecordType.response):
                    yield rec.headers.get("WARC-Record-ID"), rec.reader.read()
        return
    for path in paths:
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                if rec.rec_type == "response":
                    yield rec.rec_headers.get_header("WARC-Record-ID"), rec.content_stream().read()


def decode(payload: bytes) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes

        best = from_bytes(payload).best()
        return str(best) if best is not None else payload.decode("utf-8", "replace")


def extractor(tool: str):
    if tool == "trafilatura-fineweb":
        from datatrove.pipeline.extractors import Trafilatura

        return Trafilatura(favour_precision=True, deduplicate=True, timeout=1).extract, 1.0
    if tool == "trafilatura-default":
        import trafilatura

        return trafilatura.extract, None
    if tool == "trafilatura-recall":
        import trafilatura

        return (lambda html: trafilatura.extract(html, favor_recall=True)), None
    if tool == "dolma-resiliparse":
        from dolma.warc.linearizers import LinearizerRegistry

        return LinearizerRegistry.get("resiliparse")().linearize, None
    raise SystemExit(f"unknown tool {tool}")


def run_extract(args: argparse.Namespace) -> None:
    fn, timeout = extractor(args.tool)
    texts: dict[str, str] = {}
    cpu = 0.0
    dropped = failed = 0
    for record_id, payload in records(args.warcs):
        html = decode(payload)
        wall, start = time.perf_counter(), time.process_time()
        try:
            text = fn(html) or ""
        except Exception as exc:  # counted and shown: a broken environment must not read as empty pages
            if not failed:
                print(f"{args.tool}: {record_id}: {exc!r}", file=sys.stderr)
            failed += 1
            text = ""
        cpu += time.process_time() - start
        if timeout is not None and time.perf_counter() - wall > timeout:
            text = ""  # datatrove's sandbox would have killed it and dropped the page
        dropped += not text
        texts[record_id] = text
    with open(args.out, "w", encoding="utf8") as f:
        json.dump({"texts": texts, "cpu": cpu, "pages": len(texts), "dropped": dropped, "failed": failed}, f)
    if failed == len(texts):
        raise SystemExit(f"{args.tool}: every page failed")


def seed_lid_model(model: str) -> None:
    """datatrove's LanguageFilter downloads lid.176.bin once into its asset cache; put it there."""
    from datatrove.io import cached_assets_path, strip_protocol
    from datatrove.utils.lid import FT176LID

    folder = cached_assets_path(library_name="datatrove", namespace="lid", subfolder=FT176LID.MODEL_SUBFOLDER)
    target = os.path.join(folder, strip_protocol(FT176LID.MODEL_URL).replace("/", "_"))
    if not os.path.exists(target + ".completed"):  # what datatrove's safely_create_file looks for
        shutil.copyfile(model, target)
        open(target + ".completed", "w").close()


def become_subreaper() -> None:
    """Orphans of this process tree become this process's children (Linux), so that it can reap them.

    datatrove's local executor starts its pool from a fork server (its workers are the server's
    children) and each worker starts the extractor's sandbox process; a process whose parent ends
    without reaping it has its CPU time reported to nobody, and the bench measures the tree's CPU
    from what its root reaped."""
    import ctypes

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def reap_orphans(limit_s: float = 30.0) -> None:
    """Wait for every child left (orphans included) but multiprocessing's own trackers, which end with us."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            continue
        alive = []
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                alive += f.read().split()
        trackers = 0
        for child in alive:
            try:
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    trackers += b"tracker" in f.read()
            except OSError:
                trackers += 1
        if trackers == len(alive):
            return
        time.sleep(0.05)


def run_datatrove(args: argparse.Namespace) -> None:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers import JsonlWriter

    steps: list = [WarcReader(args.warcs, glob_pattern="*.warc.gz")]
    if args.fineweb:
        from datatrove.pipeline.filters import LanguageFilter, URLFilter

        seed_lid_model(args.lid_model)
        steps.append(URLFilter())
    steps.append(Trafilatura(favour_precision=True, deduplicate=True, timeout=1))
    if args.fineweb:
        steps.append(LanguageFilter(languages=["en"], language_threshold=0.65))
    steps.append(JsonlWriter(os.path.join(args.out, "output"), compression="gzip"))
    become_subreaper()
    LocalPipelineExecutor(
        pipeline=steps, tasks=args.tasks, workers=args.workers, logging_dir=os.path.join(args.out, "logs"), skip_completed=False
    ).run()
    # The pool's workers are children of multiprocess's fork server, which would outlive this
    # process's reaping (it ends when we exit): stop it now, so that its workers' CPU is counted.
    from multiprocess import forkserver

    forkserver._forkserver._stop()
    reap_orphans()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("extract", help="one extractor over every response record, timed per page")
    ex.add_argument(
        "--tool", required=True, choices=["trafilatura-fineweb", "trafilatura-default", "trafilatura-recall", "dolma-resiliparse"]
    )
    ex.add_argument("--out", required=True, help="JSON file written")
    ex.add_argument("warcs", nargs="+")
    dt = sub.add_parser("datatrove", help="datatrove's WARC pipeline (FineWeb's extraction) with its local executor")
    dt.add_argument("--warcs", required=True, help="folder of *.warc.gz")
    dt.add_argument("--out", required=True)
    dt.add_argument("--tasks", type=int, default=1)
    dt.add_argument("--workers", type=int, default=1)
    dt.add_argument("--fineweb", action="store_true", help="add FineWeb's URLFilter and LanguageFilter")
    dt.add_argument("--lid-model", default="", help="local lid.176 fastText model for the LanguageFilter")
    args = ap.parse_args()
    if args.cmd == "extract":
        run_extract(args)
    else:
        run_datatrove(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
