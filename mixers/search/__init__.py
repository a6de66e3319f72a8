"""``dolma-pipe mix-search``: choosing a mixture by proxy training runs on the bundled trainer.

Two methods, both deterministic by seed and resumable run by run (:mod:`.stage`):

- **swarm** (OLMo 3's topic ratios, RegMix): K mixtures sampled around a prior, each trained as a
  small proxy, evaluated per domain; a regression from mixture weights to each domain's loss, and
  the mixture it predicts best under the sources' repetition caps;
- **microanneal** (OLMo 2's Dolmino choices): for each candidate, a short anneal from a checkpoint on
  baseline + candidate, compared per domain with the baseline's own anneal.

The parts: :mod:`.config` (the spec, and what a run resolves), :mod:`.tokenizers` (the shards
checked against the proxy when the config loads), :mod:`.run` (what every phase reads, fixed when
the config loads), :mod:`.phases` (pools, runs, confirm), :mod:`.pools` (each source's documents
as token counts, and a proxy's data drawn from them), :mod:`.mixtures` (the swarm's and the
microanneal's mixtures, sampled and checked), :mod:`.proxy` (one proxy run through the trainer's
command line), :mod:`.regression` (fit, cross-validation and the search for the best mixture),
:mod:`.target` (the mix a proposal is for: its target, caps and counted tokens), :mod:`.swarm` (the
fit, the proposal written, the confirmation), :mod:`.microanneal` and :mod:`.noise` (a
microanneal's table, and its best against the noise between seeds), :mod:`.tables` (what a search
prints).
"""
