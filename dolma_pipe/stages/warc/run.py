"""What a warc run fixes once (its ``added`` time) and the frozen value its phase reads."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from dolma_pipe import storage
from dolma_pipe.manifest import ManifestError, read_manifest
from dolma_pipe.stage import Resolved

from .config import WarcConfig
from .times import dolma_time, parse_time
from .urls import bundled_psl

_WARC_SUFFIX = re.compile(r"\.(w?arc)(\.gz)?$", re.IGNORECASE)


class WarcResolved(Resolved):
    """``added``: the config's, else the time the destination's first run started (read back from
    its manifest by every rerun), in Dolma's form; ``blocklists``: each URL list's sha256 (a
    changed list redoes the files); ``public_suffix_list``: the sha256 of the list that gives each
    document's ``registered_domain`` (an edited one, or another ``tld`` release's, redoes them)."""

    added: str
    blocklists: dict[str, str] = {}
    public_suffix_list: str = ""


def blocklist_digests(config: WarcConfig) -> dict[str, str]:
    return {path: hashlib.sha256(storage.read_bytes(path)).hexdigest() for path in config.urls.blocklists}


def public_suffix_digest(config: WarcConfig) -> str:
    return hashlib.sha256(storage.read_bytes(config.urls.public_suffix_list or bundled_psl())).hexdigest()


def resolve_added(added: str | None, root: str, stage: str) -> str:
    """A run's ``added`` time, in Dolma's form: the config's (``added``), else the one the
    destination's first run of ``stage`` recorded in its manifest, else now (a first run)."""
    if added is not None:
        return dolma_time(parse_time(added))
    try:
        previous = read_manifest(root)
    except (ManifestError, storage.StorageError):
        previous = None
    if previous is not None and previous.stage == stage and isinstance(previous.resolved.get("added"), str):
        return previous.resolved["added"]
    return dolma_time(datetime.now(timezone.utc))


def documents_name(rel: str) -> str:
    """``crawl/a.warc.gz`` (or ``.arc.gz``) -> ``crawl/a.jsonl.gz``."""
    return _WARC_SUFFIX.sub("", rel) + ".jsonl.gz"


@dataclass(frozen=True)
class WarcRun:
    """What the phase reads: the config, the resolved values, where files go."""

    config: WarcConfig
    resolved: WarcResolved

    @property
    def root(self) -> str:
        return self.config.destination

    def documents_path(self, rel: str) -> str:
        return storage.join(self.root, "documents", documents_name(rel))

    def attributes_path(self, tagger: str, rel: str) -> str:
        return storage.join(self.root, "attributes", tagger, documents_name(rel))

    def outputs(self, rel: str) -> list[str]:
        taggers = self.config.pre.taggers + self.config.post.taggers
        return [self.documents_path(rel), *(self.attributes_path(t, rel) for t in taggers)]
