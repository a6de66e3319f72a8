"""``dolma-pipe pdf``: local PDF files into Dolma documents, one task per file or per group of
files, every file accounted for (written, skipped with its reason, or quarantined with the file
named), ids and paths from the relative name and the content, ``created`` from the PDF's own date
(in plain bytes or a compressed object stream), the same bytes in the extractor's child process
and in the worker, for 1 and 2 processes, after a kill, and on a rerun with files added and
removed."""

from __future__ import annotations

import json
import zlib
from collections import Counter

import pytest

from dolma_pipe import storage
from dolma_pipe.config import ConfigError, load_config
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.pdf import PdfConfig, PdfStage, document_id, plan_groups
from dolma_pipe.stages.warc.config import WarcConfig
from dolma_pipe.stages.warc.pdf import creation_date
from tests.support.outputs import stage_outputs
from tests.support.warc import make_pdf, read_records

PAGES = [["Report on rivers and bridges.", "First page, a pro-", "cess hyphenated."], ["The second page of the report."]]


def _run(overrides: dict):
    config = load_config(PdfConfig, None, {"source_name": "papers", "progress": False, "processes": 1, **overrides})
    return run_stage(PdfStage(config))


@pytest.fixture
def pdfs(tmp_path):
    root = tmp_path / "in"
    (root / "reports").mkdir(parents=True)
    dated = make_pdf(PAGES).replace(b"/Root 1 0 R >>", b"/Root 1 0 R /Info << /CreationDate (D:20240501123456+02'00') >> >>")
    (root / "reports" / "rivers.pdf").write_bytes(dated)
    (root / "plain.PDF").write_bytes(make_pdf([["A short note without a date."]]))
    (root / "scanned.pdf").write_bytes(make_pdf([[]]))  # pages, no text layer
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n" + b"\x00garbage" * 50)
    (root / "page.pdf").write_bytes(b"<html><body>not a PDF</body></html>")
    return root


def test_pdf_files_become_documents_every_file_counted(pdfs, tmp_path):
    out = tmp_path / "out"
    one = {"added": "2026-01-02T03:04:05Z", "files_per_task": 1}  # a task and an output per file, as named below
    summary = _run({"documents": [str(pdfs / "**" / "*.[pP][dD][fF]")], "destination": str(out), **one})
    tasks = summary.manifest.phases[0].tasks
    assert {rel: t.counts.get("written", 0) for rel, t in tasks.items()} == {
        "reports/rivers.pdf": 1,
        "plain.PDF": 1,
        "scanned.pdf": 0,
        "broken.pdf": 0,
        "page.pdf": 0,
    }
    assert tasks["scanned.pdf"].counts["skipped_empty_text"] == 1
    assert tasks["broken.pdf"].errors == {"extractor_error": 1} and tasks["page.pdf"].errors == {"not_pdf": 1}
    errors = [json.loads(line) for p in (out / "_errors").rglob("*") if p.is_file() for line in p.read_text().splitlines()]
    assert {e["kind"]: e["message"].split(":")[0] for e in errors} == {
        "extractor_error": str(pdfs / "broken.pdf"),
        "not_pdf": str(pdfs / "page.pdf"),
    }
    (doc,) = read_records(out / "documents" / "reports" / "rivers.jsonl.gz")
    data = (pdfs / "reports" / "rivers.pdf").read_bytes()
    assert doc["text"].index("First page") < doc["text"].index("The second page") and "\n\n" in doc["text"]
    assert "a process hyphenated." in doc["text"]  # pdfium's line-end hyphen (U+0002) joins the word again
    assert doc["created"] == "2024-05-01T10:34:56.000Z" and doc["added"] == "2026-01-02T03:04:05.000Z"
    assert doc["id"] == document_id("reports/rivers.pdf", doc["metadata"]["sha256"])
    assert doc["metadata"] == {
        "path": "reports/rivers.pdf",  # as the id's: where the input folder lies is no part of a document
        "bytes": len(data),
        "sha256": doc["metadata"]["sha256"],
        "content_type": "application/pdf",
        "extractor": "pypdfium2",
    }
    (note,) = read_records(out / "documents" / "plain.jsonl.gz")
    assert "created" not in note and note["source"] == "papers"
    assert not (out / "documents" / "scanned.jsonl.gz").exists()
    # A rerun does nothing; the worker's own pdfium (no child) writes the same bytes.
    again = _run({"documents": [str(pdfs / "**" / "*.[pP][dD][fF]")], "destination": str(out), **one})
    assert all(not t.counts or t.counts == tasks[rel].counts for rel, t in again.manifest.phases[0].tasks.items())
    inline = tmp_path / "inline"
    _run({"documents": [str(pdfs / "**" / "*.[pP][dD][fF]")], "destination": str(inline), **one, "isolate": False})
    # Two forked workers, each with a child of its own (not the one this process started above).
    forked = tmp_path / "forked"
    _run({"documents": [str(pdfs / "**" / "*.[pP][dD][fF]")], "destination": str(forked), **one, "processes": 2})
    for name in ("reports/rivers.jsonl.gz", "plain.jsonl.gz"):
        assert (inline / "documents" / name).read_bytes() == (out / "documents" / name).read_bytes()
        assert (forked / "documents" / name).read_bytes() == (out / "documents" / name).read_bytes()


def test_a_pdf_past_max_seconds_is_too_slow_in_the_worker_too(tmp_path):
    # Without a child process (isolate: false) nothing stopped pdfium: a PDF of many pages ran on
    # past max_seconds and was written. The time is checked between pages.
    root = tmp_path / "in"
    root.mkdir()
    (root / "long.pdf").write_bytes(make_pdf([[f"Page {i} of a long report."] for i in range(300)]))
    (root / "short.pdf").write_bytes(make_pdf([["One page."]]))
    run = {"documents": [str(root / "*.pdf")], "isolate": False, "added": "2026-01-02T03:04:05Z", "files_per_task": 1}
    tasks = _run({**run, "destination": str(tmp_path / "fast"), "max_seconds": 1e-4}).manifest.phases[0].tasks
    assert tasks["long.pdf"].counts.get("skipped_too_slow") == 1 and not (tmp_path / "fast" / "documents" / "long.jsonl.gz").exists()
    tasks = _run({**run, "destination": str(tmp_path / "slow")}).manifest.phases[0].tasks
    assert tasks["long.pdf"].counts["written"] == 1 and tasks["short.pdf"].counts["written"] == 1


ADDED = "2026-01-02T03:04:05Z"


def _texts(out) -> dict[str, str]:
    """Every document under ``out`` by its metadata path, each document in one output file only."""
    docs = [d for p in sorted((out / "documents").rglob("*.jsonl.gz")) for d in read_records(p)]
    by_path = {d["metadata"]["path"]: d["text"] for d in docs}
    assert len(by_path) == len(docs)
    return by_path


@pytest.fixture
def folders(tmp_path):
    """Two folders of PDFs (ten and six), a scanned one, a broken one and a web page among them."""
    root = tmp_path / "in"
    for folder, count in (("a", 10), ("b/c", 6)):
        (root / folder).mkdir(parents=True)
        for i in range(count):
            (root / folder / f"p{i:02d}.pdf").write_bytes(make_pdf([[f"Paper {folder} {i}, first page."], [f"Its second page {i}."]]))
    (root / "b" / "c" / "scanned.pdf").write_bytes(make_pdf([[]]))
    (root / "b" / "c" / "broken.pdf").write_bytes(b"%PDF-1.4\n" + b"\x00garbage" * 50)
    (root / "a" / "page.pdf").write_bytes(b"<html><body>not a PDF</body></html>")
    return root


def test_several_pdfs_per_task_and_output_file_every_one_counted(folders, tmp_path):
    run = {"documents": [str(folders / "**" / "*.pdf")], "files_per_task": 3, "added": ADDED}
    one = _run({**run, "destination": str(tmp_path / "one")})
    tasks = one.manifest.phases[0].tasks
    sizes = sorted(len(t.inputs) for t in tasks.values())
    assert len(tasks) < 19 and sizes[-1] > 1 and len(tasks) > 2  # several files per task, several tasks
    for key, task in tasks.items():  # a group is one folder's files, keyed and named by its first
        assert key == task.inputs[0].rel and len({i.rel.rpartition("/")[0] for i in task.inputs}) == 1
    totals = one.manifest.totals
    assert totals["docs_in"] == 19 and totals["written"] == 16 and totals["skipped_empty_text"] == 1 and totals["quarantined"] == 2
    assert {k: v for t in tasks.values() for k, v in t.data.get("skipped", {}).items()} == {"b/c/scanned.pdf": "empty_text"}
    errors = [json.loads(line) for p in (tmp_path / "one" / "_errors").rglob("*.jsonl") for line in p.read_text().splitlines()]
    assert sorted((e["kind"], e["file"]) for e in errors) == [
        ("extractor_error", str(folders / "b" / "c" / "broken.pdf")),
        ("not_pdf", str(folders / "a" / "page.pdf")),
    ]
    texts = _texts(tmp_path / "one")
    assert sorted(texts) == sorted([f"a/p{i:02d}.pdf" for i in range(10)] + [f"b/c/p{i:02d}.pdf" for i in range(6)])
    assert texts["b/c/p04.pdf"] == "Paper b/c 4, first page.\n\nIts second page 4."
    # Two and four processes: the same groups, the same bytes.
    for processes in (2, 4):
        _run({**run, "destination": str(tmp_path / f"p{processes}"), "processes": processes})
        assert stage_outputs(tmp_path / f"p{processes}") == stage_outputs(tmp_path / "one"), processes

    # Files added and removed: a rerun redoes the groups they change, keeps the others, and leaves
    # what a fresh run leaves (an old group's output gone where its first file changed).
    groups = plan_groups([i for t in tasks.values() for i in t.inputs], 3)
    first = next(g[0] for g in groups if g[0].rel.startswith("a/") and g[0].rel != "a/p00.pdf")  # starts a group mid-folder
    (folders / first.rel).unlink()
    (folders / "a" / "000.pdf").write_bytes(make_pdf([["A new first paper."]]))  # the folder's first group's new key
    again = _run({**run, "destination": str(tmp_path / "one")})
    redone = {k for k, t in again.manifest.phases[0].tasks.items() if not t.skipped}
    assert 0 < len(redone) < len(again.manifest.phases[0].tasks) and "a/000.pdf" in redone
    assert not (tmp_path / "one" / "documents" / first.rel.replace(".pdf", ".jsonl.gz")).exists()
    assert not (tmp_path / "one" / "documents" / "a" / "p00.jsonl.gz").exists()
    _run({**run, "destination": str(tmp_path / "fresh")})
    assert stage_outputs(tmp_path / "one") == stage_outputs(tmp_path / "fresh")
    assert first.rel not in _texts(tmp_path / "one") and _texts(tmp_path / "one")["a/000.pdf"] == "A new first paper."
    # A narrower pattern into the same destination (a typo would do the same) loses nothing: the
    # groups of files it does not read at all are kept, and one that it would regroup while a file
    # of it is still there, unread, is refused with that file named, before anything is written.
    kept = _texts(tmp_path / "one")
    narrower = {**run, "documents": [str(folders / "**" / "p0*.pdf")], "destination": str(tmp_path / "one")}
    with pytest.raises(ConfigError, match=r"holds the group '[^']+' of an earlier run, which also holds .*\.pdf: that file is still there"):
        _run(narrower)
    assert _texts(tmp_path / "one") == kept
    for rel in ("a/000.pdf", "a/page.pdf", "b/c/broken.pdf", "b/c/scanned.pdf"):
        (folders / rel).unlink()  # the files it leaves out, gone for good: regrouped, their documents go
    _run(narrower)
    assert sorted(_texts(tmp_path / "one")) == sorted(k for k in kept if k != "a/000.pdf")


def test_an_unchanged_rerun_reads_each_groups_marker_once_and_deletes_nothing(folders, tmp_path, monkeypatch):
    """Looking for an earlier grouping's outputs reads only the markers of groups this run does not
    plan (a current group's marker is the runner's to read), and deletes only what is there: on S3
    each read and delete is a request."""
    run = {"documents": [str(folders / "**" / "*.pdf")], "files_per_task": 3, "added": ADDED, "destination": str(tmp_path / "out")}
    tasks = _run(run).manifest.phases[0].tasks
    reads: list[str] = []
    removed: list[str] = []
    read_bytes, remove = storage.read_bytes, storage.remove
    monkeypatch.setattr(storage, "read_bytes", lambda path: reads.append(path) or read_bytes(path))
    monkeypatch.setattr(storage, "remove", lambda path: removed.append(path) or remove(path))
    again = _run(run)
    assert all(t.skipped for t in again.manifest.phases[0].tasks.values())
    markers = Counter(p for p in reads if p.endswith(".done"))
    assert len(markers) == len(tasks) and set(markers.values()) == {1}, markers
    assert [p for p in removed if any(f"/{folder}/" in p for folder in ("documents", "_done", "_errors", "_ids"))] == []


def test_groups_on_s3_write_what_a_local_run_writes(folders, s3_bucket, tmp_path):
    """PDFs and destination on S3 (2 processes): the same documents, file for file, as a local run;
    a file added on S3 regroups its folder there as it does locally (the old group's objects gone)."""
    from dolma_pipe import storage

    def upload(rel: str) -> None:
        storage.write_bytes(f"s3://{s3_bucket}/in/{rel}", (folders / rel).read_bytes())

    for path in sorted(folders.rglob("*.pdf")):
        upload(str(path.relative_to(folders)))
    remote = {"documents": [f"s3://{s3_bucket}/in/**/*.pdf"], "destination": f"s3://{s3_bucket}/out", "files_per_task": 3}
    local = {"documents": [str(folders / "**" / "*.pdf")], "destination": str(tmp_path / "out"), "files_per_task": 3}

    def same() -> None:
        mine = sorted(
            p.relative_to(tmp_path / "out" / "documents").as_posix() for p in (tmp_path / "out" / "documents").rglob("*.jsonl.gz")
        )
        theirs = sorted(
            p.removeprefix(f"s3://{s3_bucket}/out/documents/") for p in storage.glob(f"s3://{s3_bucket}/out/documents/**/*.jsonl.gz")
        )
        assert theirs == mine and mine
        for name in mine:
            assert storage.read_bytes(f"s3://{s3_bucket}/out/documents/{name}") == (tmp_path / "out" / "documents" / name).read_bytes(), (
                name
            )

    _run({**remote, "processes": 2, "added": ADDED})
    _run({**local, "added": ADDED})
    same()
    (folders / "a" / "000.pdf").write_bytes(make_pdf([["A new first paper."]]))  # the folder's first group's new key
    upload("a/000.pdf")
    _run({**remote, "processes": 2, "added": ADDED})
    _run({**local, "added": ADDED})
    same()
    assert not storage.exists(f"s3://{s3_bucket}/out/documents/a/p00.jsonl.gz")


def test_groups_are_the_files_names_alone():
    """The rule reads names only: a file added or removed moves no other group's boundary (a
    group cut at 4x files_per_task aside); files_per_task 1 is a group per file."""
    from dolma_pipe.manifest import InputFile

    files = [InputFile(path=f"/x/d/f{i:03d}.pdf", rel=f"d/f{i:03d}.pdf", size=1, mtime=0.0) for i in range(300)]
    groups = plan_groups(files, 8)
    assert [i for g in groups for i in g] == files and max(map(len, groups)) <= 32 and 20 < len(groups) < 60
    assert len(plan_groups(files, 1)) == 300
    without = plan_groups(files[:150] + files[151:], 8)
    changed = {tuple(i.rel for i in g) for g in groups} ^ {tuple(i.rel for i in g) for g in without}
    assert len(changed) <= 4  # the group that held f150 before and after (and its neighbour, if f150 started it)


def test_killed_mid_run_then_rerun_writes_the_same_bytes(tmp_path):
    from tests.support.processes import kill_when

    root = tmp_path / "in"
    root.mkdir()
    for i in range(12):
        (root / f"r{i:02d}.pdf").write_bytes(make_pdf([[f"Report {i}, page {p}."] for p in range(60)]))
    run = {"documents": [str(root / "*.pdf")], "files_per_task": 2, "added": ADDED}
    _run({**run, "destination": str(tmp_path / "ref")})
    out = tmp_path / "killed"
    args = ["pdf", "--documents", str(root / "*.pdf"), "--destination", str(out), "--source_name", "papers", "--files_per_task", "2"]
    kill_when("dolma_pipe", [*args, "--processes", "1", "--added", ADDED, "--no-progress"], ready=lambda: any(out.rglob("*.done")))
    markers = len(list((tmp_path / "ref" / "_done").rglob("*.done")))
    assert 0 < len(list(out.rglob("*.done"))) < markers  # killed with groups left to do
    summary = _run({**run, "destination": str(out), "processes": 2})
    assert any(t.skipped for t in summary.manifest.phases[0].tasks.values())  # finished groups kept
    assert stage_outputs(out) == stage_outputs(tmp_path / "ref")


def make_objstm_pdf(text: str, info: str) -> bytes:
    """A PDF 1.5 whose information dictionary sits in a Flate-compressed object stream that an xref
    stream names (as most writers save one since 2003): no /CreationDate in any plain byte."""
    body = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET"
    plain = {
        1: "<< /Type /Catalog /Pages 2 0 R >>",
        2: "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        3: "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        4: f"<< /Length {len(body)} >>\nstream\n{body}\nendstream",
        5: "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    packed = zlib.compress(f"7 0 {info}".encode("latin-1"))  # object 7 at offset 0 of object stream 6
    out, offsets = b"%PDF-1.5\n", {}
    for number, obj in plain.items():
        offsets[number] = len(out)
        out += f"{number} 0 obj\n{obj}\nendobj\n".encode("latin-1")
    offsets[6] = len(out)
    out += f"6 0 obj\n<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode /Length {len(packed)} >>\nstream\n".encode()
    out += packed + b"\nendstream\nendobj\n"
    offsets[8] = len(out)
    rows = [b"\x00" + bytes(4) + b"\xff\xff"]
    for number in range(1, 9):
        rows.append(b"\x02" + (6).to_bytes(4, "big") + bytes(2) if number == 7 else b"\x01" + offsets[number].to_bytes(4, "big") + bytes(2))
    xref = zlib.compress(b"".join(rows))
    out += (
        f"8 0 obj\n<< /Type /XRef /Size 9 /W [1 4 2] /Root 1 0 R /Info 7 0 R /Filter /FlateDecode /Length {len(xref)} >>\nstream\n".encode()
    )
    return out + xref + f"\nendstream\nendobj\nstartxref\n{offsets[8]}\n%%EOF\n".encode()


def test_created_from_an_information_dictionary_in_a_compressed_object_stream(tmp_path):
    # The date was looked for in plain bytes only: a PDF 1.5+ file's information dictionary in an
    # object stream gave no created, though pdfium reads it there.
    import pypdfium2 as pdfium

    data = make_objstm_pdf("Compressed metadata.", "<< /CreationDate (D:20240501123456+02'00') /Title (A report) >>")
    assert b"CreationDate" not in data
    assert pdfium.PdfDocument(data).get_metadata_dict()["CreationDate"] == "D:20240501123456+02'00'"  # a PDF as readers read it
    assert creation_date(data) is not None and creation_date(data).isoformat() == "2024-05-01T12:34:56+02:00"
    assert creation_date(make_objstm_pdf("No date.", "<< /Title (A report) >>")) is None
    # A stream that does not inflate is passed over, not an error.
    at = data.index(b"stream\n", data.index(b"/ObjStm")) + len(b"stream\n")
    assert creation_date(data[:at] + b"\x00\xff" * 8 + data[at + 16 :]) is None
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "report.pdf").write_bytes(data)
    _run({"documents": [str(tmp_path / "in" / "*.pdf")], "destination": str(tmp_path / "out"), "added": ADDED})
    (doc,) = read_records(tmp_path / "out" / "documents" / "report.jsonl.gz")
    assert doc["created"] == "2024-05-01T10:34:56.000Z" and doc["text"] == "Compressed metadata."


def test_each_compressed_stream_is_inflated_from_its_own_bytes_only(monkeypatch):
    """zlib was handed the rest of the file at every object stream (a copy each time, and the
    rest again as unused_data): a 100 MB PDF of 2,000 object streams took 122 CPU-s for its date,
    0.13 s now. Each stream's input ends at its endstream."""
    import dolma_pipe.stages.warc.pdf as pdf_module

    filler = b"%" + b"x" * 100_000 + b"\n"  # page content between the streams
    parts = [b"%PDF-1.5\n"]
    for i in range(30):
        info = b"<< /CreationDate (D:20240102030405Z) >>" if i == 29 else b""
        payload = zlib.compress(b"1 0 2 5 << /Foo /Bar >> " * 20 + info)
        head = b"%d 0 obj\n<< /Type /ObjStm /N 2 /First 8 /Filter /FlateDecode /Length %d >>\nstream\n" % (i + 1, len(payload))
        parts += [head, payload, b"\nendstream\nendobj\n", filler]
    data = b"".join(parts)
    fed: list[int] = []
    real = zlib.decompressobj

    class Recording:
        def __init__(self):
            self.inner = real()

        def decompress(self, body, max_length=0):
            fed.append(len(body))
            return self.inner.decompress(body, max_length)

    monkeypatch.setattr(pdf_module.zlib, "decompressobj", Recording)
    assert creation_date(data).isoformat() == "2024-01-02T03:04:05+00:00"
    assert len(fed) == 30 and max(fed) < 1_000 < len(data) // 1_000


class TestOnRay:
    """The same groups and bytes on Ray (a class of its own: see tests/conftest.py's scheduling)."""

    @pytest.mark.ray
    def test_same_bytes_on_ray(self, folders, tmp_path, ray_address):
        from dolma_pipe.executors import RayExecutor

        run = {"documents": [str(folders / "**" / "*.pdf")], "files_per_task": 3, "added": ADDED}
        _run({**run, "destination": str(tmp_path / "local")})
        with RayExecutor(2, ray_address) as ex:
            config = load_config(
                PdfConfig,
                None,
                {
                    "source_name": "papers",
                    "progress": False,
                    "processes": 2,
                    **run,
                    "destination": str(tmp_path / "ray"),
                    "ray_address": ray_address,
                },
            )
            run_stage(PdfStage(config), executor=ex)
        assert stage_outputs(tmp_path / "ray") == stage_outputs(tmp_path / "local")


@pytest.mark.parametrize("config", [PdfConfig, WarcConfig], ids=["pdf", "warc"])
def test_added_must_be_an_iso_time_in_both_stages(config):
    ok = config(documents=["x"], destination="d", source_name="s", added="2026-01-02T03:04:05Z")
    assert ok.added == "2026-01-02T03:04:05Z"
    with pytest.raises(ValueError, match=r"added\n.*not an ISO 8601 time: 'yesterday'"):
        config(documents=["x"], destination="d", source_name="s", added="yesterday")
