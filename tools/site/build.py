"""Stage the sources of the course's website and build it: every language's pages with Sphinx (``conf.py``) and its
slides with ``tools/build_editions.py``, all at once.

Each language's sources are staged in ``<cache>/<lang>/src`` (notebooks, cheat-sheet, instructor guide, glossary page,
``landing.md`` or its translation as ``index.md``), a file written only when it changed; Sphinx writes to
``<cache>/<lang>/html``, copied into the site (English at its root, Chinese in ``zh/``). A language whose sources did
not change since the last successful build is not rebuilt; the cache is thrown away when what Sphinx does not watch
changed (``UNWATCHED``) and after a failed build, so that its warnings, each of which fails the build, come again.
The learner editions go to the site's ``notebooks/``: the download menu's first entry, and the branch that Colab and
Kaggle open (``.github/workflows/site.yml``).

Usage: ``build(ROOT / "build" / "site", ROOT / "build" / "site-cache")`` (``python -m tools.site``, ``make site``)
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from course_utils.machinery import cloud
from course_utils.machinery.layout import NOTEBOOK_GLOB
from course_utils.machinery.messages import LANGUAGES
from tools.build_editions import write_learner
from tools.site.extension import glossary_page

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
NOTEBOOKS = ROOT / "notebooks"

SPHINX_LANGUAGE = {"en": "en", "zh": "zh_CN"}
GUIDES = ("hooks_cheatsheet.md", "instructor_guide.md")
# What the pages are made from that Sphinx does not watch: the site's own code, the course's settings (a fork's
# repository is in every launch link) and the modules and glossary (the Chinese search's dictionary) the site reads,
# the pinned packages.
UNWATCHED = ("tools/site", "translations/zh/GLOSSARY.md", "requirements.txt", "course_utils/course.toml",
             *(f"course_utils/machinery/{name}.py" for name in ("layout", "messages", "cloud", "course",
                                                                "learner_edition")))


@dataclass(frozen=True)
class Edition:
    """Where one language's sources come from and where its pages go."""

    lang: str
    out: Path  # the site's root
    cache: Path

    @property
    def notebooks(self) -> Path:
        return NOTEBOOKS if self.lang == "en" else NOTEBOOKS / self.lang

    @property
    def landing(self) -> Path:
        return HERE / ("landing.md" if self.lang == "en" else f"landing.{self.lang}.md")

    @property
    def pages(self) -> Path:
        """Where this language's pages go in the site: its root, or ``zh/``."""
        return self.out if self.lang == "en" else self.out / self.lang

    @property
    def html(self) -> Path:
        """Sphinx's output folder, copied to ``pages`` after the build (myst-nb writes its scratch files beside it,
        in ``jupyter_execute/``: kept out of the site)."""
        return self.cache / self.lang / "html"

    @property
    def src(self) -> Path:
        return self.cache / self.lang / "src"

    @property
    def doctrees(self) -> Path:
        return self.cache / self.lang / "doctrees"


def _write_if_changed(target: Path, data: bytes) -> bool:
    if target.exists() and target.read_bytes() == data:
        return False
    target.write_bytes(data)
    return True


_RELATIVE_LINK = re.compile(r"\]\((?![a-z][\w+.-]*:|#)([^()\s#]+)(#[^()\s]*)?\)")


def repository_links(text: str, source: Path) -> str:
    """``text`` (a guide at ``source`` in the checkout) with its links to files of the repository that are not pages
    of the site (``../CONTRIBUTING.md``) pointed at the repository's copy, which the site can link.

    Usage: ``repository_links(text, ROOT / "notebooks" / "instructor_guide.md")``
    """
    folder = posixpath.dirname(source.resolve().relative_to(ROOT).as_posix())

    def relink(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(folder, match[1]))
        if target.startswith(("..", "notebooks/")) or not (ROOT / target).is_file():
            return match[0]  # outside the repository, missing, or a page (or its twin) that the site has
        return f"](https://github.com/{cloud.REPOSITORY}/blob/{cloud.BRANCH}/{target}{match[2] or ''})"

    return _RELATIVE_LINK.sub(relink, text)


def stage(edition: Edition) -> bool:
    """Write what the pages are made from into ``edition.src``; every ``NN_*.ipynb`` found is a page. Whether a
    file changed."""
    notebooks = sorted(edition.notebooks.glob(NOTEBOOK_GLOB))
    if not notebooks:
        raise SystemExit(f"No course notebooks (NN_topic.ipynb) in {edition.notebooks}.")
    if not edition.landing.exists():
        raise SystemExit(f"{edition.landing.relative_to(ROOT)} is missing: run `make translations` (it builds it "
                         f"from tools/site/landing.md and translations/{edition.lang}/landing.po).")
    wanted = {path.name: path for path in notebooks}
    wanted.update({name: edition.notebooks / name for name in GUIDES})
    wanted["index.md"] = edition.landing
    missing = [path for path in wanted.values() if not path.exists()]
    if missing:
        raise SystemExit(f"{missing[0].relative_to(ROOT)} is missing: the site needs it.")
    texts = {name: path.read_bytes() for name, path in wanted.items()}
    for name in GUIDES:  # a link to a file of the repository (CONTRIBUTING.md) goes to the repository's copy
        texts[name] = repository_links(wanted[name].read_text(encoding="utf-8"), wanted[name]).encode("utf-8")
    texts["glossary.md"] = glossary_page(edition.lang).encode("utf-8")
    edition.src.mkdir(parents=True, exist_ok=True)
    changed = False
    for stale in edition.src.iterdir():
        if stale.name not in texts:
            stale.unlink() if stale.is_file() else shutil.rmtree(stale)
            changed = True
    for name, data in texts.items():
        changed |= _write_if_changed(edition.src / name, data)
    return changed


def write_learner_editions(edition: Edition) -> list[Path]:
    """The learner edition of each notebook, in ``notebooks/`` of the site (``notebooks/zh/`` for Chinese)."""
    folder = edition.out / "notebooks" / ("" if edition.lang == "en" else edition.lang)
    folder.mkdir(parents=True, exist_ok=True)
    return write_learner(sorted(edition.notebooks.glob(NOTEBOOK_GLOB)), folder)


def sphinx_command(edition: Edition) -> list[str]:
    return [sys.executable, "-m", "sphinx", "build", "--builder", "html", "--conf-dir", str(HERE),
            "--doctree-dir", str(edition.doctrees), "--define", f"language={SPHINX_LANGUAGE[edition.lang]}",
            "--fail-on-warning", "--keep-going", "--quiet", str(edition.src), str(edition.html)]


def slides_command(edition: Edition) -> list[str]:
    return [sys.executable, "-m", "tools.build_editions", "slides", "--out", str(edition.out), "--lang", edition.lang]


def slides_are_current(edition: Edition) -> bool:
    """Whether ``<pages>/slides`` was built after every file it is made from changed (then a build leaves it)."""
    index = edition.pages / "slides" / "index.html"
    if not index.exists():
        return False
    sources = [*edition.notebooks.glob(NOTEBOOK_GLOB), edition.notebooks / "hooks_cheatsheet.md",
               ROOT / "tools" / "build_editions.py", *(ROOT / "tools" / "nbconvert_templates").rglob("*"),
               *(ROOT / "vendor").rglob("*")]
    built = index.stat().st_mtime
    return all(path.stat().st_mtime < built for path in sources if path.is_file())


def tree_digest(names: tuple[str, ...], salt: str = "") -> str:
    """A digest of the files at ``names`` (relative to the checkout; a folder: all its files), this Python and ``salt``:
    a cache made from other ones is stale.

    Usage: ``tree_digest(UNWATCHED, salt="the pages: 00_start_here 01_tensor_hooks")``
    """
    digest = hashlib.sha256(f"{sys.executable}\n{salt}".encode())
    for name in names:
        path = ROOT / name
        for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(file.relative_to(ROOT).as_posix().encode() + file.read_bytes())
    return digest.hexdigest()


def build(out: Path, cache: Path, langs: tuple[str, ...] = LANGUAGES, *, slides: bool = True) -> list[Path]:
    """Stage and build ``langs`` into ``out`` (all Sphinx and slide builds run at once; slides older than none of
    their sources are left as they are), reusing ``cache`` where it is current; the pages written.

    Usage: ``build(ROOT / "build" / "site", ROOT / "build" / "site-cache")``
    """
    editions = [Edition(lang, out, cache) for lang in langs]
    stamp = cache / "unwatched.sha256"
    pages = sorted(page.name for e in editions for page in e.notebooks.glob(NOTEBOOK_GLOB))
    digest = tree_digest(UNWATCHED, salt=f"{[e.lang for e in editions]} {pages}")
    current = stamp.exists() and stamp.read_text() == digest
    if not current:
        shutil.rmtree(cache, ignore_errors=True)
    stamp.unlink(missing_ok=True)  # written back only once the build succeeded
    changed = [e for e in editions if stage(e) or not current or not e.html.is_dir()]  # (stages every edition)
    jobs = [(f"{e.lang} pages", sphinx_command(e)) for e in changed]
    if slides:
        jobs += [(f"{e.lang} slides", slides_command(e)) for e in editions if not slides_are_current(e)]
    running = [(name, subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
               for name, command in jobs]
    failed = []
    for name, process in running:
        output, _ = process.communicate()
        if process.returncode != 0:
            failed.append(f"--- {name} failed (exit {process.returncode}):\n{output.strip()}")
    if failed:
        raise SystemExit("\n".join(failed))
    stamp.write_text(digest)
    for edition in editions:
        shutil.copytree(edition.html, edition.pages, dirs_exist_ok=True)
        write_learner_editions(edition)
    return sorted(page for e in editions for page in e.pages.glob("*.html"))

