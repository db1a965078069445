"""What a run of the learner edition must show, cell by cell: only the exercise stubs fail, and each of them says so.

One verdict for both places that run the learner edition: ``tests/browser/test_jupyterlab.py`` (every notebook in
JupyterLab, the way a learner runs it) and ``tests/test_editions.py`` (nbclient, when no browser suite runs).

Usage: ``problems = learner_run_problems(executed_notebook, teaching_notebook)`` -> ``[]`` when the run is right.
"""

from __future__ import annotations

from collections.abc import Sequence

import nbformat

from course_utils.machinery.checks import STILL_THE_STUB
from course_utils.machinery.learner_edition import RAISES as EXPECTED_ERROR_TAG  # nbval's tag: a cell expected to raise
from course_utils.machinery.learner_edition import STUB_TAG
from course_utils.machinery.messages import in_every_language

__all__ = ["EXPECTED_ERROR_TAG", "STUB_TAG", "cell_problem", "learner_run_problems"]

# How a failed check's line starts, in every language of the course ("✗ Exercise ", "✗ 练习 ").
_FAILED_CHECK = tuple(line.split("{id}")[0] for line in in_every_language("✗ Exercise {id}: not yet. {message}"))


def cell_problem(tags: Sequence[str], errors: Sequence[tuple[str, str]], stdout: str) -> str | None:
    """Why one executed cell of the learner edition is wrong, or None.

    ``errors`` holds (ename, evalue) of the cell's error outputs, ``stdout`` what it printed. A stub cell must raise
    ``NotImplementedError`` itself, or hand the stub to ``check()``, which then says it is still the stub; a cell
    tagged ``raises-exception`` may raise; any other cell may neither raise nor print a failed check (``✗``).
    """
    if STUB_TAG in tags:
        if (errors and errors[0][0] == "NotImplementedError") or any(
                phrase in stdout for phrase in in_every_language(STILL_THE_STUB)):  # either edition's language
            return None
        got = f"{errors[0][0]}: {errors[0][1]}" if errors else f"printed {stdout[-200:]!r}"
        return f"the exercise stub neither raised NotImplementedError nor was reported by check() ({got})"
    if EXPECTED_ERROR_TAG in tags:
        return None
    if errors:
        return f"raised {errors[0][0]}: {errors[0][1]}"
    failed = [line for line in stdout.splitlines() if line.startswith(_FAILED_CHECK)]
    return f"an exercise check failed: {failed}" if failed else None


def _printed(cell: nbformat.NotebookNode, name: str = "stdout") -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.get("name") == name)


def learner_run_problems(executed: nbformat.NotebookNode, teaching: nbformat.NotebookNode) -> list[str]:
    """Every problem of a learner-edition run (``executed``, with its outputs) of the notebook ``teaching``.

    Besides :func:`cell_problem` for each code cell: every code cell ran, there is one stub per solution cell of the
    teaching notebook, and the last cell (``assert_no_hooks`` and its message) printed what the teaching notebook's
    stored, nbval-checked last cell printed.
    """
    problems = []
    code = [(index, cell) for index, cell in enumerate(executed.cells) if cell.cell_type == "code"]
    for index, cell in code:
        if cell.source.strip() and not cell.execution_count:
            problems.append(f"cell {index} never ran")
            continue
        errors = [(o.ename, o.evalue) for o in cell.outputs if o.output_type == "error"]
        problem = cell_problem(cell.metadata.get("tags", []), errors, _printed(cell))
        if problem:
            problems.append(f"cell {index}: {problem}")
    stubs = sum(STUB_TAG in cell.metadata.get("tags", []) for _, cell in code)
    solutions = sum("solution" in cell.metadata.get("tags", []) for cell in teaching.cells)
    if stubs != solutions:
        problems.append(f"{stubs} exercise stubs for {solutions} solution cells: this is not the learner edition")
    # the last code cell with code (Shift+Enter on the last cell adds an empty one below it)
    expected = _printed([c for c in teaching.cells if c.cell_type == "code" and c.source.strip()][-1])
    ran = [cell for _, cell in code if cell.source.strip()]
    if not expected:
        problems.append("the teaching notebook's last cell prints nothing to compare with")
    elif ran and _printed(ran[-1]) != expected:
        problems.append(f"the last cell printed {_printed(ran[-1])!r}, the teaching notebook {expected!r}")
    return problems
