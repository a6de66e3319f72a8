"""The two public extraction benchmarks: their pages, their metrics, and WARC files holding the pages.

    .venv/bin/python bench/warc_quality.py --check

``--check`` is the metrics' test, exiting non-zero on a difference: it scores the outputs
ScrapingHub publishes (``output/*.json``) and compares with the F1 its README prints (trafilatura
2.0.0 0.958, rs_trafilatura 0.970, justext 0.804, go_trafilatura 0.960; within 0.0005) and with
its own ``evaluate.py`` (read from the clone; exactly); WCXB publishes no outputs scored by its
``evaluate.py`` (``test/results/`` has 5 pages scored by rs-trafilatura's harness, a set of
whitespace words), so every page of its test split is scored by both its ``evaluate.py`` and this
module on dolma-pipe's resiliparse texts (exactly). ``--trafilatura-python`` adds trafilatura
2.0.0 (``favor_recall``) on WCXB's test split next to the README's 0.833 (its settings are not
published: informative, not checked).

The benchmarks are public git repositories, read from a local clone (a git directory or work tree,
``--scrapinghub`` / ``--wcxb``; the defaults are the ``fetch`` tool's mirrors). Their files are
copied once under ``bench/_work/warc/`` with ``git archive`` (never committed):

- ScrapingHub's article-extraction-benchmark: 181 pages ``html/<id>.html.gz`` (UTF-8), truth
  ``ground-truth.json`` (``articleBody``, ``url``). Metric (its ``evaluate.py``): words are
  ``\\w+`` matches; a page's shingles are its 4-grams of words (one shorter shingle for a text of
  under 4 words, none for an empty one); TP/FP/FN count shingles by multiplicity, normalised by
  their sum so that every page weighs the same; precision is the mean over pages with TP+FP > 0,
  recall the mean over pages with TP+FN > 0 (a page with FP = FN = 0 scores 1), and F1 is the
  harmonic mean of the two means.
- WCXB (Murrough-Foley/web-content-extraction-benchmark): ``{dev,test}/html/<id>.html.gz`` and
  ``{dev,test}/ground-truth/<id>.json`` (``url``, ``ground_truth.main_content``). Metric (its
  ``evaluate.py``): lower-cased ``\\w+`` words as bags; precision = overlap / predicted words,
  recall = overlap / reference words, F1 per page (1 when both are empty, 0 when only one is),
  and the reported F1 is the mean of the pages' F1.

``--fit-combined`` refits the ``combined`` linearizer's routing score
(``dolma_pipe.stages.warc.extract.Combined``) on WCXB's dev split only: each page's signals
(``Combined.signals``) against the difference between rs-trafilatura's and resiliparse's word F1,
least squares; it prints the weights, the threshold (the scores' 75th percentile: a quarter of the
dev pages take the slow path) and, for a few thresholds, the dev split's F1 and share routed.

``write_warc()`` packs pages into one gzip WARC of HTTP ``response`` records (warcio), each with a
``WARC-Record-ID`` made from the benchmark and page id (so the page of any output document is found
by its record id or its URL), the page's URL as ``WARC-Target-URI``, the payload digest Dolma uses
as its id, ``Content-Type: text/html; charset=utf-8`` and, as Common Crawl's records have it,
``WARC-Identified-Payload-Type: text/html``.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import types
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "_work", "warc")
MIRRORS = "/work/.mirror"
DEFAULT_SCRAPINGHUB = os.path.join(MIRRORS, "scrapinghub+article-extraction-benchmark", "repo")
DEFAULT_WCXB = os.path.join(MIRRORS, "Murrough-Foley+web-content-extraction-benchmark", "repo")

# The figures the benchmarks' READMEs publish for their own output files (ScrapingHub README.rst,
# "Results of the latest evaluation"; WCXB test/results/rs-trafilatura_results.json's metrics).
PUBLISHED_SCRAPINGHUB = {"trafilatura": 0.958, "rs_trafilatura": 0.970, "justext": 0.804, "go_trafilatura": 0.960}

_WORD = re.compile(r"\w+", re.UNICODE | re.MULTILINE | re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Page:
    bench: str  # "scrapinghub", "wcxb-dev", "wcxb-test"
    id: str
    url: str
    html: bytes  # the page's bytes as the benchmark ships them (UTF-8)
    truth: str

    @property
    def record_id(self) -> str:
        return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'dolma-pipe-bench:{self.bench}:{self.id}')}>"


# ScrapingHub: shingle F1 ------------------------------------------------------------------------


def _shingles(text: str, n: int = 4) -> Counter[tuple[str, ...]]:
    tokens = _WORD.findall(text or "")
    return Counter(tuple(tokens[i : i + n]) for i in range(max(1, len(tokens) - n + 1)) if tokens[i : i + n])


def shingle_tp_fp_fn(true: str, pred: str) -> tuple[float, float, float]:
    """One page's TP, FP, FN over word 4-gram shingles, normalised to sum to 1 (evaluate.py)."""
    t, p = _shingles(true), _shingles(pred)
    tp = float(sum((t & p).values()))
    fp = float(sum((p - t).values()))
    fn = float(sum((t - p).values()))
    s = tp + fp + fn
    return (tp / s, fp / s, fn / s) if s > 0 else (tp, fp, fn)


def _precision(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    return 0.0 if tp == fp == 0 else tp / (tp + fp)


def _recall(tp: float, fp: float, fn: float) -> float:
    if fp == fn == 0:
        return 1.0
    return 0.0 if tp == fn == 0 else tp / (tp + fn)


def scrapinghub_scores(truth: dict[str, str], pred: dict[str, str]) -> dict[str, float]:
    """F1, precision, recall over all pages of ``truth`` (a page missing from ``pred`` is empty)."""
    counts = [shingle_tp_fp_fn(truth[k], pred.get(k) or "") for k in truth]
    precision = statistics.mean(_precision(*c) for c in counts if c[0] + c[1] > 0)
    recall = statistics.mean(_recall(*c) for c in counts if c[0] + c[2] > 0)
    return {"f1": 2 * precision * recall / (precision + recall), "precision": precision, "recall": recall}


# WCXB: word F1 -------------------------------------------------------------------------------------


def word_prf(pred: str, ref: str) -> tuple[float, float, float]:
    """One page's word precision, recall, F1 (WCXB evaluate.py's word_f1)."""
    p_tokens = re.findall(r"\w+", (pred or "").lower())
    r_tokens = re.findall(r"\w+", (ref or "").lower())
    if not r_tokens:
        return (1.0, 1.0, 1.0) if not p_tokens else (0.0, 0.0, 0.0)
    if not p_tokens:
        return (0.0, 0.0, 0.0)
    overlap = sum((Counter(p_tokens) & Counter(r_tokens)).values())
    precision, recall = overlap / len(p_tokens), overlap / len(r_tokens)
    return precision, recall, (2 * precision * recall / (precision + recall) if overlap else 0.0)


def wcxb_scores(truth: dict[str, str], pred: dict[str, str]) -> dict[str, float]:
    """Mean F1, precision, recall over all pages of ``truth`` (a page missing from ``pred`` is empty)."""
    rows = [word_prf(pred.get(k) or "", truth[k]) for k in truth]
    return {key: statistics.mean(r[i] for r in rows) for i, key in enumerate(("precision", "recall", "f1"))}


def scores(pages: list[Page], pred: dict[str, str]) -> dict[str, float]:
    """The benchmark's own metric for ``pages`` (all of one benchmark), predictions by page id."""
    truth = {p.id: p.truth for p in pages}
    return scrapinghub_scores(truth, pred) if pages[0].bench == "scrapinghub" else wcxb_scores(truth, pred)


# The benchmarks' files -----------------------------------------------------------------------------


def _git_dir(repo: str) -> list[str]:
    return ["git", "--git-dir", repo] if os.path.isfile(os.path.join(repo, "HEAD")) else ["git", "-C", repo]


def _unpack(repo: str, paths: list[str], dest: str) -> str:
    """``git archive HEAD paths`` of ``repo`` into ``dest`` (once)."""
    stamp = os.path.join(dest, ".unpacked")
    if not os.path.exists(stamp):
        if not os.path.exists(repo):
            raise SystemExit(f"{repo}: no clone of the benchmark here (give its path with --scrapinghub / --wcxb)")
        os.makedirs(dest, exist_ok=True)
        data = subprocess.run([*_git_dir(repo), "archive", "--format=tar", "HEAD", *paths], check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest, filter="data")
        open(stamp, "w").close()
    return dest


def scrapinghub_pages(repo: str = DEFAULT_SCRAPINGHUB) -> list[Page]:
    outputs = [f"output/{name}.json" for name in PUBLISHED_SCRAPINGHUB]
    root = _unpack(repo, ["html", "ground-truth.json", *outputs], os.path.join(WORK, "scrapinghub"))
    with open(os.path.join(root, "ground-truth.json"), encoding="utf8") as f:
        truth = json.load(f)
    pages = []
    for key in sorted(truth):
        with gzip.open(os.path.join(root, "html", f"{key}.html.gz"), "rb") as g:
            pages.append(Page("scrapinghub", key, truth[key]["url"], g.read(), truth[key].get("articleBody") or ""))
    return pages


def wcxb_pages(split: str, repo: str = DEFAULT_WCXB) -> list[Page]:
    root = _unpack(repo, ["dev", "test"], os.path.join(WORK, "wcxb"))
    pages = []
    for name in sorted(os.listdir(os.path.join(root, split, "ground-truth"))):
        key = name.removesuffix(".json")
        with open(os.path.join(root, split, "ground-truth", name), encoding="utf8") as f:
            data = json.load(f)
        gt = data.get("ground_truth")
        if not isinstance(gt, dict):  # evaluate.py skips these too
            continue
        with gzip.open(os.path.join(root, split, "html", f"{key}.html.gz"), "rb") as g:
            pages.append(
                Page(f"wcxb-{split}", key, data.get("url") or f"https://wcxb.invalid/{key}", g.read(), gt.get("main_content") or "")
            )
    return pages


def load(bench: str, scrapinghub: str = DEFAULT_SCRAPINGHUB, wcxb: str = DEFAULT_WCXB) -> list[Page]:
    if bench == "scrapinghub":
        return scrapinghub_pages(scrapinghub)
    return wcxb_pages(bench.removeprefix("wcxb-"), wcxb)


# WARC -----------------------------------------------------------------------------------------------


def write_warc(pages: Iterable[Page], path: str) -> int:
    """``pages`` as HTTP response records of one gzip WARC (a warcinfo record first); returns the count."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    n = 0
    tmp = path + ".tmp"
    with open(tmp, "wb") as out:
        writer = WARCWriter(out, gzip=True)
        writer.write_record(writer.create_warcinfo_record(os.path.basename(path), {"software": "dolma-pipe bench/warc_quality.py"}))
        for page in pages:
            http = StatusAndHeaders(
                "200 OK", [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(page.html)))], protocol="HTTP/1.1"
            )
            record = writer.create_warc_record(
                page.url,
                "response",
                payload=io.BytesIO(page.html),
                http_headers=http,
                warc_headers_dict={
                    "WARC-Record-ID": page.record_id,
                    "WARC-Date": "2024-01-01T00:00:00Z",
                    # Common Crawl's detected type: datatrove's reader filters on it (or sniffs with libmagic)
                    "WARC-Identified-Payload-Type": "text/html",
                },
            )
            writer.write_record(record)
            n += 1
    os.replace(tmp, path)
    return n


def record_map(pages: list[Page]) -> dict[str, str]:
    """Record id and URL -> page id (a bench's outputs name a page by one or the other)."""
    out = {p.record_id: p.id for p in pages}
    out.update({p.url: p.id for p in pages})
    return out


# --check ---------------------------------------------------------------------------------------------


def _their_evaluate(repo: str, name: str) -> types.ModuleType:
    """A benchmark's own ``evaluate.py`` (read from its clone), as a module: the reference."""
    source = subprocess.run([*_git_dir(repo), "show", "HEAD:evaluate.py"], check=True, capture_output=True, text=True).stdout
    module = types.ModuleType(name)
    module.__file__ = os.path.join(WORK, name, "evaluate.py")
    exec(compile(source, f"{repo}:evaluate.py", "exec"), module.__dict__)
    return module


def _report(label: str, mine: float, theirs: float, tolerance: float) -> int:
    ok = abs(mine - theirs) <= tolerance
    print(f"{label:<62} {mine:.4f}  theirs {theirs:.4f}  {'ok' if ok else 'DIFFERS'}")
    return 0 if ok else 1


def check(scrapinghub: str, wcxb: str, trafilatura_python: str | None) -> int:
    """These metrics against the benchmarks' published figures and their own evaluate.py; 1 on a difference."""
    from dolma_pipe.stages.warc.extract import Resiliparse

    bad = 0
    pages = scrapinghub_pages(scrapinghub)
    truth = {p.id: p.truth for p in pages}
    theirs = _their_evaluate(scrapinghub, "scrapinghub")
    for name, published in PUBLISHED_SCRAPINGHUB.items():
        with open(os.path.join(WORK, "scrapinghub", "output", f"{name}.json"), encoding="utf8") as f:
            data = json.load(f)
        pred = {k: (v.get("articleBody") or "") for k, v in (data["output"] if set(data) == {"version", "output"} else data).items()}
        f1 = scrapinghub_scores(truth, pred)["f1"]
        bad += _report(f"ScrapingHub {name} output, F1 vs README", f1, published, 0.0005)
        ref = theirs.metrics_from_tp_fp_fns([theirs.string_shingle_matching(true=truth[k], pred=pred[k]) for k in truth])["f1"]
        bad += _report(f"ScrapingHub {name} output, F1 vs evaluate.py", f1, ref, 1e-12)
    # WCXB publishes no per-page outputs scored by its evaluate.py (test/results/ holds 5 pages
    # scored by another harness), so the reference is its evaluate.py itself, page by page, on
    # the texts of an extractor run here (dolma-pipe's resiliparse) over the whole test split.
    theirs = _their_evaluate(wcxb, "wcxb")
    test = wcxb_pages("test", wcxb)
    extractor = Resiliparse()
    pred = {p.id: extractor.extract(p.html.decode("utf-8", "replace")) for p in test}
    worst = max(abs(a - b) for p in test for a, b in zip(word_prf(pred[p.id], p.truth), theirs.word_f1(pred[p.id], p.truth)))
    bad += _report(f"WCXB test, {len(test)} pages: largest per-page P/R/F1 difference", worst, 0.0, 1e-12)
    if trafilatura_python:
        warc = os.path.join(WORK, "wcxb-test-check.warc.gz")
        write_warc(test, warc)
        out = os.path.join(WORK, "wcxb-test-trafilatura.json")
        script = os.path.join(HERE, "warc_peers.py")
        subprocess.run([trafilatura_python, script, "extract", "--tool", "trafilatura-recall", "--out", out, warc], check=True)
        with open(out, encoding="utf8") as f:
            texts = json.load(f)["texts"]
        ids = record_map(test)
        f1 = wcxb_scores({p.id: p.truth for p in test}, {ids[k]: v for k, v in texts.items()})["f1"]
        # informative only: the README does not say which version or settings gave its figure
        _report("WCXB test, trafilatura favor_recall, F1 vs README's 0.833", f1, 0.833, 1.0)
    return 1 if bad else 0


def _complete_tree(tree, depth: int) -> tuple[list[int], list[float], list[float]]:
    """One fitted scikit-learn tree as a complete tree of ``depth`` levels (the layout
    ``extract.Router`` reads): split features and thresholds in breadth-first order, then the
    leaves; a leaf above the last level becomes splits that send both ways to its value."""
    feat, thr, leaf = [0] * (2**depth - 1), [0.0] * (2**depth - 1), [0.0] * (2**depth)
    stack = [(0, 0, 0)]  # (node, position, level)
    while stack:
        node, pos, level = stack.pop()
        is_leaf = tree.children_left[node] == -1
        if level == depth:
            assert is_leaf, "a tree deeper than max_depth"
            leaf[pos - (2**depth - 1)] = float(tree.value[node][0][0])
        elif is_leaf:
            stack += [(node, 2 * pos + 1, level + 1), (node, 2 * pos + 2, level + 1)]
        else:
            feat[pos], thr[pos] = int(tree.feature[node]), float(tree.threshold[node])
            stack += [(int(tree.children_left[node]), 2 * pos + 1, level + 1), (int(tree.children_right[node]), 2 * pos + 2, level + 1)]
    return feat, thr, leaf


def fit_combined(wcxb: str, speedup: float = 3.3, out: str | None = None) -> dict:
    """The combined linearizer's router (``extract.Router``), fitted on WCXB dev alone, written to
    ``out`` (default: the file the stage reads). Per dev page: resiliparse's main text and its CPU
    time (parse, linearize and the router's signals), rs-trafilatura's text (given the URL) and its CPU time; the kept
    text's rule (``keep_shorter``: the share of resiliparse's length under which rs-trafilatura's
    text is dropped) is the one of 0.2-0.5 with the best dev F1 when every page is routed; boosted
    trees (scikit-learn, 200 trees of depth 3, fixed seed) regress rs-trafilatura's word-F1 gain
    on ``Combined.signals``; a line fits log rs-trafilatura seconds on log(1 + tags); the
    threshold on gain per second is the best dev F1 whose routed pages cost at most
    rs-trafilatura's time on every page over ``speedup``, less resiliparse's time on every page."""
    import time

    import numpy as np
    from resiliparse.parse.html import HTMLTree
    from sklearn.ensemble import GradientBoostingRegressor

    from dolma_pipe._rust import rs_trafilatura_extract
    from dolma_pipe.stages.warc.extract import Combined, Router
    from dolma_pipe.stages.warc.extractor import resiliparse_text

    depth = 3
    pages = wcxb_pages("dev", wcxb)
    rows, fast_f1, slow_f1, ratio, t_fast, t_slow, tags = [], [], [], [], [], [], []
    keys: list[str] = []
    for page in pages:
        html = page.html.decode("utf-8", "replace")
        start = time.process_time()
        main = resiliparse_text(HTMLTree.parse(html), True)
        signals = Combined.signals(html, main, page.url)
        mid = time.process_time()
        slow = rs_trafilatura_extract(html, page.url)[0]
        t_fast.append(mid - start)
        t_slow.append(time.process_time() - mid)
        keys = [k for k in signals if k != "log_tags"]  # the page's time, not its gain
        rows.append([signals[k] for k in keys])
        tags.append(signals["log_tags"])
        fast_f1.append(word_prf(main, page.truth)[2])
        slow_f1.append(word_prf(slow, page.truth)[2])
        ratio.append(len(slow) / max(len(main), 1))
    fast, slow_, r = np.array(fast_f1), np.array(slow_f1), np.array(ratio)
    keep_shorter = max((0.2, 0.3, 0.4, 0.5), key=lambda k: float(np.where(r >= k, slow_, fast).mean()))
    kept = np.where(r >= keep_shorter, slow_, fast)
    x = np.array(rows)
    model = GradientBoostingRegressor(n_estimators=200, max_depth=depth, learning_rate=0.05, subsample=0.8, random_state=0)
    model.fit(x, kept - fast)
    slope, intercept = np.polyfit(np.array(tags), np.log(np.maximum(t_slow, 1e-6)), 1)
    feat, thr, leaf = map(list, zip(*(_complete_tree(e.tree_, depth) for e in model.estimators_[:, 0])))
    spec = {
        "fitted_on": f"WCXB dev, {len(pages)} pages (bench/warc_quality.py --fit-combined --speedup {speedup})",
        "features": keys,
        "depth": depth,
        "base": float(model.init_.constant_[0][0]),
        "learning_rate": model.learning_rate,
        "split_feature": feat,
        "split_threshold": thr,
        "leaf": leaf,
        "time_intercept": float(intercept),
        "time_slope": float(slope),
        "keep_shorter": keep_shorter,
        "threshold": 0.0,
    }
    router = Router(spec)
    gains = np.array([router.gain(dict(zip(keys, row))) for row in rows])
    assert np.allclose(gains, model.predict(x.astype(np.float32)), atol=1e-9), "the exported trees disagree with the model"
    scores = gains / np.exp(intercept + slope * np.array(tags))
    t_slow_a, total_slow, total_fast = np.array(t_slow), float(np.sum(t_slow)), float(np.sum(t_fast))
    order = np.argsort(-scores, kind="stable")
    cost = np.cumsum(t_slow_a[order])

    def best(target: float) -> tuple[float, float, float]:
        """(threshold, dev F1, share routed) with routed cost within the budget for ``target``."""
        k = int(np.searchsorted(cost, total_slow / target - total_fast, side="right"))
        f1s = np.cumsum((kept - fast)[order])
        k = int(np.argmax(f1s[:k])) + 1 if k else 0
        threshold = float(scores[order[k - 1]]) if k else float("inf")
        routed = scores >= threshold
        return threshold, float(np.where(routed, kept, fast).mean()), float(routed.mean())

    spec["threshold"] = best(speedup)[0]
    print(
        f"WCXB dev, {len(pages)} pages: resiliparse {fast.mean():.4f}, rs-trafilatura {slow_.mean():.4f}, kept (keep_shorter {keep_shorter}) {kept.mean():.4f}"
    )
    print(
        f"CPU-s: resiliparse {total_fast:.1f}, rs-trafilatura {total_slow:.1f}; rs-trafilatura seconds = exp({intercept:.3f} + {slope:.3f} log(1 + tags))"
    )
    for target in (2.5, 3.0, speedup, 4.0, 5.0):
        threshold, f1, share = best(target)
        print(
            f"  at {target:.1f}x rs-trafilatura's speed on dev: threshold {threshold:.4g}, dev F1 {f1:.4f} (in sample), {share:.1%} routed"
        )
    path = out or Router.PATH
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f)
        f.write("\n")
    print(f"wrote {path} (threshold {spec['threshold']:.6g}, {speedup}x)")
    return spec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="score the benchmarks' published outputs and compare with their READMEs")
    ap.add_argument("--scrapinghub", default=DEFAULT_SCRAPINGHUB, help="clone of scrapinghub/article-extraction-benchmark")
    ap.add_argument("--wcxb", default=DEFAULT_WCXB, help="clone of Murrough-Foley/web-content-extraction-benchmark")
    ap.add_argument(
        "--trafilatura-python",
        help="with --check: a python with trafilatura (2.0.0) whose WCXB test F1 is compared with the README's (informative)",
    )
    ap.add_argument("--fit-combined", action="store_true", help="refit the combined linearizer's router on WCXB dev")
    ap.add_argument(
        "--speedup", type=float, default=3.3, help="with --fit-combined: the speed over rs-trafilatura the threshold keeps on dev"
    )
    ap.add_argument("--out", help="with --fit-combined: where the router goes (default: the file the stage reads)")
    args = ap.parse_args()
    if args.fit_combined:
        fit_combined(args.wcxb, args.speedup, args.out)
        return 0
    if args.check:
        return check(args.scrapinghub, args.wcxb, args.trafilatura_python)
    ap.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
