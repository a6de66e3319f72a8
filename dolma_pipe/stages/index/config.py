"""``dolma-pipe index``'s config: what to index (token shards or documents), where, and what to
count against it afterwards (evaluation sets' n-grams)."""

from __future__ import annotations

from pydantic import Field, model_validator

from dolma_pipe.config import PathStr, RunOptions, StrictModel

# Peak memory of a build per symbol of its text, as measured (resident set size, the text's mapped
# pages included): the text (1, 2 or 4 bytes), the array as 32-bit positions (4), and the
# library's working space: none for bytes, 2 bytes a symbol for 16-bit tokens, a 32-bit copy of a
# 32-bit text. A part is cut to fit ``memory_per_task`` by these.
MEMORY_PER_SYMBOL = {"u8": 5, "u16": 8, "u32": 12}


class ContaminationConfig(StrictModel):
    """Evaluation sets whose n-grams are looked up in the index once it is built (exact counts)."""

    evaluation: list[PathStr] = Field(..., min_length=1, description="evaluation documents (globs): each file is one set")
    ngram: int = Field(13, ge=1, le=1000, description="n-gram length: tokens (a token index) or bytes (a document index)")


class IndexConfig(RunOptions):
    shards: list[PathStr] | None = Field(
        None, description="token shards to index: folders or .npy files written by dolma-pipe tokenize (the trainer's data)"
    )
    documents: list[PathStr] | None = Field(None, description="document files to index by the UTF-8 bytes of their text (globs)")
    destination: PathStr = Field(..., description="the index folder, local or s3:// (built in local scratch and uploaded)")
    tokenizer: str | None = Field(
        None, description="token shards: the tokenizer that made them (default: the one the tokenize run recorded in its manifest)"
    )
    dtype: str | None = Field(None, description="token shards: uint16 or uint32 (default: what the tokenize run recorded)")
    eos_token_id: int | None = Field(
        None, ge=0, description="token shards: the token ending every document, where no match runs on (default: what tokenize recorded)"
    )
    memory_per_task: int = Field(
        4 << 30,
        ge=1 << 20,
        description=(
            "bytes a build task may use: a larger shard is indexed in parts (a build takes about "
            f"{MEMORY_PER_SYMBOL['u16']} bytes a 16-bit token, {MEMORY_PER_SYMBOL['u32']} a 32-bit token, "
            f"{MEMORY_PER_SYMBOL['u8']} a byte of documents)"
        ),
    )
    contamination: ContaminationConfig | None = Field(None, description="evaluation sets whose n-grams are counted in the index")

    @model_validator(mode="after")
    def _one_kind(self) -> IndexConfig:
        if (self.shards is None) == (self.documents is None):
            raise ValueError("give either 'shards' (token shards) or 'documents' (document files) to index")
        return self
