"""``dolma-pipe index`` and ``dolma-pipe query``: one suffix array per shard of a corpus, and what
it answers.

- :mod:`.config`: what to index (token shards or documents), where, contamination counts;
- :mod:`.format`: ``index.json``, the index's record of its sources and parts (checksums);
- :mod:`.sources`: the shards an index is built from (local or S3), and where it may go;
- :mod:`.resolved`: what a run settles first (the shards' dtype and tokenizer) and records;
- :mod:`.run`: :class:`~.run.IndexRun`, the settled run every phase is built from;
- :mod:`.stage`: the build (one task per source, as phases on the runner): :mod:`.build`'s
  tasks, then :mod:`.finish` (``index.json``, stale parts, contamination counts);
- :mod:`.files`: a build task's files, written with their checksums, checked, uploaded (S3);
- :mod:`.checked`: an index's files on this machine, checked before a query reads them;
- :mod:`.query`: :class:`Index`, counts, finding documents, tracing a text (OLMoTrace's spans);
- :mod:`.texts`: the texts of a ``--trace_file``;
- :mod:`.contamination`: evaluation sets' n-grams found in the index;
- :mod:`.action`: the ``query`` command.

The suffix arrays are the Rust crate's (``rust_bloom/src/suffix/``, through :mod:`dolma_pipe.suffix`).
"""

from .action import QueryAction, QueryConfig
from .config import ContaminationConfig, IndexConfig
from .files import SuffixIndexError
from .query import Hit, Index, IndexQueryError, Span
from .stage import IndexStage

__all__ = [
    "ContaminationConfig",
    "Hit",
    "Index",
    "IndexConfig",
    "IndexQueryError",
    "IndexStage",
    "QueryAction",
    "QueryConfig",
    "Span",
    "SuffixIndexError",
]
