"""dolma-pipe: tag, deduplicate, mix and tokenize text into pretraining corpora.

This package owns the core shared by every stage: document and attribute I/O,
path mapping, executors, resumability, error quarantine, manifests, config
loading and the command line.
"""

import os as _os

# Stages parallelise by processes and never call BLAS, but numpy's bundled OpenBLAS starts one
# spinning thread per core in every process that imports numpy (the mixer, tokenize, MinHash,
# fastText): ~0.15 CPU-s of busy-waiting per process, a third of a small mix's CPU time. A user
# who sets the variable keeps their value. Set before anything can import numpy.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
