"""Re-execute notebooks in place with the settings nbval uses in CI, so stored outputs are never hand-edited.

Same kernel as ``pytest --nbval-current-env`` (this Python, through ipykernel), same working directory (the
notebook's folder), same environment variables (set by the Makefile). Cell timing metadata is not recorded,
so re-running an unchanged notebook leaves the file unchanged.

Usage: ``python -m tools.refresh_notebooks notebooks/01_tensor_hooks.ipynb`` (or ``make refresh NB=...``)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import ipykernel.kernelspec
import nbformat
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from nbclient import NotebookClient
from nbconvert.preprocessors import CoalesceStreamsPreprocessor

CURRENT_ENV = "course-current-env"


class CurrentEnvKernelSpecs(KernelSpecManager):
    """Resolve our kernel name to this very Python, as nbval's --nbval-current-env does."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        if kernel_name == CURRENT_ENV:
            return self.kernel_spec_class(resource_dir=ipykernel.kernelspec.RESOURCES, **ipykernel.kernelspec.get_kernel_dict())
        return super().get_kernel_spec(kernel_name)


def execute_in_current_env(notebook: nbformat.NotebookNode, cwd: Path, *, timeout: int, **client_options: object) -> None:
    """Run ``notebook`` top to bottom in a fresh kernel of this Python, in ``cwd``, then shut that kernel down.

    nbclient leaves a kernel running when it was given the kernel manager (it assumes the caller owns it): without
    ``cleanup_kc=True`` every call would leave a kernel behind until this process ends.
    Usage: ``execute_in_current_env(notebook, Path("notebooks"), timeout=300, allow_errors=True)`` (changes ``notebook``).
    """
    manager = AsyncKernelManager(kernel_name=CURRENT_ENV, kernel_spec_manager=CurrentEnvKernelSpecs())
    client = NotebookClient(notebook, km=manager, kernel_name=CURRENT_ENV, timeout=timeout,
                            resources={"metadata": {"path": str(cwd)}}, **client_options)
    client.execute(cleanup_kc=True)


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


def refresh(path: Path, timeout: int) -> None:
    notebook = nbformat.read(path, as_version=4)
    kernelspec = dict(notebook.metadata.get("kernelspec", {}))
    execute_in_current_env(notebook, path.parent, timeout=timeout, record_timing=False,
                           allow_errors=False)  # only cells tagged raises-exception may raise
    # Widget state (model ids, captured figures) changes every run and is not needed to read the course:
    # drop it so that refreshing an unchanged notebook leaves it byte-identical.
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:  # ...and without the state a stored widget view (a random model id) shows nothing
        for output in cell.get("outputs", []):
            output.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
    coalesce_streams(notebook)
    # Keep the notebook's own kernelspec (python3), not the internal name used to start this kernel.
    notebook.metadata["kernelspec"] = kernelspec or {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(notebook, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell (as nbval's --nbval-cell-timeout)")
    args = parser.parse_args(argv)
    os.environ.pop("COURSE_LANG", None)  # English notebooks store English; the Chinese ones call setup_notebook(lang="zh")
    failed: list[str] = []
    for path in args.notebooks:
        if path.suffix != ".ipynb" or not path.is_file():
            parser.error(f"not a notebook file: {path}")
        print(f"refreshing {path}", flush=True)
        refresh(path, args.timeout)
        failed += [f"  {path} {line}" for line in failed_checks(nbformat.read(path, as_version=4))]
    if failed:
        print("stored, but a solution cell's output must be its ✓ (CONTRIBUTING.md, \"Exercise rules\"): fix the "
              "solution or its check (make sync lists an exercise no module defines), then make refresh again:\n"
              + "\n".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
