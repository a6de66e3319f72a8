"""``python -m train.launch --config CFG [--nproc-per-node N] ...``: see ``train.launch.launcher``."""

import sys

from train.launch.launcher import main

if __name__ == "__main__":
    sys.exit(main())
