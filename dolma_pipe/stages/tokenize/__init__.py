"""``tokenize``: documents into OLMo token shards, Dolma's ``tokens`` command made deterministic.

Every document's tokens are exactly what Dolma 1.2.1 writes for it: the text is ``strip()``-ed
(a document empty after that is skipped and counted), encoded without the tokenizer's own
special tokens, then BOS is put in front when ``tokenizer.bos_token_id`` is set and the first
token is not already BOS, and EOS is appended when the last token is not already EOS (a text
ending in ``<|endoftext|>`` keeps its one EOS unless ``encode_special_tokens`` is on).  The
sidecar rows are ``start,end,id,src,loc``: ``src`` the input file, ``loc`` its 1-based line.

Where Dolma breaks, this stage does not:

- **Order**: the order of documents is a seeded, order-independent rule: document ``d`` sorts by
  ``(blake2b_seed(id), input file, line)``.  It does not depend on which worker read what, so
  the shards are byte-identical for any process count, for local and Ray, and across reruns;
  another ``seed`` gives another order.
- **Shard size**: ``max_tokens`` counts tokens (BOS/EOS included; ``max_size``, Dolma's name,
  means the same); a shard holds at most that many.  A document longer than a shard gets a shard
  of its own (documents are never split); no shard is empty.
- **Validation split**: ``validation.fraction`` or ``validation.documents`` holds documents out by
  a seeded hash of their id (ties by file and line), written as separate shards. Its seed
  (``validation.seed``) is not the order's: corpora tokenized with other order seeds hold out the
  same documents.

Layout: ``<destination>/train/part-XXXXX.npy`` (+ ``.csv.gz``) and, with a validation split,
``<destination>/val/part-XXXXX.npy``: the ``data.paths`` and ``data.val_paths`` of ``train/``.

Modules: :mod:`.config` (the config, with Dolma's keys), :mod:`.rules` (Dolma's rules for a
document's tokens, the seeded order and hold-out keys, shard packing), :mod:`.run` (the tokenizer
settled once, the resolved values, and the run's value every phase is built from), :mod:`.plan`
(what the phases hand each other, typed), :mod:`.encode` (phase 1), :mod:`.shards` (phases 2 and
3), :mod:`.stage` (the stage: builds the run's value and asks the phase classes for the phases).

Three phases (each resumable where it stopped):

1. ``encode``, one task per input file: batches of ``batch_size`` documents through one
   ``encode_batch`` call (the GIL is released while the Rust tokenizer runs), special tokens added
   with numpy, tokens appended to ``_work/encode/<file>.tok`` in input order, and a per-document
   index (shuffle key, validation key, token offset and count, line, id) sorted by key.
   Memory: one batch plus the file's index (56 bytes a document).
2. ``pack``, one task per key-range bucket of each split: reads the bucket's index rows from every
   file, orders them, and counts the shards greedy packing gives (so shards can be numbered
   globally before any is written).
3. ``write``, one task per bucket: the same documents, shards written through ``train.shards``
   (the one owner of the format), numbered from the bucket's first index.  Afterwards shards
   left by an earlier run with other settings are removed, and the runner deletes ``_work/`` (but
   the validation candidates) unless ``keep_work``.
"""

from .config import FieldsOptions, TokenizeConfig, TokenizeError, TokenizerOptions, ValidationOptions
from .rules import add_special_tokens, hash_ids, shard_bounds
from .stage import TokenizeStage

__all__ = [
    "FieldsOptions",
    "TokenizeConfig",
    "TokenizeError",
    "TokenizeStage",
    "TokenizerOptions",
    "ValidationOptions",
    "add_special_tokens",
    "hash_ids",
    "shard_bounds",
]
