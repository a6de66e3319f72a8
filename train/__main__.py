"""``python -m train --config stage1.yaml [--set key=value ...]`` (under torchrun or alone).

A config mistake is one line on stderr, ``config error: <key>: ...`` (exit status 2), found
before the first step: most when the file loads (before torch is imported), the rest when the
trainer is built (an existing ``save_dir``, a checkpoint that does not fit the config). A
data problem is ``data error: ...`` (exit status 3). Neither prints a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from train.config import ConfigError, check_for_training, load_config
from train.data import DataError


def _rank() -> int:
    return int(os.environ.get("RANK", "0") or 0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train", description="Pretrain an OLMo-2-style model on token shards.")
    ap.add_argument("--config", required=True, help="YAML config (see train/configs/)")
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set data.seed=2 (repeatable)",
    )
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config, args.overrides)
        check_for_training(cfg, int(os.environ.get("WORLD_SIZE", "1") or 1))
        from train.trainer import run  # imports torch; config errors above stay fast

        result = run(cfg)
    except ConfigError as e:
        # the same on every rank (it comes from the config): said once
        if _rank() == 0:
            print(f"config error: {e}", file=sys.stderr)
        return 2
    except DataError as e:
        # may differ between ranks (a file one node cannot see): every rank says its own
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
