"""Every course notebook obeys the hygiene rules, and each rule is proven to catch a notebook that breaks it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from notebook_hygiene import GUIDE_SECTION, RULES, problems, report

_FOLDER = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(_FOLDER.glob("[0-9][0-9]_*.ipynb")) + sorted((_FOLDER / "zh").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.relative_to(_FOLDER).as_posix() for p in NOTEBOOKS])
def test_course_notebook_is_clean(path: Path) -> None:
    found = problems(nbformat.read(path, as_version=4))
    assert not found, report(path.relative_to(_FOLDER.parent).as_posix(), found)


def test_a_broken_rule_is_named_with_the_guide_section_that_explains_it() -> None:
    nb = clean_notebook()
    break_last_cell(nb)
    break_kernelspec(nb)
    message = report("notebooks/99_x.ipynb", problems(nb))
    assert message.startswith("notebooks/99_x.ipynb breaks the notebook rule(s) kernelspec, no-hooks-left;")
    assert GUIDE_SECTION in message and "#notebook-rules" in GUIDE_SECTION


def test_the_course_has_notebooks() -> None:
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_start_here.ipynb"


# -- fixture notebooks ------------------------------------------------------------------------------------
def clean_notebook() -> Any:
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nb.cells = [
        new_markdown_cell("# A lesson\n\nObjectives: learn a thing.\n\n"
                          "Estimated time: 10 min. Binder: see binder/README.md"),
        new_code_cell("from course_utils import check, hint, setup_notebook\nprint(setup_notebook())",
                      execution_count=1, outputs=[new_output("stream", name="stdout", text="torch 2.14.1\n")]),
        new_code_cell("raise ValueError('shown on purpose')", execution_count=2,
                      metadata={"tags": ["raises-exception"]},
                      outputs=[new_output("error", ename="ValueError", evalue="shown on purpose", traceback=[])]),
        new_code_cell("check('99.1', answer)\nassert_no_hooks(model)", execution_count=3),
    ]
    return nb


def setting(cell: int, key: str, value: Any) -> Callable[[Any], None]:
    """A breaker that sets ``key`` of cell ``cell`` (``source``, ``execution_count``, ...) to ``value``."""
    return lambda nb: nb.cells[cell].update({key: copy.deepcopy(value)})


def break_kernelspec(nb: Any) -> None:
    nb.metadata.kernelspec.name = "my-env"


def output_text(text: str) -> Callable[[Any], None]:
    return lambda nb: nb.cells[1].outputs.append(new_output("execute_result", data={"text/plain": text},
                                                            execution_count=1))


def break_opening_not_markdown(nb: Any) -> None:
    nb.cells[0] = new_code_cell("# A lesson", execution_count=None)


def import_without(name: str) -> Callable[[Any], None]:
    return lambda nb: setattr(nb.cells[1], "source", nb.cells[1].source.replace(f" {name},", ""))


def source_with(cell: int, text: str) -> Callable[[Any], None]:
    return lambda nb: setattr(nb.cells[cell], "source", nb.cells[cell].source + text)


# How notebook 06's equation broke: "\bar" and "\top" written into a Python string that was not raw.
BROKEN_TEX = "\n$\\sum_c \bar g'_c (W A)_c = \\sum_c (W^\top \bar g')_c A_c$"


def break_schema_missing_outputs(nb: Any) -> None:
    del nb.cells[3]["outputs"]  # a code cell must have an outputs list


def allow_digits(reason: Any) -> Callable[[Any], None]:
    def breaker(nb: Any) -> None:
        output_text("[[0.0, 1.4736897945404053]]")(nb)
        nb.cells[1].metadata["allow_digits"] = reason

    return breaker


break_last_cell = setting(3, "source", "print('done')")

BREAKERS = {
    "schema": [break_schema_missing_outputs, lambda nb: setattr(nb.cells[1].outputs[0], "output_type", "printout"),
               setting(0, "id", "not a valid id!"), setting(0, "execution_count", 1)],  # a markdown cell with a count
    "kernelspec": [break_kernelspec],
    "executed": [setting(2, "execution_count", 7), setting(2, "execution_count", None)],
    "errors": [setting(2, "metadata", {}), setting(2, "outputs", [])],  # an untagged error; a tag without one
    "stderr": [lambda nb: nb.cells[1].outputs.append(new_output("stream", name="stderr", text="UserWarning: noise\n"))],
    "unstable": [
        output_text("<function f at 0x7f3a2b1c4d60>"),
        output_text("OrderedDict([(43, <function c_hook at 0x0>)])"),
        output_text("saved to /home/alice/course/out.png"),
        output_text("UserWarning: x (Triggered internally at /__w/pytorch/build/TensorBody.h:488.)"),
        output_text("C:\\Users\\alice\\course"),
        output_text("File ipykernel_1234/567.py, line 3"),
    ],
    "opening": [break_opening_not_markdown, setting(0, "source", "# A lesson\n\nObjectives: learn a thing."),
                setting(0, "source", "# A lesson\n\nAbout 10 minutes."),
                setting(0, "source", "# A lesson\n\nObjectives: learn a thing.\n\nEstimated time: 10 min.")],
    "setup": [setting(1, "source", "import torch")],
    "no-hooks-left": [break_last_cell],
    "hint": [import_without("hint"), import_without("check"),
             setting(1, "source", "from course_utils import (\n    check,\n    setup_notebook,\n)\n"
                                  "print(setup_notebook())")],
    "control-chars": [
        source_with(0, BROKEN_TEX),
        source_with(0, "\n\tan indented markdown line"),
        source_with(1, "\nif True:\n\tprint('tab-indented')"),
        source_with(3, "\r\n"),
        source_with(0, "\x1b[31m"),
    ],
    "digits": [
        output_text("max difference 2.7e-07"),
        output_text("max difference 8.3e-7"),
        output_text("tensor([1.2346e-08])"),
        output_text("eager: [[0.0, 1.4736897945404053]]"),
        output_text("loss 6.21730375"),
        output_text("0.000123456789"),
        allow_digits(""),
        allow_digits(True),
    ],
}


def test_clean_fixture_passes() -> None:
    assert problems(clean_notebook()) == []


def test_schema_problem_says_where_the_notebook_is_invalid() -> None:
    nb = clean_notebook()
    break_schema_missing_outputs(nb)
    assert problems(nb)[0] == ("schema: invalid at cells/3: 'outputs' is a required property "
                               "(nbformat.validate; notebooks are written by `make refresh`)")


@pytest.mark.parametrize("change", [
    output_text("see github.com/pytorch/pytorch/pull/30531 and https://docs.pytorch.org/a/b/c; 1/2/3"),  # not paths
    output_text("max difference < 1e-6; tolerance 1e-05; 2.5e-03; loss 0.073; 1,797 digits; torch 2.14.1; "
                "127.0.0.1; 12345678 bytes; 3.1415927; id 0.12345678"),  # bounds, rounded values, versions
    allow_digits("float64 rounding is the lesson: the same on every CPU"),  # digits allowed with a reason
], ids=["urls-and-ratios", "bounds-and-versions", "digits-with-a-reason"])
def test_what_looks_like_a_problem_but_is_not(change: Callable[[Any], None]) -> None:
    nb = clean_notebook()
    change(nb)
    assert problems(nb) == []


def test_tex_written_correctly_is_not_a_control_character() -> None:
    nb = clean_notebook()
    nb.cells[0].source += "\n$\\sum_c \\bar g'_c (W A)_c = \\sum_c (W^\\top \\bar g')_c A_c$"
    assert problems(nb) == []
    source_with(0, BROKEN_TEX)(nb)
    found = [p for p in problems(nb) if p.startswith("control-chars:")]
    assert len(found) == 3 and all("cell 1 (markdown) line 7" in p for p in found), found  # two \b, one \t


def test_a_notebook_without_exercises_needs_no_hint_import() -> None:
    nb = clean_notebook()
    nb.cells[3].source = "assert_no_hooks(model)"
    nb.cells[1].source = "from course_utils import setup_notebook\nprint(setup_notebook())"
    assert problems(nb) == []
    nb.cells[1].source = ("from course_utils import (\n    check,\n    hint,\n    setup_notebook,\n)\n"
                          "print(setup_notebook())")
    nb.cells[3].source = "check('99.1', answer)\nassert_no_hooks(model)"
    assert problems(nb) == []


def test_every_rule_has_breaking_fixtures() -> None:
    assert set(BREAKERS) == set(RULES)


@pytest.mark.parametrize(
    ("rule", "breaker"),
    [(rule, breaker) for rule, breakers in BREAKERS.items() for breaker in breakers],
    ids=[f"{rule}-{i}" for rule, breakers in BREAKERS.items() for i, _ in enumerate(breakers)],
)
def test_each_rule_catches_a_notebook_that_breaks_it(rule: str, breaker: Callable[[Any], None]) -> None:
    nb = copy.deepcopy(clean_notebook())
    breaker(nb)
    found = problems(nb)
    assert any(p.startswith(f"{rule}:") for p in found), found


@pytest.mark.parametrize(("texts", "stored"), [
    # chunks of one stream are merged; a chunk of another stream stays between them
    ([("stdout", "first line"), ("stdout", "\nsecond\n"), ("stderr", "err\n"), ("stdout", "after\n")],
     [("stdout", "first line\nsecond\n"), ("stderr", "err\n"), ("stdout", "after\n")]),
    # a text progress bar redraws its line with \r at moments that depend on timing (notebook 07's tqdm bar):
    # only the last state of the line is stored, so re-running gives the same file
    ([("stdout", "\repochs:   0%| 0/4\repochs:  50%| 2/4"), ("stdout", "\repochs: 100%| 4/4\repochs: 100%| 4/4\n"),
      ("stdout", "trained\r\n")],
     [("stdout", "epochs: 100%| 4/4\ntrained\r\n")]),
], ids=["merges-chunks", "keeps-the-finished-progress-bar"])
def test_refresh_stores_streams_as_they_end(texts: list[tuple[str, str]], stored: list[tuple[str, str]]) -> None:
    from tools.notebook_runner import coalesce_streams

    nb = clean_notebook()
    nb.cells[1].outputs = [new_output("stream", name=name, text=text) for name, text in texts]
    coalesce_streams(nb)
    assert [(o.name, o.text) for o in nb.cells[1].outputs] == stored


def test_refresh_names_a_solution_cell_whose_stored_output_is_not_a_pass() -> None:
    from tools.notebook_runner import failed_checks

    def solution(cell_id: str, printed: str) -> nbformat.NotebookNode:
        cell = new_code_cell('check("13.1", f)', id=cell_id, metadata={"tags": ["solution"]}, execution_count=1)
        cell.outputs = [new_output("stream", name="stdout", text=printed)]
        return cell

    nb = clean_notebook()
    nb.cells += [solution("ok", "✓ Exercise 13.1: correct.\n"),
                 solution("missing", "✗ There is no exercise '13.1'. Did you mean '12.1'?\n")]
    assert failed_checks(nb) == ["cell missing: printed \"✗ There is no exercise '13.1'. Did you mean '12.1'?\""]


