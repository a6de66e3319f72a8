"""``python -m dolma_pipe`` runs the command line."""

import sys

from dolma_pipe.cli import main

sys.exit(main())
