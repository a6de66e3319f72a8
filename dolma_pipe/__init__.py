"""dolma-pipe: tag, deduplicate, mix and tokenize text into pretraining corpora.

This package owns the core shared by every stage: document and attribute I/O,
path mapping, executors, resumability, error quarantine, manifests, config
loading and the command line.
"""

__version__ = "0.1.0"
