"""What did not raise ``resiliparse_refined``: its line model's ceiling, capacity, more or fewer features and routing, on WCXB dev alone.

    .venv/bin/python bench/warc_refine_probe.py                  # all five
    .venv/bin/python bench/warc_refine_probe.py --probes oracle,capacity

Every figure is held-out WCXB dev word F1 over its 1,497 pages, with ``bench/warc_refine.py
--fit``'s labels, folds (5, by page) and fallback rule (a page gets resiliparse's main content
when the kept lines have under half its words). Each row picks its own log-odds threshold from
-1.0 to 0.5. Nothing here reads WCXB test or ScrapingHub, and nothing is written.

- ``oracle``: the lines labelled content kept, and nothing else (no model, no fallback). This is
  the ceiling of any filter of resiliparse's lines.
- ``capacity``: the shipped model's features, with more and deeper trees.
- ``features``: the shipped features plus others, one group at a time. The groups:
  - ``links``: the line is the text of an ``<a>`` (a regex over the HTML), it survives a
    linearization without ``<a>``, and the first one's mean over 2 lines either side;
  - ``elements``: the line is the text of an ``<h1>``-``<h6>`` or a ``<p>`` (regex);
  - ``words``: distinct-word share, function-word share, digit share, capitalised words, cookie
    and consent words (lines of any length), the function-word share's neighbourhood mean;
  - ``article``: the line is in the text of an ``<article>``, ``<main>``, ``articleBody`` or
    ``role=main`` element (resiliparse's DOM), and whether the page has one.

  Their cost a page is printed beside them.
- ``without``: the shipped features less the two read from the text less boilerplate elements,
  the one linearization only they need (what leaving it out would cost in F1).
- ``routing``: the refined filter on every page, and rs-trafilatura (given the URL) instead on the
  pages a router picks, within 3x rs-trafilatura's CPU time over all pages. Both extractors are
  timed per page in this process. The rows:
  - a perfect chooser (by true gain over measured time);
  - a router on the ``combined`` linearizer's signals, fitted out of fold (the same 5 folds)
    to predict rs-trafilatura's gain, divided by the shipped time model's expected seconds;
  - the same router with the filter's own confidence added: kept share, words near the
    threshold, mean |log-odds|, kept words against the main content's, fell back.

  rs-trafilatura's text is kept as ``combined`` keeps it (not when it is under ``keep_shorter``
  of the other's length). The perfect chooser and the second router are run again with the
  filter's time taken as 75% and 50% of what was measured (its text unchanged): what a cheaper
  filter would leave for routing.

The results and what they mean are in docs/benchmarks.md ("What did not raise it").
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import warc_quality as wq
import warc_refine as wr
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

from dolma_pipe.stages.warc.refine import _SETTINGS, FEATURES, _norm

THRESHOLDS = np.arange(-1.0, 0.51, 0.25)
SPEEDUP = 3.0  # the combined target's: at least 3x rs-trafilatura's pages per CPU-second
# Features the ``without`` probe leaves out, a group a row: the text less boilerplate elements' pair,
# the one linearization that only they need.
WITHOUT = [("outside_boilerplate", "outside_boilerplate_wide")]
FILTER_SHARES = (0.75, 0.5)  # the routing probe's cheaper filters, as shares of its measured time
CAPACITY = [(60, 3, 0.25), (120, 4, 0.15), (200, 5, 0.1), (300, 6, 0.05)]  # trees, depth, learning rate; the first is shipped

_ANCHOR = re.compile(r"<a\b[^>]*>([^<]*)</a", re.IGNORECASE)
_HEADING = re.compile(r"<h[1-6]\b[^>]*>([^<]*)</h", re.IGNORECASE)
_PARAGRAPH = re.compile(r"<p\b[^>]*>([^<]*)</p", re.IGNORECASE)
_WORD = re.compile(r"\w+")
_FUNCTION = frozenset(
    "the and of to a in is that for it with as was on be by this are or from at an have has not but which you your we our they "
    "their his her its can will would been were".split()
)
_CONSENT = frozenset(
    "cookie cookies consent partners vendors privacy personalised personalized advertising browser preferences tracking".split()
)
GROUPS = ("links", "elements", "words", "article")


def _line_set(text: str) -> set[str]:
    lines = {line.strip() for line in text.split("\n")}
    lines.discard("")
    return lines


def _window_mean(values: np.ndarray, radius: int) -> np.ndarray:
    """Mean of each column of ``values`` over each row's neighbours within ``radius`` (itself included)."""
    n = len(values)
    csum = np.concatenate((np.zeros((1, values.shape[1])), np.cumsum(values, axis=0)))
    idx = np.arange(n)
    lo, hi = np.maximum(idx - radius, 0), np.minimum(idx + radius + 1, n)
    return (csum[hi] - csum[lo]) / (hi - lo)[:, None]


def _texts(pattern: re.Pattern[str], html: str) -> set[str]:
    found = {_norm(m) for m in pattern.findall(html)}
    found.discard("")
    return found


def extra_features(group: str, html: str, lines: list[str]) -> np.ndarray:
    """One row a line of ``group``'s features (the module's list) for one page's lines."""
    bodies = [line[1:].lstrip() if line[0] == "\u2022" else line for line in lines]
    if group == "links":
        anchors = _texts(_ANCHOR, html)
        no_anchor = _line_set(extract_plain_text(HTMLTree.parse(html), main_content=False, skip_elements=["a"], **_SETTINGS))
        x = np.array([[b in anchors, line in no_anchor, 0.0] for line, b in zip(lines, bodies)], dtype=np.float64).reshape(-1, 3)
        if len(x):
            x[:, 2] = _window_mean(x[:, [0]], 2)[:, 0]
        return x
    if group == "elements":
        headings, paragraphs = _texts(_HEADING, html), _texts(_PARAGRAPH, html)
        return np.array([[b in headings, b in paragraphs] for b in bodies], dtype=np.float64).reshape(-1, 2)
    if group == "words":
        rows = []
        for b in bodies:
            words = _WORD.findall(b.lower())
            n, tokens = max(len(words), 1), b.split()
            rows.append(
                [
                    len(set(words)) / n,
                    sum(w in _FUNCTION for w in words) / n,
                    sum(c.isdigit() for c in b) / max(len(b), 1),
                    sum(w in _CONSENT for w in words) / n,
                    sum(t[:1].isupper() for t in tokens) / max(len(tokens), 1),
                    0.0,
                ]
            )
        x = np.array(rows, dtype=np.float64).reshape(-1, 6)
        if len(x):
            x[:, 5] = _window_mean(x[:, [1]], 2)[:, 0]
        return x
    if group == "article":
        body = HTMLTree.parse(html).body
        found = body.query_selector_all("article,main,[itemprop=articleBody],[role=main]") if body is not None else []
        article = "\n".join(_norm(node.text or "") for node in found)
        return np.array([[bool(article) and _norm(b) in article, bool(article)] for b in bodies], dtype=np.float64).reshape(-1, 2)
    raise ValueError(f"no feature group {group!r} (one of {', '.join(GROUPS)})")


def best_threshold(pages, texts, mains, groups, odds) -> tuple[float, float]:
    """The best held-out F1 over :data:`THRESHOLDS`, and its threshold."""
    return max((wr.held_out_f1(pages, texts, mains, groups, odds, float(t), 0.5), float(t)) for t in THRESHOLDS)


def routing(pages, texts, mains, groups, odds) -> list[tuple[str, float, float | None, str]]:
    """The ``routing`` probe's rows (the module's docstring)."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    from dolma_pipe._rust import rs_trafilatura_extract
    from dolma_pipe.stages.warc.extract import Combined, Router
    from dolma_pipe.stages.warc.refine import LineModel, ResiliparseRefined

    model, router, refined = LineModel.load(), Router.load(), ResiliparseRefined()
    keep, per_page = wr.by_page(odds >= model.threshold, groups, len(pages)), wr.by_page(odds, groups, len(pages))
    f_refined, f_rs, t_refined, t_rs, expected, signals = [], [], [], [], [], []
    for i, page in enumerate(pages):
        html = page.html.decode("utf-8", "replace")
        start = time.process_time()
        refined.extract(html, url=page.url)
        t_refined.append(time.process_time() - start)
        start = time.process_time()
        try:
            slow: str | None = rs_trafilatura_extract(html, page.url)[0]
        except (ValueError, RuntimeError):
            slow = None
        t_rs.append(time.process_time() - start)
        text = "\n".join(line for line, k in zip(texts[i], keep[i]) if k)  # the filter, out of fold
        fell_back = len(text.split()) < model.fallback_share * len(mains[i].split())
        if fell_back:
            text = mains[i]
        kept = slow if slow is not None and len(slow) >= router.keep_shorter * len(text) else text
        f_refined.append(wq.word_prf(text, page.truth)[2])
        f_rs.append(wq.word_prf(kept, page.truth)[2])
        sig = Combined.signals(html, mains[i], page.url)
        own = len(sig)  # combined's signals come first, the filter's confidence after them
        expected.append(router.seconds(sig["log_tags"]))
        words = np.array([len(line.split()) for line in texts[i]], dtype=np.float64)
        total, o = max(words.sum(), 1.0), per_page[i]
        sig.update(
            kept_share=float((words * keep[i]).sum() / total),
            near_threshold=float((words * (np.abs(o - model.threshold) < 1)).sum() / total),
            mean_abs_odds=float((words * np.abs(o)).sum() / total),
            kept_vs_main=len(text.split()) / max(len(mains[i].split()), 1),
            fell_back=float(fell_back),
        )
        signals.append(sig)
    base, gain = np.array(f_refined), np.array(f_rs) - np.array(f_refined)
    times = np.array(t_rs)
    names = list(signals[0])
    x = np.array([[s[k] for k in names] for s in signals])

    def routed(score: np.ndarray, filter_share: float = 1.0) -> tuple[float, int]:
        """F1 and pages routed, best score first, within 3x rs-trafilatura's time over all pages
        less the filter's time on every page at ``filter_share`` of what it was measured at."""
        budget = sum(t_rs) / SPEEDUP - filter_share * sum(t_refined)
        order = np.argsort(-score, kind="stable")
        chosen = order[np.cumsum(times[order]) <= budget]
        f1 = base.copy()
        f1[chosen] = base[chosen] + gain[chosen]
        return float(f1.mean()), len(chosen)

    def fitted(columns: list[int]) -> np.ndarray:
        predicted, fold = np.zeros(len(pages)), np.arange(len(pages)) % 5
        for k in range(5):
            reg = HistGradientBoostingRegressor(max_iter=100, max_depth=3, learning_rate=0.1, random_state=0)
            reg.fit(x[fold != k][:, columns], gain[fold != k])
            predicted[fold == k] = reg.predict(x[fold == k][:, columns])
        return np.maximum(predicted, 1e-9) / np.array(expected)

    speed = f"filter {np.mean(t_refined) * 1000:.1f} ms, rs-trafilatura {np.mean(t_rs) * 1000:.1f} ms a page"
    rows: list[tuple[str, float, float | None, str]] = [("the filter alone", float(base.mean()), None, speed)]
    perfect, confident = np.maximum(gain, 0) / times, fitted(list(range(len(names))))
    for name, score in (
        ("a perfect chooser", perfect),
        ("router: combined's signals", fitted(list(range(own)))),
        ("router: + the filter's confidence", confident),
    ):
        f1, n = routed(score)
        rows.append((f"{name}, {SPEEDUP:g}x rs-trafilatura's speed", f1, None, f"{n} pages routed"))
    # How much a cheaper filter would leave for routing (its text unchanged, its time scaled).
    for share in FILTER_SHARES:
        for name, score in (("a perfect chooser", perfect), ("router: + the filter's confidence", confident)):
            f1, n = routed(score, share)
            rows.append((f"{name}, the filter at {share:.0%} of its time", f1, None, f"{n} pages routed"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--probes", default="oracle,capacity,features,without,routing", help="comma-separated: oracle, capacity, features, without, routing"
    )
    ap.add_argument("--wcxb", default=wq.DEFAULT_WCXB, help="clone of Murrough-Foley/web-content-extraction-benchmark")
    args = ap.parse_args()
    probes = args.probes.split(",")
    pages = wq.load("wcxb-dev", wcxb=args.wcxb)
    x, y, w, groups, texts, mains = wr.dev_lines(pages)
    print(f"WCXB dev: {len(pages)} pages, {len(y)} lines", flush=True)
    rows: list[tuple[str, float, float | None, str]] = []
    if "oracle" in probes:
        keep = wr.by_page(y > 0.5, groups, len(pages))
        ceiling = [wq.word_prf("\n".join(line for line, k in zip(texts[i], keep[i]) if k), p.truth)[2] for i, p in enumerate(pages)]
        rows.append(("the labelled lines (ceiling)", float(np.mean(ceiling)), None, ""))
    if "capacity" in probes:
        for trees, depth, rate in CAPACITY:
            odds = wr.out_of_fold(x, y, w, groups, make=lambda t=trees, d=depth, r=rate: wr._classifier(t, d, r))
            f1, threshold = best_threshold(pages, texts, mains, groups, odds)
            rows.append((f"{trees} trees of depth {depth}, rate {rate}", f1, threshold, ""))
    if "features" in probes:
        for group in GROUPS:
            start = time.process_time()
            extra = np.vstack([extra_features(group, p.html.decode("utf-8", "replace"), texts[i]) for i, p in enumerate(pages)])
            ms = (time.process_time() - start) / len(pages) * 1000
            odds = wr.out_of_fold(np.hstack([x, extra]), y, w, groups)
            f1, threshold = best_threshold(pages, texts, mains, groups, odds)
            rows.append((f"shipped features + {group}", f1, threshold, f"{ms:.1f} ms a page"))
    if "without" in probes:
        for dropped in WITHOUT:
            kept = [i for i, name in enumerate(FEATURES) if name not in dropped]
            f1, threshold = best_threshold(pages, texts, mains, groups, wr.out_of_fold(x[:, kept], y, w, groups))
            rows.append((f"shipped features less {', '.join(dropped)}", f1, threshold, ""))
    if "routing" in probes:
        rows += routing(pages, texts, mains, groups, wr.out_of_fold(x, y, w, groups))
    print("\n| probe | held-out dev F1 | threshold | cost |\n|---|---:|---:|---|")
    for name, score, at, cost in rows:
        print(f"| {name} | {score:.4f} | {'-' if at is None else f'{at:+.2f}'} | {cost} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
