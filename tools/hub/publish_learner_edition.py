"""Publish the learner edition as a git repository that nbgitpuller pulls into every learner's server.

On TLJH and Zero to JupyterHub each learner's copy comes from nbgitpuller's ``gitpuller`` command as their server
starts (a clone, then merges that keep the learner's edits). This fills such a repository with what ``make lab``'s
workspace holds (the learner edition, ``complete/``, the cheat sheet) and commits it; push it where your hub can read.

Usage: ``.venv/bin/python -m tools.hub.publish_learner_edition ../pytorch-hooks-learner`` then ``git -C
../pytorch-hooks-learner push``; its URL goes in the recipes (``REPLACE-ME``). There is no nbgitpuller link to hand
out: nbgitpuller's /git-pull page is off (it would pull any repository a link names), hand out the hub's URL.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from course_utils.machinery.workspace import MANIFEST, prepare_workspace

ROOT = Path(__file__).resolve().parents[2]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=course", "-c", "user.email=course@localhost",
                           *args], check=True, capture_output=True, text=True).stdout


def publish(dest: Path, notebooks_dir: Path | None = None, branch: str = "main") -> bool:
    """Make ``dest`` (a git repository, created if needed) hold the current learner edition; True if it changed."""
    dest.mkdir(parents=True, exist_ok=True)
    if not (dest / ".git").exists():
        subprocess.run(["git", "init", "--quiet", "--initial-branch", branch, str(dest)], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        edition = Path(tmp) / "edition"
        prepare_workspace(edition, notebooks_dir=notebooks_dir, quiet=True)
        (edition / MANIFEST).unlink()
        for path in sorted(edition.rglob("*")):
            if path.is_file():
                target = dest / path.relative_to(edition)
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.exists():
                    target.chmod(0o644)
                shutil.copyfile(path, target)
    git(dest, "add", "--all")
    if not git(dest, "status", "--porcelain").strip():
        return False
    source = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    git(dest, "commit", "--quiet", "-m", f"Learner edition of PyTorch Hooks, hands-on ({source})")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Publish the learner edition as a git repository for nbgitpuller.")
    parser.add_argument("dest", type=Path, help="the repository folder (created if needed)")
    parser.add_argument("--branch", default="main")
    parser.add_argument("--notebooks", type=Path, default=None, help="teaching notebooks (default: notebooks/)")
    args = parser.parse_args(argv)
    changed = publish(args.dest, args.notebooks, args.branch)
    print(f"{args.dest}: {'new commit' if changed else 'already up to date'}. Push it, and put its URL in "
          "deploy/tljh/jupyterhub_config.d/course.py (LEARNER_EDITION) or deploy/z2jh/values.yaml (gitpuller).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
