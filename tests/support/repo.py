"""Where the checkout is: its root and the bundled sample corpus."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

# As given to the stages (a string, not resolved through links).
SAMPLE_DOCUMENTS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples", "sample", "documents"
)
