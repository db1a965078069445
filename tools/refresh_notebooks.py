"""Re-execute notebooks in place with the settings nbval uses in CI, so stored outputs are never hand-edited.

Run by the course's one runner (:mod:`tools.notebook_runner`): the kernel nbval uses (this Python), the notebook's
folder, CI's environment variables. Cell timing metadata is not recorded, so re-running an unchanged notebook
leaves the file unchanged.

Usage: ``python -m tools.refresh_notebooks notebooks/01_tensor_hooks.ipynb`` (or ``make refresh NB=...``)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

from tools.notebook_runner import CELL_TIMEOUT, NotebookFailed, execute


def coalesce_streams(notebook: nbformat.NotebookNode) -> None:
    """Merge consecutive stdout (or stderr) chunks of each cell into one output and keep only the last state
    of each line rewritten with ``\\r`` (a finished progress bar), with nbconvert's CoalesceStreamsPreprocessor.

    The kernel flushes a stream in chunks, and a progress bar redraws itself, at moments that depend on timing;
    coalesced, the stored file is the same on every run (nbval coalesces the same way before it compares).
    Usage: ``coalesce_streams(notebook)`` (changes the notebook in place).
    """
    CoalesceStreamsPreprocessor().preprocess(notebook, {})


def failed_checks(notebook: nbformat.NotebookNode) -> list[str]:
    """The solution cells whose stored output is not check()'s ✓: one line each, with what the cell printed.

    Usage: ``failed_checks(nbformat.read("notebooks/02_hook_lifecycle.ipynb", as_version=4))``"""
    found = []
    for cell in notebook.cells:
        if cell.cell_type != "code" or "solution" not in cell.metadata.get("tags", []):
            continue
        text = "".join(output.get("text", "") for output in cell.get("outputs", []) if output.get("name") == "stdout")
        if not text.lstrip().startswith("✓"):
            found.append(f"cell {cell.get('id')}: printed {text.strip()[:160]!r}")
    return found


def refresh(path: Path, timeout: float) -> None:
    """Re-execute ``path`` and store its outputs; raises :class:`~tools.notebook_runner.NotebookFailed` (nothing is
    written) when a cell not tagged ``raises-exception`` raises or runs past ``timeout``."""
    notebook = execute(path, cell_timeout=timeout, record_timing=False)
    # Widget state (model ids, captured figures) changes every run and is not needed to read the course:
    # drop it so that refreshing an unchanged notebook leaves it byte-identical.
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:  # ...and without the state a stored widget view (a random model id) shows nothing
        for output in cell.get("outputs", []):
            output.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
    coalesce_streams(notebook)
    notebook.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                                "language": "python"})
    nbformat.write(notebook, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=float, default=CELL_TIMEOUT,
                        help="seconds per cell (as nbval's --nbval-cell-timeout)")
    args = parser.parse_args(argv)
    failed: list[str] = []
    for path in args.notebooks:
        if path.suffix != ".ipynb" or not path.is_file():
            parser.error(f"not a notebook file: {path}")
        print(f"refreshing {path}", flush=True)
        try:
            refresh(path, args.timeout)
        except NotebookFailed as failure:
            print(f"make refresh stopped, {path} not written: {failure}", file=sys.stderr)
            return 1
        failed += [f"  {path} {line}" for line in failed_checks(nbformat.read(path, as_version=4))]
    if failed:
        print("stored, but a solution cell's output must be its ✓ (CONTRIBUTING.md, \"Exercise rules\"): fix the "
              "solution or its check (make sync lists an exercise no module defines), then make refresh again:\n"
              + "\n".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
