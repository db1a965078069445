"""Make tests/ importable (notebook_hygiene) and the repository root (tests.exercise_cases)."""

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
for path in (TESTS.parent, TESTS):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
