"""``dolma-pipe warc`` on WARC files the tests write with warcio: every record accounted for, the
provenance (a record fetched again by its byte range), legacy charsets, damaged files, the URL
filter, taggers, Dolma's config, and the same bytes for any process count, on reruns and on Ray."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from warcio.archiveiterator import ArchiveIterator as WarcioIterator

from dolma_pipe.config import load_config
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.warc import WarcConfig, WarcError, WarcStage
from tests.support.outputs import stage_outputs
from tests.support.warc import (
    LEGACY,
    crawl_records,
    gzip_member_offsets,
    html_page,
    legacy_records,
    make_pdf,
    paragraphs,
    read_records,
    response,
    run,
    write_arc,
    write_warc,
)

ADDED = "2025-01-02T03:04:05Z"


@pytest.fixture(autouse=True)
def url_list_cache(tmp_path_factory, monkeypatch):
    """Compiled URL lists go to a folder of the test session's, not the user's cache."""
    monkeypatch.setenv("DOLMA_PIPE_CACHE", str(tmp_path_factory.getbasetemp() / "url-list-cache"))


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    """Three WARC.gz files and one plain WARC, ~500 records; the records as written, by file."""
    root = tmp_path_factory.mktemp("crawl")
    written = {}
    for seed in range(3):
        path = root / "crawl" / f"part-{seed}.warc.gz"
        written[path.name] = write_warc(path, crawl_records(seed, 110, big_paragraphs=1500 if seed == 0 else 0))
    plain = root / "crawl" / "plain.warc"
    written[plain.name] = write_warc(plain, crawl_records(7, 40), compress=False)
    return root, written


def _docs(out: Path) -> list[dict]:
    return [d for p in sorted((out / "documents").rglob("*.jsonl.gz")) for d in read_records(p)]


def _expected(records) -> Counter:
    counts = Counter(r.expect for r in records)
    counts["skipped_record_type"] += 1  # the warcinfo record
    return counts


def test_every_record_is_written_or_skipped_with_its_reason(crawl, tmp_path):
    root, written = crawl
    out = tmp_path / "out"
    summary = run({"documents": [str(root / "crawl" / "*")], "destination": str(out), "processes": 2, "added": ADDED})
    tasks = summary.manifest.phases[0].tasks
    assert sorted(tasks) == sorted(written)
    for name, records in written.items():
        counts = tasks[name].counts
        got = Counter({k: v for k, v in counts.items() if k.startswith("skipped_") or k == "written"})
        assert got == _expected(records), name
        assert counts["records"] == len(records) + 1 == sum(got.values())
    docs = _docs(out)
    by_url = {d["metadata"]["warc_url"]: d for d in docs}
    assert len(by_url) == len(docs) == sum(1 for rs in written.values() for r in rs if r.expect == "written")
    for records in written.values():
        for rec in records:
            if rec.expect == "written":
                doc = by_url[rec.url]
                assert all(p in doc["text"] for p in rec.text), rec.url
                assert "Copyright footer" not in doc["text"] and "About" not in doc["text"]  # boilerplate left out
                assert doc["id"] == rec.record_id
    assert summary.manifest.totals["records"] == sum(len(rs) + 1 for rs in written.values())


def test_provenance_fetches_the_exact_record_again(crawl, tmp_path):
    root, written = crawl
    out = tmp_path / "out"
    run({"documents": [str(root / "crawl" / "*")], "destination": str(out), "processes": 1})
    docs = _docs(out)
    assert len({d["id"] for d in docs}) == len(docs)
    for doc in docs:
        meta = doc["metadata"]
        with open(meta["warc_filename"], "rb") as fh:
            fh.seek(meta["warc_offset"])
            chunk = fh.read(meta["warc_length"])
        # An independent reader (warcio) finds exactly this one record in the byte range.
        records = list(WarcioIterator(io.BytesIO(chunk)))
        assert len(records) == 1
        record = records[0]
        assert record.rec_headers.get_header("WARC-Record-ID") == meta["warc_record_id"]
        assert record.rec_headers.get_header("WARC-Target-URI") == meta["warc_url"]
        assert record.rec_headers.get_header("WARC-Payload-Digest") == meta["payload_digest"]
        assert doc["created"] == meta["warc_date"] == "2024-05-01T12:00:00.000Z"
        assert meta["url"] == meta["warc_url"].split("://", 1)[1].replace("www.", "", 1).rstrip("/")
        assert meta["extractor"] == "resiliparse" and meta["charset"] == "utf-8"
        assert meta["http_status"] in (200, None) and meta["content_type"] == "text/html"
        assert doc["source"] == "cc" and "html" not in meta


def test_same_bytes_for_any_process_count_and_on_rerun(crawl, tmp_path):
    root, _ = crawl
    pattern = [str(root / "crawl" / "*")]
    outputs = []
    for processes in (1, 2, 4):
        out = tmp_path / f"p{processes}"
        run({"documents": pattern, "destination": str(out), "processes": processes, "added": ADDED})
        outputs.append(stage_outputs(out))
    assert outputs[0] == outputs[1] == outputs[2]
    again = run({"documents": pattern, "destination": str(tmp_path / "p2"), "processes": 2, "added": ADDED})
    assert all(t.skipped for t in again.manifest.phases[0].tasks.values())
    run({"documents": pattern, "destination": str(tmp_path / "p2"), "processes": 2, "added": ADDED, "force": True})
    assert stage_outputs(tmp_path / "p2") == outputs[0]


def test_added_is_the_first_runs_time_on_every_rerun(crawl, tmp_path):
    root, _ = crawl
    config = {"documents": [str(root / "crawl" / "part-1.warc.gz")], "destination": str(tmp_path / "out"), "processes": 1}
    first = run(config)
    before = (tmp_path / "out" / "documents" / "part-1.jsonl.gz").read_bytes()
    added = first.manifest.resolved["added"]
    assert {d["added"] for d in _docs(tmp_path / "out")} == {added}
    (tmp_path / "out" / "documents" / "part-1.jsonl.gz").unlink()  # a lost output: the rerun redoes it
    second = run(config)
    assert second.manifest.resolved["added"] == added
    assert (tmp_path / "out" / "documents" / "part-1.jsonl.gz").read_bytes() == before


def _f1(expected: str, got: str) -> float:
    want, have = Counter(expected.split()), Counter(got.split())
    common = sum((want & have).values())
    if not common:
        return 0.0
    precision, recall = common / sum(have.values()), common / sum(want.values())
    return 2 * precision * recall / (precision + recall)


def test_legacy_charsets_lose_no_page(tmp_path):
    records = [r for meta in (True, False) for header in ("right", "none", "lying") for r in legacy_records(meta, header)]
    write_warc(tmp_path / "in" / "legacy.warc.gz", records)
    run({"documents": [str(tmp_path / "in" / "*.warc.gz")], "destination": str(tmp_path / "out"), "processes": 1})
    docs = {d["metadata"]["warc_url"]: d for d in _docs(tmp_path / "out")}
    assert len(docs) == len(records) == 6 * len(LEGACY)  # no page lost
    scores = [_f1(" ".join(["T", *r.text]), docs[r.url]["text"]) for r in records]
    assert sum(scores) / len(scores) >= 0.98
    decided = Counter(docs[r.url]["metadata"]["charset_decided_by"] for r in records)
    assert set(decided) <= {"http", "meta", "utf8", "detector"}
    for r in records:
        meta = docs[r.url]["metadata"]
        if "/right/" in r.url:  # a true header decides (windows-1252, a server default, yields to a tag)
            assert meta["charset_decided_by"] == ("meta" if r.url.startswith("https://cp1252.") and r.url.endswith("/1") else "http")
            assert all(p in docs[r.url]["text"] for p in r.text)
        elif r.url.endswith("/1"):  # a meta tag beats a missing or a lying default header
            assert meta["charset_decided_by"] == "meta" and all(p in docs[r.url]["text"] for p in r.text)


def test_utf8_behind_a_lying_legacy_header_and_a_bom(tmp_path):
    paras = ["Ünïcödé text — Привет мир — 你好世界, written as UTF-8 but sent as windows-1251."]
    records = [
        response("https://a.example.org/lie", html_page("Lie", paras), "text/html; charset=windows-1251", text=paras),
        response(
            "https://a.example.org/bom", b"\xef\xbb\xbf" + html_page("Bom", paras).encode(), "text/html; charset=iso-8859-1", text=paras
        ),
    ]
    write_warc(tmp_path / "in" / "x.warc.gz", records)
    run({"documents": [str(tmp_path / "in" / "x.warc.gz")], "destination": str(tmp_path / "out"), "processes": 1})
    docs = {d["metadata"]["warc_url"]: d for d in _docs(tmp_path / "out")}
    assert docs["https://a.example.org/lie"]["metadata"]["charset_decided_by"] == "utf8"
    assert docs["https://a.example.org/bom"]["metadata"]["charset_decided_by"] == "bom"
    assert all(paras[0] in d["text"] for d in docs.values())


def _damaged(tmp_path: Path) -> tuple[Path, dict]:
    """Damaged WARCs: a corrupt gzip member, a truncated last record, a wrong Content-Length, bad chunking."""
    src = tmp_path / "in"
    base = crawl_records(3, 30)
    ok = write_warc(src / "corrupt.warc.gz", [r for r in base])
    data = bytearray((src / "corrupt.warc.gz").read_bytes())
    starts = gzip_member_offsets(src / "corrupt.warc.gz")
    victim = len(starts) // 2
    for i in range(starts[victim] + 30, starts[victim] + 60):
        data[i] ^= 0x5A
    (src / "corrupt.warc.gz").write_bytes(bytes(data))
    write_warc(src / "truncated.warc.gz", crawl_records(4, 10))
    (src / "truncated.warc.gz").write_bytes((src / "truncated.warc.gz").read_bytes()[:-60])
    lengths = write_warc(src / "length.warc", crawl_records(5, 10), compress=False)
    raw = (src / "length.warc").read_bytes()
    third = raw.index(b"WARC-Type: response", raw.index(b"WARC-Type: response") + 1)
    at = raw.index(b"Content-Length: ", third) + len(b"Content-Length: ")
    end = raw.index(b"\r\n", at)
    (src / "length.warc").write_bytes(raw[:at] + str(int(raw[at:end]) - 25).encode() + raw[end:])
    paras = paragraphs(__import__("random").Random(1), 3)
    chunked = html_page("Chunked", paras).encode()

    def framed(size: int) -> bytes:
        pieces = [chunked[i : i + size] for i in range(0, len(chunked), size)]
        return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"

    good = framed(100)
    bad = good[:-40]  # framing cut short: read as far as it goes
    recs = [
        response("https://c.example.org/good", good, text=paras),
        response("https://c.example.org/bad", bad, text=paras[:1]),
        response(
            "https://c.example.org/huge", html_page("Huge", paragraphs(__import__("random").Random(2), 4000)), expect="skipped_too_large"
        ),
        # Its digest (below) is of the body without the chunked framing, as some crawlers write it.
        response("https://c.example.org/digest", framed(70), text=paras),
    ]
    for r in (recs[0], recs[1], recs[3]):
        r.headers.append(("Transfer-Encoding", "chunked"))
    write_warc(src / "chunks.warc", recs, compress=False)
    as_stored = ("sha1:" + base64.b32encode(hashlib.sha1(framed(70)).digest()).decode()).encode()
    without_framing = ("sha1:" + base64.b32encode(hashlib.sha1(chunked).digest()).decode()).encode()
    stored = (src / "chunks.warc").read_bytes()
    assert stored.count(as_stored) == 1
    (src / "chunks.warc").write_bytes(stored.replace(as_stored, without_framing))
    return src, {"corrupt": (ok, victim), "length": lengths, "chunks": recs}


def test_damaged_files_are_counted_never_a_dead_task(tmp_path):
    src, made = _damaged(tmp_path)
    out = tmp_path / "out"
    summary = run({"documents": [str(src / "*")], "destination": str(out), "processes": 2, "max_record_bytes": 1 << 20})
    tasks = summary.manifest.phases[0].tasks
    assert not summary.manifest.phases[0].failures
    for name, task in tasks.items():
        c = task.counts
        skipped = sum(v for k, v in c.items() if k.startswith("skipped_"))
        assert c["records"] == c["written"] + skipped + c.get("quarantined", 0), name
        assert c.get("quarantined", 0) == sum(task.errors.values()), name
    corrupt = tasks["corrupt.warc.gz"]
    assert corrupt.errors == {"corrupt_record": 1}
    records, victim = made["corrupt"]
    urls = {d["metadata"]["warc_url"] for d in read_records(out / "documents" / "corrupt.jsonl.gz")}
    # Member 0 is the warcinfo record: record ``victim - 1`` is the one lost.
    expected = {r.url for i, r in enumerate(records) if r.expect == "written" and i != victim - 1}
    assert urls == expected  # every record after the damage is read again
    assert tasks["truncated.warc.gz"].errors == {"payload_digest_mismatch": 1}
    assert tasks["length.warc"].errors.get("payload_digest_mismatch", 0) >= 1
    chunks = {d["metadata"]["warc_url"]: d for d in read_records(out / "documents" / "chunks.jsonl.gz")}
    assert all(p in chunks["https://c.example.org/good"]["text"] for p in made["chunks"][0].text)
    assert chunks["https://c.example.org/digest"]["text"] == chunks["https://c.example.org/good"]["text"]
    assert made["chunks"][1].text[0] in chunks["https://c.example.org/bad"]["text"]
    assert tasks["chunks.warc"].counts["skipped_too_large"] == 1 and tasks["chunks.warc"].counts["payload_damaged"] == 1
    errors = [json.loads(line) for p in (out / "_errors").rglob("*") if p.is_file() for line in p.read_text().splitlines()]
    assert {e["kind"] for e in errors} >= {"corrupt_record", "payload_digest_mismatch"}
    assert all("at byte" in e["message"] for e in errors)


def test_url_filter_blocks_domains_urls_and_banned_words(crawl, tmp_path):
    root, written = crawl
    blocklist = tmp_path / "blocked.txt"
    blocklist.write_text("# test list\nsite0-1.example.org\nhttps://www.site0-2.example.org/page/2\n")
    out = tmp_path / "out"
    config = {"documents": [str(root / "crawl" / "part-0.warc.gz")], "destination": str(out), "processes": 1}
    summary = run({**config, "urls": {"blocklists": [str(blocklist)], "banned_words": ["SITE0-3."]}})
    counts = summary.manifest.phases[0].tasks["part-0.warc.gz"].counts
    docs = _docs(out)
    hosts = {d["metadata"]["url"].split("/")[0] for d in docs}
    assert "site0-1.example.org" not in hosts and "site0-3.example.org" not in hosts and "site0-4.example.org" in hosts
    assert counts["skipped_blocked_domain"] > 0 and counts["skipped_banned_word"] > 0 and counts["skipped_blocked_url"] == 1
    assert not any(d["metadata"]["warc_url"] == "https://www.site0-2.example.org/page/2" for d in docs)
    with pytest.raises(WarcError, match="blocklists"):
        run({**config, "destination": str(tmp_path / "o2"), "urls": {"blocklists": [str(tmp_path / "missing.txt")]}})


def test_taggers_write_attribute_files_row_for_row(crawl, tmp_path):
    root, _ = crawl
    out = tmp_path / "out"
    config = {"documents": [str(root / "crawl" / "part-2.warc.gz")], "destination": str(out), "processes": 1}
    taggers = {"pre": {"taggers": ["pii_regex"]}, "post": {"taggers": ["char_length_with_paragraphs_v1"]}}
    run({**config, **taggers, "store_html_in_metadata": True})
    docs = _docs(out)
    rows = [json.loads(x) for x in gzip.open(out / "attributes" / "char_length_with_paragraphs_v1" / "part-2.jsonl.gz")]
    assert [r["id"] for r in rows] == [d["id"] for d in docs]
    # A pre-tagger sees the record before extraction: Dolma hands it an empty text.
    pre = [json.loads(x) for x in gzip.open(out / "attributes" / "pii_regex" / "part-2.jsonl.gz")]
    assert [r["id"] for r in pre] == [d["id"] for d in docs]
    assert all(r["attributes"]["pii_regex__pii_regex__doc"] == [[0, 0, -1.0]] for r in pre)
    key = "char_length_with_paragraphs_v1__char_length_with_paragraphs_v1__document"
    assert all(r["attributes"][key] == [[0, len(d["text"]), float(len(d["text"]))]] for r, d in zip(rows, docs))
    assert all(d["metadata"]["html"].startswith("<!DOCTYPE html>") for d in docs)
    with pytest.raises(WarcError, match="unknown tagger"):
        run({**config, "destination": str(tmp_path / "o2"), "post": {"taggers": ["no_such_tagger"]}})


def test_dolma_warc_config_runs_unchanged(crawl, tmp_path):
    root, _ = crawl
    path = tmp_path / "dolma.yaml"
    path.write_text(
        f"documents: ['{root}/crawl/part-1.warc.gz']\n"
        f"destination: ['{tmp_path}/out']\n"
        "source_name: cc-2024\nlinearizer: resiliparse\nprocesses: 1\nignore_existing: false\ndebug: false\n"
        "work_dir: {input: /tmp/x, output: /tmp/y}\npre: {taggers: [], skip: false}\npost: {taggers: [cld2_en_doc_v2], skip: false}\n"
        "store_html_in_metadata: false\n"
    )
    config = load_config(WarcConfig, str(path), {"progress": False})
    run_stage(WarcStage(config))
    docs = _docs(tmp_path / "out")
    assert docs and {d["source"] for d in docs} == {"cc-2024"}
    # Dolma's CLD2 post-tagger, as Dolma's warc configs name it: English and not English per document.
    rows = [json.loads(x) for x in gzip.open(tmp_path / "out" / "attributes" / "cld2_en_doc_v2" / "part-1.jsonl.gz")]
    assert [r["id"] for r in rows] == [d["id"] for d in docs]
    for row, doc in zip(rows, docs):
        [[s, e, en]] = row["attributes"]["cld2_en_doc_v2__cld2_en_doc_v2__en"]
        assert (s, e) == (0, len(doc["text"])) and row["attributes"]["cld2_en_doc_v2__cld2_en_doc_v2__not_en"] == [[0, e, round(1 - en, 5)]]
    assert sum(r["attributes"]["cld2_en_doc_v2__cld2_en_doc_v2__en"][0][2] > 0.5 for r in rows) > len(rows) / 2


def test_s3_in_and_out(crawl, s3_bucket, tmp_path):
    from dolma_pipe import storage

    root, written = crawl
    for name in ("part-1.warc.gz", "plain.warc"):
        storage.write_bytes(f"s3://{s3_bucket}/crawl/{name}", (root / "crawl" / name).read_bytes())
    dest = f"s3://{s3_bucket}/out"
    run({"documents": [f"s3://{s3_bucket}/crawl/*"], "destination": dest, "processes": 2, "added": ADDED})
    local = tmp_path / "local"
    for name in ("part-1.warc.gz", "plain.warc"):
        (local / "crawl").mkdir(parents=True, exist_ok=True)
        shutil.copy(root / "crawl" / name, local / "crawl" / name)
    run({"documents": [str(local / "crawl" / "*")], "destination": str(tmp_path / "out"), "processes": 1, "added": ADDED})
    for name in ("part-1.jsonl.gz", "plain.jsonl.gz"):
        remote = [json.loads(x) for x in gzip.decompress(storage.read_bytes(f"{dest}/documents/{name}")).splitlines()]
        mine = read_records(tmp_path / "out" / "documents" / name)
        for doc in remote + mine:
            doc["metadata"].pop("warc_filename")
        assert remote == mine


class TestOnRay:
    """The same bytes on Ray (a class of its own: see tests/conftest.py's scheduling)."""

    @pytest.mark.ray
    def test_same_bytes_on_ray(self, crawl, tmp_path, ray_address):
        from dolma_pipe.executors import RayExecutor

        root, _ = crawl
        pattern = [str(root / "crawl" / "*")]
        run({"documents": pattern, "destination": str(tmp_path / "local"), "processes": 2, "added": ADDED})
        with RayExecutor(2, ray_address) as ex:
            run(
                {"documents": pattern, "destination": str(tmp_path / "ray"), "processes": 2, "added": ADDED, "ray_address": ray_address},
                executor=ex,
            )
        assert stage_outputs(tmp_path / "ray") == stage_outputs(tmp_path / "local")


def test_deep_markup_and_big_pages_are_extracted(tmp_path):
    big = paragraphs(__import__("random").Random(3), 9000, words=90)  # ~5 MB of HTML
    deep = 50_000  # resiliparse's main-content rules would never end on it
    records = [
        response("https://d.example.org/big", html_page("Big", big), text=[big[0], big[-1]]),
        response(
            "https://d.example.org/deep",
            "<html><body>" + "<div>" * deep + "<p>Deep text.</p>" + "</div>" * deep + "</body></html>",
            text=["Deep text."],
        ),
        response("https://d.example.org/unclosed", "<html><body>" + "<b><i><span>" * 30_000 + "Never closed.", text=["Never closed."]),
    ]
    write_warc(tmp_path / "in" / "hostile.warc.gz", records)
    # In process (isolate off): the depth cap alone keeps these pages fast.
    summary = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(tmp_path / "out"), "processes": 1, "isolate": False})
    counts = summary.manifest.phases[0].tasks["hostile.warc.gz"].counts
    assert counts["written"] == 3 and counts["deep_markup"] == 2
    docs = {d["metadata"]["warc_url"]: d for d in _docs(tmp_path / "out")}
    for rec in records:
        assert all(p in docs[rec.url]["text"] for p in rec.text), rec.url


def test_an_extraction_past_its_time_cap_is_stopped():
    import time

    from dolma_pipe.stages.warc.extract import Extractor, TooSlow, extract_capped

    class Slow(Extractor):
        name = "slow"

        def extract(self, html: str, deep: bool = False, url: str | None = None) -> str:
            while True:  # interruptible Python: the timer stops it
                time.sleep(0.01)

    with pytest.raises(TooSlow):  # the loop never ends by itself: only the timer stops it
        extract_capped(Slow(), "<p>x</p>", 0.2)


def test_arc_files(tmp_path):
    rng = __import__("random").Random(5)
    pages = [
        response(f"https://arc.example.org/{i}", html_page(f"Arc {i}", ps), text=ps)
        for i, ps in enumerate(paragraphs(rng, 3) for _ in range(40))
    ]
    pages.append(response("https://arc.example.org/img", b"\x89PNG\r\n\x1a\n" + bytes(100), "image/png", expect="skipped_content_type"))
    pages.append(response("https://arc.example.org/moved", b"", status="302 Found", expect="skipped_redirect"))
    write_arc(tmp_path / "in" / "old.arc.gz", pages)
    write_arc(tmp_path / "in" / "plain.arc", pages[:10], compress=False)
    out = tmp_path / "out"
    summary = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(out), "processes": 2, "added": ADDED})
    tasks = summary.manifest.phases[0].tasks
    assert tasks["old.arc.gz"].counts == {
        "docs_out": 40,
        "records": 43,
        "written": 40,
        "skipped_record_type": 1,
        "skipped_content_type": 1,
        "skipped_redirect": 1,
    }
    assert tasks["plain.arc"].counts["written"] == 10
    docs = read_records(out / "documents" / "old.jsonl.gz")
    assert [d["metadata"]["warc_url"] for d in docs] == [p.url for p in pages[:40]]
    assert all(all(t in d["text"] for t in p.text) for d, p in zip(docs, pages))
    assert len({d["id"] for d in docs}) == 40 and docs[0]["created"] == "2024-05-01T12:00:00.000Z"
    data = (tmp_path / "in" / "old.arc.gz").read_bytes()
    for doc in docs:  # the byte range is the record's own gzip member
        m = doc["metadata"]
        member = gzip.decompress(data[m["warc_offset"] : m["warc_offset"] + m["warc_length"]])
        assert member.startswith(m["warc_url"].encode() + b" ")
    again = tmp_path / "again"
    run({"documents": [str(tmp_path / "in" / "*")], "destination": str(again), "processes": 1, "added": ADDED})
    assert read_records(again / "documents" / "old.jsonl.gz") == docs  # ids made from the file and offset, not random


def test_a_page_that_crashes_or_hangs_the_extractor_costs_that_page_only(tmp_path, monkeypatch):
    from dolma_pipe.stages.warc import extract
    from tests.support.warc import Flaky

    # One process runs the task inline, so the stage's extractor is this one; its sandbox child
    # imports Flaky by name.
    monkeypatch.setitem(extract.EXTRACTORS, "resiliparse", Flaky)
    rng = __import__("random").Random(9)
    records = [
        response(f"https://f.example.org/{i}", html_page(f"P{i}", ps), text=ps)
        for i, ps in enumerate(paragraphs(rng, 2) for _ in range(40))
    ]
    records[7] = response("https://f.example.org/crash", html_page("C", ["CRASH-HERE now."]), expect="quarantined")
    records[23] = response("https://f.example.org/hang", html_page("H", ["HANG-HERE now."]), expect="skipped_too_slow")
    write_warc(tmp_path / "in" / "flaky.warc.gz", records)
    out = tmp_path / "out"
    summary = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(out), "processes": 1, "max_seconds": 2.0})
    task = summary.manifest.phases[0].tasks["flaky.warc.gz"]
    assert task.counts["written"] == 38 and task.counts["skipped_too_slow"] == 1 and task.errors == {"extractor_crash": 1}
    docs = read_records(out / "documents" / "flaky.jsonl.gz")
    assert [d["metadata"]["warc_url"] for d in docs] == [r.url for r in records if r.expect == "written"]  # in the file's order
    assert all(all(p in d["text"] for p in r.text) for d, r in zip(docs, [r for r in records if r.expect == "written"]))


def test_a_warc_gz_compressed_as_one_stream_has_no_byte_ranges(crawl, tmp_path):
    root, written = crawl
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "stream.warc.gz").write_bytes(gzip.compress((root / "crawl" / "plain.warc").read_bytes()))
    run({"documents": [str(tmp_path / "in" / "*")], "destination": str(tmp_path / "out"), "processes": 1, "added": ADDED})
    run({"documents": [str(root / "crawl" / "plain.warc")], "destination": str(tmp_path / "ref"), "processes": 1, "added": ADDED})
    docs, ref = _docs(tmp_path / "out"), _docs(tmp_path / "ref")
    assert [d["text"] for d in docs] == [d["text"] for d in ref] and docs
    # No range of a single gzip stream holds one record: none is claimed.
    assert all(d["metadata"]["warc_offset"] is None and d["metadata"]["warc_length"] is None for d in docs)
    assert all(isinstance(d["metadata"]["warc_offset"], int) for d in ref)


def test_dolmas_trafilatura_linearizer(crawl, tmp_path):
    root, written = crawl
    out = tmp_path / "out"
    run({"documents": [str(root / "crawl" / "plain.warc")], "destination": str(out), "processes": 1, "linearizer": "trafilatura"})
    docs = {d["metadata"]["warc_url"]: d for d in _docs(out)}
    pages = [r for r in written["plain.warc"] if r.expect == "written" and len(r.text) >= 2]
    assert pages and all(all(p in docs[r.url]["text"] for p in r.text) for r in pages)
    assert all(d["metadata"]["extractor"] == "trafilatura" and "Copyright footer" not in d["text"] for d in docs.values())


def test_killed_mid_run_then_rerun_writes_the_same_bytes(crawl, tmp_path):
    from tests.support.processes import kill_when

    root, _ = crawl
    pattern = str(root / "crawl" / "*")
    run({"documents": [pattern], "destination": str(tmp_path / "ref"), "processes": 1, "added": ADDED})
    out = tmp_path / "killed"
    args = ["warc", "--documents", pattern, "--destination", str(out), "--source_name", "cc", "--processes", "1", "--added", ADDED]
    kill_when("dolma_pipe", [*args, "--no-progress"], ready=lambda: any(out.rglob("*.done")))
    assert len(list(out.rglob("*.done"))) < 4  # killed with files left to do
    summary = run({"documents": [pattern], "destination": str(out), "processes": 2, "added": ADDED})
    assert any(t.skipped for t in summary.manifest.phases[0].tasks.values())  # finished files kept
    assert stage_outputs(out) == stage_outputs(tmp_path / "ref")


@pytest.mark.parametrize("isolate", [True, False])
def test_pdf_records_give_their_text_layer(tmp_path, isolate):
    pages = [["Report on rivers and bridges.", "First page, second line."], ["The second page of the report."]]
    records = [
        response("https://p.example.org/report.pdf", make_pdf(pages), "application/pdf", text=[line for page in pages for line in page]),
        # A PDF sent as HTML: sniffed, and extracted as the PDF it is.
        response("https://p.example.org/mislabelled", make_pdf([["Sent as text/html."]]), "text/html", text=["Sent as text/html."]),
        response("https://p.example.org/broken.pdf", b"%PDF-1.4\n" + b"\x00garbage" * 50, "application/pdf", expect="quarantined"),
        response("https://p.example.org/page", html_page("Html", ["An HTML page beside them."]), text=["An HTML page beside them."]),
    ]
    write_warc(tmp_path / "in" / "pdfs.warc.gz", records)
    out = tmp_path / "out"
    summary = run(
        {
            "documents": [str(tmp_path / "in" / "*")],
            "destination": str(out),
            "processes": 1,
            "content_types": ["text/html", "application/pdf"],
        }
    )
    task = summary.manifest.phases[0].tasks["pdfs.warc.gz"]
    assert task.counts["written"] == 3 and task.errors == {"extractor_error": 1}
    docs = {d["metadata"]["warc_url"]: d for d in read_records(out / "documents" / "pdfs.jsonl.gz")}
    for rec in records:
        if rec.expect == "written":
            assert all(line in docs[rec.url]["text"] for line in rec.text), rec.url
    report = docs["https://p.example.org/report.pdf"]
    assert report["text"].index("First page") < report["text"].index("The second page") and "\n\n" in report["text"]
    meta = report["metadata"]
    assert meta["extractor"] == "pypdfium2" and meta["content_type"] == "application/pdf" and meta["charset"] is None
    assert docs["https://p.example.org/page"]["metadata"]["extractor"] == "resiliparse"
    # Without application/pdf in content_types, PDFs are skipped.
    again = run({"documents": [str(tmp_path / "in" / "*")], "destination": str(tmp_path / "html"), "processes": 1})
    assert again.manifest.phases[0].tasks["pdfs.warc.gz"].counts["skipped_content_type"] == 3


def test_url_lists_bare_and_mixed_give_the_same_verdicts(tmp_path, monkeypatch):
    """A list of bare domains takes the whole-chunk path, a list with URLs the line-by-line one
    (``_key``): the same entries block the same URLs either way; a domain blocks its subdomains,
    not its look-alikes; a list is read once per process for the run's digests."""
    from dolma_pipe.stages.warc.config import UrlFilterOptions
    from dolma_pipe.stages.warc.urls import UrlFilter, _lists

    domains = ["  WWW.Blocked.ORG. ", "www2.other.net", "sub.example.com", "plain-site_1.io", "# a comment", "", "tail.dev  # why"]
    bare = tmp_path / "bare.txt"
    bare.write_text("\r\n".join(domains) + "\n")
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("\n".join([*domains, "https://www.paths.org/a/b/", "http://q.org/?x=1"]) + "\n")
    urls = {
        "http://blocked.org/": "blocked_domain",
        "https://a.b.blocked.org/x": "blocked_domain",
        "http://notblocked.org/": None,
        "http://other.net/p": "blocked_domain",
        "http://example.com/": None,
        "http://x.sub.example.com/": "blocked_domain",
        "http://PLAIN-SITE_1.io./": "blocked_domain",
        "http://tail.dev/": "blocked_domain",
        "http://paths.org/a/b": "blocked_url",
        "http://www.paths.org/a/b/": "blocked_url",
        "http://paths.org/a/c": None,
        "http://q.org/?x=1": "blocked_url",
    }
    only_bare = {u: (v if v != "blocked_url" else None) for u, v in urls.items()}
    for path, want in ((bare, only_bare), (mixed, urls)):
        with monkeypatch.context() as m:
            if path == bare:  # the whole-chunk path parses no line
                m.setattr("dolma_pipe.stages.warc.urls._key", lambda line: pytest.fail(f"parsed {line!r}"))
            f = UrlFilter(UrlFilterOptions(blocklists=[str(path)]))
        assert {u: f.blocked(u) for u in urls} == want, path.name
        assert len(f.domains) == 5
    _lists.cache_clear()
    digests = {str(bare): "d1"}
    first = UrlFilter(UrlFilterOptions(blocklists=[str(bare)]), digests)
    assert UrlFilter(UrlFilterOptions(blocklists=[str(bare)]), digests).domains is first.domains
    assert UrlFilter(UrlFilterOptions(blocklists=[str(bare)]), {str(bare): "d2"}).domains is not first.domains
    # Compiled once per content into the cache folder: a process that finds it there maps it and
    # parses nothing; where the folder cannot be made, the lists are compiled in memory.
    _lists.cache_clear()
    with monkeypatch.context() as m:
        m.setattr("dolma_pipe.stages.warc.urls._list_keys", lambda path: pytest.fail(f"compiled {path} again"))
        mapped = UrlFilter(UrlFilterOptions(blocklists=[str(mixed)]))
    assert {u: mapped.blocked(u) for u in urls} == urls and isinstance(mapped.domains.parts[0], np.memmap)
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("DOLMA_PIPE_CACHE", str(tmp_path / "not-a-folder" / "cache"))
    _lists.cache_clear()
    in_memory = UrlFilter(UrlFilterOptions(blocklists=[str(mixed)]))
    assert {u: in_memory.blocked(u) for u in urls} == urls and not isinstance(in_memory.domains.parts[0], np.memmap)


# The depth check's definition, as a loop over the tags of the text: elements that never nest (void)
# or that HTML closes by itself when a sibling starts leave the depth as it is.
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)[^>]*>")
_FLAT = frozenset(
    "area base br col embed hr img input link meta param source track wbr p li td tr th dt dd option optgroup tbody thead tfoot colgroup rb rt rp".split()
)


def _nested_deeper(html: str, limit: int) -> bool:
    depth = 0
    for match in _TAG.finditer(html):
        if match.group(2).lower() in _FLAT:
            continue
        depth = max(depth - 1, 0) if match.group(1) else depth + 1
        if depth > limit:
            return True
    return False


def test_the_depth_check_on_utf8_bytes_answers_as_the_tag_scan():
    """The Rust core's ``html_nested_deeper`` (one pass over the page's UTF-8 bytes) says what a
    loop over the tags of the text says, on random markup: tags inside tags, unclosed tags,
    self-closing and void elements in any case, names longer than any void element's, non-ASCII
    text, and a last tag with no ``>``; pages with no more ``<`` than the limit included."""
    import random

    from dolma_pipe._rust import HTML_FLAT_ELEMENTS, html_nested_deeper

    assert set(HTML_FLAT_ELEMENTS) == _FLAT
    pieces = "< > / <div> </div> <DIV x='<b>'> <P> <p  </p> <br/> <Colgroup> <colgroupx> <col> <1 x é 字 <!-- <optgroup <a1> </ <B> </b> <li> <LI2> <RT> <rtc>"
    rng = random.Random(5)
    for _ in range(1000):
        html = "".join(rng.choice(pieces.split(" ") + [" "]) for _ in range(rng.randint(0, 120)))
        for limit in (0, 2, 6):
            assert html_nested_deeper(html.encode("utf-8"), limit) == _nested_deeper(html, limit), (html, limit)
    deep = "<div>" * 40 + "<p>x" * 100 + "</div>" * 40
    assert html_nested_deeper(deep.encode(), 39) and not html_nested_deeper(deep.encode(), 40)
