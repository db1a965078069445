"""Make tests/ importable (notebook_hygiene) and keep test output quiet."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
