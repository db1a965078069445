"""Measure how long each course notebook takes to execute top to bottom (for the instructor guide's agendas).

Usage: ``python tools/time_notebooks.py`` (or ``make timings``); prints one line per notebook and the total, stores
the whole seconds in ``tools/notebook_timings.json`` and regenerates the guide's tables from them
(``tools/instructor_guide.py``). ``--no-write`` only prints.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import nbformat
from jupyter_client import AsyncKernelManager
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_editions import course_notebooks, read_opening  # noqa: E402
from refresh_notebooks import CURRENT_ENV, CurrentEnvKernelSpecs  # noqa: E402

import instructor_guide  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave the timings file and guide alone")
    args = parser.parse_args()
    total = 0.0
    measured: dict[str, int] = {}
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
        measured[path.stem] = max(1, round(seconds))
        print(f"{path.name:32} {seconds:8.1f} {read_opening(path).minutes:16d}", flush=True)
    print(f"{'total':32} {total:8.1f}")
    if not args.no_write:
        record = json.loads(instructor_guide.TIMINGS.read_text(encoding="utf-8")) if instructor_guide.TIMINGS.exists() else {}
        record.setdefault("measured", "make timings: each notebook top to bottom in a fresh kernel, kernel start included")
        record["seconds"] = measured
        instructor_guide.TIMINGS.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        guide = instructor_guide.GUIDE
        guide.write_text(instructor_guide.updated_guide(guide.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"wrote {instructor_guide.TIMINGS.name} and regenerated the tables of {guide.name}")


if __name__ == "__main__":
    main()
