"""The checkout the tools work on: its root, what changed in it according to git (read here, once, for ``make sync``
and ``make check`` alike), the regions of its Markdown files that a generator owns, and its notebooks' code or prose.

Usage: ``changes()`` -> ``{"notebooks/02_hook_lifecycle.ipynb": "M", "notes.md": "?"}``; ``changes("main")``;
``with_region(text, "course-map", table, "README.md")``;
``notebook_text(ROOT / "notebooks" / "01_tensor_hooks.ipynb", "code")``
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class GitError(RuntimeError):
    """git is missing, this is no repository, or a revision does not exist; the message says which and what to do."""


def git(*args: str) -> str:
    """``git args`` in the checkout's root, its output; :class:`GitError` when it fails."""
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except OSError as error:
        raise GitError(f"git is not installed ({error}); the change is read from git") from error
    if done.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def changes(base: str | None = None) -> dict[str, str]:
    """Every file that differs from the last commit (``base``: from where HEAD left that branch), by its path from
    the root: ``"M"`` changed, ``"A"`` added, ``"D"`` deleted (staged or not), ``"?"`` new and not ignored."""
    since = git("merge-base", base, "HEAD").strip() if base else "HEAD"
    listed = git("diff", "--name-status", "--no-renames", "-z", since).split("\0")
    found = {path: status[0] for status, path in zip(listed[::2], listed[1::2], strict=False) if path}
    found.update({path: "?" for path in git("ls-files", "-z", "--others", "--exclude-standard").split("\0") if path})
    return dict(sorted(found.items()))


def committed(path: str, revision: str = "HEAD") -> str | None:
    """``path``'s text at ``revision`` (``""``: the staged one), or None where it has none."""
    try:
        return git("show", f"{revision}:{path}")
    except GitError:
        return None


def notebook_text(path: Path, cell_type: str) -> str:
    """The sources of a notebook's ``cell_type`` cells (``"code"``, ``"markdown"``), one after another."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == cell_type)


def region(name: str) -> re.Pattern[str]:
    """A generated region: ``<!-- NAME:start ... -->``, its text, ``<!-- NAME:end -->`` (groups 1, 2, 3)."""
    return re.compile(rf"(<!-- {name}:start[^\n]*-->)\n(.*?)\n?(<!-- {name}:end -->)", re.DOTALL)


def with_region(text: str, name: str, content: str, where: str) -> str:
    """``text`` with region ``name`` holding ``content``; SystemExit naming the file ``where`` without its markers."""
    match = region(name).search(text)
    if match is None:
        raise SystemExit(f"{where} lacks the <!-- {name}:start ... --> / <!-- {name}:end --> markers.")
    return f"{text[:match.start()]}{match[1]}\n{content}\n{match[3]}{text[match.end():]}"
