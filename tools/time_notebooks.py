"""Measure how long each course notebook takes to execute top to bottom (for the instructor guide's agendas).

Usage: ``python -m tools.time_notebooks`` (or ``make timings``); prints one line per notebook and the total, stores
the whole seconds in ``tools/notebook_timings.json`` and regenerates the guide's tables from them
(``tools.instructor_guide``). ``--no-write`` only prints.

A cell that raises stops the run with :class:`NotebookFailed` (naming the notebook, the cell and the error)
instead of reporting the short time of a notebook that broke early; cells tagged ``raises-exception`` may raise,
as in nbval and ``make refresh``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tools import instructor_guide
from tools.build_editions import course_notebooks, read_opening
from tools.notebook_runner import NotebookFailed, run_notebook

__all__ = ["NotebookFailed", "time_notebook"]


def time_notebook(path: Path, *, timeout: float = 600) -> float:
    """Seconds to run ``path`` top to bottom in a fresh kernel of this Python (kernel start included).

    Usage: ``seconds = time_notebook(Path("notebooks/01_tensor_hooks.ipynb"))``. Raises :class:`NotebookFailed`
    naming the notebook, the cell (index in the notebook, markdown cells counted, 0-based) and the error when a cell
    not tagged ``raises-exception`` raises: a notebook that stopped early has no meaningful time.
    """
    run = run_notebook(path, cell_timeout=timeout)
    if run.problem is not None:
        raise NotebookFailed(f"{run.problem}. Fix the notebook (or tag a cell that is meant to raise with "
                             "raises-exception) before timing it.")
    return run.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave the timings file and guide alone")
    args = parser.parse_args()
    total = 0.0
    measured: dict[str, int] = {}
    print(f"{'notebook':32} {'run (s)':>8} {'estimated (min)':>16}")
    for path in course_notebooks():
        try:
            seconds = time_notebook(path)
        except NotebookFailed as failure:
            raise SystemExit(f"make timings stopped, nothing written: {failure}") from failure
        total += seconds
        measured[path.stem] = max(1, round(seconds))
        print(f"{path.name:32} {seconds:8.1f} {read_opening(path).minutes:16d}", flush=True)
    print(f"{'total':32} {total:8.1f}")
    if not args.no_write:
        timings = instructor_guide.TIMINGS
        record = json.loads(timings.read_text(encoding="utf-8")) if timings.exists() else {}
        record.setdefault("measured",
                          "make timings: each notebook top to bottom in a fresh kernel, kernel start included")
        record["seconds"] = measured
        instructor_guide.TIMINGS.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        guide = instructor_guide.GUIDE
        guide.write_text(instructor_guide.updated_guide(guide.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"wrote {instructor_guide.TIMINGS.name} and regenerated the tables of {guide.name}")


if __name__ == "__main__":
    main()
