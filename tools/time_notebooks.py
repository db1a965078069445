"""Measure how long each course notebook takes to execute top to bottom (for the instructor guide's agendas).

Usage: ``python tools/time_notebooks.py`` (or ``make timings``); prints one line per notebook and the total.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from jupyter_client import AsyncKernelManager
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_editions import course_notebooks, read_opening  # noqa: E402
from refresh_notebooks import CURRENT_ENV, CurrentEnvKernelSpecs  # noqa: E402


def main() -> None:
    total = 0.0
    print(f"{'notebook':32} {'run (s)':>8} {'estimated (min)':>16}")
    for path in course_notebooks():
        notebook = nbformat.read(path, as_version=4)
        manager = AsyncKernelManager(kernel_name=CURRENT_ENV, kernel_spec_manager=CurrentEnvKernelSpecs())
        client = NotebookClient(notebook, km=manager, kernel_name=CURRENT_ENV, timeout=600, allow_errors=True,
                                resources={"metadata": {"path": str(path.parent)}})
        start = time.perf_counter()
        client.execute()
        seconds = time.perf_counter() - start
        total += seconds
        print(f"{path.name:32} {seconds:8.1f} {read_opening(path).minutes:16d}", flush=True)
    print(f"{'total':32} {total:8.1f}")


if __name__ == "__main__":
    main()
