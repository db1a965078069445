"""Time ``make sync`` on a checkout where nothing changed (the budget: 5 s), against a run of every generator.

Runs ``python -m tools sync --all`` once (every step), then ``python -m tools sync`` three times; prints each wall
time, the median of the three and its ratio to the full run. It leaves the checkout as ``make sync`` would.

Usage: ``.venv/bin/python benchmarks/bench_sync.py``
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 5.0


def timed(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tools", "sync", *args], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    full = timed("--all")
    quiet = [timed() for _ in range(3)]
    median = statistics.median(quiet)
    print(f"make sync, every generator: {full:.1f} s; nothing changed: {', '.join(f'{s:.2f}' for s in quiet)} s, "
          f"median {median:.2f} s ({median / full:.0%} of the full run; budget {BUDGET:.0f} s: "
          f"{'met' if median <= BUDGET else 'MISSED'})")
    sys.exit(0 if median <= BUDGET else 1)
