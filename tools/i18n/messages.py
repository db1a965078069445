"""The message catalogue of check(), hint(), doctor(), the other machinery and the tools' generated text: extract,
compile, verify.

Translations are standard PO files, ``course_utils/machinery/locale/<lang>/*.po`` (one part per area: ``machinery.po``,
``nb03.po``, ``tools.po``); ``compile`` merges them into the one catalogue the course reads, ``LC_MESSAGES/course.mo``
(committed: an installed course needs no Babel). Messages are every ``_("...")`` and ``N_("...")`` of
``course_utils/`` and ``tools/`` (the hub aside), found by Babel's extractor, and the texts of the exercises' tables in
``course_utils/machinery/exercises/nbNN.toml`` (:func:`extract_toml`). Where ``translations_may_lag`` is true
(``course_utils/course.toml``), a message with no translation yet shows in English and the tests warn.

Usage::

    python -m tools.i18n.messages missing            # messages in the code without a Chinese translation
    python -m tools.i18n.messages add nb03.po course_utils/machinery/exercises/nb03.py   # append them, empty, to a part
    python -m tools.i18n.messages compile            # write course.mo from the parts (make sync runs it)
    python -m tools.i18n.messages verify             # what the tests check: complete, no stray entries, course.mo fresh
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_file
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

from course_utils.machinery.layout import SETTINGS
from course_utils.machinery.messages import LANGUAGES

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "course_utils"
TOOLS = ROOT / "tools"
LOCALE = PACKAGE / "machinery" / "locale"
KEYWORDS = {"_": None, "N_": None}
_FIXED_DATE = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def extract_toml(fileobj: Any, keywords: Any, comment_tags: Any, options: Any) -> Iterator[Any]:
    """Babel's extraction method for an exercises' ``nbNN.toml``: the texts of each table (``task``, ``what``, each
    of ``hints``, ``praise``: the kit's ``TEXT_FIELDS``), each at the line where it stands, as ``(line, None,
    message, [])`` (what Babel's own extractors yield, whatever its type hints say)."""
    from course_utils.machinery.exercise_kit import TEXT_FIELDS

    text = fileobj.read().decode("utf-8")
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        for token in [] if line.lstrip().startswith("#") else _TOML_STRING.findall(line):
            with contextlib.suppress(tomllib.TOMLDecodeError):
                lines.setdefault(tomllib.loads(f"v = {token}")["v"], number)
    for table in tomllib.loads(text).values():
        for name in TEXT_FIELDS:
            for message in [table[name]] if isinstance(table.get(name), str) else table.get(name, []):
                yield lines.get(message, 1), None, message, []


_TOML_STRING = re.compile(r""""(?:[^"\\]|\\.)*"|'[^']*'""")  # a basic or literal string on one line


def source_messages(files: Iterable[Path] | None = None) -> dict[str, list[str]]:
    """Every message marked in the code, and the exercises' texts: msgid -> ["path:line", ...]."""
    found: dict[str, list[str]] = {}
    code = [*PACKAGE.rglob("*.py"), *(PACKAGE / "machinery" / "exercises").glob("nb[0-9][0-9].toml"),
            *(path for path in TOOLS.rglob("*.py") if "hub" not in path.relative_to(TOOLS).parts)]
    for path in sorted(files if files is not None else code):
        method = extract_toml if path.suffix == ".toml" else "python"
        for lineno, message, _comments, _context in extract_from_file(method, str(path), keywords=KEYWORDS):
            if isinstance(message, tuple):  # plural forms are not used
                message = message[0]
            if message:
                found.setdefault(message, []).append(f"{path.relative_to(ROOT)}:{lineno}")
    return found


def parts(lang: str) -> list[Path]:
    return sorted((LOCALE / lang).glob("*.po"))


def read_part(path: Path) -> Catalog:
    with path.open("rb") as handle:
        return read_po(handle, locale=None, abort_invalid=True)


def merged(lang: str) -> tuple[Catalog, list[str]]:
    """All parts of ``lang`` as one catalogue; problems: the same message translated two ways."""
    # a fixed creation date: course.mo must be the same bytes whenever it is compiled from the same .po files
    catalog = Catalog(locale=lang, domain="course", project="PyTorch Hooks, hands-on", fuzzy=False,
                      creation_date=_FIXED_DATE, revision_date=_FIXED_DATE)
    problems: list[str] = []
    seen: dict[str, tuple[str, str]] = {}
    for path in parts(lang):
        for message in read_part(path):
            if not message.id or not message.string or message.fuzzy:
                continue
            msgid, string = str(message.id), str(message.string)  # the course has no plural forms
            if msgid in seen and seen[msgid][0] != string:
                problems.append(f"{path.name} and {seen[msgid][1]} translate {msgid[:60]!r} differently")
                continue
            seen[msgid] = (string, path.name)
            catalog.add(message.id, message.string)
    return catalog, problems


def compiled(lang: str) -> bytes:
    catalog, _problems = merged(lang)
    buffer = io.BytesIO()
    write_mo(buffer, catalog, use_fuzzy=False)
    return buffer.getvalue()


def mo_path(lang: str) -> Path:
    return LOCALE / lang / "LC_MESSAGES" / "course.mo"


def missing(lang: str) -> dict[str, list[str]]:
    """The messages of the code without a translation (added to a part with an empty msgstr, or not at all)."""
    catalog, _problems = merged(lang)
    return {msgid: where for msgid, where in source_messages().items() if msgid not in catalog}


def unlisted(lang: str) -> dict[str, list[str]]:
    """The messages of the code that no part has yet, not even empty: what ``add`` is for."""
    listed = {message.id for path in parts(lang) for message in read_part(path) if message.id}
    return {msgid: where for msgid, where in source_messages().items() if msgid not in listed}


def to_write(lang: str) -> dict[str, list[str]]:
    """Part file name -> the messages it lists with no translation yet (after ``add``: the msgstr to write)."""
    untranslated = missing(lang)
    found = {path.name: [str(m.id) for m in read_part(path) if m.id in untranslated] for path in parts(lang)}
    return {name: ids for name, ids in found.items() if ids}


def problems(lang: str, may_lag: bool | None = None) -> list[str]:
    """Everything ``verify`` reports for ``lang``; empty when the catalogue is complete and compiled. Where the
    translation may lag (``may_lag``, else the course's setting), a message without a translation is no problem."""
    found = source_messages()
    catalog, clashes = merged(lang)
    out = list(clashes)
    lagging = SETTINGS.translations_may_lag if may_lag is None else may_lag
    for msgid, where in found.items():
        if msgid not in catalog and not lagging:
            out.append(f"no {lang} translation of {msgid[:70]!r} ({where[0]}): add it to a .po in {LOCALE / lang}")
    for message in catalog:
        if message.id and message.id not in found:
            out.append(f"{lang} translation of {message.id[:70]!r} is no longer in the code: delete it")
    out += [f"{_shown(path)}: not a .po part, so never compiled: rename or delete it"
            for path in sorted((LOCALE / lang).iterdir()) if path.name != "LC_MESSAGES" and path.suffix != ".po"]
    if not mo_path(lang).exists() or mo_path(lang).read_bytes() != compiled(lang):
        out.append(f"{_shown(mo_path(lang))} is not compiled from the .po files: "
                   "run python -m tools.i18n.messages compile")
    return out


def _shown(path: Path) -> Path:
    """``path`` relative to the repository when it is inside it (as messages show paths)."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def add(lang: str, part_name: str, files: list[Path]) -> int:
    """Append the messages of ``files`` that no part translates yet to the part ``part_name`` (``nb03.po``: anything
    else is a ``ValueError``), with an empty msgstr; no ``#:`` references, which go stale (``missing`` says where)."""
    if Path(part_name).name != part_name or not part_name.endswith(".po") or part_name == ".po":
        raise ValueError(f"the part is a PO file's name in {_shown(LOCALE / lang)}, such as nb03.po or "
                         f"tools.po; got {part_name!r}")
    missing_files = [str(path) for path in files if not path.is_file()]
    if missing_files:
        raise ValueError(f"no such file: {', '.join(missing_files)} (give the code files whose messages to add)")
    path = LOCALE / lang / part_name
    catalog = read_part(path) if path.exists() else Catalog(locale=lang, domain="course", fuzzy=False)
    already, _problems = merged(lang)
    added = 0
    for msgid in source_messages(files):
        if msgid in already or msgid in catalog:
            continue
        catalog.add(msgid, "")
        added += 1
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        write_po(handle, catalog, width=0, omit_header=True, no_location=True)
    return added


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in ("missing", "compile", "verify"):
        sub.add_parser(command)
    adding = sub.add_parser("add")
    adding.add_argument("part")
    adding.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--lang", default="zh", choices=LANGUAGES[1:])
    args = parser.parse_args(argv)
    if args.command == "missing":
        for msgid, where in missing(args.lang).items():
            print(f"{where[0]}: {msgid!r}")
        return 0
    if args.command == "add":
        try:
            added = add(args.lang, args.part, [p.resolve() for p in args.files])
        except ValueError as error:
            parser.error(str(error))
        print(f"{added} messages added to {_shown(LOCALE / args.lang / args.part)}: write their "
              "translations there, then python -m tools.i18n.messages compile (or make sync)")
        return 0
    if args.command == "compile":
        _catalog, clashes = merged(args.lang)
        if clashes:
            print("\n".join(clashes), file=sys.stderr)
            return 1
        mo_path(args.lang).parent.mkdir(parents=True, exist_ok=True)
        mo_path(args.lang).write_bytes(compiled(args.lang))
        print(f"wrote {mo_path(args.lang).relative_to(ROOT)}")
        return 0
    found, untranslated = problems(args.lang), missing(args.lang)
    print("\n".join(found) if found
          else f"{args.lang}: every message translated, course.mo compiled" if not untranslated
          else f"{args.lang}: {len(untranslated)} messages show in English until translated (translations may lag; "
               "python -m tools.i18n.messages missing lists them), course.mo compiled")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
