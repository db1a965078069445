"""Hygiene rules every course notebook obeys; ``problems(nb)`` lists the rules a notebook breaks.

Each problem starts with the rule's name (a key of RULES), so tests can prove that each rule fires; ``report`` says
them with the section of CONTRIBUTING.md that explains each rule.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

import nbformat

from course_utils.machinery.layout import CHECK_CALL

# A cell may print such digits on purpose (float64 arithmetic it teaches, say): its metadata names the reason,
# e.g. {"allow_digits": "float64 rounding is the lesson; the same on every CPU"}.
ALLOW_DIGITS = "allow_digits"

RULES = {
    "schema": "the notebook is valid against the nbformat JSON schema (nbformat.validate)",
    "kernelspec": "the kernelspec is python3",
    "executed": "every code cell ran, execution counts are 1..n in order",
    "errors": "no error output unless the cell is tagged raises-exception (and a tagged cell does raise)",
    "stderr": "no stderr in stored outputs",
    "unstable": "no 0x addresses, hook ids, absolute paths or ipykernel_ paths in stored outputs",
    "opening": "the first cell is markdown with a title, objectives, estimated minutes and the Binder configuration "
               "(binder/)",
    "setup": "the first code cell calls setup_notebook()",
    "no-hooks-left": "the last code cell calls assert_no_hooks(...)",
    "control-chars": "no control character (tab, backspace, carriage return, ...) in any cell's source; only newlines",
    "digits": "no stored output depends on the CPU's rounding: no noise-level exponents (2.7e-07) and no number with "
              "more significant digits than float32 carries (1.4736897945404053), unless the cell's metadata says why "
              f"under {ALLOW_DIGITS!r}",
    "hint": "a notebook with exercises (a check(\"NN.k\", ...) call) imports check and hint from course_utils in its "
            "setup cell, so hint(\"NN.k\") works exactly when a learner is stuck",
}

# Where an author reads the rules (CONTRIBUTING.md keeps one line per rule there: tests/test_contributing.py).
GUIDE_SECTION = "CONTRIBUTING.md, section \"Notebook rules\" (#notebook-rules)"


def report(name: str, found: list[str]) -> str:
    """The failure message for a notebook that breaks rules: each problem, and where the rules are explained.

    Usage: ``report("notebooks/01_x.ipynb", problems(nb))``
    """
    rules = sorted({problem.split(":", 1)[0] for problem in found})
    return (f"{name} breaks the notebook rule(s) {', '.join(rules)}; each is explained in {GUIDE_SECTION}:\n"
            + "\n".join(f"- {problem}" for problem in found))


UNSTABLE_PATTERNS = {
    "memory address": re.compile(r"0x[0-9a-fA-F]{6,}"),
    "hook id": re.compile(r"\(\d+,\s*<(?:function|bound method|built-in)"),
    # /a/b/c not preceded by a word character, '.', ':' or '/' (so URLs like github.com/x/y do not count)
    "absolute path": re.compile(r"(?<![\w.:/~])/(?:[\w.-]+/){2,}[\w.-]*|\b[A-Z]:\\[\w.-]+"),
    "ipykernel path": re.compile(r"ipykernel_\d+"),
}

# Digits that another CPU's kernels (AVX-512, AVX2, NEON; oneDNN's own dispatch) or another torch version round
# differently: a mantissa with decimals and an exponent of -6 or below (the size of float32 rounding noise), or a
# decimal number with more significant digits than float32 holds (~7.2; 9 or more is surely noise).
NOISE_EXPONENT = re.compile(r"(?<![\w.])\d\.\d+e-(?:0?[6-9]|[1-9]\d)(?![\d])")
_DECIMAL = re.compile(r"(?<![\w.])(\d+)\.(\d+)(?![\w.])")
FLOAT32_DIGITS = 8


def too_many_digits(text: str) -> str | None:
    """The first number in ``text`` that prints float32 rounding noise, or None.

    Usage: ``too_many_digits("diff 2.7e-07")`` -> ``"2.7e-07"``
    """
    if match := NOISE_EXPONENT.search(text):
        return match.group(0)
    for match in _DECIMAL.finditer(text):
        significant = (match.group(1) + match.group(2)).lstrip("0")
        if len(significant) > FLOAT32_DIGITS:
            return match.group(0)
    return None


# Every C0/C1 control character except the newline. Tabs count too: the course indents with spaces, and a tab or
# backspace in markdown is almost always a TeX command (\top, \bar) written into a non-raw Python string.
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")

_OPENING_TITLE = re.compile(r"^#\s+\S", re.MULTILINE)
# English, or the Chinese edition's (notebooks/zh/): 学习目标 / 你将学到, "35 分钟"
_OPENING_OBJECTIVES = re.compile(r"objective|you will learn|目标|你将学[到会]", re.IGNORECASE)
_OPENING_MINUTES = re.compile(r"\b\d+\s*(?:min\b|minutes\b|分钟)", re.IGNORECASE)

_EXERCISE_CALL = re.compile(CHECK_CALL)


def _course_utils_imports(source: str) -> set[str]:
    """The names a cell imports with ``from course_utils import ...`` (parsed, so parentheses and line breaks count)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {alias.asname or alias.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "course_utils" for alias in node.names}


def _source(cell: Any) -> str:
    return _join(cell.get("source", ""))


# An image embedded in a figure's text/html (course_utils/figures.py): data, not text that could print noise or a path.
_DATA_URI = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+")


def _texts(output: dict[str, Any]) -> Iterator[str]:
    kind = output.get("output_type")
    if kind == "stream":
        yield _join(output.get("text", ""))
    elif kind in ("execute_result", "display_data"):
        data = output.get("data", {})
        for mime in ("text/plain", "text/html", "text/markdown", "text/latex"):
            if mime in data:
                yield _DATA_URI.sub("data:(image)", _join(data[mime]))
    elif kind == "error":
        yield output.get("evalue", "")
        yield "\n".join(output.get("traceback", []))


def _join(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def schema_problem(nb: dict[str, Any]) -> str | None:
    """What ``nbformat.validate`` finds wrong with the notebook (its first error, with where it is), or None.

    Usage: ``schema_problem(nbformat.read(path, as_version=4))``
    """
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as error:
        where = "/".join(str(part) for part in getattr(error, "absolute_path", ())) or "the top level"
        message = getattr(error, "message", None) or str(error).splitlines()[0]
        if len(message) > 200:
            message = message[:200] + "..."
        return f"schema: invalid at {where}: {message} (nbformat.validate; notebooks are written by `make refresh`)"
    return None


def _code_cell_problems(index: int, cell: dict[str, Any]) -> list[str]:
    """What the stored outputs of code cell ``index`` break: errors, digits, stderr, unstable."""
    found: list[str] = []
    tags = cell.get("metadata", {}).get("tags", [])
    outputs = cell.get("outputs", [])
    has_error = any(o.get("output_type") == "error" for o in outputs)
    if has_error and "raises-exception" not in tags:
        found.append(f"errors: code cell {index} has an error output but is not tagged raises-exception")
    if "raises-exception" in tags and not has_error:
        found.append(f"errors: code cell {index} is tagged raises-exception but stored no error")
    allow_digits = cell.get("metadata", {}).get(ALLOW_DIGITS)
    if allow_digits is not None and not (isinstance(allow_digits, str) and allow_digits.strip()):
        found.append(f"digits: code cell {index} has {ALLOW_DIGITS!r} in its metadata without a reason (a string)")
    for output in outputs:
        if not allow_digits and (noisy := next(filter(None, map(too_many_digits, _texts(output))), None)):
            found.append(f"digits: code cell {index} output prints {noisy!r}, digits another CPU rounds differently: "
                         f"print a bound (max difference < 1e-5) or round; or give the reason in the cell's metadata "
                         f"{ALLOW_DIGITS!r}")
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            found.append(f"stderr: code cell {index} stored stderr output (catch and print warnings instead)")
        for text in _texts(output):
            for label, pattern in UNSTABLE_PATTERNS.items():
                if match := pattern.search(text):
                    found.append(f"unstable: code cell {index} output contains a {label}: {match.group(0)!r}")
    return found


def _frame_problems(cells: list[dict[str, Any]], code_cells: list[dict[str, Any]]) -> list[str]:
    """What the notebook's frame breaks: its opening, setup cell, hint imports and last cell."""
    found: list[str] = []
    first = cells[0] if cells else {}
    first_text = _source(first)
    if first.get("cell_type") != "markdown" or not (
            _OPENING_TITLE.search(first_text) and _OPENING_OBJECTIVES.search(first_text)
            and _OPENING_MINUTES.search(first_text) and "binder/" in first_text):
        found.append("opening: the first cell must be markdown with a '# Title', objectives, estimated minutes and the "
                     "line that points to the Binder configuration (binder/)")
    if not code_cells or "setup_notebook(" not in _source(code_cells[0]):
        found.append("setup: the first code cell must call setup_notebook()")
    if code_cells and any(_EXERCISE_CALL.search(_source(c)) for c in code_cells):
        if lacking := sorted({"check", "hint"} - _course_utils_imports(_source(code_cells[0]))):
            found.append(f"hint: the notebook has exercises but its setup cell does not import {' and '.join(lacking)} "
                         "from course_utils (a learner who types hint(\"NN.k\") would get a NameError)")
    if not code_cells or "assert_no_hooks(" not in _source(code_cells[-1]):
        found.append("no-hooks-left: the last code cell must call assert_no_hooks(...) on the notebook's models")
    return found


def problems(nb: dict[str, Any]) -> list[str]:
    """Every hygiene rule the notebook breaks, one message each (``"rule: detail"``).

    Usage: ``assert problems(nbformat.read(path, as_version=4)) == []``
    """
    found = [invalid] if (invalid := schema_problem(nb)) else []
    cells = nb.get("cells", [])
    code_cells = [c for c in cells if c.get("cell_type") == "code"]
    kernel = nb.get("metadata", {}).get("kernelspec", {}).get("name")
    if kernel != "python3":
        found.append(f"kernelspec: kernelspec name is {kernel!r}, expected 'python3'")
    counts = [c.get("execution_count") for c in code_cells]
    if counts != list(range(1, len(code_cells) + 1)):
        found.append(f"executed: execution counts are {counts}, expected 1..{len(code_cells)} (run `make refresh`)")
    for index, cell in enumerate(code_cells, start=1):
        found += _code_cell_problems(index, cell)
    for number, cell in enumerate(cells, start=1):
        source = _source(cell)
        for match in _CONTROL.finditer(source):
            line = source.count("\n", 0, match.start()) + 1
            context = source[max(0, match.start() - 15) : match.end() + 15]
            found.append(f"control-chars: cell {number} ({cell.get('cell_type')}) line {line} contains "
                         f"{match.group(0)!r} in {context!r} (a TeX command like \\top or \\bar written without r''? "
                         "use spaces, not tabs)")
    return found + _frame_problems(cells, code_cells)
