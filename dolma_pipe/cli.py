"""The ``dolma-pipe`` command: one subcommand per stage, options from config models.

Options come from a YAML/JSON file (``-c config.yaml``) and are overridden on
the command line with dotted keys, as Dolma's CLI does (``--processes 4``,
``--max-errors 10``; ``-``/``_`` are interchangeable).  The command-line flags
of a stage are generated from its pydantic config model, so a new config field
is a new flag with its help text.  User mistakes (bad config, missing inputs,
too many bad records) end with one message and a non-zero exit, never a
traceback.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import itertools
import os
import signal
import sys
import threading
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel

from dolma_pipe import __version__, extras
from dolma_pipe.action import Action
from dolma_pipe.config import load_config
from dolma_pipe.errors import DolmaPipeError
from dolma_pipe.stage import Stage


@dataclass(frozen=True)
class Command:
    """One CLI command: its name, the ``module:Class`` of its stage or action, and its help line.

    The class carries its config model (``config_model``) and description; a
    command whose ``target`` is None is planned but not built yet.
    """

    name: str
    target: str | None
    help: str
    issue: str | None = None  # where a command not built yet is planned

    def load(self) -> type[Stage] | type[Action]:
        assert self.target is not None
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)

    def config_model(self) -> type[BaseModel] | None:
        return None if self.target is None else self.load().config_model


COMMANDS: list[Command] = [
    Command("convert", "dolma_pipe.stages.convert:ConvertStage", "validate documents and write them as Dolma jsonl/.gz/.zst/parquet"),
    Command("warc", "dolma_pipe.stages.warc:WarcStage", "extract Dolma documents from WARC files (web crawls), every record accounted for"),
    Command("pdf", "dolma_pipe.stages.pdf:PdfStage", "extract Dolma documents from PDF files (their text layer), every file accounted for"),
    Command("stats", "dolma_pipe.stages.stats:StatsStage", "count documents, characters, bytes and words per source"),
    Command("tag", "taggers.stage:TagStage", "run taggers (language, quality, PII, toxicity, rules) and write Dolma attributes"),
    Command("train-classifier", "taggers.train_classifier:TrainClassifier", "train a fastText quality classifier from labelled documents"),
    Command(
        "dedup", "dolma_pipe.stages.dedup:DedupStage", "exact, paragraph (Bloom filter) and near-duplicate (MinHash LSH) deduplication"
    ),
    Command("mix", "mixers.stage:MixStage", "mix sources into a corpus from a YAML spec (Dolma and Dolmino style)"),
    Command(
        "mix-search",
        "mixers.search.stage:MixSearchStage",
        "choose a mixture by proxy training runs: a swarm of proxies and a regression, or microanneals",
    ),
    Command(
        "tokenize",
        "dolma_pipe.stages.tokenize:TokenizeStage",
        "tokenize documents into OLMo token shards (.npy + .csv.gz), train and validation",
    ),
    Command("index", "dolma_pipe.stages.index:IndexStage", "suffix arrays over token shards or documents (counts, finding, tracing)"),
    Command("query", "dolma_pipe.stages.index:QueryAction", "count, find or trace text against an index (dolma-pipe index)"),
    Command("report", "report:ReportStage", "one offline HTML page (and its data) of what every stage did to the corpus"),
]


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """The inner type of ``X | None`` and whether ``None`` was allowed."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _leaf_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, Any, str]]:
    out = []
    for name, field in model.model_fields.items():
        ann, _ = _unwrap(field.annotation)
        key = f"{prefix}{name}"
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.extend(_leaf_fields(ann, key + "."))
        else:
            out.append((key, ann, field.description or ""))
    return out


def _parse_value(raw: str) -> Any:
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def _add_model_options(parser: argparse.ArgumentParser, model: type[BaseModel]) -> None:
    group = parser.add_argument_group("config keys (override the config file)")
    for key, ann, desc in _leaf_fields(model):
        flags = [f"--{key}"]
        if "_" in key:
            flags.append(f"--{key.replace('_', '-')}")
        kwargs: dict[str, Any] = {"dest": f"cfg:{key}", "default": argparse.SUPPRESS, "help": desc}
        origin = typing.get_origin(ann)
        if ann is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif origin in (list, tuple, set):
            kwargs["nargs"] = "+"
            (inner,) = typing.get_args(ann)[:1] or (str,)
            kwargs["type"] = str if inner is str else _parse_value
            kwargs["metavar"] = "VALUE"
        else:
            kwargs["type"] = str if ann is str else _parse_value
            kwargs["metavar"] = "VALUE"
        group.add_argument(*flags, **kwargs)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with ``argv``, only the command it names gets its config options.

    A command's options come from its stage's config model, which means importing the stage's
    module (numpy, tokenizers, the mixers ...): a run imports its own stage only, and ``--help``
    lists every command from the help lines alone.  Without ``argv`` every command is complete.
    """
    if argv is None:
        wanted = {c.name for c in COMMANDS}
    else:
        # The top-level options (-h, --version) take no value: the first other word is the command.
        wanted = set(itertools.islice((a for a in argv if not a.startswith("-")), 1))
    parser = argparse.ArgumentParser(
        prog="dolma-pipe",
        description="Turn raw text into pretraining corpora: tag, dedup, mix, tokenize (Dolma-compatible).",
    )
    parser.add_argument("--version", action="version", version=f"dolma-pipe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in COMMANDS:
        help_text = cmd.help + ("" if cmd.issue is None else " [not built yet]")
        p = sub.add_parser(cmd.name, help=help_text, description=help_text)
        if cmd.target is None:
            p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        elif cmd.name in wanted:  # another command's options are never parsed
            p.add_argument("-c", "--config", help="YAML or JSON config file")
            _add_model_options(p, cmd.load().config_model)
    lp = sub.add_parser("list", help="list the stages and the registered taggers (--tagger NAME: one tagger's options)")
    lp.add_argument("--tagger", metavar="NAME", help="show this tagger's options: types, defaults and help")
    lp.add_argument("--tagger-modules", "--tagger_modules", nargs="+", default=[], help="also load taggers from these modules")
    return parser


def _unknown_message(parser: argparse.ArgumentParser, command: str | None, unknown: list[str]) -> str:
    option = next((u for u in unknown if u.startswith("--")), unknown[0])
    known: list[str] = []
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        choices = action.choices if isinstance(action.choices, dict) else {}
        sub = choices.get(command) if command else None
        if sub is not None:
            known = [s for a in sub._actions for s in a.option_strings]
    close = difflib.get_close_matches(option.split("=")[0], known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown option or config key {option!r}{hint}"


def _dotted_dict_overrides(cmd: Command | None, ns: argparse.Namespace, unknown: list[str]) -> list[str]:
    """Take ``--field.key.sub VALUE`` for mapping-typed fields (``--tagger_options.pii.types '[email]'``)
    and for list items (``--streams.0.output.path out/``): the config's own checks name a wrong key."""
    model = None if cmd is None else cmd.config_model()
    if model is None:
        return unknown
    fields = model.model_fields
    mapping_fields = {n for n, f in fields.items() if typing.get_origin(_unwrap(f.annotation)[0]) in (dict, list)}
    rest: list[str] = []
    i = 0
    while i < len(unknown):
        tok = unknown[i]
        head = tok[2:].split("=", 1)[0].split(".", 1)[0].replace("-", "_") if tok.startswith("--") else ""
        if head in mapping_fields and "." in tok:
            key, eq, value = tok[2:].partition("=")
            if not eq:
                if i + 1 >= len(unknown):
                    rest.append(tok)
                    break
                value = unknown[i + 1]
                i += 1
            setattr(ns, f"cfg:{head}{key[len(head) :]}", _parse_value(value))
        else:
            rest.append(tok)
        i += 1
    return rest


def _overrides(ns: argparse.Namespace) -> dict[str, Any]:
    return {k[len("cfg:") :]: v for k, v in vars(ns).items() if k.startswith("cfg:")}


def _list(out: typing.TextIO, tagger_modules: list[str], tagger: str | None = None) -> int:
    from taggers import registry

    registry.load_modules(tagger_modules)
    if tagger is not None:
        print(registry.describe(tagger), file=out)
        return 0
    width = max(len(c.name) for c in COMMANDS)
    print("stages:", file=out)
    for cmd in COMMANDS:
        state = "ready" if cmd.issue is None else "not built yet"
        print(f"  {cmd.name.ljust(width)}  {state.ljust(13)}  {cmd.help}", file=out)
    found = registry.available()
    print(f"\ntaggers ({len(found)}):", file=out)
    width = max((len(n) for n in found), default=0)
    for name, cls in found.items():
        options = registry.option_names(cls)
        listed = f" [options: {', '.join(options)}]" if options else ""
        print(f"  {name.ljust(width)}  {cls.granularity.ljust(9)}  {cls.description}{listed}", file=out)
    print("\n`dolma-pipe list --tagger NAME` shows a tagger's options with types, defaults and help.", file=out)
    return 0


def run_command(cmd: Command, ns: argparse.Namespace) -> int:
    from dolma_pipe.runner import run_stage

    target = cmd.load()
    config = load_config(target.config_model, ns.config, _overrides(ns))
    if issubclass(target, Action):
        print(target(config).run())
        return 0
    summary = run_stage(target(config))
    if summary.table:
        print(summary.table)
    return 0


class Terminated(KeyboardInterrupt):
    """SIGTERM: ends a run the way Ctrl-C does (workers stopped, manifest marked failed)."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated("SIGTERM")


def _reader_gone() -> int:
    """``dolma-pipe query ... | head``: the reader has what it wanted. What is left to print goes
    nowhere (Python's flush at exit would fail on the closed pipe again)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    ns, unknown = parser.parse_known_args(argv)
    cmd = next((c for c in COMMANDS if c.name == ns.command), None)
    if cmd is not None and cmd.issue is not None:
        print(f"dolma-pipe {cmd.name}: not built yet (planned in {cmd.issue}); see `dolma-pipe list`", file=sys.stderr)
        return 2
    unknown = _dotted_dict_overrides(cmd, ns, unknown)
    if unknown:
        parser.exit(2, f"dolma-pipe {ns.command or ''}: error: {_unknown_message(parser, ns.command, unknown)}\n")
    if ns.command is None:
        parser.print_help()
        return 2
    if ns.command == "list":
        try:
            return _list(sys.stdout, ns.tagger_modules, ns.tagger)
        except BrokenPipeError:
            return _reader_gone()
        except DolmaPipeError as exc:
            print(f"dolma-pipe list: error: {exc}", file=sys.stderr)
            return 1
    assert cmd is not None
    try:
        return run_command(cmd, ns)
    except BrokenPipeError:
        return _reader_gone()
    except DolmaPipeError as exc:
        print(f"dolma-pipe {cmd.name}: error: {exc}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:
        line = extras.missing_extra(exc)  # a module of an extra (torch: 'train'), else a bug worth its traceback
        if line is None:
            raise
        print(f"dolma-pipe {cmd.name}: error: {line}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        print(f"dolma-pipe {cmd.name}: {how}; finished work is kept and a rerun resumes", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130


if __name__ == "__main__":
    sys.exit(main())
