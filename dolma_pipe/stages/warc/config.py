"""``dolma-pipe warc``'s config: Dolma's ``dolma warc`` keys (``documents``, ``destination``,
``source_name``, ``linearizer``, ``pre.taggers``, ``post.taggers``, ``store_html_in_metadata``,
``processes``) mean what they mean in Dolma; the keys Dolma lacks (URL filtering, caps, the
Content-Type filter, ``added``) are our own and say so in their help.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from dolma_pipe.config import ModuleRef, PathStr, RunOptions, StrictModel

from .times import parse_time

# Dolma's keys that say how its own runner goes (scratch folders, a rerun's policy, logging):
# accepted so that its configs load unchanged; ours are `force` and the run's manifest.
DOLMA_RUN_KEYS = ("work_dir", "ignore_existing", "debug", "dryrun")

HTML_TYPES = ("text/html", "application/xhtml+xml")


def _iso_time(value: str | None) -> str | None:
    if value is not None:
        try:
            parse_time(value)
        except ValueError:
            raise ValueError(f"not an ISO 8601 time: {value!r}") from None
    return value


# ``added`` of the warc and pdf stages: an ISO 8601 time (``Z`` allowed), or None (the run's)
AddedTime = Annotated[str | None, AfterValidator(_iso_time)]


class TaggerSet(StrictModel):
    """Dolma's ``pre`` / ``post`` sections: taggers run before / after extraction."""

    taggers: list[str] = Field(default_factory=list, description="registered tagger names (see `dolma-pipe list`)")
    skip: bool = Field(False, description="skip a record whose taggers here give no span at all (Dolma's skip)")


class UrlFilterOptions(StrictModel):
    """Offline URL filtering (not in Dolma): a record whose URL is blocked is skipped and counted."""

    blocklists: list[PathStr] = Field(
        default_factory=list,
        description="files of blocked domains or URLs, one a line ('#' comments); a domain blocks its subdomains",
    )
    banned_words: list[str] = Field(default_factory=list, description="a host holding one of these words (lower case) is blocked")
    banned_words_in: Literal["host", "registered_domain"] = Field(
        default="host", description="where banned_words are looked for: the whole host, or its registered domain alone (example.co.uk)"
    )
    public_suffix_list: PathStr | None = Field(
        default=None, description="publicsuffix.org's list file for registered domains (default: the snapshot the tld package ships)"
    )
    private_suffixes: bool = Field(
        default=False, description="also the list's private section (github.io, blogspot.com: their subdomains are registered domains)"
    )


class WarcConfig(RunOptions):
    documents: list[PathStr] = Field(..., min_length=1, description="WARC files or globs (.warc, .warc.gz; local or s3://)")
    destination: PathStr = Field(..., description="output root: <destination>/documents/... and <destination>/attributes/<tagger>/...")
    source_name: str = Field(..., min_length=1, description="the documents' source field")
    linearizer: Literal["resiliparse", "trafilatura", "rs_trafilatura", "combined", "resiliparse_refined"] = Field(
        "resiliparse",
        description=(
            "HTML to text extractor: Dolma's two, rs_trafilatura (Rust), combined (resiliparse, hard pages to rs_trafilatura),"
            " or resiliparse_refined (resiliparse's lines kept or dropped by a model)"
        ),
    )
    pre: TaggerSet = Field(
        default_factory=lambda: TaggerSet(taggers=[], skip=False),
        description="taggers run on the record before extraction (text empty, html in metadata)",
    )
    post: TaggerSet = Field(default_factory=lambda: TaggerSet(taggers=[], skip=False), description="taggers run on the extracted document")
    tagger_modules: list[ModuleRef] = Field(
        default_factory=list, description="extra modules (files or names) that register taggers (as the tag stage's; not in Dolma's warc)"
    )
    tagger_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="options per pre or post tagger, passed to its constructor (as the tag stage's)"
    )
    store_html_in_metadata: bool = Field(False, description="keep the decoded HTML in metadata.html")
    content_types: list[str] = Field(
        default_factory=lambda: list(HTML_TYPES), min_length=1, description="payload types extracted (after sniffing); others are skipped"
    )
    urls: UrlFilterOptions = Field(default_factory=UrlFilterOptions, description="offline URL filtering")
    max_record_bytes: int = Field(8 << 20, ge=1024, description="a payload larger than this is skipped as too_large")
    max_depth: int = Field(
        2000,
        ge=10,
        description="markup nested deeper than this is extracted without the main-content rules (their time is quadratic in it)",
    )
    isolate: bool = Field(
        True, description="extract in a child process per task, so that a crash or hang of the extractor costs one page, not the task"
    )
    max_seconds: float = Field(5.0, gt=0, description="an extraction running longer than this is skipped as too_slow")
    added: AddedTime = Field(
        None, description="the documents' added time (ISO 8601); default: when this destination's first run started (kept by reruns)"
    )

    @model_validator(mode="before")
    @classmethod
    def _dolma_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key in DOLMA_RUN_KEYS:
            data.pop(key, None)
        destination = data.get("destination")
        # Dolma's destination is a list (one per documents pattern); one root is what a run writes.
        if isinstance(destination, list):
            if len(destination) != 1:
                raise ValueError("destination: give one output root (Dolma's list form is accepted with one entry)")
            data["destination"] = destination[0]
        return data

    @field_validator("content_types")
    @classmethod
    def _lower(cls, v: list[str]) -> list[str]:
        return [t.strip().lower() for t in v]
