"""The ``tokenize`` stage: settles the tokenizer once (:mod:`.run`), builds the run's value, and
asks the phase classes (:mod:`.encode`, :mod:`.shards`) for its phases."""

from __future__ import annotations

from dolma_pipe import tokenizer as toks
from dolma_pipe.manifest import InputFile
from dolma_pipe.stage import Phase, Stage
from dolma_pipe.workdir import WorkDir

from .config import TokenizeConfig
from .encode import Encode
from .run import TokenizeResolved, TokenizeRun, settle
from .shards import Shards


class TokenizeStage(Stage[TokenizeConfig]):
    name = "tokenize"
    description = "tokenize documents into OLMo token shards (train and validation), deterministic and resumable"
    config_model = TokenizeConfig
    depends_on_input_set = True
    # How many documents go to one encode call, and whether _work/ stays: not what is written.
    run_keys = frozenset({"batch_size", "keep_work"})

    def __init__(self, config: TokenizeConfig):
        super().__init__(config)
        # Settled here, not in resolve(): a bad tokenizer or id is refused before anything runs,
        # and the phases (asked for before resolve()) are built from it.
        tok_info, settled = settle(config)
        self.run = TokenizeRun(config, settled, tok_info.path)

    @property
    def output_root(self) -> str:
        return self.run.root

    def resolve(self, inputs: list[InputFile]) -> TokenizeResolved:
        """The tokenizer as it is and the ids and dtype the shards are written with. With a remote
        work directory the tokenizer file goes there too, for workers on machines that do not have
        it (:meth:`.run.TokenizeRun.tokenizer_file`)."""
        toks.ship(self.work, self.run.tokenizer_path, self.run.resolved.tokenizer.sha256)
        return self.run.resolved

    def phases(self) -> list[Phase]:
        encode, shards = Encode(self.run), Shards(self.run)
        return [
            Phase("encode", plan=encode.plan, run=encode.encode, outputs=encode.outputs, after=encode.split, unit="file"),
            Phase("pack", plan=shards.plan_buckets, run=shards.pack, after=shards.number),
            Phase("write", plan=shards.plan_writes, run=shards.write, outputs=shards.write_outputs, after=shards.finish, unit="bucket"),
        ]

    @property
    def work(self) -> WorkDir:
        return self.run.work

    def keeps_work_file(self, path: str) -> bool:
        # The validation candidates are small, and a rerun of a finished run (every task skipped)
        # computes the same split from them.
        return path.endswith(".cand")
