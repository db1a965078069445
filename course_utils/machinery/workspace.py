"""The learner's workspace: their own copy of the learner edition, created once and never overwritten.

``prepare_workspace(dest)`` fills ``dest`` with the learner edition's ``NN_topic.ipynb`` (only where the learner has
no such file), ``complete/`` (the notebooks with every solution, read-only) and ``hooks_cheatsheet.md``. A course
update of a notebook the learner has lands beside it as ``NN_topic.course-update-<id>.ipynb``, with a message; nothing
is ever deleted; ``.course-manifest.json`` remembers what was delivered. ``--lang zh``: from ``notebooks/zh/``.

Usage: ``python -m course_utils.machinery.workspace workspace`` (what ``make lab`` runs), or
``prepare_workspace(Path("workspace"))`` -> the list of messages it printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import stat
import sys
from pathlib import Path

import nbformat

from course_utils.machinery.course import notebooks_folder
from course_utils.machinery.layout import COMPLETE, MANIFEST, NOTEBOOK_GLOB
from course_utils.machinery.learner_edition import learner_notebook
from course_utils.machinery.messages import LANGUAGES, _, language

__all__ = ["MANIFEST", "prepare_workspace", "main"]

_EXTRA_FILES = ("hooks_cheatsheet.md",)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_manifest(dest: Path) -> dict[str, dict[str, str]]:
    path = dest / MANIFEST
    if not path.exists():
        return {"delivered": {}, "offered": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise SystemExit(_("{path} is unreadable ({error}). Move it away and run again; your notebooks are "
                           "safe.").format(path=path, error=error)) from error
    data.setdefault("delivered", {})
    data.setdefault("offered", {})
    return data


def _write_new(path: Path, text: str, *, read_only: bool = False) -> None:
    """Create ``path`` (never replacing an existing file)."""
    with open(path, "x", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
    if read_only:
        path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


def _deliver(dest: Path, relative: str, text: str, manifest: dict[str, dict[str, str]], messages: list[str],
             *, read_only: bool = False, course_owned: bool = False) -> None:
    """Give the learner ``text`` at ``relative``: create it, or leave theirs and put the new version beside it.

    ``course_owned`` files (``complete/``) are replaced when the learner has not changed them since delivery.
    """
    target = dest / relative
    digest = _digest(text)
    delivered = manifest["delivered"].get(relative)
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_new(target, text, read_only=read_only)
        manifest["delivered"][relative] = digest
        messages.append(_("added {file}").format(file=relative))
        return
    if delivered == digest:
        return  # the learner has this version (edited or not)
    current = _digest(target.read_text(encoding="utf-8", errors="replace"))
    if course_owned and current == delivered:
        target.chmod(stat.S_IRUSR | stat.S_IWUSR)
        target.unlink()
        _write_new(target, text, read_only=read_only)
        manifest["delivered"][relative] = digest
        messages.append(_("updated {file} (a course file you had not changed)").format(file=relative))
        return
    if current == digest:
        manifest["delivered"][relative] = digest  # already the same text: nothing to offer
        return
    if manifest["offered"].get(relative) == digest:
        return  # offered before; the learner knows
    name = Path(relative)
    beside = name.with_name(f"{name.stem}.course-update-{digest[:8]}{name.suffix}")
    if not (dest / beside).exists():
        _write_new(dest / beside, text, read_only=read_only)
    manifest["offered"][relative] = digest
    messages.append(
        _("The course has a new version of {file}. Your file is untouched; the new version is {new} -- copy over "
          "what you want from it.").format(file=relative, new=beside.as_posix())
    )


def prepare_workspace(dest: Path, *, notebooks_dir: Path | None = None, quiet: bool = False,
                      lang: str = "en") -> list[str]:
    """Create or update a learner workspace in ``dest`` without overwriting or deleting a learner's file.

    Usage: ``prepare_workspace(Path("workspace"))``
    """
    source = notebooks_folder(lang) if notebooks_dir is None else Path(notebooks_dir)
    notebooks = sorted(source.glob(NOTEBOOK_GLOB))
    if not notebooks:
        raise FileNotFoundError(_("No course notebooks (NN_topic.ipynb) in {folder}: is this the course "
                                  "repository?").format(folder=source))
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise NotADirectoryError(_("{path} exists and is not a folder: choose another workspace path.").format(
            path=dest))
    dest.mkdir(parents=True, exist_ok=True)
    manifest = _read_manifest(dest)
    messages: list[str] = []
    for path in notebooks:
        teaching = nbformat.read(path, as_version=4)
        learner_text = nbformat.writes(learner_notebook(teaching)) + "\n"
        _deliver(dest, path.name, learner_text, manifest, messages)
        _deliver(dest, f"{COMPLETE}/{path.name}", path.read_text(encoding="utf-8"), manifest, messages,
                 read_only=True, course_owned=True)
    for extra in _EXTRA_FILES:
        if (source / extra).exists():
            _deliver(dest, extra, (source / extra).read_text(encoding="utf-8"), manifest, messages,
                     read_only=True, course_owned=True)
    temporary = dest / f"{MANIFEST}.tmp"
    temporary.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, dest / MANIFEST)
    if not quiet:
        for message in messages:
            print(message)
    return messages


def main(argv: list[str] | None = None) -> int:
    """``python -m course_utils.machinery.workspace [DEST]``: prepare the workspace and say where it is."""
    parser = argparse.ArgumentParser(
        description=_("Create or update a learner workspace (never overwrites your files)."))
    parser.add_argument("dest", nargs="?", default="workspace", type=Path)
    parser.add_argument("--lang", default=language(), choices=LANGUAGES,
                        help="the edition: en (default, or COURSE_LANG) or zh (the Chinese notebooks)")
    args = parser.parse_args(argv)
    prepare_workspace(args.dest, lang=args.lang)
    print(_("Workspace ready: {folder}/ (your exercises; the complete notebooks are in {complete}/)").format(
        folder=args.dest, complete=f"{args.dest}/{COMPLETE}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
