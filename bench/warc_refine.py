"""The ``resiliparse_refined`` extractor's line model: its fit (WCXB dev only) and its held-out scores.

    .venv/bin/python bench/warc_refine.py --fit        # writes dolma_pipe/stages/warc/refine_model.json
    .venv/bin/python bench/warc_refine.py --measure    # ScrapingHub, WCXB test and dev; speed vs trafilatura-FineWeb

``--fit`` reads WCXB's dev split alone. Every non-empty line of resiliparse's text of the whole
page (``refine.page_lines``) is labelled content when at least half of its word trigrams (its
words, for a line of under 3 words) are in the page's ground truth (lower-cased ``\\w+`` words,
WCXB's tokens); a line weighs its share of the page's words, so every page weighs the same, as
in WCXB's mean of per-page F1. A scikit-learn ``HistGradientBoostingClassifier`` (60 trees of depth 3)
is fitted on the lines; its log-odds threshold is the one with the best mean word F1 on dev pages held out of the
fit (5 folds by page), then the share of resiliparse's main-content words under which the page
gets that main content instead (the model dropped most of it) is chosen the same way; the
shipped model is refitted on every dev page with those two.

``--measure`` scores the shipped model once on ScrapingHub (shingle F1) and WCXB test and dev (word
F1) with the benchmarks' own metrics (``bench/warc_quality.py``), next to ``resiliparse`` and,
in the same run, trafilatura with FineWeb's settings (datatrove 0.10.1, in its own environment:
``bench/warc.py``'s ``peer_extract``); speed is pages per CPU-second of the extraction call alone
(``time.process_time``), as ``bench/warc.py`` measures every extractor.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import warc_quality as wq

from dolma_pipe.stages.warc.refine import FEATURES, LineModel, ResiliparseRefined, page_lines

_WORD = re.compile(r"\w+")
DEPTH = 3
TREES = 60
RATE = 0.25


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def label(line: str, trigrams: set[tuple[str, ...]], words: set[str]) -> float:
    """1.0 when most of ``line``'s word trigrams (its words, under 3 words) are in the truth."""
    w = _words(line)
    if len(w) < 3:
        return float(bool(w) and all(x in words for x in w))
    grams = [tuple(w[i : i + 3]) for i in range(len(w) - 2)]
    return float(sum(g in trigrams for g in grams) >= len(grams) / 2)


def dev_lines(pages: list[wq.Page]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[list[str]], list[str]]:
    """Features, labels, weights and page index of every line of the dev pages, each page's lines
    and its main content (resiliparse's)."""
    xs, ys, ws, groups, texts, mains = [], [], [], [], [], []
    for i, page in enumerate(pages):
        lines, _, _, x, main = page_lines(page.html.decode("utf-8", "replace"))
        truth = _words(page.truth)
        trigrams = {tuple(truth[j : j + 3]) for j in range(len(truth) - 2)}
        vocab = set(truth)
        n_words = np.array([max(len(_WORD.findall(line)), 1) for line in lines], dtype=np.float64)
        xs.append(x)
        ys.append(np.array([label(line, trigrams, vocab) for line in lines]))
        ws.append(n_words / max(n_words.sum(), 1.0))
        groups.append(np.full(len(lines), i))
        texts.append(lines)
        mains.append(main)
    return np.vstack(xs), np.concatenate(ys), np.concatenate(ws), np.concatenate(groups), texts, mains


def _complete_tree(nodes: np.ndarray, depth: int) -> tuple[list[int], list[float], list[float]]:
    """One fitted scikit-learn histogram-boosting tree (its predictor's ``nodes``) as a complete
    tree of ``depth`` levels (``refine.LineModel``'s layout): splits breadth-first, then leaves; a
    leaf above the last level becomes splits that send both ways to its value."""
    feat, thr, leaf = [0] * (2**depth - 1), [0.0] * (2**depth - 1), [0.0] * (2**depth)
    stack = [(0, 0, 0)]  # (node, position, level)
    while stack:
        node, pos, level = stack.pop()
        row = nodes[node]
        if level == depth:
            assert row["is_leaf"], "a tree deeper than max_depth"
            leaf[pos - (2**depth - 1)] = float(row["value"])
        elif row["is_leaf"]:
            stack += [(node, 2 * pos + 1, level + 1), (node, 2 * pos + 2, level + 1)]
        else:
            feat[pos], thr[pos] = int(row["feature_idx"]), float(row["num_threshold"])
            stack += [(int(row["left"]), 2 * pos + 1, level + 1), (int(row["right"]), 2 * pos + 2, level + 1)]
    return feat, thr, leaf


def _classifier(trees: int = TREES, depth: int = DEPTH, rate: float = RATE):
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(max_iter=trees, max_depth=depth, learning_rate=rate, early_stopping=False, random_state=0)


def out_of_fold(x: np.ndarray, y: np.ndarray, w: np.ndarray, groups: np.ndarray, folds: int = 5, make=_classifier) -> np.ndarray:
    """Each line's log-odds from a model (``make()``) fitted without its page's fold (pages by index mod ``folds``)."""
    odds = np.zeros(len(y))
    for fold in range(folds):
        train = groups % folds != fold
        model = make().fit(x[train], y[train], sample_weight=w[train])
        odds[~train] = model.decision_function(x[~train])
        print(f"  fold {fold + 1}/{folds} fitted", flush=True)
    return odds


def by_page(values: np.ndarray, groups: np.ndarray, pages: int) -> list[np.ndarray]:
    """``values`` (one a line) cut into each page's (``dev_lines`` gives a page's lines together,
    in page order; a page without lines gets an empty array)."""
    return np.split(values, np.cumsum(np.bincount(groups, minlength=pages))[:-1])


def held_out_f1(
    pages: list[wq.Page], texts: list[list[str]], mains: list[str], groups: np.ndarray, odds: np.ndarray, threshold: float, fallback: float
) -> float:
    """Mean word F1 of the pages' kept lines (log-odds at or above ``threshold``), a page getting
    resiliparse's main content when they have fewer words than ``fallback`` of it (the extractor's rule)."""
    keep = by_page(odds >= threshold, groups, len(pages))
    f1 = []
    for i, page in enumerate(pages):
        kept = [line for line, k in zip(texts[i], keep[i]) if k]
        text = "\n".join(kept)
        if len(text.split()) < fallback * len(mains[i].split()):
            text = mains[i]
        f1.append(wq.word_prf(text, page.truth)[2])
    return float(np.mean(f1))


def _spec(model, threshold: float, fallback: float) -> dict:
    trees = [_complete_tree(predictors[0].nodes, DEPTH) for predictors in model._predictors]
    return {
        "features": FEATURES,
        "depth": DEPTH,
        "base": float(np.ravel(model._baseline_prediction)[0]),
        "threshold": threshold,
        "fallback_share": fallback,
        "split_feature": [t[0] for t in trees],
        "split_threshold": [t[1] for t in trees],
        "leaf": [t[2] for t in trees],
        "fitted_on": "WCXB dev split (bench/warc_refine.py --fit)",
    }


def fit(wcxb: str, folds: int = 5) -> dict:
    pages = wq.load("wcxb-dev", wcxb=wcxb)
    x, y, w, groups, texts, mains = dev_lines(pages)
    print(f"WCXB dev: {len(pages)} pages, {len(y)} lines, {y.mean():.1%} content", flush=True)
    odds = out_of_fold(x, y, w, groups, folds)

    def held_out(threshold: float, fallback: float) -> float:
        return held_out_f1(pages, texts, mains, groups, odds, threshold, fallback)

    scores = {float(t): held_out(float(t), 0.0) for t in np.round(np.arange(-1.5, 1.51, 0.25), 2)}
    for threshold, f1 in scores.items():
        print(f"  threshold {threshold:+.2f}: held-out dev F1 {f1:.4f}")
    best = max(scores, key=lambda t: scores[t])
    shares = {share: held_out(best, share) for share in (0.0, 0.25, 0.5, 0.75)}
    for share, f1 in shares.items():
        print(f"  threshold {best:+.2f}, main content when under {share:.0%} of its words: held-out dev F1 {f1:.4f}")
    fallback = max(shares, key=lambda s: shares[s])
    model = _classifier().fit(x, y, sample_weight=w)
    spec = _spec(model, best, fallback)
    # the exported trees must give scikit-learn's own log-odds
    ours = LineModel(spec).log_odds(x)
    assert np.allclose(ours, model.decision_function(x), atol=1e-6), "exported trees differ from the fitted model"
    print(f"threshold {best:+.2f}, fallback share {fallback}: held-out dev F1 {shares[fallback]:.4f}")
    with open(LineModel.PATH, "w", encoding="utf-8") as f:
        json.dump(spec, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {LineModel.PATH}")
    return spec


def measure(scrapinghub: str, wcxb: str, peers: bool) -> None:
    from dolma_pipe.stages.warc.extract import Resiliparse

    rows: dict[str, dict[str, float]] = {}
    cpu: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for bench in ("scrapinghub", "wcxb-test", "wcxb-dev"):
        pages = wq.load(bench, scrapinghub, wcxb)
        tools: dict[str, object] = {"resiliparse_refined": ResiliparseRefined(), "resiliparse": Resiliparse()}
        for name, extractor in tools.items():
            texts = {}
            for page in pages:
                html = page.html.decode("utf-8", "replace")
                start = time.process_time()
                texts[page.id] = extractor.extract(html) or ""  # type: ignore[attr-defined]
                seconds = time.process_time() - start
                if bench != "wcxb-dev":
                    cpu[name] += seconds
            if bench != "wcxb-dev":
                count[name] += len(pages)
            rows.setdefault(name, {})[bench] = wq.scores(pages, texts)["f1"]
        if peers and bench != "wcxb-dev":
            import warc as bench_warc

            texts, seconds = bench_warc.peer_extract(bench_warc.FINEWEB, bench_warc.benchmark_warc(bench, pages), pages)
            rows.setdefault(bench_warc.FINEWEB, {})[bench] = wq.scores(pages, texts)["f1"]
            cpu[bench_warc.FINEWEB] += seconds
            count[bench_warc.FINEWEB] += len(pages)
        print(f"{bench}: {len(pages)} pages done", flush=True)
    # speed over the held-out pages (ScrapingHub and WCXB test), the pages every tool ran
    print("\n| extractor | ScrapingHub F1 | WCXB test F1 | WCXB dev F1 | pages/CPU-s | vs trafilatura-FineWeb |")
    print("|---|---|---|---|---|---|")
    fw = "trafilatura-fineweb"
    speeds = {name: count[name] / cpu[name] for name in rows}
    for name, by in rows.items():
        cells = " | ".join(f"{by[b]:.3f}" if b in by else "-" for b in ("scrapinghub", "wcxb-test", "wcxb-dev"))
        ratio = f"{speeds[name] / speeds[fw]:.1f}x" if fw in speeds else "-"
        print(f"| {name} | {cells} | {speeds[name]:.1f} | {ratio} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fit", action="store_true", help="fit the line model on WCXB dev and write refine_model.json")
    ap.add_argument("--measure", action="store_true", help="score the shipped model on ScrapingHub, WCXB test and dev, with speed")
    ap.add_argument("--no-peers", action="store_true", help="with --measure: leave trafilatura-FineWeb out")
    ap.add_argument("--scrapinghub", default=wq.DEFAULT_SCRAPINGHUB, help="clone of scrapinghub/article-extraction-benchmark")
    ap.add_argument("--wcxb", default=wq.DEFAULT_WCXB, help="clone of Murrough-Foley/web-content-extraction-benchmark")
    args = ap.parse_args()
    if args.fit:
        fit(args.wcxb)
    if args.measure:
        measure(args.scrapinghub, args.wcxb, not args.no_peers)
    if not (args.fit or args.measure):
        ap.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
