"""``dolma-pipe dedup``: exact, paragraph and near-duplicate deduplication, and decontamination.

Runs Dolma's dedupe configs unchanged (``documents``, ``dedupe``, ``bloom_filter``, ...) and
writes Dolma's attributes under ``attributes/<dedupe.name>/``, with one global order deciding
which copy survives in every pass. Modules, one job each:

* :mod:`.config`: the config (Dolma's schema plus ``minhash``, ``decontamination``, ...);
* :mod:`.stage`: the phases a config needs, and the summary;
* :mod:`.scan`: phase ``scan``, every document's keys (Rust) into work files;
* :mod:`.exact`: exact mode's first occurrences per hash range (documents, paragraphs);
* :mod:`.bloommode`: Bloom mode (Dolma's ``bloom_filter``), deterministic, and filter files;
* :mod:`.minhash`: MinHash bands, verification and clusters;
* :mod:`.decontam`: the evaluation side of decontamination;
* :mod:`.attributes`: the attribute files;
* :mod:`.workfiles`: the intermediate files' paths and formats.
"""

from .config import DedupConfig
from .stage import DedupStage

__all__ = ["DedupConfig", "DedupStage"]
