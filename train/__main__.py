"""``python -m train --config stage1.yaml [--set key=value ...]`` (under torchrun or alone).

A mistake is one line on stderr and an exit status, never a traceback (``train.errors``): a
config mistake is ``config error: <key>: ...`` (exit status 2), found before the first step: most
when the file loads (before torch is imported), the rest when the trainer is built (an existing
``save_dir``, a checkpoint that does not fit the config); a checkpoint that cannot be loaded is
``checkpoint error: ...`` (2); a data problem is ``data error: ...`` (3); a failed pre-flight
check exits with the status its verdict gives (``train.errors``: retry, cordon, fatal). Any other
exception prints its traceback and exits ``EXIT_RETRY`` (75): recovery starts again from the
newest checkpoint.
"""

from __future__ import annotations

import argparse
import os
import traceback

from train.config import check_for_training, load_config
from train.errors import EXIT_RETRY, TrainError, exit_process, report


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
        try:
            from train.trainer import run  # imports torch; config errors above stay fast
        except ModuleNotFoundError as e:
            missing = (e.name or "train").split(".")[0]
            if missing == "train":  # a bug of ours, not a library left out
                raise
            raise TrainError(f"the trainer needs {missing}, which the 'train' extra installs: pip install 'dolma-pipe[train]'") from None

        result = run(cfg)
    except TrainError as e:
        # A config mistake is the same on every rank (said once); a data one may differ between
        # ranks (a file one node cannot see): every rank says its own.
        return report(e, _rank())
    except Exception:
        # Anything else (a peer rank lost mid-collective, an I/O error) is worth another attempt
        # from the newest checkpoint: the traceback, then the status recovery retries.
        traceback.print_exc()
        return EXIT_RETRY
    return 0 if result is not None else 1


if __name__ == "__main__":
    exit_process(main())  # by now the checkpoint is on disk and the process group destroyed
