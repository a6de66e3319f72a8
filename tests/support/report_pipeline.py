"""A small real pipeline for the report's tests: real documents from the bundled sample corpus (two
sources, several files each) with planted exact and near duplicates, tagged, deduplicated (exact,
paragraphs, MinHash, decontamination), mixed with filter rules, tokenized, and optionally a tiny
training run and its evaluation table."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

from dolma_pipe.config import load_config
from dolma_pipe.documents import read_documents, write_documents
from dolma_pipe.runner import run_stage
from dolma_pipe.stages.dedup import DedupStage
from dolma_pipe.stages.dedup.config import DedupConfig
from dolma_pipe.stages.tokenize import TokenizeStage
from dolma_pipe.stages.tokenize.config import TokenizeConfig
from mixers.config import MixConfig
from mixers.stage import MixStage
from report import ReportStage
from report.config import ReportConfig
from taggers.stage import TagConfig, TagStage
from tests.support.repo import REPO_ROOT
from tests.support.tokens import train_tokenizer

ROOT = REPO_ROOT
SAMPLE = ROOT / "examples" / "sample" / "documents"
SOURCES = ("debian-handbook", "python-doc")


def run(stage_cls, model, cfg: dict) -> None:
    run_stage(stage_cls(load_config(model, None, {"processes": 1, "progress": False, **cfg})), stream=io.StringIO())


def write_corpus(root: Path) -> Path:
    """The sample corpus's two sources, their files as they are, plus a file per source of planted
    copies: 6 exact copies and 6 near copies (one word changed) of earlier documents."""
    docs_dir = root / "corpus" / "documents"
    for src in SOURCES:
        files = sorted((SAMPLE / src).glob("*.jsonl.gz"))[:2]
        rows: list[dict] = []
        for f in files:
            (docs_dir / src).mkdir(parents=True, exist_ok=True)
            shutil.copy(f, docs_dir / src / f.name)
            rows += [doc for _, doc in read_documents(str(f))]
        planted = []
        for i, doc in enumerate(rows[:12]):
            text = doc["text"]
            if i % 2:
                words = text.split(" ")
                words[len(words) // 2] = "CHANGED"
                text = " ".join(words)
            planted.append({"id": f"planted-{src}-{i}", "text": text, "source": src})
        write_documents(str(docs_dir / src / "part-9999.jsonl.gz"), planted)
    return docs_dir


def build_pipeline(root: Path, tokenizer: str | None = None) -> dict[str, Path]:
    docs_dir = write_corpus(root)
    pattern = str(docs_dir / "*" / "*.jsonl.gz")
    run(
        TagStage,
        TagConfig,
        {
            "documents": [pattern],
            "experiment": "t",
            "taggers": ["ft_lang_id", "gopher", "pii_regex_with_counts", "lengths_v1"],
            "tagger_options": {"ft_lang_id": {"granularity": "document"}},
        },
    )
    run(
        DedupStage,
        DedupConfig,
        {
            "documents": [pattern],
            "dedupe": {
                "name": "dd",
                "documents": {"attribute_name": "bff_duplicate_docs", "key": "$.text"},
                "paragraphs": {"attribute_name": "bff_duplicate_paragraph_spans"},
                "skip_empty": True,
            },
        },
    )
    run(DedupStage, DedupConfig, {"documents": [pattern], "dedupe": {"name": "near"}, "minhash": {"threshold": 0.7}})
    evaluation = sorted((docs_dir / "python-doc").glob("part-0001*"))[0]
    run(
        DedupStage,
        DedupConfig,
        {
            "documents": [pattern],
            "dedupe": {"name": "decontam"},
            "decontamination": {"evaluation": [str(evaluation)], "mode": "paragraphs"},
        },
    )
    mix_out = root / "mix"
    run(
        MixStage,
        MixConfig,
        {
            "streams": [
                {
                    "name": "broad",
                    "documents": [pattern],
                    "attributes": ["t", "dd", "near"],
                    "filter": {
                        "syntax": "shorthand",
                        "include": ["ft_lang_id__doc_en > 0.5"],
                        "exclude": ["gopher__keep == 0", "bff_duplicate_docs", "minhash_duplicate"],
                    },
                    "span_replacement": [{"span": "$.attributes.bff_duplicate_paragraph_spans", "min_score": 0.5, "replacement": ""}],
                    "output": {
                        "path": str(mix_out),
                        "max_size_in_bytes": 200_000,
                        "discard_fields": ["attributes"],
                        "min_text_length": 200,
                    },
                }
            ]
        },
    )
    tok = tokenizer or train_tokenizer(
        root / "tokenizer.json", [d["text"] for f in sorted(docs_dir.glob("*/*.jsonl.gz")) for _, d in read_documents(str(f))]
    )
    # A Dolmino mix: two sources, one repeated, two seeds.
    run(
        MixStage,
        MixConfig,
        {
            "tokenizer": tok,
            "target_tokens": 300_000,
            "seeds": [0, 1],
            "output": str(root / "mix2"),
            "sources": [
                {
                    "name": "python",
                    "documents": [str(docs_dir / "python-doc" / "*.jsonl.gz")],
                    "attributes": ["dd"],
                    "filter": {"exclude": ["bff_duplicate_docs"]},
                    "ratio": 0.6,
                    "max_repetition": 4,
                },
                {
                    "name": "handbook",
                    "documents": [str(docs_dir / "debian-handbook" / "*.jsonl.gz")],
                    "attributes": ["t"],
                    "filter": {"exclude": ["gopher__keep == 0"]},
                    "ratio": 0.4,
                    "max_repetition": 4,
                },
            ],
        },
    )
    run(
        TokenizeStage,
        TokenizeConfig,
        {
            "documents": [str(mix_out / "*.jsonl.gz")],
            "destination": str(root / "tokens"),
            "tokenizer": {"name_or_path": tok, "eos_token_id": 0},
            "validation": {"fraction": 0.1},
            "max_tokens": 20_000,
        },
    )
    return {"corpus": docs_dir, "mix": mix_out, "tokens": root / "tokens", "tokenizer": Path(tok)}


def train_tiny(root: Path, tokens: Path, steps: int = 6) -> Path:
    """A real tiny training run on the test's token shards, and train.evaluate's table of it."""
    from tokenizers import Tokenizer

    out = root / "runs" / "tiny"
    vocab = Tokenizer.from_file(str(root / "tokenizer.json")).get_vocab_size()
    cmd = [
        sys.executable, "-m", "train", "--config", str(ROOT / "train" / "configs" / "tiny.yaml"),
        "--set", f"train.max_steps={steps}", "--set", "log.interval=1", "--set", "eval.interval=3",
        "--set", f"data.paths=[{tokens / 'train'}]", "--set", f"data.val_paths=[{tokens / 'val'}]",
        "--set", f"checkpoint.save_dir={out}", "--set", f"model.vocab_size={vocab}", "--set", "data.seq_len=64", "--set", "data.eos_id=0",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    evaluation = subprocess.run(
        [sys.executable, "-m", "train.evaluate", "--val-paths", str(tokens / "val"), "--json", str(out / f"step{steps}")],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    (root / "runs" / "evaluation.json").write_text(evaluation.stdout)
    return out


def report(root: Path | str, dest: Path, executor=None, **extra) -> dict:
    cfg = {"processes": 1, "progress": False, "runs": [str(root)], "destination": str(dest), **extra}
    run_stage(ReportStage(load_config(ReportConfig, None, cfg)), executor=executor, stream=io.StringIO())
    return json.loads((dest / "report_data" / "summary.json").read_bytes())


def clusters_file(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        return [json.loads(line) for line in fh]


def build_chain(root: str, tokenizer: str, index: str) -> None:
    """A small chain below ``root`` (a local folder or ``s3://bucket/prefix``): made-up documents
    in two files with planted copies, tagged, deduplicated (exact and MinHash), mixed with rules
    (and ``min_text_length``), tokenized, and the mix indexed into ``index`` (a local folder: an
    index is memory-mapped where it is); the same runs wherever ``root`` is."""
    from dolma_pipe.stages.index import IndexStage
    from dolma_pipe.stages.index.config import IndexConfig
    from tests.support.documents import make_docs

    for f in range(2):
        # 30 words: removed by a rule; 50 (about 215 characters): by min_text_length; 90: kept.
        docs = [dict(d, id=f"{words}-{d['id']}") for words in (30, 50, 90) for d in make_docs(15, seed=f, words=words, source=f"src{f}")]
        docs += [dict(d, id=f"copy{f}-{i}") for i, d in enumerate(docs[-3:])]
        write_documents(f"{root}/corpus/documents/p{f}.jsonl.gz", docs)
    pattern = f"{root}/corpus/documents/*.jsonl.gz"
    run(TagStage, TagConfig, {"documents": [pattern], "experiment": "t", "taggers": ["gopher", "lengths_v1", "c4_v1"]})
    dedupe = {"name": "dd", "documents": {"attribute_name": "bff_duplicate_docs", "key": "$.text"}}
    run(DedupStage, DedupConfig, {"documents": [pattern], "dedupe": dedupe})
    run(DedupStage, DedupConfig, {"documents": [pattern], "dedupe": {"name": "near"}, "minhash": {"threshold": 0.7}})
    stream = {
        "name": "m",
        "documents": [pattern],
        "attributes": ["t", "dd", "near"],
        "filter": {"syntax": "shorthand", "exclude": ["bff_duplicate_docs", "t__gopher__word_count < 35"]},
        "output": {"path": f"{root}/mix", "min_text_length": 250},
    }
    run(MixStage, MixConfig, {"streams": [stream]})
    tokenize = {"documents": [f"{root}/mix/*.jsonl.gz"], "destination": f"{root}/tokens", "validation": {"fraction": 0.2}}
    run(TokenizeStage, TokenizeConfig, {**tokenize, "tokenizer": {"name_or_path": tokenizer, "eos_token_id": 0}})
    run(IndexStage, IndexConfig, {"documents": [f"{root}/mix/*.jsonl.gz"], "destination": index})


def write_train_run(save_dir: str, steps: int, checkpoints: tuple[int, ...], max_steps: int | None = None) -> None:
    """A training run's ``save_dir`` (local or ``s3://``) as ``train`` leaves it, without training:
    ``config.yaml``, ``metrics.jsonl`` (a row per step, an evaluation every 4 steps) and a
    complete checkpoint folder (``trainer_state.json`` and DCP's ``.metadata``) per step in
    ``checkpoints``; ``max_steps`` (default ``steps``) is what the config asked for."""
    import yaml

    from dolma_pipe import storage

    seq, batch = 64, 8
    config = {"run_name": "tiny", "train": {"max_steps": max_steps or steps, "stop_at_step": None, "global_batch_size": batch}}
    config["data"] = {"seq_len": seq}
    storage.write_bytes(f"{save_dir}/config.yaml", yaml.safe_dump(config).encode())
    rows = []
    for step in range(1, steps + 1):
        rows.append({"loss": 8.0 - step * 0.25, "grad_norm": 1.0, "step": step, "tokens": step * batch * seq, "lr": 1e-3, "step_time": 0.5,
                     "tokens_per_s": batch * seq / 0.5})  # fmt: skip
        if step % 4 == 0:
            rows.append({"step": step, "eval/loss": 8.5 - step * 0.25, "eval/ppl": 100.0})
    storage.write_bytes(f"{save_dir}/metrics.jsonl", b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    for step in checkpoints:
        state = {"step": step, "tokens_seen": step * batch * seq, "time": 1_790_000_000.0 + step, "run_name": "tiny"}
        storage.write_bytes(f"{save_dir}/step{step}/trainer_state.json", json.dumps(state).encode())
        storage.write_bytes(f"{save_dir}/step{step}/.metadata", b"\x00" * 16)
