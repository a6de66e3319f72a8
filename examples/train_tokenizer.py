"""Train a small byte-level BPE tokenizer on documents, for the proxies of ``dolma-pipe mix-search``.

    python examples/train_tokenizer.py OUT.json 'demo-output/corpus/documents/*/*' [--vocab 4096]

Proxy runs are tiny models; with a 50,280-entry vocabulary most of their time would go to the output
layer. A 4,096-entry BPE trained on the corpus itself keeps a proxy to seconds on a CPU; the
proposal it leads to is a mixture of sources, which does not depend on the tokenizer that chose it.
``<|endoftext|>`` is id 0 (the EOS the token shards end every document with).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from dolma_pipe.documents import read_documents


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("output", help="the tokenizer.json to write")
    ap.add_argument("documents", nargs="+", help="document files or globs")
    ap.add_argument("--vocab", type=int, default=4096)
    args = ap.parse_args()
    files = sorted({f for pattern in args.documents for f in glob.glob(pattern)})
    if not files:
        print(f"no document files match {args.documents}", file=sys.stderr)
        return 1
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator((doc["text"] for f in files for _, doc in read_documents(f)), trainer)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    tok.save(args.output)
    print(f"{args.output}: {tok.get_vocab_size():,} entries from {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
