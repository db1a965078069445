"""The workshop editions. The learner edition reveals no solution, keeps everything else of the teaching notebook, and
runs to the end with only its stubs failing; every slide deck is produced, non-empty, titled, and loads its scripts
from local files. (The readable pages are the website's: tests/test_website.py.)"""

from __future__ import annotations

import ast
import io
import itertools
import re
import textwrap
import tokenize
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from learner_run import learner_run_problems

from course_utils.machinery.layout import SETTINGS
from course_utils.machinery.learner_edition import learner_notebook, solution_blocks, stub_source
from tools import build_editions
from tools.notebook_runner import run_notebook

ROOT = Path(__file__).resolve().parent.parent

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("tools/nbconvert_templates/*", "vendor/*")

NOTEBOOKS = build_editions.course_notebooks()


def skeletons(teaching: str, stubbed: str) -> tuple[list[str], list[str]]:
    """The teaching cell's lines with each solution block as two lines ``STUB``, and the stubbed cell's lines with its
    stubs' comment and raise lines as ``STUB``: equal when everything but the blocks stayed, in place."""
    lines, want, position = teaching.splitlines(), [], 0
    for block in solution_blocks(teaching):
        want += [*lines[position:block.start], "STUB", "STUB"]
        position = block.end + 1
    have = ["STUB" if line.lstrip().startswith(("# YOUR CODE HERE", "raise NotImplementedError(")) else line
            for line in stubbed.splitlines()]
    return want + lines[position:], have


def test_stub_keeps_the_def_line_docstring_and_check() -> None:
    source = (
        'def clamp_hook(grad):\n    """Clamp."""\n    ### BEGIN SOLUTION\n    return grad.clamp(-1, 1)\n'
        '    ### END SOLUTION\n\ncheck("01.2", clamp_hook)\n'
    )
    stub = stub_source(source)
    assert stub.splitlines()[:2] == ["def clamp_hook(grad):", '    """Clamp."""']
    assert stub.splitlines()[2].startswith("    # YOUR CODE HERE")
    assert stub.splitlines()[3] == '    raise NotImplementedError("Exercise 01.2: your code goes here")'
    assert "clamp(-1, 1)" not in stub and stub.rstrip().endswith('check("01.2", clamp_hook)')
    assert skeletons(source, stub)[0] == skeletons(source, stub)[1]
    chosen = stub_source('### BEGIN SOLUTION\nanswer = "b"\n### END SOLUTION\ncheck("05.3", answer)\n')
    assert "# YOUR CODE HERE (define `answer`), then delete the raise line below" in chosen and '"b"' not in chosen
    # a prediction stub raises at the cell's top level (check() is never reached): its message says what to do
    with pytest.raises(NotImplementedError, match=r"Exercise 05\.3: write your prediction here -- define `answer`"):
        exec(chosen, {"check": lambda *args: None})


def _stubs_without_docstring(learner: nbformat.NotebookNode) -> list[str]:
    """The stubs of a learner edition whose def or class has no docstring, as ``"cell ID: NAME"``: the outermost def
    or class around each stub's ``raise NotImplementedError`` (a prediction's stub, at the cell's top level, has none
    and says what to define)."""
    missing = []
    for cell in learner.cells:
        if "learner-stub" not in cell.metadata.get("tags", []):
            continue
        for node in ast.parse(cell.source).body:
            stubbed = any(isinstance(inner, ast.Raise) and isinstance(inner.exc, ast.Call)
                          and getattr(inner.exc.func, "id", None) == "NotImplementedError" for inner in ast.walk(node))
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stubbed
                    and not (ast.get_docstring(node) or "").strip()):
                missing.append(f"cell {cell.get('id')}: {node.name}")
    return missing


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_stub_keeps_a_docstring_in_every_language(path: Path) -> None:
    """Notebook 00 promises that an exercise cell gives the def line and the docstring: in the learner edition of
    each language, every stub's def or class has one (written in the teaching cell above ### BEGIN SOLUTION)."""
    for edition in (path, *(path.parent / lang / path.name for lang in SETTINGS.languages[1:])):
        missing = _stubs_without_docstring(learner_notebook(nbformat.read(edition, as_version=4)))
        assert not missing, (f"{edition.relative_to(ROOT)}: these stubs have no docstring; give each a docstring "
                             "above ### BEGIN SOLUTION that says what it takes and returns: " + ", ".join(missing))


def test_the_docstring_rule_finds_a_stub_without_one() -> None:
    teaching = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        'def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n\ncheck("01.1", f)\n', id="c1")])
    assert _stubs_without_docstring(learner_notebook(teaching)) == ["cell c1: f"]
    teaching.cells[0].source = teaching.cells[0].source.replace("(x):\n", '(x):\n    """x, unchanged."""\n')
    prediction = '### BEGIN SOLUTION\nanswer = 2\n### END SOLUTION\ncheck("00.2", answer)\n'
    teaching.cells.append(nbformat.v4.new_code_cell(prediction, id="c2"))
    assert _stubs_without_docstring(learner_notebook(teaching)) == []


@pytest.mark.parametrize(("source", "message"), [
    ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
    ("x = 1\n### END SOLUTION\n", "without a"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "inside another"),
    ("## BEGIN SOLUTION\nx = 1\n## END SOLUTION\n", "exactly as"),
])
def test_broken_markers_are_reported_with_their_line(source: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        solution_blocks(source)


def _material(body: list[str]) -> tuple[list[str], list[str], list[float]]:
    """A solution block's lines (>= 20 characters), string literals (>= 4 characters) and numbers (not 0..3)."""
    lines = [line.strip() for line in body if len(line.strip()) >= 20 and not line.strip().startswith("#")]
    strings: list[str] = []
    numbers: list[float] = []
    code = textwrap.dedent("\n".join(body)) + "\n"
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.STRING:
            try:
                value = ast.literal_eval(token.string)
            except (ValueError, SyntaxError):
                continue  # an f-string: its parts are covered by the line rule
            if isinstance(value, str) and len(value.strip()) >= 4:
                strings.append(value.strip())
        elif token.type == tokenize.NUMBER:
            digits = token.string.replace("_", "")
            value = complex(digits).real if digits.endswith(("j", "J")) else float(digits)
            if value not in (0, 1, 2, 3):
                numbers.append(value)
    return lines, strings, numbers


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE]-?\d+)?(?![\w])")


def _numbers_in(text: str) -> set[float]:
    return {float(match) for match in _NUMBER.findall(text)}


_GENERATED = re.compile(r"<!-- cloud: .*?<!-- /cloud -->", re.DOTALL)  # tools/cloud_badges.py's links: no task


def _task_cells(cells: list, index: int) -> set[int]:
    """The markdown cells that pose the exercise checked in cell ``index`` (those since the last code cell)."""
    return set(itertools.takewhile(lambda position: cells[position].cell_type != "code", range(index - 1, -1, -1)))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_learner_edition_stubs_each_solution_keeps_the_rest_and_reveals_nothing(path: Path) -> None:
    """Each solution cell (tagged ``solution``, with nbgrader's metadata and a grade_id of its own) is stubbed in place
    and tagged so that Run All goes on past it; nothing else changes. Nothing of a solution block -- a line of >= 20
    characters, a string of >= 4, a number other than 0..3 -- is anywhere in the learner edition (shorter lines such
    as `loss.backward()` are too generic to give anything away). What the exercise's own task gives (code to fix,
    options to choose from, data) and what stays visible in its own cell (the def line) is the question, not the
    answer, and is not counted."""
    teaching = nbformat.read(path, as_version=4)
    learner = learner_notebook(teaching)
    leaks, grade_ids = [], []
    for index, (original, cell) in enumerate(zip(teaching.cells, learner.cells, strict=True)):
        blocks = solution_blocks(original.source) if original.cell_type == "code" else []
        tags = original.metadata.get("tags", [])
        assert ("solution" in tags) == bool(blocks), f"cell {index}: the solution tag and the markers disagree"
        if not blocks:
            assert cell.source == original.source, f"cell {index}: changed although it holds no solution"
            continue
        want, have = skeletons(original.source, cell.source)
        assert have == want, f"cell {index}: the stubbed cell changed beyond its solution blocks"
        assert "learner-stub" in cell.metadata["tags"] and "solution" not in cell.metadata["tags"]
        assert "raises-exception" in cell.metadata["tags"], f"cell {index}: Run All would stop at this stub"
        assert cell.outputs == [] and cell.execution_count is None
        meta = original.metadata.get("nbgrader", {})
        assert meta.get("solution") is True and meta.get("grade") is False and meta.get("schema_version") == 3, index
        grade_ids.append(meta.get("grade_id"))
        given = _task_cells(teaching.cells, index)
        others = {position: _GENERATED.sub("", c.source) for position, c in enumerate(learner.cells)
                  if position not in given | {index}}
        elsewhere = "\n".join(others.values())
        shown = _numbers_in(elsewhere) - _numbers_in(cell.source)
        lines = original.source.splitlines()

        def seen(found: Callable[[str], bool], others: dict[int, str] = others) -> str:
            return "visible in cell " + ", ".join(str(position) for position, text in others.items() if found(text))

        for block in blocks:
            solution_lines, strings, numbers = _material(block.body(lines))
            leaks += [f"cell {index}: line {line!r}, {seen(lambda t, v=line: v in t)}"
                      for line in solution_lines if line in elsewhere]
            leaks += [f"cell {index}: string {value!r}, {seen(lambda t, v=value: v.lower() in t.lower())}"
                      for value in strings if value.lower() in elsewhere.lower()]
            leaks += [f"cell {index}: number {value:g}, {seen(lambda t, v=value: v in _numbers_in(t))}"
                      for value in numbers if value in shown]
    assert len(grade_ids) == len(set(grade_ids)), f"{path.name}: nbgrader grade_ids repeat: {grade_ids}"
    assert not leaks, (f"{path.name}: rule 'no leak' (CONTRIBUTING.md, section \"Exercise rules\" (#exercise-rules)): "
                       "the learner edition shows what a solution writes (cells counted from 0; a cell's own "
                       "statement does not count): reword the other cell, or write the solution differently\n"
                       + "\n".join(leaks))


def _defined_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_check_receives_what_the_learners_code_made_and_passes(path: Path) -> None:
    """check("NN.k", name) with a name the cell defines (never a literal), and the stored (nbval-verified) output
    of every solution cell is ✓ for its exercise."""
    teaching = nbformat.read(path, as_version=4)
    for index, cell in enumerate(teaching.cells):
        if "solution" not in cell.metadata.get("tags", []):
            continue
        tree = ast.parse(cell.source)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "check"]
        assert len(calls) == 1, f"{path.name} cell {index}: exactly one check(...) per solution cell"
        argument = calls[0].args[1]
        assert isinstance(argument, ast.Name), f"{path.name} cell {index}: check() gets a literal or expression"
        assert argument.id in _defined_names(tree), f"{path.name} cell {index}: {argument.id} is not made in the cell"
        exercise_id = calls[0].args[0].value
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        assert f"✓ Exercise {exercise_id}: correct." in text and "✗" not in text, f"{path.name} cell {index}: {text!r}"


def _jupyterlab_runs_the_learner_edition(session: pytest.Session, name: str) -> bool:
    """True when this run also runs the learner notebook ``name`` in JupyterLab (tests/browser/test_jupyterlab.py,
    same verdict): a third execution of the notebook, beside nbval's, would only repeat it."""
    from chromium_path import CHROMIUM

    return CHROMIUM.exists() and any(
        item.nodeid.startswith("tests/browser/test_jupyterlab.py::test_learner_notebook_runs")
        and item.nodeid.endswith(f"[{name}]") for item in session.items)


@pytest.mark.parametrize("name", [path.name for path in NOTEBOOKS])
def test_learner_notebooks_run_to_the_end_with_only_the_stubs_failing(request: pytest.FixtureRequest,
                                                                     name: str) -> None:
    """The learner edition, run top to bottom in a kernel as a learner's workspace holds it (tests/learner_run.py
    says what must hold). When the browser suite runs too, it runs each learner notebook in JupyterLab with the same
    verdict, and this test steps aside."""
    if _jupyterlab_runs_the_learner_edition(request.session, name):
        pytest.skip("run in JupyterLab by tests/browser/test_jupyterlab.py in this same run")
    path = request.getfixturevalue("course_editions") / "learner" / name  # built once per run (tests/conftest.py)
    run = run_notebook(path, allow_errors=True)  # as in a workspace
    problems = [run.problem] if run.problem else learner_run_problems(
        run.notebook, nbformat.read(ROOT / "notebooks" / name, as_version=4))
    assert not problems, f"{name}, learner edition:\n" + "\n".join(problems)


def test_every_slide_deck_is_produced_with_its_title(course_editions: Path) -> None:
    slides = course_editions / "slides"
    index = (slides / "index.html").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        title = build_editions.read_opening(path).title
        page = slides / f"{path.stem}.slides.html"
        text = page.read_text(encoding="utf-8")
        assert len(text) > 10_000 and title.split(" · ")[-1][:20] in text, page.name
        scripts = re.findall(r'<script src="([^"]+)"', text)
        assert not [s for s in scripts if s.startswith("http")], page.name  # nothing remote: KaTeX is vendored
        assert all((page.parent / s).exists() for s in scripts), page.name
        assert f'href="{page.name}"' in index
    deck = (slides / "03_forward_hooks.slides.html").read_text(encoding="utf-8")
    assert deck.count("<section") > 5  # one slide per ## heading at least
    assert (slides / "reveal.js" / "dist" / "reveal.js").exists()
    deck = (slides / "05_guided_backprop.slides.html").read_text(encoding="utf-8")
    assert "data:image/jpeg;base64" in deck  # its saliency maps, embedded (course_utils/figures.py)


# -- vendored jQuery ----------------------------------------------------------------------------------------------
JQUERY = ROOT / "vendor" / "jquery"


def test_vendored_jquery_has_the_xss_fixes_its_licence_and_its_readme_line() -> None:
    banner = (JQUERY / "jquery.min.js").read_text(encoding="utf-8")[:200]
    match = re.match(r"/\*! jQuery v(\d+)\.(\d+)\.(\d+) ", banner)
    assert match, f"no jQuery version banner at the start of vendor/jquery/jquery.min.js: {banner[:60]!r}"
    version = tuple(int(part) for part in match.groups())
    # CVE-2019-11358 was fixed in 3.4.0, CVE-2020-11022 and CVE-2020-11023 in 3.5.0
    assert version >= (3, 5, 0), f"vendored jQuery {version} has known XSS flaws: vendor 3.5.0 or later"
    assert "Permission is hereby granted, free of charge" in (JQUERY / "LICENSE.txt").read_text(encoding="utf-8")
    readme = (ROOT / "vendor" / "README.md").read_text(encoding="utf-8")
    assert f"| {'.'.join(map(str, version))} |" in readme, "vendor/README.md must name the jQuery version shipped"


def test_the_slides_load_the_vendored_jquery_once(course_editions: Path) -> None:
    # vendor/README.md says why jQuery is needed at all: the reveal template's scroll handler. Keep that true.
    loads_jquery = re.compile(r'<script[^>]+src="[^"]*jquery[^"]*"')
    for path in NOTEBOOKS:
        deck = (course_editions / "slides" / f"{path.stem}.slides.html").read_text(encoding="utf-8")
        assert loads_jquery.findall(deck) == ['<script src="jquery/jquery.min.js"'], path.name
