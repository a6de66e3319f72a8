"""dolma-pipe trainer: pretrain an OLMo-2-style decoder on token shards with FSDP2.

Reads only token shards (headerless ``np.memmap`` ``.npy`` files plus ``.csv.gz``
sidecars, docs/tokenize.md); it never imports ``dolma_pipe``, ``taggers`` or
``mixers``. One module per job:

- ``config``     plain dataclass configs loaded (and validated) from YAML
- ``model``      the OLMo 2 decoder, presets, parameter and FLOP counts
- ``shards``     the token-shard format: writer and reader (numpy only)
- ``data``       fixed-length instances, the seeded global order, fingerprints
- ``schedule``   learning-rate schedules (warmup+cosine, linear decay to zero)
- ``loss``       cross entropy with z-loss, and its all-reduce across ranks
- ``optim``      AdamW parameter groups, gradient clipping
- ``dist``       process-group / device setup for torchrun, SLURM or one process; the mesh,
                 FSDP2 sharding and the start-up checks across ranks
- ``checkpoint`` torch.distributed.checkpoint save/load, async saves, retention, resume
- ``metrics``    step records and the metrics file
- ``trainer``    the training loop (``python -m train --config ...``)
- ``evaluate``   validation loss / perplexity of checkpoints
- ``soup``       weight averaging of several checkpoints (``python -m train.soup``)
- ``export_hf``  write a checkpoint as a Hugging Face Olmo2 model
- ``testing``    tiny shards, configs and a torchrun launcher for tests and the benchmark
"""
