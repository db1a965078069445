"""``make sync``: every generator of the course in one command, then what changed and what still needs a person.

The generators, in the order they run, and what each one owns (nobody edits these by hand):

1. ``message catalogue`` (``tools.i18n.messages compile``): course.mo from course_utils/machinery/locale/zh/*.po
   (first: the Chinese of the generated tables below is read from it).
2. ``solution cells``: a code cell of an English notebook with ``### BEGIN SOLUTION`` / ``### END SOLUTION`` gets
   the ``solution`` tag and nbgrader's cell metadata (``grade_id`` ``exercise-NN-k`` from its ``check("NN.k", ...)``).
3. ``cloud links`` (``tools.cloud_badges``): each English notebook's "Open in" / "Report a problem" / "Last verified"
   block and its guarded install; README.md's verified table.
4. ``course map``: README.md's course-map table, from the notebooks' opening cells.
5. ``timings and agendas`` (``tools.instructor_guide``): the two tables of notebooks/instructor_guide.md.
6. ``translations`` (``tools.i18n.editions update``): translations/zh/*.po follow the English; a changed text keeps
   its old translation, marked out of date.
7. ``Chinese edition`` (``tools.i18n.editions build``): notebooks/zh/*.ipynb, notebooks/zh/*.md, README.zh.md,
   tools/site/landing.zh.md.
8. ``learner editions`` (``tools.build_editions learner``): build/learner and build/zh/learner (not committed).

It changes sources only, never a stored output. Then it prints what still needs a person: exercises a notebook
checks that no exercise module defines, text to translate, messages to translate, notebooks whose code changed
since the last commit or that show an old course map (``make refresh``), and files git does not track yet
(``git add``). Running it twice changes nothing the second time.

Usage: ``python -m tools.sync`` (``make sync``; ``--no-learner`` skips the learner editions)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_utils.machinery.course import course_map_markdown
from course_utils.machinery.layout import NOTEBOOK_GLOB

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
README = ROOT / "README.md"
LANG = "zh"

COURSE_MAP = re.compile(r"(<!-- course-map:start[^\n]*-->)\n(.*?)\n?(<!-- course-map:end -->)", re.DOTALL)
_SOLUTION = re.compile(r"^\s*### BEGIN SOLUTION\s*$", re.MULTILINE)
_CHECK_ID = re.compile(r"""\bcheck\(\s*["'](\d\d)\.(\d+)["']""")


def _git(*args: str) -> str | None:
    """``git args`` in the repository's root; None where there is no git or no repository."""
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def english_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob(NOTEBOOK_GLOB))


# -- the generators that live here ------------------------------------------------------------------------------
def nbgrader_metadata(cell: dict, notebook_number: str, index: int) -> dict:
    """The nbgrader metadata of a solution cell: its ``grade_id`` from its ``check("NN.k", ...)`` (else from its
    position), the one it has kept."""
    source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    match = _CHECK_ID.search(source)
    grade_id = f"exercise-{match[1]}-{match[2]}" if match else f"solution-{notebook_number}-{index}"
    old = cell.get("metadata", {}).get("nbgrader", {})
    return {"grade": False, "grade_id": old.get("grade_id", grade_id), "locked": False, "schema_version": 3,
            "solution": True, "task": False}


def mark_solution_cells(path: Path) -> bool:
    """Give each code cell with solution markers the ``solution`` tag and nbgrader's metadata; True if it changed."""
    notebook = nbformat.read(path, as_version=4)
    changed = False
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or not _SOLUTION.search(cell.source):
            continue
        tags = cell.metadata.get("tags", [])
        if "solution" not in tags:
            cell.metadata["tags"] = [*tags, "solution"]
            changed = True
        wanted = nbgrader_metadata(cell, path.name[:2], index)
        if cell.metadata.get("nbgrader") != wanted:
            cell.metadata["nbgrader"] = wanted
            changed = True
    if changed:
        nbformat.write(notebook, path)
    return changed


def readme_with_course_map(text: str) -> str:
    """README.md's text with its course-map region made from the notebooks' openings."""
    if not COURSE_MAP.search(text):
        raise SystemExit("README.md lacks the <!-- course-map:start ... --> / <!-- course-map:end --> markers.")
    return COURSE_MAP.sub(lambda m: f"{m[1]}\n{course_map_markdown(lang='en')}\n{m[3]}", text, count=1)


def write_course_map() -> None:
    text = README.read_text(encoding="utf-8")
    new = readme_with_course_map(text)
    if new != text:
        README.write_text(new, encoding="utf-8")


# -- running them ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Generator:
    name: str
    run: Callable[[], object]


def generators(learner: bool = True) -> list[Generator]:
    from tools import build_editions, cloud_badges, instructor_guide
    from tools.i18n import editions, messages

    def learner_editions() -> None:
        for lang in ("en", LANG):
            build_editions.build_learner(ROOT / "build", build_editions.Edition(lang))

    def compile_messages() -> None:
        _catalog, clashes = messages.merged(LANG)
        if clashes:
            raise SystemExit("the message catalogue translates a message two ways:\n" + "\n".join(clashes))
        messages.mo_path(LANG).parent.mkdir(parents=True, exist_ok=True)
        compiled = messages.compiled(LANG)
        if not messages.mo_path(LANG).is_file() or messages.mo_path(LANG).read_bytes() != compiled:
            messages.mo_path(LANG).write_bytes(compiled)

    found = [
        # first: the generated regions' Chinese (cloud links, tables, agendas) is read from the compiled catalogue
        Generator("message catalogue", compile_messages),
        Generator("solution cells", lambda: [mark_solution_cells(path) for path in english_notebooks()]),
        Generator("cloud links", lambda: cloud_badges.main([])),
        Generator("course map", write_course_map),
        Generator("timings and agendas", lambda: instructor_guide.main([])),
        Generator("translations", lambda: [editions.update(LANG, source) for source in editions.all_sources()]),
        Generator("Chinese edition", lambda: editions.build(LANG)),
    ]
    if learner:
        found.append(Generator("learner editions", learner_editions))
    return found


def watched_files() -> list[Path]:
    """Every committed file a generator writes."""
    from tools.i18n import editions, messages

    files = [*english_notebooks(), *sorted((NOTEBOOKS / LANG).glob("*")), README, ROOT / "README.zh.md",
             NOTEBOOKS / "instructor_guide.md", *sorted((editions.TRANSLATIONS / LANG).glob("*.po")),
             messages.mo_path(LANG), *(ROOT / pattern.format(lang=LANG) for pattern in editions.GUIDES.values())]
    return sorted({path for path in files if path.is_file()})


def snapshot(files: Iterable[Path]) -> dict[Path, str]:
    return {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in files if path.is_file()}


def run_generators(learner: bool = True) -> dict[str, list[str]]:
    """Run every generator; the files each one changed (paths relative to the repository), by generator."""
    changed: dict[str, list[str]] = {}
    before = snapshot(watched_files())
    for generator in generators(learner):
        with redirect_stdout(io.StringIO()):  # each tool's own report: the summary below says it once
            generator.run()
        after = snapshot(watched_files())
        changed[generator.name] = sorted(str(p.relative_to(ROOT)) for p in after if after[p] != before.get(p))
        before = after
    return changed


# -- what still needs a person -----------------------------------------------------------------------------------
_INSTALL = re.compile(r"^# --- cloud install \(.*?# --- end of the cloud install ---\n*", re.DOTALL | re.MULTILINE)


def _code_cells(text: str) -> dict[str, dict]:
    return {cell["id"]: cell for cell in json.loads(text)["cells"] if cell["cell_type"] == "code"}


def _code(cell: dict) -> str:
    source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return _INSTALL.sub("", source)


def cells_to_refresh(current: str, committed: str | None) -> list[str]:
    """The ids of the code cells of a notebook (its JSON text) whose stored outputs may no longer be what the code
    prints: never run, or code changed since ``committed`` (the last commit's version, or the staged one of a new
    notebook; None: a new notebook git does not know yet) while
    the outputs did not. A new cell that ran, and the generated install block (it prints nothing), do not count."""
    cells = _code_cells(current)
    before = _code_cells(committed) if committed is not None else {}
    stale = []
    for cell_id, cell in cells.items():
        if cell.get("execution_count") is None:
            stale.append(cell_id)
            continue
        old = before.get(cell_id)
        if old is not None and _code(old) != _code(cell) and old.get("outputs") == cell.get("outputs"):
            stale.append(cell_id)
    return stale


def notebooks_to_refresh() -> dict[str, list[str]]:
    """Notebook path -> code cells that need ``make refresh``, for the notebooks that differ from the last commit."""
    listed = _git("status", "--porcelain", "--untracked-files=all", "--", "notebooks")
    if listed is None:
        return {}
    found = {}
    for line in listed.splitlines():
        name = line[3:].split(" -> ")[-1].strip('"')
        if not re.fullmatch(r"notebooks/(?:zh/)?\d\d_\w+\.ipynb", name) or not (ROOT / name).is_file():
            continue
        # the last commit's version; a new notebook: the one git add staged, if any
        committed = _git("show", f"HEAD:{name}") or _git("show", f":{name}")
        cells = cells_to_refresh((ROOT / name).read_text(encoding="utf-8"), committed)
        if cells:
            found[name] = cells
    for name in [n for n in found if not n.startswith("notebooks/zh/")]:  # the Chinese twin runs the same code
        twin = name.replace("notebooks/", f"notebooks/{LANG}/", 1)
        if (ROOT / twin).is_file():
            found[twin] = found[name] + [cell for cell in found.get(twin, []) if cell not in found[name]]
    return dict(sorted(found.items(), key=lambda item: (item[0].replace(f"/{LANG}/", "/"), item[0])))


def stale_course_maps() -> dict[str, list[str]]:
    """The notebooks (both languages) whose stored output shows the course map as it was: a new notebook, or a
    changed opening, changes what ``course_map_markdown()`` prints in 00_start_here."""
    found = {}
    for english in english_notebooks():
        for lang, path in (("en", english), (LANG, ROOT / "notebooks" / LANG / english.name)):
            if not path.is_file():
                continue
            now = course_map_markdown(lang=lang)
            cells = [cell for cell in nbformat.read(path, as_version=4).cells
                     if cell.cell_type == "code" and "course_map_markdown(" in cell.source]
            stale = [cell.id for cell in cells if not any(
                "".join(output.get("data", {}).get("text/markdown", "")) == now for output in cell.get("outputs", []))]
            if stale:
                found[str(path.relative_to(ROOT))] = stale
    return found


def untracked_files() -> list[str]:
    listed = _git("ls-files", "--others", "--exclude-standard")
    return sorted(line for line in (listed or "").splitlines() if line)


def message_part(code_file: str) -> str:
    """The PO part a code file's messages belong in: ``nbNN.po`` for an exercise module, else machinery or tools."""
    match = re.search(r"exercises/(nb\d\d)\.py$", code_file)
    if match:
        return f"{match[1]}.po"
    return "tools.po" if code_file.startswith("tools/") else "machinery.po"


def undefined_exercises(checked: dict[str, list[str]], defined: Iterable[str],
                        module_files: Iterable[str]) -> list[str]:
    """What to do about each notebook whose ``check("NN.k", ...)`` names an exercise no module defines.

    ``checked``: notebook file name -> the exercise ids its cells check; ``defined``: the catalogue's ids;
    ``module_files``: the ``nbNN`` exercise modules that exist."""
    defined, module_files = set(defined), set(module_files)
    found = []
    for name, ids in sorted(checked.items()):
        missing = sorted(set(ids) - defined)
        if not missing:
            continue
        module = f"nb{name[:2]}"
        where = f"course_utils/machinery/exercises/{module}.py"
        what = (f"add them to the EXERCISES of {where}" if module in module_files else
                f"write {where} with its EXERCISES, and tests/exercise_cases/{module}.py with their cases")
        found.append(f"{name}: check() of {', '.join(missing)}, which no exercise module defines: {what} "
                     "(CONTRIBUTING.md, \"Add or change an exercise\")")
    return found


def exercises_to_define() -> list[str]:
    """:func:`undefined_exercises` for the course's English notebooks."""
    from course_utils.machinery.exercises import MODULES, catalogue

    checked = {}
    for path in english_notebooks():
        cells = nbformat.read(path, as_version=4).cells
        checked[path.name] = [f"{m[1]}.{m[2]}" for cell in cells if cell.cell_type == "code"
                              for m in _CHECK_ID.finditer(cell.source)]
    return undefined_exercises(checked, catalogue(), MODULES)


@dataclass
class Todo:
    translations: dict[str, list[str]] = field(default_factory=dict)  # English source -> what is stale
    messages: dict[str, list[str]] = field(default_factory=dict)  # code file -> messages no PO part lists yet
    message_translations: dict[str, list[str]] = field(default_factory=dict)  # PO part -> messages listed, untranslated
    stray_messages: list[str] = field(default_factory=list)
    refresh: dict[str, list[str]] = field(default_factory=dict)
    untracked: list[str] = field(default_factory=list)
    exercises: list[str] = field(default_factory=list)  # what to do where a check() names no defined exercise

    def __bool__(self) -> bool:
        return bool(self.translations or self.messages or self.message_translations or self.stray_messages
                    or self.refresh or self.untracked or self.exercises)


def todo() -> Todo:
    from tools.i18n import editions, messages

    found = Todo()
    for source in editions.all_sources():
        stale = editions.stale(LANG, source)
        if stale:
            found.translations[source] = stale
    for msgid, where in messages.unlisted(LANG).items():  # once `messages add` has listed them, no longer
        found.messages.setdefault(where[0].rsplit(":", 1)[0], []).append(msgid)
    found.message_translations = messages.to_write(LANG)
    found.stray_messages = [p for p in messages.problems(LANG) if "no longer in the code" in p]
    found.refresh = notebooks_to_refresh()
    for name, cells in stale_course_maps().items():  # 00_start_here: its code is as it was, the map it shows is not
        listed = found.refresh.setdefault(name, [])
        listed += [cell for cell in cells if cell not in listed]
    found.untracked = untracked_files()
    found.exercises = exercises_to_define()
    return found


def interpreter() -> str:
    """This Python as a command to paste here: ``.venv/bin/python`` from the checkout (else its full path)."""
    relative = os.path.relpath(sys.executable)
    return sys.executable if relative.startswith("..") else relative


def report(changed: dict[str, list[str]], needs: Todo, seconds: float, lag: bool, python: str = "python") -> str:
    lines = [f"make sync: {len(changed)} generators in {seconds:.1f} s"]
    touched = [(name, files) for name, files in changed.items() if files]
    if touched:
        lines.append("changed:")
        for name, files in touched:
            shown = ", ".join(files[:6]) + (f" and {len(files) - 6} more" if len(files) > 6 else "")
            lines.append(f"  {name}: {shown}")
    else:
        lines.append("changed: nothing (everything generated was current)")
    if not needs:
        lines.append("nothing needs a person. Next: make check")
        return "\n".join(lines)
    lines.append("still needs a person:")
    if needs.exercises:
        lines.append("  define the exercises the notebooks check (until then check() prints 'There is no exercise' "
                     "and make refresh stores that ✗):")
        lines += [f"    {problem}" for problem in needs.exercises]
    if needs.translations:
        count = sum(map(len, needs.translations.values()))
        rule = ("they show the English with a 'not yet translated' note (translations_may_lag = true)" if lag else
                "make test fails until they are translated (translations/settings.toml: translations_may_lag = false)")
        lines.append(f"  translate {count} cell(s) or paragraph(s) into Chinese; {rule}:")
        for source, stale in needs.translations.items():
            lines += [f"    {problem}" for problem in stale[:5]]
            if len(stale) > 5:
                lines.append(f"    ... and {len(stale) - 5} more in {source}")
            short = Path(source).stem[:2] if source.endswith(".ipynb") else Path(source).stem
            lines.append(f"    {python} -m tools.i18n.editions export --missing {source} > {short}.txt   "
                         f"# write the Chinese in {short}.txt, then:")
            lines.append(f"    {python} -m tools.i18n.editions import {source} {short}.txt && make sync")
    if needs.messages:
        lines.append("  translate the messages of check(), hint() and the tools (course_utils/machinery/locale/zh/):")
        for code_file, ids in needs.messages.items():
            lines.append(f"    {python} -m tools.i18n.messages add {message_part(code_file)} {code_file}   "
                         f"# {len(ids)} message(s); write their msgstr, then make sync")
    if needs.message_translations:
        rule = ("they show in English (translations_may_lag = true)" if lag else
                "make test fails until they are translated (translations_may_lag = false)")
        lines.append(f"  write the Chinese of the messages added without it; {rule}:")
        for part, ids in needs.message_translations.items():
            lines.append(f"    course_utils/machinery/locale/zh/{part}: {len(ids)} empty msgstr "
                         f"({python} -m tools.i18n.messages missing lists them)")
    if needs.stray_messages:
        lines.append("  delete the translations of messages the code no longer has:")
        lines += [f"    {problem}" for problem in needs.stray_messages[:10]]
    if needs.refresh:
        names = " ".join(needs.refresh)
        lines.append("  re-execute the notebooks whose code changed since the last commit (ignore it if you did), "
                     "or that print the table of notebooks as it was (00_start_here):")
        for name, cells in needs.refresh.items():
            lines.append(f"    {name}: code cells {', '.join(cells[:8])}{' ...' if len(cells) > 8 else ''}")
        lines.append(f'    make refresh NB="{names}"')
    if needs.untracked:
        lines.append("  add the new files to git (the tests and the wheel see only tracked files):")
        lines.append("    git add " + " ".join(needs.untracked))
    lines.append("then: make sync again if you changed anything above, and make check")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-learner", action="store_true", help="skip the learner editions in build/")
    args = parser.parse_args(argv)
    from tools.i18n import editions

    start = time.perf_counter()
    changed = run_generators(learner=not args.no_learner)
    needs = todo()
    print(report(changed, needs, time.perf_counter() - start, editions.translations_may_lag(), interpreter()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
