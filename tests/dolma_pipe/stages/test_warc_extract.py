"""The warc stage's Rust-backed linearizers: ``rs_trafilatura`` (the crate in our core) and
``combined`` (resiliparse, hard pages to rs-trafilatura), on pages these tests write."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from dolma_pipe._rust import html_tag_counts, rs_trafilatura_extract
from dolma_pipe.stages.warc import extract
from dolma_pipe.stages.warc.extract import EXTRACTORS, Combined, Resiliparse, RsTrafilatura
from tests.support.warc import html_page, paragraphs, read_records, response, run, write_warc


def _article(seed: int = 1) -> tuple[str, list[str]]:
    paras = paragraphs(random.Random(seed), 6)
    return html_page(f"Page {seed}", paras), paras


def _hard_page(seed: int = 2) -> tuple[str, list[str]]:
    """A page whose text sits in table cells beside a long link menu: the combined mode's score
    sends it to rs-trafilatura."""
    paras = paragraphs(random.Random(seed), 5, words=60)
    menu = "".join(f"<li><a href='/c/{i}'>Category number {i}</a></li>" for i in range(60))
    cells = "".join(f"<tr><td class='content'>{p}</td></tr>" for p in paras)
    html = (
        "<html><head><title>Hard</title></head><body>"
        f"<div id='side'><ul>{menu}</ul></div><div id='page'><table>{cells}</table></div>"
        "<footer>Copyright footer text</footer></body></html>"
    )
    return html, paras


def test_both_are_linearizer_choices():
    assert EXTRACTORS["rs_trafilatura"] is RsTrafilatura and EXTRACTORS["combined"] is Combined
    assert RsTrafilatura.depth_quadratic and Combined.depth_quadratic  # deep pages never reach the crate


def test_rs_trafilatura_keeps_the_article_and_drops_the_boilerplate():
    html, paras = _article()
    text, quality, page_type = rs_trafilatura_extract(html, "https://example.org/news/a-story")
    assert all(p in text for p in paras)
    assert "Copyright footer" not in text and "About" not in text
    assert 0.0 <= quality <= 1.0 and page_type
    assert RsTrafilatura().extract(html) == rs_trafilatura_extract(html)[0]
    assert rs_trafilatura_extract("")[0] == "" and rs_trafilatura_extract("<html><body></body></html>")[0] == ""


def test_errors_are_exceptions():
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate is no UTF-8: refused at the boundary
        rs_trafilatura_extract("<p>\ud800</p>")
    with pytest.raises(TypeError):
        rs_trafilatura_extract(b"<p>bytes</p>")  # type: ignore[arg-type]


def test_combined_sends_hard_pages_to_rs_trafilatura_and_keeps_resiliparse_elsewhere():
    combined = Combined()
    easy, _ = _article()
    assert combined.extract_by(easy) == (Resiliparse().extract(easy), "combined:resiliparse") and combined.routed == 0
    hard, paras = _hard_page()
    assert combined.score(hard, Resiliparse().extract(hard), "https://example.org/hard") >= combined.router.threshold
    assert combined.score(easy, Resiliparse().extract(easy), "https://example.org/easy") < combined.router.threshold
    text, by = combined.extract_by(hard, url="https://example.org/hard")
    assert combined.routed == 1 and text == rs_trafilatura_extract(hard, "https://example.org/hard")[0]
    assert by == "combined:rs_trafilatura"
    assert all(p in text for p in paras)


def test_combined_keeps_resiliparse_when_rs_trafilatura_fails_or_drops_the_content(monkeypatch):
    hard, _ = _hard_page()
    main = Resiliparse().extract(hard)

    def fails(html: str, url: str | None = None) -> tuple[str, float, str]:
        raise RuntimeError("rs-trafilatura panicked: boom")

    monkeypatch.setattr(extract, "rs_trafilatura_extract", fails)
    assert Combined().extract_by(hard) == (main, "combined:resiliparse")
    monkeypatch.setattr(extract, "rs_trafilatura_extract", lambda html, url=None: ("x", 0.0, ""))
    assert Combined().extract_by(hard) == (main, "combined:resiliparse")  # under a fifth of resiliparse's text: dropped content


def test_the_router_reads_its_trees_and_its_signals_count_as_python_does():
    # depth 2, two trees; the first splits on b (left: <= 0.5) then on a, the second is one leaf
    spec = {
        "features": ["a", "b"],
        "depth": 2,
        "base": 0.5,
        "learning_rate": 0.1,
        "split_feature": [[1, 0, 0], [0, 0, 0]],
        "split_threshold": [[0.5, 2.0, 3.0], [0.0, 0.0, 0.0]],
        "leaf": [[1.0, 2.0, 3.0, 4.0], [10.0, 10.0, 10.0, 10.0]],
        "time_intercept": 0.0,
        "time_slope": 1.0,
        "threshold": 0.0,
        "keep_shorter": 0.4,
    }
    router = extract.Router(spec)
    for a, b, leaf in [(2.0, 0.0, 1.0), (2.5, 0.0, 2.0), (3.0, 1.0, 3.0), (9.0, 1.0, 4.0)]:
        assert router.gain({"a": a, "b": b}) == pytest.approx(0.5 + 0.1 * (leaf + 10.0))
    assert router.seconds(1.0) == pytest.approx(2.718281828)
    with pytest.raises(ValueError, match="combined_router.json: trees are not complete trees of depth 2"):
        extract.Router({**spec, "leaf": [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]})
    html = _hard_page()[0] + '<main><article><script>{"articleBody": 1}</script><td><li><p><pre>'
    counts = html_tag_counts(html)
    assert counts == (html.count("<"), html.count("<a "), html.count("<p"), html.count("<td"), html.count("<li"), True, True, True)
    assert html_tag_counts("<div>plain</div>")[5:] == (False, False, False)


def test_same_text_in_another_process():
    """rs-trafilatura's text does not depend on the process (Rust's hash maps are seeded per process)."""
    pages = [_article(3)[0], _hard_page(4)[0]]
    code = (
        "import sys, json; from dolma_pipe.stages.warc.extract import RsTrafilatura, Combined;"
        "pages = json.load(sys.stdin); print(json.dumps([[RsTrafilatura().extract(p), Combined().extract(p)] for p in pages]))"
    )
    import json

    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(pages), capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [[RsTrafilatura().extract(p), Combined().extract(p)] for p in pages]


@pytest.mark.parametrize("linearizer", ["rs_trafilatura", "combined"])
def test_the_stage_with_caps(tmp_path, linearizer):
    """A run: pages written with the extractor's name; a page nested past max_depth is extracted
    without the crate (counted deep_markup); with rs_trafilatura, a page too slow for max_seconds
    is skipped as too_slow (the sandbox kills it) and the task goes on."""
    html, paras = _article(5)
    hard, hard_paras = _hard_page(6)
    deep = "<html><body>" + "<div>" * 12_000 + "<p>Deep text.</p>" + "</div>" * 12_000 + "</body></html>"
    records = [
        response("https://e.example.org/a", html, text=paras),
        response("https://e.example.org/hard", hard, text=hard_paras),
        response("https://e.example.org/deep", deep, text=["Deep text."]),
    ]
    write_warc(tmp_path / "in" / "pages.warc.gz", records)
    if linearizer == "rs_trafilatura":
        # 6,000 nested elements, under max_depth here: rs-trafilatura takes ~5 CPU-s on it (quadratic).
        # A file of its own: one page in its task's batch, so the wait is paid once.
        slow = "<html><body>" + "<div>" * 6000 + "<p>Slow text.</p>" + "</div>" * 6000 + "</body></html>"
        write_warc(tmp_path / "in" / "slow.warc.gz", [response("https://e.example.org/slow", slow)])
    out = tmp_path / "out"
    config = {"documents": [str(tmp_path / "in" / "*")], "destination": str(out), "processes": 1, "linearizer": linearizer}
    summary = run({**config, "max_seconds": 2.0, "max_depth": 10_000})
    tasks = summary.manifest.phases[0].tasks
    counts = tasks["pages.warc.gz"].counts
    docs = {d["metadata"]["warc_url"]: d for d in read_records(out / "documents" / "pages.jsonl.gz")}
    assert counts["deep_markup"] == 1 and counts["written"] == 3
    if linearizer == "rs_trafilatura":
        assert tasks["slow.warc.gz"].counts["skipped_too_slow"] == 1 and tasks["slow.warc.gz"].counts.get("written", 0) == 0
    # combined: which extractor's text was kept (the deep page: resiliparse's, without the crate)
    expected = {"a": "resiliparse", "hard": "rs_trafilatura", "deep": "resiliparse"}
    for rec in records:
        assert all(p in docs[rec.url]["text"] for p in rec.text), rec.url
        by = linearizer if linearizer == "rs_trafilatura" else f"combined:{expected[rec.url.rsplit('/', 1)[1]]}"
        assert docs[rec.url]["metadata"]["extractor"] == by


class EchoUrl(Resiliparse):
    """The page's URL as its text (a test of what reaches the extractor's process)."""

    name = "echo_url"

    def extract(self, html: str, deep: bool = False, url: str | None = None) -> str:
        return f"{url!r} deep={deep}"


def test_the_sandbox_hands_the_url_to_the_extractor_and_returns_who_made_the_text():
    from dolma_pipe.stages.warc.sandbox import DEEP, HTML, Sandbox

    pages = [(b"<p>a</p>", HTML, "https://u.example.org/\u00e9"), (b"<p>b</p>", DEEP, ""), (b"<p>c</p>", HTML, "x" * 70_000)]
    with Sandbox(f"{__name__}:EchoUrl", 10.0) as sandbox:
        got = sandbox.extract_many(pages)
    assert got == [
        ("'https://u.example.org/\u00e9' deep=False", "echo_url"),
        ("None deep=True", "echo_url"),
        ("None deep=False", "echo_url"),
    ]


@pytest.mark.parametrize("linearizer", ["resiliparse", "resiliparse_refined"])
def test_the_extractors_process_loads_neither_the_config_nor_numpy(linearizer):
    """A child starts for every WARC file: it loads the extractor, not the stage's config (pydantic,
    ~0.25 CPU-s) nor numpy. Read off the shared objects mapped into the child after a page."""
    from dolma_pipe.stages.warc.sandbox import HTML, Sandbox, class_path

    with Sandbox(class_path(type(EXTRACTORS[linearizer]())), 10.0) as sandbox:
        ((text, by),) = sandbox.extract_many([(html_page("T", ["A paragraph of words here."]).encode(), HTML, "")])
        assert sandbox.proc is not None
        with open(f"/proc/{sandbox.proc.pid}/maps", encoding="utf-8") as f:
            mapped = {line.split()[-1].rsplit("/", 1)[-1] for line in f if "/" in line}
    assert "A paragraph of words here." in text and by == linearizer
    assert any(name.startswith("_resiliparse") for name in mapped)  # the check sees the child's imports
    assert not [name for name in mapped if name.startswith(("_pydantic_core", "_multiarray_umath"))]
