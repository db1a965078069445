"""make test-compat: the course on Colab's package set, installed and run the way a learner does.

1. An environment with Colab's packages (``tools/compat/colab-packages.txt``, Python 3.13), made once in the cache
   folder from a wheelhouse there (torch 2.11.0 from PyPI is a CUDA build of several GB), and put back to exactly
   the snapshot at the start of every run.
2. ``pip install`` of this checkout into it, as a learner would; every snapshot version must stay (torch above all).
3. From a temporary folder outside the checkout, ``tools/compat/execute.py`` in that environment runs every teaching
   notebook and learner edition through the course's runner and judges each (a hang fails its notebook only).
4. On success, ``tools/compat/verified.json`` records the torch version and date each notebook last passed on;
   ``python -m tools.cloud_badges`` writes them into the notebooks' openings and the README.

Usage: ``python -m tools compat`` (``make test-compat``); ``--notebooks 04 10``; ``--cache DIR`` (default
``~/.cache/course-compat`` or $COURSE_COMPAT_CACHE); ``--python PATH`` (a Python 3.13); ``--lock-python PATH``
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from packaging.utils import canonicalize_name

from course_utils.machinery.pins import parse_pins

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "tools" / "compat" / "colab-packages.txt"
VERIFIED = ROOT / "tools" / "compat" / "verified.json"
EXECUTE = ROOT / "tools" / "compat" / "execute.py"
COLAB_DATE = "2026-08-19"
COLAB_PYTHON = "3.13"
PIP = ["-m", "pip", "--disable-pip-version-check"]


def log(message: str) -> None:
    print(f"[compat {time.strftime('%H:%M:%S')}] {message}", flush=True)


def sh(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, text=True, capture_output=True, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        sys.exit(f"compat: {' '.join(map(str, command))} failed ({result.returncode}):\n"
                 f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def find_python(given: str | None) -> str:
    pyenv = sorted(map(str, Path.home().glob(f".pyenv/versions/{COLAB_PYTHON}*/bin/python3")))
    candidates = [given] if given else [os.environ.get("COURSE_COMPAT_PYTHON", ""), f"python{COLAB_PYTHON}", *pyenv]
    for candidate in filter(None, candidates):
        try:
            out = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == COLAB_PYTHON:
            return candidate
    sys.exit(f"compat: Colab runs Python {COLAB_PYTHON}; none found. Install it (apt-get install python{COLAB_PYTHON}"
             f" python{COLAB_PYTHON}-venv, or pyenv install {COLAB_PYTHON}) or pass "
             f"--python /path/to/python{COLAB_PYTHON}.")


def snapshot_pins() -> dict[str, str]:
    """Colab's packages, ``{normalised name: version}``, read as the course reads its own lock."""
    return parse_pins(SNAPSHOT.read_text(encoding="utf-8").splitlines())


def freeze(python: Path) -> dict[str, str]:
    out = sh([str(python), *PIP, "list", "--format", "json"]).stdout
    return {canonicalize_name(item["name"]): item["version"] for item in json.loads(out)}


def base_environment(python_exe: str, cache: Path) -> tuple[Path, dict[str, str]]:
    """The snapshot's environment, made or put back to exactly the snapshot; returns its Python and its packages."""
    wheels = cache / "wheels"
    key = hashlib.sha256(SNAPSHOT.read_bytes() + python_exe.encode()).hexdigest()[:12]
    prefix = cache / f"colab-{key}"
    python = prefix / "bin" / "python"
    record = prefix / "snapshot-freeze.json"
    if record.is_file() and python.is_file():
        base = json.loads(record.read_text())
        now = freeze(python)
        added = sorted(set(now) - set(base))
        changed = sorted(n for n in base if now.get(n) != base[n])
        if added:
            log(f"putting the environment back: removing {', '.join(added)}")
            sh([str(python), *PIP, "uninstall", "--yes", *added])
        if changed:
            log(f"putting the environment back: {', '.join(f'{n} {now.get(n)} -> {base[n]}' for n in changed)}")
            sh([str(python), *PIP, "install", "--quiet", "--no-deps", "--no-index", "--find-links", str(wheels),
                *(f"{n}=={base[n]}" for n in changed)])
        if freeze(python) == base:
            return python, base
        log("the cached environment differs from the snapshot: making it anew")
    shutil.rmtree(prefix, ignore_errors=True)
    wheels.mkdir(parents=True, exist_ok=True)
    log(f"downloading the snapshot's wheels into {wheels} (once; torch 2.11.0 from PyPI is several GB)")
    sh([python_exe, *PIP, "download", "--quiet", "--dest", str(wheels), "--find-links", str(wheels),
        "-r", str(SNAPSHOT)])
    log(f"making {prefix}")
    sh([python_exe, "-m", "venv", str(prefix)])
    sh([str(python), *PIP, "install", "--quiet", "--no-index", "--find-links", str(wheels), "-r", str(SNAPSHOT)])
    base = freeze(python)
    record.write_text(json.dumps(base, indent=1, sort_keys=True) + "\n")
    return python, base


def install_course(python: Path, cache: Path, base: dict[str, str]) -> tuple[list[str], list[str]]:
    """pip install of the checkout (not editable, with dependencies); returns (problems, what was added)."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "course"  # a copy: the build leaves nothing in the checkout
        files = sh(["git", "ls-files", "-z"], cwd=ROOT).stdout.split("\0")
        for name in filter(None, files):
            if (ROOT / name).is_file():
                (source / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, source / name)
        log("pip install of the course (as a learner does: not editable, with its dependencies)")
        sh([str(python), *PIP, "install", "--quiet", "--find-links", str(cache / "wheels"), str(source)],
           env={**os.environ, "PIP_CACHE_DIR": str(cache / "pip")})
    after = freeze(python)
    problems = [f"the install changed {name} {base[name]} -> {after.get(name, 'removed')}"
                for name in sorted(base) if after.get(name) != base[name]]
    added = sorted(f"{name} {after[name]}" for name in set(after) - set(base))
    return problems, added


def run_notebooks(python: Path, notebooks: list[str] | None, workers: int, strict_warnings: bool,
                  timeouts: tuple[float, float] = (300, 900)) -> dict[str, list[str]]:
    """Execute every notebook (teaching and learner edition) with ``python`` from a temporary folder; the report.
    ``timeouts``: (seconds per cell, seconds per notebook); past either, that notebook fails, naming the cell."""
    with tempfile.TemporaryDirectory(prefix="course-compat-") as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        command = [str(python), str(EXECUTE), "--workers", str(workers), "--cell-timeout", str(timeouts[0]),
                   "--notebook-timeout", str(timeouts[1])]
        command += ["--notebooks", *notebooks] if notebooks else []
        command += ["--strict-warnings"] if strict_warnings else []
        log(f"running the notebooks from {tmp} (outside the checkout)")
        result = subprocess.run(command, cwd=tmp, env=env, text=True)
        report_file = Path(tmp, "report.json")
        report = json.loads(report_file.read_text()) if report_file.is_file() else {}
    if result.returncode != 0 or not report:
        report["runner"] = [f"the notebook runner failed ({result.returncode})"]
    return report


def torch_version(python: Path) -> str:
    code = "from importlib.metadata import version; print(version('torch').split('+')[0])"
    return sh([str(python), "-c", code]).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get(
        "COURSE_COMPAT_CACHE", Path.home() / ".cache" / "course-compat")))
    parser.add_argument("--python", help=f"a Python {COLAB_PYTHON}")
    parser.add_argument("--lock-python", type=Path, help="also run every notebook with the lock's Python, where a "
                        "DeprecationWarning or FutureWarning from torch, torchvision or the course fails the run")
    parser.add_argument("--notebooks", nargs="*", help="numbers (04 10) of the notebooks to run; default all")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cell-timeout", type=float, default=300, help="seconds one cell may run")
    parser.add_argument("--notebook-timeout", type=float, default=900, help="seconds one notebook may take in all")
    args = parser.parse_args(argv)
    started = time.monotonic()
    timeouts = (args.cell_timeout, args.notebook_timeout)
    python, base = base_environment(find_python(args.python), args.cache)
    snapshot = snapshot_pins()
    missing = [f"{n} (want {v}, have {base.get(n)})" for n, v in snapshot.items() if base.get(n, "").split("+")[0] != v]
    if missing:
        sys.exit(f"compat: the environment is not the snapshot: {missing}")
    log(f"Colab snapshot {COLAB_DATE} ready: torch {base['torch']}, torchvision {base['torchvision']}, "
        f"numpy {base['numpy']}, ipywidgets {base['ipywidgets']} ({time.monotonic() - started:.0f} s)")
    problems, added = install_course(python, args.cache, base)
    log(f"the install kept every snapshot version: {not problems}; it added {len(added)}: {', '.join(added)}")
    runs = {f"colab-{COLAB_DATE}": (python, run_notebooks(python, args.notebooks, args.workers, False, timeouts))}
    log(f"Colab's snapshot done ({(time.monotonic() - started) / 60:.1f} min)")
    if args.lock_python:
        args.lock_python = args.lock_python.absolute()  # not resolve(): a venv's python is a link to its base Python
        runs["lock"] = (args.lock_python, run_notebooks(args.lock_python, args.notebooks, args.workers, True, timeouts))
    for run, (_, report) in runs.items():
        for name, notebook_problems in sorted(report.items()):
            problems += [f"{run}: {name}: {p}" for p in notebook_problems]
    minutes = (time.monotonic() - started) / 60
    for run, (run_python, report) in runs.items():
        record_verified(run, report, torch_version(run_python))
    if args.lock_python:  # nbformat is there
        log(sh([str(args.lock_python), str(ROOT / "tools" / "cloud_badges.py")]).stdout.strip())
    if problems:
        print("\n".join(["", "COMPAT FAILED:", *(f"  - {p}" for p in problems)]))
        print(f"({minutes:.1f} min)")
        return 1
    print(f"\nCOMPAT PASSED: every notebook and learner edition ran clean on Colab's snapshot {COLAB_DATE} "
          f"(torch {base['torch']}, Python {COLAB_PYTHON}), torch unchanged by the install"
          + (", and on the lock without deprecation debt" if args.lock_python else "") + f" ({minutes:.1f} min)")
    return 0


def record_verified(run: str, report: dict[str, list[str]], torch_version: str) -> None:
    """Record, for each notebook whose teaching and learner runs both passed, that it passed on this torch today."""
    data = json.loads(VERIFIED.read_text()) if VERIFIED.is_file() else {}
    today = dt.date.today().isoformat()
    for name in sorted({label.split(" ")[0] for label in report if label != "runner"}):
        if report.get(f"{name} (teaching)") == [] and report.get(f"{name} (learner)") == []:
            data.setdefault(name, {})[run] = {"torch": torch_version, "date": today}
    VERIFIED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    log(f"recorded in {VERIFIED.relative_to(ROOT)}; `python -m tools.cloud_badges` shows it in the notebooks and "
        "README")


if __name__ == "__main__":
    sys.exit(main())
