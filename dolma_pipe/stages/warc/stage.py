"""The ``warc`` stage: resolves the run's ``added`` time, builds the run's value, asks for its phase."""

from __future__ import annotations

from dolma_pipe import storage
from dolma_pipe.manifest import InputFile
from dolma_pipe.stage import Phase, Stage

from .config import WarcConfig
from .errors import WarcError
from .files import WarcFiles
from .run import WarcResolved, WarcRun, blocklist_digests, documents_name, public_suffix_digest, resolve_added
from .tagging import check
from .urls import public_suffixes


class WarcStage(Stage[WarcConfig]):
    name = "warc"
    description = "extract Dolma documents from WARC files (web crawls), every record accounted for"
    config_model = WarcConfig
    output_dir = "documents"

    def __init__(self, config: WarcConfig):
        super().__init__(config)
        # A misspelled tagger or a missing blocklist fails now, before any file is read (the
        # lists themselves are read by the tasks, once per process: UT1's takes seconds)
        check(config)
        for path in config.urls.blocklists:
            if not storage.exists(path):
                raise WarcError(f"urls.blocklists: {path} cannot be read (no such file)")
        if config.urls.public_suffix_list is not None:  # a bad file or rule fails now, naming its line
            public_suffixes(config.urls.public_suffix_list, config.urls.private_suffixes)

    @property
    def output_root(self) -> str:
        return self.config.destination

    def output_name(self, rel: str) -> str:
        return documents_name(rel)

    def resolve(self, inputs: list[InputFile]) -> WarcResolved:
        return WarcResolved(
            added=resolve_added(self.config.added, self.output_root, self.name),
            blocklists=blocklist_digests(self.config),
            public_suffix_list=public_suffix_digest(self.config),
        )

    def phases(self) -> list[Phase]:
        assert isinstance(self.resolved, WarcResolved)
        return [WarcFiles(WarcRun(self.config, self.resolved)).phase()]
