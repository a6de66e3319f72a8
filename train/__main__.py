"""``python -m train --config stage1.yaml [--set key=value ...]`` (under torchrun or alone)."""

from __future__ import annotations

import argparse
import os
import sys

from train.config import ConfigError, load_config
from train.data import DataError


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train", description="Pretrain an OLMo-2-style model on token shards.")
    ap.add_argument("--config", required=True, help="YAML config (see train/configs/)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config value, e.g. --set data.seed=2 (repeatable)")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    from train.trainer import run  # imports torch; config errors above stay fast

    try:
        result = run(cfg)
    except DataError as e:
        print(f"data error: {e}", file=sys.stderr)
        return 3
    return 0 if result is not None else 1


def _exit(code: int) -> None:
    # By now the checkpoint is on disk, the process group is destroyed and the logs are
    # written. Skipping interpreter teardown avoids a rare abort ("terminate called without
    # an active exception") when gloo's C++ worker threads race the static destructors.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit(main())
