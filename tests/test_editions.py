"""The workshop editions: the learner edition's stubs raise and nothing before them fails; every slide deck and
HTML page is produced, non-empty, titled, and loads its scripts from local files."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client import AsyncKernelManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import build_editions  # noqa: E402
from refresh_notebooks import CURRENT_ENV, CurrentEnvKernelSpecs  # noqa: E402

NOTEBOOKS = build_editions.course_notebooks()


@pytest.fixture(scope="module")
def editions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build")
    for builder in (build_editions.build_learner, build_editions.build_slides, build_editions.build_html):
        builder(out)
    return out


def test_stub_keeps_the_check_and_raises() -> None:
    stub = build_editions.learner_stub('def f(x):\n    return x\n\ncheck("03.1", f)\n')
    assert stub.splitlines()[0].startswith("# YOUR CODE HERE")
    assert 'raise NotImplementedError("Exercise 03.1' in stub and stub.rstrip().endswith('check("03.1", f)')
    assert "return x" not in stub
    with pytest.raises(ValueError, match="no check"):
        build_editions.learner_stub("x = 1\n")


def test_learner_edition_hides_solutions_and_keeps_everything_else(editions: Path) -> None:
    for path in NOTEBOOKS:
        teaching = nbformat.read(path, as_version=4)
        learner = nbformat.read(editions / "learner" / path.name, as_version=4)
        assert len(learner.cells) == len(teaching.cells)
        solutions = 0
        for original, cell in zip(teaching.cells, learner.cells):
            if "solution" in original.metadata.get("tags", []):
                solutions += 1
                assert "raise NotImplementedError" in cell.source and "learner-stub" in cell.metadata["tags"]
                assert "solution" not in cell.metadata["tags"]
            else:
                assert cell.source == original.source
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None
        if path.name != "00_start_here.ipynb" or solutions:
            assert solutions >= 2, f"{path.name} should have self-checked exercises"


@pytest.mark.parametrize("name", [path.name for path in NOTEBOOKS])
def test_learner_notebooks_run_up_to_each_stub(editions: Path, name: str) -> None:
    path = editions / "learner" / name
    notebook = nbformat.read(path, as_version=4)
    manager = AsyncKernelManager(kernel_name=CURRENT_ENV, kernel_spec_manager=CurrentEnvKernelSpecs())
    NotebookClient(notebook, km=manager, kernel_name=CURRENT_ENV, timeout=300, allow_errors=True,
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    stubs = 0
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        tags = cell.metadata.get("tags", [])
        if "learner-stub" in tags:
            stubs += 1
            assert errors and errors[0].ename == "NotImplementedError", f"{name} cell {index}: the stub did not raise"
        elif "raises-exception" not in tags:
            assert not errors, f"{name} cell {index} failed in the learner edition: {errors[0].ename}: {errors[0].evalue}"
    assert stubs == sum("solution" in c.metadata.get("tags", []) for c in nbformat.read(ROOT / "notebooks" / name, 4).cells)


def test_every_slide_deck_and_page_is_produced_with_its_title(editions: Path) -> None:
    index = (editions / "html" / "index.html").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        title = build_editions.read_opening(path).title
        for page in (editions / "slides" / f"{path.stem}.slides.html", editions / "html" / f"{path.stem}.html"):
            text = page.read_text(encoding="utf-8")
            assert len(text) > 10_000 and title.split(" · ")[-1][:20] in text, page.name
            scripts = re.findall(r'<script src="([^"]+)"', text)
            local = [s for s in scripts if not s.startswith("http")]
            assert all((page.parent / s).exists() for s in local), page.name
            assert all("mathjax" in s for s in scripts if s.startswith("http")), page.name  # only MathJax is remote
        assert f'href="{path.stem}.html"' in index
    deck = (editions / "slides" / "03_forward_hooks.slides.html").read_text(encoding="utf-8")
    assert deck.count("<section") > 5  # one slide per ## heading at least
    assert (editions / "slides" / "reveal.js" / "dist" / "reveal.js").exists()
    assert "data:image/png;base64" in (editions / "html" / "05_guided_backprop.html").read_text(encoding="utf-8")
