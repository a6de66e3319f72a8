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
import sys
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import yaml
from pydantic import BaseModel

from dolma_pipe import __version__
from dolma_pipe.config import ConfigError, load_config


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    config: Callable[[], type[BaseModel]] | None = None
    stage: Callable[[], type] | None = None
    # For commands that are not file-by-file stages: returns a function config -> printable report.
    action: Callable[[], Callable[[Any], str]] | None = None
    issue: str | None = None  # set for stages not built yet


def _convert_config():
    from dolma_pipe.stages.convert import ConvertConfig

    return ConvertConfig


def _convert_stage():
    from dolma_pipe.stages.convert import ConvertStage

    return ConvertStage


def _stats_config():
    from dolma_pipe.stages.stats import StatsConfig

    return StatsConfig


def _stats_stage():
    from dolma_pipe.stages.stats import StatsStage

    return StatsStage


def _tag_config():
    from taggers.stage import TagConfig

    return TagConfig


def _tag_stage():
    from taggers.stage import TagStage

    return TagStage


def _train_classifier_config():
    from taggers.train_classifier import TrainClassifierConfig

    return TrainClassifierConfig


def _train_classifier_action():
    from taggers.train_classifier import run

    def action(config: Any) -> str:
        report = run(config)
        held = report.get("heldout", report)
        keys = ("precision", "recall", "f1", "accuracy", "auc")
        figures = ", ".join(f"{k} {held[k]:.3f}" for k in keys if isinstance(held.get(k), (int, float)))
        return f"dolma-pipe train-classifier: wrote {config.output} (held-out {figures}); report in {config.output}.json"

    return action


COMMANDS: list[Command] = [
    Command("convert", "validate documents and write them as Dolma jsonl/.gz/.zst/parquet", _convert_config, _convert_stage),
    Command("stats", "count documents, characters, bytes and words per source", _stats_config, _stats_stage),
    Command("tag", "run taggers (language, quality, PII, toxicity, rules) and write Dolma attributes", _tag_config, _tag_stage),
    Command("train-classifier", "train a fastText quality classifier from labelled documents", _train_classifier_config, action=_train_classifier_action),
    Command("dedup", "exact, paragraph (Bloom filter) and near-duplicate (MinHash LSH) deduplication", issue="the dedup issue"),
    Command("mix", "mix sources into a corpus from a YAML spec (Dolma and Dolmino style)", issue="the mixer issue"),
    Command("tokenize", "tokenize a mix into memmap token shards", issue="the tokenizer issue"),
    Command("report", "summarise a run's manifests and attributes", issue="a later issue"),
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dolma-pipe",
        description="Turn raw text into pretraining corpora: tag, dedup, mix, tokenize (Dolma-compatible).",
    )
    parser.add_argument("--version", action="version", version=f"dolma-pipe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in COMMANDS:
        help_text = cmd.help + ("" if cmd.issue is None else " [not built yet]")
        p = sub.add_parser(cmd.name, help=help_text, description=help_text)
        if cmd.config is not None:
            p.add_argument("-c", "--config", help="YAML or JSON config file")
            _add_model_options(p, cmd.config())
        else:
            p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    lp = sub.add_parser("list", help="list the stages and the registered taggers")
    lp.add_argument("--tagger-modules", "--tagger_modules", nargs="+", default=[], help="also load taggers from these modules")
    return parser


def _unknown_message(parser: argparse.ArgumentParser, command: str | None, unknown: list[str]) -> str:
    option = next((u for u in unknown if u.startswith("--")), unknown[0])
    known: list[str] = []
    for action in parser._subparsers._group_actions if parser._subparsers else []:
        sub = action.choices.get(command) if command else None
        if sub is not None:
            known = [s for a in sub._actions for s in a.option_strings]
    close = difflib.get_close_matches(option.split("=")[0], known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown option or config key {option!r}{hint}"


def _dotted_dict_overrides(cmd: Command | None, ns: argparse.Namespace, unknown: list[str]) -> list[str]:
    """Take ``--field.key.sub VALUE`` for mapping-typed fields (e.g. ``--tagger_options.pii.types '[email]'``)."""
    if cmd is None or cmd.config is None:
        return unknown
    fields = cmd.config().model_fields
    mapping_fields = {n for n, f in fields.items() if typing.get_origin(_unwrap(f.annotation)[0]) is dict}
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
            setattr(ns, f"cfg:{head}{key[len(head):]}", _parse_value(value))
        else:
            rest.append(tok)
        i += 1
    return rest


def _overrides(ns: argparse.Namespace) -> dict[str, Any]:
    return {k[len("cfg:") :]: v for k, v in vars(ns).items() if k.startswith("cfg:")}


def _list(out: typing.TextIO, tagger_modules: list[str]) -> int:
    from taggers import registry

    width = max(len(c.name) for c in COMMANDS)
    print("stages:", file=out)
    for cmd in COMMANDS:
        state = "ready" if cmd.issue is None else "not built yet"
        print(f"  {cmd.name.ljust(width)}  {state.ljust(13)}  {cmd.help}", file=out)
    registry.load_modules(tagger_modules)
    found = registry.available()
    print(f"\ntaggers ({len(found)}):", file=out)
    width = max((len(n) for n in found), default=0)
    for name, cls in found.items():
        print(f"  {name.ljust(width)}  {cls.granularity.ljust(9)}  {cls.description}", file=out)
    return 0


def run_command(cmd: Command, ns: argparse.Namespace) -> int:
    from dolma_pipe.runner import run_stage

    model = cmd.config()
    config = load_config(model, ns.config, _overrides(ns))
    if cmd.action is not None:
        print(cmd.action()(config))
        return 0
    stage = cmd.stage()(config)
    summary = run_stage(stage)
    table = summary.extra.get("table")
    if table:
        print(table)
    return 0


def user_errors() -> tuple[type[BaseException], ...]:
    from dolma_pipe.attributes import AttributeMismatchError
    from dolma_pipe.documents import DocumentError
    from dolma_pipe.paths import PathError
    from dolma_pipe.runner import RunFailed
    from dolma_pipe.storage import StorageError
    from taggers.base import TaggerError

    return (ConfigError, PathError, RunFailed, DocumentError, StorageError, AttributeMismatchError, TaggerError)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
            return _list(sys.stdout, ns.tagger_modules)
        except user_errors() as exc:
            print(f"dolma-pipe list: error: {exc}", file=sys.stderr)
            return 1
    assert cmd is not None
    try:
        return run_command(cmd, ns)
    except user_errors() as exc:
        print(f"dolma-pipe {cmd.name}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"dolma-pipe {cmd.name}: interrupted; finished files are kept and a rerun resumes", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
