"""make timings stops on a notebook that raises (a notebook broken early has no meaningful time)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tools.time_notebooks import NotebookFailed, time_notebook


def write_notebook(path: Path, *cells: nbformat.NotebookNode) -> Path:
    nbformat.write(new_notebook(cells=list(cells)), path)
    return path


def test_a_cell_that_raises_stops_the_timing_and_is_named(tmp_path: Path) -> None:
    path = write_notebook(
        tmp_path / "broken.ipynb",
        new_markdown_cell("# A notebook that breaks in its second code cell"),
        new_code_cell("x = 1"),
        new_code_cell("raise ValueError('broken on purpose')"),
        new_code_cell("import time; time.sleep(30)"),  # never reached: the timing stops at the error
    )
    with pytest.raises(NotebookFailed) as failure:
        time_notebook(path, timeout=60)
    message = str(failure.value)
    assert "broken.ipynb" in message
    assert "cell 2 (\"raise ValueError('broken on purpose')\")" in message
    assert "ValueError: broken on purpose" in message


def test_cells_tagged_raises_exception_may_raise(tmp_path: Path) -> None:
    expected = new_code_cell("raise KeyError('shown to learners')", metadata={"tags": ["raises-exception"]})
    path = write_notebook(tmp_path / "teaches_an_error.ipynb", expected, new_code_cell("y = 2"))
    seconds = time_notebook(path, timeout=60)
    assert seconds > 0
