"""``make sync``: every generator of the course, each run only when what it reads or writes changed, then what
changed and what still needs a person.

Each :class:`Step` declares the globs it reads and writes and runs only when one of those files differs from what it
left last time (hashes in build/sync/stamps.json, as d2l-book keeps its build's); the course's code and settings
count as read by every step. The generators run in order (:func:`generators`: the message catalogue first, since the
generated tables' Chinese is read from it); then the lists of what needs a person (:func:`checks`, and from git
:func:`needs`). It changes sources only; a second run changes nothing.

Usage: ``python -m tools sync`` (``make sync``; ``--all``: every step, whatever the stamps say)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import io
import json
import os
import re
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from course_utils.machinery.layout import CHECK_CALL, NOTEBOOK_GLOB, SETTINGS
from tools.repo import ROOT, GitError, changes, committed, notebook_text, with_region

NOTEBOOKS = ROOT / "notebooks"
README = ROOT / "README.md"
STAMPS = ROOT / "build" / "sync" / "stamps.json"
TRANSLATED = SETTINGS.languages[1:]

_SOLUTION = re.compile(r"^\s*### BEGIN SOLUTION\s*$", re.MULTILINE)
_CHECK_ID = re.compile(CHECK_CALL)

# What the steps read and write, as globs from the repository's root.
CODE = ("course_utils/**/*.py", "tools/**/*.py", "course_utils/**/*.toml")  # course.toml, the exercises' texts
ENGLISH = (f"notebooks/{NOTEBOOK_GLOB}",)
EDITIONS = tuple(f"notebooks/{lang}/{NOTEBOOK_GLOB}" for lang in TRANSLATED)
GUIDES = (*SETTINGS.guides, *(pattern.format(lang=lang) for pattern in SETTINGS.guides.values() for lang in TRANSLATED))
PO = ("translations/*/*.po",)
MESSAGES = ("course_utils/machinery/locale/*/*.po",)
MO = ("course_utils/machinery/locale/*/LC_MESSAGES/course.mo",)
TABLES = ("tools/compat/verified.json", "tools/notebook_timings.json")


def english_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob(NOTEBOOK_GLOB))


def mark_solution_cells(path: Path) -> bool:
    """Give each code cell with solution markers the ``solution`` tag and nbgrader's metadata (its ``grade_id`` from
    its ``check("NN.k", ...)``, else its position; one it has is kept); True if the notebook changed."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    before = nbformat.writes(notebook)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code" and _SOLUTION.search(cell.source):
            tags = cell.metadata.get("tags", [])
            cell.metadata["tags"] = tags if "solution" in tags else [*tags, "solution"]
            match = _CHECK_ID.search(cell.source)
            grade_id = f"exercise-{match[1]}-{match[2]}" if match else f"solution-{path.name[:2]}-{index}"
            kept = {"grade_id": cell.metadata["nbgrader"]["grade_id"]} if "grade_id" in cell.metadata.get(
                "nbgrader", {}) else {}
            cell.metadata["nbgrader"] = {"grade": False, "grade_id": grade_id, "locked": False, "schema_version": 3,
                                         "solution": True, "task": False, **kept}
    changed = nbformat.writes(notebook) != before
    if changed:
        nbformat.write(notebook, path)
    return changed


def readme_with_course_map(text: str) -> str:
    """README.md's text with its course-map region made from the notebooks' openings."""
    from course_utils.machinery.course import course_map_markdown

    return with_region(text, "course-map", course_map_markdown(lang="en"), "README.md")


def write_course_map() -> None:
    text = README.read_text(encoding="utf-8")
    if (new := readme_with_course_map(text)) != text:
        README.write_text(new, encoding="utf-8")


def tool(module: str, *args: str, languages: tuple[str, ...] = ("",)) -> Callable[[], None]:
    """A step that runs ``python -m module args`` here, once per language of ``languages`` (``--lang`` added)."""
    def run() -> None:
        for lang in languages:
            if code := importlib.import_module(module).main([*(["--lang", lang] if lang else []), *args]):
                raise SystemExit(f"python -m {module} {' '.join(args)} stopped ({code})")
    return run


@dataclass(frozen=True)
class Step:
    """A generator (or a list of what needs a person): what it reads, what it writes, and how it runs; ``run``
    returns what to keep for the report (JSON), kept with the stamps while its files stay as they are."""

    name: str
    reads: tuple[str, ...]
    run: Callable[[], Any]
    writes: tuple[str, ...] = ()


_KNOWN: dict[Path, tuple[int, int, str]] = {}  # a file's (modification time, size, hash): each hashed once


def hashes(globs: tuple[str, ...]) -> dict[str, str]:
    """The hash of each file the globs match, by its path from the root."""
    found = {}
    for path in sorted({path for glob in globs for path in ROOT.glob(glob) if "__pycache__" not in path.parts}):
        if path.is_file():
            status = path.stat()
            if _KNOWN.get(path, (None, None))[:2] != (status.st_mtime_ns, status.st_size):
                _KNOWN[path] = (status.st_mtime_ns, status.st_size, hashlib.sha256(path.read_bytes()).hexdigest())
            found[str(path.relative_to(ROOT))] = _KNOWN[path][2]
    return found


def _digest(found: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()


def generators() -> list[Step]:
    guide = ("notebooks/instructor_guide.md",)
    found = [
        Step("message catalogue", MESSAGES, tool("tools.i18n.messages", "compile", languages=TRANSLATED), MO),
        Step("solution cells", ENGLISH, lambda: [mark_solution_cells(path) for path in english_notebooks()], ENGLISH),
        Step("cloud links", (*ENGLISH, "README.md", *TABLES), tool("tools.cloud_badges"), (*ENGLISH, "README.md")),
        Step("course map", (*ENGLISH, "README.md"), write_course_map, ("README.md",)),
        Step("timings and agendas", (*ENGLISH, *guide, *TABLES), tool("tools.instructor_guide"), guide),
        Step("translations", (*ENGLISH, *SETTINGS.guides, *PO), tool("tools.i18n.editions", "update",
                                                                     languages=TRANSLATED), PO),
        Step("translated editions", (*ENGLISH, *EDITIONS, *GUIDES, *PO, *MO, *TABLES),
             tool("tools.i18n.editions", "build", languages=TRANSLATED), (*EDITIONS, *GUIDES)),
    ]
    learner = tuple(f"build/{lang}/learner/*.ipynb".replace("/en/", "/") for lang in SETTINGS.languages)
    return [*found, Step("learner editions", (*ENGLISH, *EDITIONS),
                         tool("tools.build_editions", "learner", languages=SETTINGS.languages), learner)]


def run_steps(steps: list[Step], stamps: dict[str, dict], problems: list[str]) -> dict[str, Any]:
    """Run each step whose files changed since its stamp. Returns, by name, what each generator changed (None: it had
    nothing to do) or what each list found. A step that fails is named in ``problems`` and runs again next time."""
    done: dict[str, Any] = {}
    for step in steps:
        reads, writes = hashes((*step.reads, *CODE)), hashes(step.writes)
        key = {"reads": _digest(reads), "writes": _digest(writes)}
        stamp = stamps.get(step.name, {})
        if {k: stamp.get(k) for k in key} == key:
            done[step.name] = None if step.writes else stamp["result"]
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # each tool's own report: the summary says it once
                result = step.run()
        except (SystemExit, ValueError) as error:
            problems.append(f"{step.name}: {error}")
            stamps.pop(step.name, None)
            continue
        after = hashes(step.writes)
        if step.writes:
            result = sorted(path for path in set(after) | set(writes) if after.get(path) != writes.get(path))
        stamps[step.name] = {"reads": _digest(hashes((*step.reads, *CODE))), "writes": _digest(after),
                             "result": result}
        done[step.name] = result
    return done


def _code_cells(text: str) -> dict[str, dict]:
    return {cell["id"]: cell for cell in json.loads(text)["cells"] if cell["cell_type"] == "code"}


def _code(cell: dict) -> str:
    """A code cell's code without the generated install (which prints nothing)."""
    from tools.cloud_badges import INSTALL_BLOCK

    return INSTALL_BLOCK.sub("", "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"])


def cells_to_refresh(current: str, committed_text: str | None) -> list[str]:
    """The ids of the code cells of a notebook (its JSON text) whose stored outputs may no longer be what the code
    prints: never run, or code changed since ``committed_text`` (the last commit's version, or the staged one of a
    new notebook; None: a new notebook git does not know yet) while the outputs did not. A new cell that ran, and the
    generated install block (it prints nothing), do not count."""
    cells = _code_cells(current)
    before = _code_cells(committed_text) if committed_text is not None else {}
    stale = []
    for cell_id, cell in cells.items():
        old = before.get(cell_id)
        if cell.get("execution_count") is None or (
                old is not None and _code(old) != _code(cell) and old.get("outputs") == cell.get("outputs")):
            stale.append(cell_id)
    return stale


def notebooks_to_refresh(changed: dict[str, str]) -> dict[str, list[str]]:
    """Notebook path -> code cells that need ``make refresh``, for the notebooks that differ from the last commit."""
    found = {}
    for name in changed:
        if re.fullmatch(r"notebooks/(?:\w+/)?\d\d_\w+\.ipynb", name) and (ROOT / name).is_file():
            before = committed(name) or committed(name, "")  # a new notebook: the one git add staged, if any
            cells = cells_to_refresh((ROOT / name).read_text(encoding="utf-8"), before)
            if cells:
                found[name] = cells
    for name in [n for n in found if n.count("/") == 1]:  # the translated twins run the same code
        for lang in TRANSLATED:
            twin = name.replace("notebooks/", f"notebooks/{lang}/", 1)
            if (ROOT / twin).is_file():
                found[twin] = found[name] + [cell for cell in found.get(twin, []) if cell not in found[name]]
    return dict(sorted(found.items(), key=lambda item: (re.sub(r"/\w+/", "/", item[0]), item[0])))


def stale_course_maps() -> dict[str, list[str]]:
    """The notebooks (every language) whose stored output shows the course map as it was: a new notebook, or a
    changed opening, changes what ``course_map_markdown()`` prints in 00_start_here."""
    from course_utils.machinery.course import course_map_markdown

    found = {}
    for lang in SETTINGS.languages:
        now = course_map_markdown(lang=lang)
        for path in sorted((NOTEBOOKS / lang if lang != "en" else NOTEBOOKS).glob(NOTEBOOK_GLOB)):
            if stale := [cell["id"] for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]
                         if cell["cell_type"] == "code" and "course_map_markdown(" in "".join(cell["source"])
                         and not any("".join(out.get("data", {}).get("text/markdown", "")) == now
                                     for out in cell.get("outputs", []))]:
                found[str(path.relative_to(ROOT))] = stale
    return found


def message_part(code_file: str) -> str:
    """The PO part a code file's messages belong in: ``nbNN.po`` for an exercise module or its texts (``nbNN.toml``),
    else machinery or tools."""
    match = re.search(r"exercises/(nb\d\d)\.(?:py|toml)$", code_file)
    if match:
        return f"{match[1]}.po"
    return "tools.po" if code_file.startswith("tools/") else "machinery.po"


def undefined_exercises(checked: dict[str, list[str]], defined: Collection[str],
                        module_files: Collection[str]) -> list[str]:
    """What to do about each notebook whose ``check("NN.k", ...)`` names an exercise no module defines.

    ``checked``: notebook file name -> the exercise ids its cells check; ``defined``: the catalogue's ids;
    ``module_files``: the ``nbNN`` exercise modules that exist."""
    found = []
    for name, ids in sorted(checked.items()):
        missing = sorted(set(ids) - set(defined))
        if not missing:
            continue
        module = f"nb{name[:2]}"
        where = f"course_utils/machinery/exercises/{module}.py"
        what = (f"add them to the EXERCISES of {where}, their texts to {module}.toml" if module in module_files else
                f"write {where} with its EXERCISES, {module}.toml with their texts, and "
                f"tests/exercise_cases/{module}.py with their cases")
        found.append(f"{name}: check() of {', '.join(missing)}, which no exercise module defines: {what} "
                     "(CONTRIBUTING.md, \"Add or change an exercise\")")
    return found


def exercises_to_define() -> list[str]:
    """:func:`undefined_exercises` for the course's English notebooks."""
    from course_utils.machinery.exercises import MODULES, catalogue

    checked = {path.name: [f"{m[1]}.{m[2]}" for m in _CHECK_ID.finditer(notebook_text(path, "code"))]
               for path in english_notebooks()}
    return undefined_exercises(checked, catalogue(), MODULES)


def translations_to_do() -> list[str]:
    from tools.i18n import editions

    lines, python = [], interpreter()
    for lang in TRANSLATED:
        for source in editions.all_sources():
            if stale := editions.stale(lang, source):
                short = Path(source).stem[:2] if source.endswith(".ipynb") else Path(source).stem
                lines += [*stale[:5], *([f"... and {len(stale) - 5} more in {source}"] if len(stale) > 5 else []),
                          f"{python} -m tools.i18n.editions export --missing {source} > {short}.txt   # write the "
                          f"translation in {short}.txt, then:",
                          f"{python} -m tools.i18n.editions import {source} {short}.txt && make sync"]
    return lines


def messages_to_do() -> list[str]:
    from tools.i18n import messages

    found: dict[str, list[str]] = {}
    for lang in TRANSLATED:
        for msgid, where in messages.unlisted(lang).items():  # once `messages add` has listed them, no longer
            found.setdefault(where[0].rsplit(":", 1)[0], []).append(msgid)
    rule = ("they show in English: translations_may_lag = true" if SETTINGS.translations_may_lag else
            "make test fails until they are translated")
    return [f"{interpreter()} -m tools.i18n.messages add {message_part(code)} {code}   # {len(ids)} message(s); "
            "write their msgstr, then make sync" for code, ids in found.items()] + [
        f"course_utils/machinery/locale/{lang}/{part}: {len(ids)} empty msgstr ({interpreter()} -m "
        f"tools.i18n.messages missing lists them; {rule})"
        for lang in TRANSLATED for part, ids in messages.to_write(lang).items()] + [
        p for lang in TRANSLATED for p in messages.problems(lang) if "no longer in the code" in p][:10]


_MENTION = re.compile(r"\b(?:[Nn]otebooks? |[Ee]xercises? |[\"'])(\d\d(?:(?:, | and |, and )\d\d\b(?!\.\d))*)\b|"
                      r"\b(\d\d)_[a-z]\w*\.ipynb\b|\b(\d\d)[–-](\d\d)\b")


def _mentions(text: str, numbers: set[str]) -> list[str]:
    """The mentions in ``text`` of notebooks not in ``numbers``: "notebook 10", "notebooks 02, 04 and 10", "exercise
    10.3", "10_x.ipynb", "08–10" (a range up to one past the last notebook: not one of minutes)."""
    return sorted({match[0].strip("\"'") for match in _MENTION.finditer(text) if any(
        n not in numbers and (not match[4] or int(n) <= int(max(numbers)) + 1)
        for group in match.groups() if group for n in re.findall(r"\d\d", group))})


def _paragraphs(text: str) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of each paragraph or block of a Markdown text (blank lines between): a removal
    changes a paragraph, so it is listed whole (its other sentences may count or name the notebook in words)."""
    found, start, lines = [], 1, text.splitlines()
    for number, line in enumerate([*lines, ""], start=1):
        if not line.strip():
            if number > start:
                found.append((start, number - 1, "\n".join(lines[start - 1:number - 1])))
            start = number + 1
    return found


_DATA_FILES = {"tools/compat/verified.json": lambda data: data,  # notebook stem -> what it was verified on
               "tools/notebook_timings.json": lambda data: data.get("seconds", {})}  # make timings


def leftovers() -> list[str]:
    """What refers to a notebook the course no longer has: mentions in the English notebooks (by cell) and guides (by
    paragraph), the files of its number (exercises, cases, messages, translation, translated edition), the entries of
    the data files keyed by notebook, teaching modules no notebook imports (with the tests that import them; one that
    a test of something else imports only inside its test stays), and the docstrings of course_utils that name such
    a module or one removed. An agenda that names it stops the guide's generator, which says so."""
    numbers = {path.name[:2] for path in english_notebooks()}
    found = []
    for path in english_notebooks():
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if named := _mentions("".join(cell["source"]), numbers):
                found.append(f"notebooks/{path.name} cell {cell.get('id')}: mentions {', '.join(named)}")
    for guide in (*SETTINGS.guides, "CONTRIBUTING.md"):
        for first, last, text in _paragraphs((ROOT / guide).read_text(encoding="utf-8")):
            text = "\n".join(line for line in text.splitlines() if "generated by make sync" not in line)
            if named := _mentions(text, numbers):
                where = f"line {first}" if first == last else f"lines {first}–{last} (read the paragraph whole)"
                found.append(f"{guide} {where}: mentions {', '.join(named)}")
    patterns = ("course_utils/machinery/exercises/nb{n}.*", "tests/exercise_cases/nb{n}.py",
                "course_utils/machinery/locale/*/nb{n}.po", "translations/*/{n}_*.po", "notebooks/*/{n}_*.ipynb")
    orphans = sorted({name for pattern in patterns for path in ROOT.glob(pattern.format(n="[0-9]" * 2))
                      if re.findall(r"(?:nb|/)(\d\d)[_.]", name := str(path.relative_to(ROOT)))[0] not in numbers})
    found += [f"{path}: belongs to a notebook the course no longer has" for path in orphans]
    for name, entries in _DATA_FILES.items():
        with contextlib.suppress(OSError, ValueError):
            if gone := sorted(key for key in entries(json.loads((ROOT / name).read_text(encoding="utf-8")))
                              if re.match(r"\d\d_", key) and key[:2] not in numbers):
                found.append(f"{name}: entries of {', '.join(gone)} (delete them)")
    return found + _module_leftovers(orphans)


def _module_leftovers(orphans: list[str]) -> list[str]:
    """:func:`leftovers`' teaching modules no notebook imports, and the course_utils docstrings naming them."""
    from tools import check

    found = []
    modules = check.python_modules()
    sources = {name: path.read_text(encoding="utf-8") for name, path in modules.items()}
    exports = check._exports(modules)
    teaching = {f"course_utils.{path.stem}" for path in ROOT.glob("course_utils/*.py") if path.stem != "__init__"}
    orphan = {f"course_utils.machinery.exercises.{Path(path).stem}" for path in orphans}
    users = [notebook_text(path, "code") for path in english_notebooks()] + [
        code for name, code in sources.items() if name.startswith("course_utils.") and name not in teaching | orphan]
    used: set[str] = set()
    while more := {name for name in teaching - used if any(check.imports(code, name, exports)
                                                           for code in [*users, *(sources[u] for u in used)])}:
        used |= more
    unused = []
    for name in sorted(teaching - used):
        chain = check.importers({name}, sources, exports)
        tests = sorted(user for user in chain if modules[user].name.startswith("test_"))
        if any(check.imports(sources[test], name, exports) and not any(
                check.imports(_top_level_imports(sources[test]), module, exports) for module in chain)
               for test in tests):
            continue  # a test of something else uses it inside a test (test_cheatsheet's DDP row): it stays
        unused.append(name)
        files = sorted({str(modules[test].relative_to(ROOT)) for test in tests})
        found.append(f"{name.replace('.', '/')}.py: no notebook imports it, nor a module one imports"
                     + (f" (tests that import it: {', '.join(files)}: remove the tests of this module, a whole "
                        "file only if it tests nothing else)" if files else ""))
    with contextlib.suppress(GitError):
        unused += [f"course_utils.{Path(path).stem}" for path, status in changes().items()
                   if status == "D" and re.fullmatch(r"course_utils/\w+\.py", path)]
    for name in [module for module in modules if module.split(".")[0] == "course_utils" and module not in {
            *unused, *orphan}]:
        for leaf in sorted({module.rsplit(".", 1)[-1] for module in unused} - {name.rsplit(".", 1)[-1]}):
            lines = [str(number) for number, line in enumerate(sources[name].splitlines(), start=1)
                     if re.search(rf"(?<![A-Za-z0-9]){leaf}(?![A-Za-z0-9])", line)]
            if lines:
                found.append(f"{modules[name].relative_to(ROOT)} line{'s' * (len(lines) > 1)} {', '.join(lines)}: "
                             f"names {leaf} (a docstring or Usage line to change when the module goes)")
    return found


def _top_level_imports(code: str) -> str:
    """The imports of a test file at its top level (not those inside a test)."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    return "\n".join(ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)))


def checks() -> list[Step]:
    """The lists of what needs a person that depend only on the files (kept with the stamps like the generators)."""
    return [
        Step("exercises to define", ENGLISH, exercises_to_define),
        Step("leftovers", (*ENGLISH, *EDITIONS, *SETTINGS.guides, *PO, *MESSAGES, *TABLES, "tests/**/*.py",
                           "CONTRIBUTING.md"), leftovers),
        Step("translations to do", (*ENGLISH, *SETTINGS.guides, *PO), translations_to_do),
        Step("messages to translate", MESSAGES, messages_to_do),
        Step("course maps shown", (*ENGLISH, *EDITIONS, *MO), stale_course_maps),
    ]


HEADINGS = {
    "failed": "fix what stopped a generator (it runs again next time):",
    "exercises to define": "define the exercises the notebooks check (until then check() prints 'There is no "
                           "exercise' and make refresh stores that ✗):",
    "leftovers": "what refers to a notebook the course no longer has (CONTRIBUTING.md, \"Remove a notebook\"): "
                 "change the text, git rm the files",
    "translations to do": "translate these cells or paragraphs; {lag}",
    "messages to translate": "translate the messages of check(), hint() and the tools "
                             "(course_utils/machinery/locale/){add}:",
    "refresh": "re-execute the notebooks whose code changed since the last commit (ignore it if you did), or that "
               "print the table of notebooks as it was (00_start_here):",
    "untracked": "add the new files to git (the tests and the wheel see only tracked files):",
}


def needs(found: dict[str, Any], failed: list[str]) -> dict[str, list[str]]:
    """What needs a person: the lists the check steps found, and from git (read now, never kept) what to refresh
    and to add."""
    try:
        changed = changes()
    except GitError:  # no git, or no repository (a copy of the course): nothing to compare with
        changed = {}
    refresh = notebooks_to_refresh(changed)
    for name, cells in (found.get("course maps shown") or {}).items():  # 00_start_here: its map, not its code
        refresh[name] = [*refresh.get(name, []), *(cell for cell in cells if cell not in refresh.get(name, []))]
    lines = [f"{name}: code cells {', '.join(cells[:8])}{' ...' if len(cells) > 8 else ''}"
             for name, cells in refresh.items()]
    untracked = [path for path, status in changed.items() if status == "?"]
    return {"failed": failed, **{name: found.get(name) or [] for name in HEADINGS if name in found},
            "refresh": [*lines, f'make refresh NB="{" ".join(refresh)}"'] if refresh else [],
            "untracked": ["git add " + " ".join(untracked)] if untracked else []}


def interpreter() -> str:
    """This Python as a command to paste here: ``.venv/bin/python`` from the checkout (else its full path)."""
    relative = os.path.relpath(sys.executable)
    return sys.executable if relative.startswith("..") else relative


def report(changed: dict[str, list[str] | None], needs: dict[str, list[str]], seconds: float) -> str:
    ran = sum(files is not None for files in changed.values())
    lines = [f"make sync: {len(changed)} generators, {ran} with something to do, in {seconds:.1f} s"]
    touched = [f"  {name}: " + ", ".join(files[:6]) + (f" and {len(files) - 6} more" if len(files) > 6 else "")
               for name, files in changed.items() if files]
    lines += ["changed:", *touched] if touched else ["changed: nothing (everything generated was current)"]
    if not any(needs.values()):
        return "\n".join([*lines, "nothing needs a person. Next: make check"])
    lines.append("still needs a person:")
    messages = needs.get("messages to translate") or []
    words = {"lag": "they show the English with a 'not yet translated' note (course_utils/course.toml: "
                    "translations_may_lag = true):" if SETTINGS.translations_may_lag else
             "make test fails until they are translated (course_utils/course.toml: translations_may_lag = false):",
             "add": "".join(f", {what}" for what, shown in (
                 ("add them", any(".messages add " in line for line in messages)),
                 ("write their translation", any("empty msgstr" in line for line in messages)),
                 ("delete those the code no longer has", any("no longer in the code" in line for line in messages)))
                 if shown).replace(", ", ": ", 1)}
    for name, heading in HEADINGS.items():
        heading = heading.format(**words)  # read when the report is made: the fork's own setting
        lines += [f"  {heading}", *(f"    {line}" for line in needs.get(name, []))] if needs.get(name) else []
    return "\n".join([*lines, "then: make sync again if you changed anything above, and make check"])


def read_stamps(ignore: bool = False) -> dict[str, dict]:
    try:
        return {} if ignore else json.loads(STAMPS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools sync", description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="run every step, whatever the stamps say")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    stamps, failed = read_stamps(args.all), list[str]()
    generated = run_steps(generators(), stamps, failed)
    found = run_steps(checks(), stamps, failed)
    STAMPS.parent.mkdir(parents=True, exist_ok=True)
    STAMPS.write_text(json.dumps(stamps, indent=1), encoding="utf-8")
    print(report(generated, needs(found, failed), time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
