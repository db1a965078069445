"""The learner edition of a notebook: every ``### BEGIN SOLUTION`` … ``### END SOLUTION`` block becomes a stub.

The markers are nbgrader's, so instructors who use nbgrader can take the teaching notebooks as they are. Only the
marked lines are replaced (by ``# YOUR CODE HERE`` and a ``raise NotImplementedError``, at the block's
indentation); the ``def`` line, docstring and ``check(...)`` line around them stay. Outputs are cleared.

The stub's comment and message are in the course's language when the edition is made (``COURSE_LANG=zh``: Chinese);
the ``# YOUR CODE HERE`` marker itself is nbgrader's and stays as it is.

Usage::

    import nbformat
    from course_utils.machinery.learner_edition import learner_notebook
    learner = learner_notebook(nbformat.read("notebooks/01_tensor_hooks.ipynb", as_version=4))
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from dataclasses import dataclass

import nbformat

from course_utils.machinery.layout import CHECK_CALL
from course_utils.machinery.messages import N_, _, in_language

__all__ = ["BEGIN", "END", "STUB_MESSAGE", "SolutionBlock", "learner_notebook", "solution_blocks", "stub_source"]

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
STUB_TAG = "learner-stub"
RAISES = "raises-exception"  # nbval's tag; JupyterLab's Run All goes on past a cell that has it
_NEAR_MARKER = re.compile(r"#+\s*(BEGIN|END)\s+SOLUTION", re.IGNORECASE)  # a marker written slightly wrong
_CHECK_ID = re.compile(CHECK_CALL)
STUB_MESSAGE = N_("your code goes here")  # what check() recognises a stub's NotImplementedError by, in any language


@dataclass(frozen=True)
class SolutionBlock:
    """Lines ``start`` … ``end`` (inclusive, 0-based, the marker lines included) of a cell, and their indentation."""

    start: int
    end: int
    indent: str

    def body(self, lines: list[str]) -> list[str]:
        """The solution's own lines, markers excluded."""
        return lines[self.start + 1 : self.end]


def solution_blocks(source: str) -> list[SolutionBlock]:
    """Every marked block of a cell; unbalanced or nested markers raise ``ValueError`` saying which line."""
    blocks: list[SolutionBlock] = []
    opened: tuple[int, str] | None = None
    for number, line in enumerate(source.splitlines()):
        stripped = line.strip()
        if stripped == BEGIN:
            if opened is not None:
                raise ValueError(f"Line {number + 1}: {BEGIN} inside another solution block (line {opened[0] + 1}).")
            opened = (number, line[: len(line) - len(line.lstrip())])
        elif stripped == END:
            if opened is None:
                raise ValueError(f"Line {number + 1}: {END} without a {BEGIN} before it.")
            blocks.append(SolutionBlock(opened[0], number, opened[1]))
            opened = None
        elif _NEAR_MARKER.match(stripped):
            raise ValueError(f"Line {number + 1}: write the markers exactly as '{BEGIN}' and '{END}'.")
    if opened is not None:
        raise ValueError(f"Line {opened[0] + 1}: {BEGIN} is never closed by {END}.")
    return blocks


def _assigned_names(body: list[str]) -> tuple[list[str], bool]:
    """The top-level names a block assigns or defines (kept in the stub so the learner knows what to create), and
    whether it only assigns values (a prediction such as ``answer = 3``), defining no function or class."""
    try:
        tree = ast.parse(textwrap.dedent("\n".join(body)))
    except SyntaxError:
        return [], False
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        names += [leaf.id for target in targets for leaf in ast.walk(target) if isinstance(leaf, ast.Name)]
    values = all(isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)) for node in tree.body)
    return list(dict.fromkeys(names)), values


def stub_source(source: str) -> str:
    """The cell with each solution block replaced by ``# YOUR CODE HERE`` and a ``raise NotImplementedError``."""
    lines = source.splitlines()
    exercise = _CHECK_ID.search(source)  # the cell's check("NN.k", ...)
    label = _("Exercise {id}").format(id=f"{exercise[1]}.{exercise[2]}") if exercise else _("This exercise")
    out: list[str] = []
    position = 0
    for block in solution_blocks(source):
        out.extend(lines[position : block.start])
        # a block at the top of the cell names what the learner must create (e.g. `answer`); inside a def, the
        # def line already says it, and the solution's local names would be a hint
        names, only_values = _assigned_names(block.body(lines)) if not block.indent else ([], False)
        listed = ", ".join(f"`{n}`" for n in names)
        create = _(" (define {names})").format(names=listed) if names else ""
        out.append(f"{block.indent}# YOUR CODE HERE" + _("{define}, then delete the raise line below").format(
            define=create))
        if names and only_values:
            # a prediction: the cell itself raises (check() is not reached), so the message must say what to do
            message = _("{exercise}: write your prediction here -- define {names} in place of this raise line, then "
                        "run the cell again").format(exercise=label, names=listed)
        else:
            message = _("{exercise}: {message}").format(exercise=label, message=_(STUB_MESSAGE))
        out.append(f"{block.indent}raise NotImplementedError({json.dumps(message, ensure_ascii=False)})")
        position = block.end + 1
    out.extend(lines[position:])
    return "\n".join(out) + ("\n" if source.endswith("\n") else "")


def learner_notebook(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of a teaching notebook with every solution block stubbed and all outputs cleared.

    A stubbed cell is tagged ``learner-stub`` (no longer ``solution``) and ``raises-exception``, so that JupyterLab's
    *Run All* goes on past an exercise not done yet. Markers in a markdown cell are an error. The stubs speak the
    notebook's language (``metadata.language_edition.lang``).
    """
    learner = nbformat.from_dict(notebook)
    with in_language(learner.metadata.get("language_edition", {}).get("lang")):
        for index, cell in enumerate(learner.cells):
            if cell.cell_type != "code":
                if BEGIN in cell.source:
                    raise ValueError(f"Cell {index} is markdown but holds {BEGIN}: solutions go in code cells.")
                continue
            if solution_blocks(cell.source):
                cell.source = stub_source(cell.source)
                tags = [tag for tag in cell.metadata.get("tags", []) if tag not in ("solution", RAISES)]
                cell.metadata["tags"] = [*tags, STUB_TAG, RAISES]
            cell.outputs = []
            cell.execution_count = None
    return learner
