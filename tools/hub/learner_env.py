"""The learners' Python on a hub run as root: the course's own ``.venv`` when every user can run it and import the
course from it, else a copy of it outside the checkout, which may be private to its owner (a clone in a 0700 folder,
``/root``, the 0750 homes of current Ubuntu releases, a venv on a pyenv Python under ``/root``).

Usage: ``learner_python(Path("/var/lib/course-hub/learner-env-ID"))`` (as root) -> (the interpreter, a note)
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"


def runs_as(python: str, uid: int, gid: int, code: str = "import sys") -> bool:
    """Whether ``python -c code`` works for an unprivileged user (the learners' point of view)."""
    try:
        result = subprocess.run([python, "-c", code], user=uid, group=gid, extra_groups=[], cwd="/",
                                capture_output=True, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": "/"})
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0


# What a learner's Python must import (the spawn hook's workspace, the server), checked as ``nobody``: each module is
# found and its file read, without running it (importing jupyterhub.singleuser alone costs ~2.5 CPU-seconds, at
# every start). Finding a module imports its parent packages, so an unreadable folder or package fails here too.
LEARNER_IMPORTS_PROBE = (
    "import importlib.util\n"
    "for name in ('course_utils.machinery.workspace', 'jupyterhub.singleuser'):\n"
    "    spec = importlib.util.find_spec(name)\n"
    "    open(spec.origin, 'rb').close()\n"
)


def _site_packages(python: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return python.parent.parent / "lib" / version / "site-packages"


# What learners need from the checkout besides the installed packages: the course package and what it reads.
COURSE_FILES = ("course_utils", "notebooks", "requirements.txt", "pyproject.toml", "environment.yml")
STAMP = ".course-hub-stamp"


def _stamp(venv_python: Path) -> str:
    """Changes when the checkout's course files or the installed packages change (a refresh is then due)."""
    import hashlib

    digest = hashlib.sha256()
    prefix = Path(os.path.realpath(venv_python.parent.parent))
    for marker in sorted(prefix.glob(".installed-*")) + [_site_packages(prefix / "bin" / "python")]:
        digest.update(f"{marker.name}:{marker.stat().st_mtime_ns}\n".encode())
    for name in COURSE_FILES:
        top = ROOT / name
        for path in sorted([top] if top.is_file() else top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and ".ipynb_checkpoints" not in path.parts:
                content = hashlib.sha256(path.read_bytes()).hexdigest()  # by content: a fresh clone is no change
                digest.update(f"{path.relative_to(ROOT)}:{content}\n".encode())
    return digest.hexdigest()


def _copy_readable(source: Path, dest: Path) -> None:
    """Copy a tree for learners: hard links where everybody may read the file, else copies; 0755/0644."""
    import shutil

    def copy(src: str, dst: str) -> None:
        info = os.stat(src)
        if info.st_mode & 0o004:
            try:
                os.link(src, dst)
                return
            except OSError:
                pass
        shutil.copy2(src, dst)
        os.chmod(dst, 0o755 if info.st_mode & 0o111 else 0o644)

    shutil.copytree(source, dest, symlinks=True, copy_function=copy,
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    for folder, _, _ in os.walk(dest):
        os.chmod(folder, 0o755)


def build_learner_env(dest: Path, base: Path, venv_python: Path = VENV_PYTHON) -> bool:
    """Learners' own copy of the course's environment at ``dest`` (True if it was (re)built): a venv on the system
    Python ``base`` with copies (hard links where possible) of the course's packages and of the course itself. Built
    beside and swapped in when the checkout or the packages changed: a running server keeps the files it opened."""
    import shutil

    stamp = _stamp(venv_python)
    if (dest / STAMP).exists() and (dest / STAMP).read_text() == stamp and (dest / "bin" / "python").exists():
        return False
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    prefix = Path(os.path.realpath(venv_python.parent.parent))
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(dest.parent, 0o755)
    building = dest.parent / f".{dest.name}.building"
    shutil.rmtree(building, ignore_errors=True)
    (building / "bin").mkdir(parents=True)
    (building / "lib").mkdir()
    version = subprocess.run([str(base), "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (building / "pyvenv.cfg").write_text(
        f"home = {base.parent}\ninclude-system-site-packages = false\nversion = {version}\n"
        f"# made by tools/hub/learner_env.py: a copy of {prefix}'s packages and of the course in {ROOT}, on {base}\n")
    (building / "bin" / "python").symlink_to(base)
    (building / "bin" / "python3").symlink_to("python")
    site = building / "lib" / minor / "site-packages"
    _copy_readable(_site_packages(prefix / "bin" / "python"), site)
    for name in ("share", "etc"):  # JupyterLab's extensions and kernel spec; which server extensions are on
        if (prefix / name).is_dir():
            _copy_readable(prefix / name, building / name)
    for editable in site.glob("__editable__*course_utils*"):
        editable.unlink()  # the editable install points into the checkout: the copy below replaces it
    course = building / "course"
    course.mkdir()
    for name in COURSE_FILES:
        if (ROOT / name).is_dir():
            _copy_readable(ROOT / name, course / name)
        elif (ROOT / name).is_file():
            shutil.copyfile(ROOT / name, course / name)
            os.chmod(course / name, 0o644)
    (site / "course-hub-course.pth").write_text(f"{dest / 'course'}\n")
    for path in (building, building / "bin", building / "lib", site.parent, course):
        os.chmod(path, 0o755)
    (building / STAMP).write_text(stamp)
    old = dest.parent / f".{dest.name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        dest.rename(old)
    building.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return True


def learner_python(view: Path, hidden: bool = False, venv_python: Path = VENV_PYTHON) -> tuple[str, str]:
    """The interpreter learners run, and a note for the instructor: the course's ``.venv`` when everybody can run
    it (and it is not ``hidden`` from their servers, in /tmp say), else :func:`build_learner_env`'s copy at ``view``.
    Raises RuntimeError when learners could not run that either."""
    nobody = pwd.getpwnam("nobody")
    probe = LEARNER_IMPORTS_PROBE
    if not hidden and runs_as(str(venv_python), nobody.pw_uid, nobody.pw_gid, probe):
        return str(venv_python), f"learners run the course's environment {venv_python}"
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(p) / minor for p in ("/usr/local/bin", "/usr/bin")]
    base = next((p for p in candidates if p.exists() and runs_as(str(p), nobody.pw_uid, nobody.pw_gid)), None)
    if base is None:
        raise RuntimeError(
            f"Learners cannot run the course's Python ({os.path.realpath(venv_python)}): a folder above it is "
            f"private. Install Python {sys.version_info.major}.{sys.version_info.minor} where everybody can read it "
            f"(/usr/local, /opt) and run `make clean && make venv PYTHON=/opt/.../{minor}`, or install {minor} from "
            "the system packages.")
    rebuilt = build_learner_env(view, base, venv_python)
    python = str(view / "bin" / "python")
    if not runs_as(python, nobody.pw_uid, nobody.pw_gid, probe):
        raise RuntimeError(f"Learners cannot import the course from {python}: is {view.parent} readable by everybody? "
                           "Name another place with HUB_LEARNER_ENV=/srv/course-learner-env.")
    return python, (f"learners run {base} with a copy of the course's packages and of the course in {view} "
                    f"({'made now' if rebuilt else 'up to date'}; the checkout {ROOT} needs no permission change)")
