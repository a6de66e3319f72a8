"""``dolma-pipe dedup``: exact, paragraph and near-duplicate deduplication, and decontamination.

Runs Dolma's dedupe configs unchanged (``documents``, ``dedupe``, ``bloom_filter``, ...) and
writes Dolma's attributes under ``attributes/<dedupe.name>/``, with one global order deciding
which copy survives in every pass. Modules, one job each:

* :mod:`.config`: the config (Dolma's schema plus ``minhash``, ``decontamination``, ...);
* :mod:`.stage`: the stage, and its phase table (which phases a config needs);
* :mod:`.run`: the resolved run every phase reads, and what the phase families share;
* :mod:`.phases`, :mod:`.clustering`, :mod:`.summary`: the phase families (plan, run, outputs, step);
* :mod:`.scan`: phase ``scan``, every document's keys (Rust) into work files;
* :mod:`.exact`: exact mode's first occurrences per hash range (documents, paragraphs);
* :mod:`.bloommode`: Bloom mode (Dolma's ``bloom_filter``), deterministic, and filter files;
* :mod:`.minhash`: MinHash bands, verification and clusters;
* :mod:`.decontam`: the evaluation side of decontamination;
* :mod:`.attributes`: the attribute files;
* :mod:`.scaleout`, :mod:`.components`: clusters past one task's memory;
* :mod:`.substrings`: repeated substrings by suffix arrays;
* :mod:`.workfiles`: the intermediate files' paths and formats.
"""

from .config import DedupConfig
from .stage import DedupStage

__all__ = ["DedupConfig", "DedupStage"]
