"""The Chinese edition, made from the English one: notebooks and guides rebuilt from English + translation files.

``translations/<lang>/`` holds one standard PO file per notebook and guide, one entry per unit (``units.py``): each
block of a markdown cell or guide, each comment and shown string of a code cell. A notebook's entry has the cell id
as ``msgctxt``; a guide's is found by its English alone; a ``source-sha256`` comment holds the hash of the English.
The built code is the English code with the translations written into the same tokens, and ``setup_notebook(``
gets ``lang="zh"``. Generated regions (``<!-- cloud: ... -->``, ``<!-- X:start -->``) are made again in the
translation's language, their words from the message catalogue (``messages.py``), never translated by hand.

When an English unit changes, ``update`` keeps the old translation, fuzzy, with the old English beside it (an
obsolete ``#~`` entry), and the build shows the English under a "not yet translated" note -- unless only numbers or
code names changed: then the translation gets the same change (:func:`carried`). ``stale`` names every unit without
a current translation; whether that fails ``make test`` is ``translations_may_lag`` in ``course_utils/course.toml``.

Usage::

    python -m tools.i18n.editions update  # after editing English: the PO files in line (never loses a translation)
    python -m tools.i18n.editions build   # notebooks/zh/*.ipynb, notebooks/zh/*.md, README.zh.md, the landing page
    python -m tools.i18n.editions stale   # what is untranslated or out of date (exit 1 if any, unless it may lag)
    python -m tools.i18n.editions export notebooks/03_forward_hooks.ipynb > 03.txt   # the entries as plain text
    python -m tools.i18n.editions export --missing notebooks/03_forward_hooks.ipynb > 03.txt   # only those to do
    python -m tools.i18n.editions import notebooks/03_forward_hooks.ipynb 03.txt  # translations back in

The plain-text form (CONTRIBUTING.md, "Update a translation") is an ``@@ KEY`` line (the cell id, ``.2``, ``.3`` ...
for a cell's further units; a guide's paragraph number) before each entry; ``@|`` lines are notes, ignored by
``import``.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import hashlib
import json
import posixpath
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from babel.messages.catalog import Catalog, Message
from babel.messages.pofile import read_po, write_po

from course_utils.machinery.course import course_map_markdown
from course_utils.machinery.layout import NOTEBOOK_GLOB, SETTINGS
from course_utils.machinery.messages import LANGUAGES, N_, _, in_language
from tools.i18n import units as units_module

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
TRANSLATIONS = ROOT / "translations"

GUIDES: dict[str, str] = dict(SETTINGS.guides)

# <!-- cloud: ... --> ... <!-- /cloud -->   and   <!-- timings:start ... --> ... <!-- timings:end -->
_REGION = re.compile(
    r"<!-- (?P<name>[\w-]+)(?::start|:)[^>]*-->.*?<!-- (?:/(?P=name)|(?P=name):end) -->", re.DOTALL)
_PLACEHOLDER = re.compile(r"<!-- generated: ([\w-]+) -->")
# The English guides' link to their translation ("**中文版：** [...](...)"); the translation links back there instead.
_SWITCH = "**中文版：**"
_SWITCH_BACK = "\x00switch\x00"
_SETUP_CALL = re.compile(r"\bsetup_notebook\((\s*\)?)")
# Guides whose code blocks are translated too (the Chinese README's quickstart opens the Chinese workspace first).
FENCES_TRANSLATED = ("README.md",)

# Shown above the English of a cell or paragraph whose translation is missing or out of date.
NOT_YET_TRANSLATED = N_("**Not yet translated:** this part is new or changed in English, and its translation has not "
                        "caught up yet; the English follows.")


class UntranslatedWarning(UserWarning):
    """Cells or paragraphs without a current translation, where ``translations_may_lag = true`` allows them."""


def lag_note(lang: str) -> str:
    """The visible note above an English text in a translated edition (a Markdown quote, in ``lang``)."""
    with in_language(lang):
        return "> " + _(NOT_YET_TRANSLATED)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Generated regions, made again in the translation's language (never translated by hand); other regions are prose.
COPIED_REGIONS = ("cloud", "verified", "timings", "agendas", "course-map")


def without_regions(text: str) -> tuple[str, dict[str, str]]:
    """``text`` with each copied region replaced by ``<!-- generated: NAME -->``; the regions by name."""
    regions: dict[str, str] = {}

    def keep(match: re.Match[str]) -> str:
        if match["name"] not in COPIED_REGIONS:
            return match[0]
        regions[match["name"]] = match[0]
        return f"<!-- generated: {match['name']} -->"

    return _REGION.sub(keep, text), regions


def with_regions(text: str, regions: dict[str, str], lang: str, notebook: str | None = None) -> str:
    """``text`` with each ``<!-- generated: NAME -->`` made again in ``lang`` (``notebook``: a notebook's links)."""
    def put_back(match: re.Match[str]) -> str:
        name, region = match[1], regions.get(match[1])
        if region is None:
            raise ValueError(f"the translation has a placeholder {match[0]!r} that the English text lacks")
        if name in ("cloud", "verified"):
            from tools import cloud_badges

            if notebook is not None:  # the translated notebook's own links, in its language
                return cloud_badges.links_block(notebook, cloud_badges.verified(), lang)
            return cloud_badges.readme_table(english_notebooks(), cloud_badges.verified(), lang)
        if name == "course-map":  # from the translated notebooks' openings
            table = course_map_markdown(NOTEBOOKS / lang, lang=lang)
            body = re.sub(r"\| `(\d\d_\w+\.ipynb)` \|", rf"| [`\1`](notebooks/{lang}/\1) |", table)
        else:  # the guide's timings and agendas
            from tools import instructor_guide

            body = instructor_guide.GENERATED[name](lang=lang)
        start, end = region.split("\n", 1)[0], region.rsplit("\n", 1)[-1]
        return f"{start}\n{body}\n{end}"

    return _PLACEHOLDER.sub(put_back, text)


def localized_code(source: str, lang: str) -> str:
    """The English code, with ``lang`` passed to ``setup_notebook(...)``."""
    return _SETUP_CALL.sub(lambda m: f'setup_notebook(lang="{lang}")' if m[1].strip() == ")"
                           else f'setup_notebook(lang="{lang}", {m[1]}', source)


def english_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob(NOTEBOOK_GLOB))


def po_path(lang: str, source: str) -> Path:
    return TRANSLATIONS / lang / (Path(source).stem + ".po")


# -- the units to translate ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Unit:
    context: str | None  # the cell id (notebooks); None for guides, whose paragraphs are found by their text
    english: str  # generated regions replaced by placeholders
    where: str  # for messages: "notebooks/03_x.ipynb cell c012" or "README.md line 40"
    kind: str = "text"  # a Markdown block, or a "comment" or "string" of a code cell (tools/i18n/units.py)
    fstring: bool = False  # a string: an f-string, whose every {...} is a field


def notebook_units(path: Path) -> list[Unit]:
    """Each block of a markdown cell, each comment and shown string of a code cell (``units.py``)."""
    units = []
    for cell in json.loads(path.read_text())["cells"]:
        source, where = "".join(cell["source"]), f"{path.relative_to(ROOT)} cell {cell['id']}"
        if cell["cell_type"] == "markdown":
            pieces = units_module.markdown_blocks(without_regions(source)[0])
        else:
            pieces = units_module.code_pieces(source)
        units += [Unit(cell["id"], piece.text, f"{where} ({piece.kind} {piece.text[:40]!r})" if piece.kind != "text"
                       else f"{where} line {source[:piece.start].count(chr(10)) + 1}", piece.kind,
                       "f" in piece.shape.split(" ")[0].lower()) for piece in pieces]
    return units


def guide_units(source: str) -> list[Unit]:
    text = without_regions((ROOT / source).read_text())[0]
    return [Unit(None, piece.text, f"{source} line {text[:piece.start].count(chr(10)) + 1}")
            for piece in guide_pieces(text, source)]


def guide_pieces(text: str, source: str) -> list[units_module.Piece]:
    return [piece for piece in units_module.markdown_blocks(text, fences=source in FENCES_TRANSLATED)
            if not piece.text.startswith(_SWITCH)]


def all_sources() -> list[str]:
    return [str(p.relative_to(ROOT)) for p in english_notebooks()] + list(GUIDES)


def units_of(source: str) -> list[Unit]:
    return notebook_units(ROOT / source) if source.endswith(".ipynb") else guide_units(source)


# -- PO files -----------------------------------------------------------------------------------------------
def read_catalog(path: Path) -> Catalog:
    if not path.exists():
        return Catalog(locale=path.parent.name, fuzzy=False)
    with path.open("rb") as handle:
        return read_po(handle, abort_invalid=True, ignore_obsolete=False)


def write_catalog(path: Path, catalog: Catalog) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        write_po(handle, catalog, width=100, omit_header=True, sort_output=False)


def update(lang: str, source: str) -> tuple[int, int]:
    """Bring ``source``'s PO file in line with the English; returns (new, changed) entries. A changed unit keeps its
    old translation, fuzzy, with the old English beside it (where only numbers or names changed: :func:`carried`)."""
    path = po_path(lang, source)
    units = units_of(source)
    old = read_catalog(path)
    _refuse_the_old_form(path, old, source)
    new_catalog = Catalog(locale=lang, fuzzy=False)
    added = changed = 0
    current = {(unit.context, unit.english) for unit in units}
    # A changed unit is found again among the entries of its cell (a guide: of the whole guide) whose English no
    # longer exists: the only one, or the most similar (difflib, as msgmerge's fuzzy matching does).
    orphans: dict[str | None, list[Message]] = {}
    for message in old:
        if message.id and message.string and (message.context, message.id) not in current:
            orphans.setdefault(message.context, []).append(message)
    unmatched = Counter(unit.context for unit in units if old.get(unit.english, context=unit.context) is None)
    for unit in units:
        before = old.get(unit.english, context=unit.context)
        if before is None and (candidates := orphans.get(unit.context, [])):
            ratio, best = max((difflib.SequenceMatcher(None, m.id, unit.english).ratio(), n)
                              for n, m in enumerate(candidates))
            if ratio >= 0.6 or len(candidates) == 1 == unmatched[unit.context]:
                before = candidates.pop(best)
        message = Message(unit.english, context=unit.context, auto_comments=[f"source-sha256: {sha(unit.english)}"])
        if before is None:
            added += 1
        elif before.id == unit.english:
            message.string, message.flags = before.string, set(before.flags)
        elif not before.fuzzy and (same := carried(str(before.id), unit.english, str(before.string))) is not None:
            message.string = same
        else:
            changed += 1
            message.string, message.flags = before.string, {"fuzzy"}
        if before is not None and "fuzzy" in message.flags:
            # The English it was translated from, as an obsolete "#~" entry (Babel cannot round-trip "#| msgid").
            was = (_was(old, before) if before.fuzzy else None) or Message(before.id, string=before.string,
                                                                           context=unit.context)
            new_catalog.obsolete[str(was.id) if unit.context is None else (str(was.id), unit.context)] = was
        if new_catalog.get(message.id, context=message.context) is None:
            new_catalog[message.id] = message
    write_catalog(path, new_catalog)
    return added, changed


def _refuse_the_old_form(path: Path, catalog: Catalog, source: str) -> None:
    """A ``SystemExit`` where the PO file has the form before 2026-11-29 (one entry per markdown cell or guide list,
    ``cell-id/altN``), whose translations ``update`` would drop."""
    notebook = json.loads((ROOT / source).read_text())["cells"] if source.endswith(".ipynb") else None
    markdown = {cell["id"] for cell in notebook or [] if cell["cell_type"] == "markdown"}
    fences = notebook is not None or source in FENCES_TRANSLATED
    for message in [m for m in [*catalog, *catalog.obsolete.values()] if m.id]:
        english, prose = str(message.id), notebook is None or message.context in markdown
        blocks = [block.text for block in units_module.markdown_blocks(english, fences)] if prose else [english]
        if blocks != [english] or re.search(r"/alt\d+$", message.context or ""):
            raise SystemExit(f"{path.relative_to(ROOT)} is of the PO form before 2026-11-29 (its entry "
                             f"{english[:40]!r} is a whole cell or list): migrate it with `python -m "
                             "tools.i18n.editions update` in a checkout of the course at commit 18607bf, then copy "
                             "it back here")


_CODE_LIKE = re.compile(r"`[^`\n]+`|\d+(?:\.\d+)*(?:e[-+]?\d+)?|[A-Za-z_]\w*(?:\.\w+)*")


def carried(old_english: str, new_english: str, translation: str) -> str | None:
    """``translation`` with the change from ``old_english`` to ``new_english`` where only numbers or code names changed
    (``75`` -> ``85``, `` `fc1` `` -> `` `fc2` ``), each as often in the translation as in the English; else None."""
    old, new = _CODE_LIKE.split(old_english), _CODE_LIKE.split(new_english)
    if old != new:  # the words around the numbers and names differ
        return None
    changes: dict[str, str] = {}
    for before, after in zip(_CODE_LIKE.findall(old_english), _CODE_LIKE.findall(new_english), strict=True):
        if before == after:
            continue
        if not all(re.search(r"[\d_.`A-Z]", word[1:] or word) or word[0].isdigit() for word in (before, after)) \
                or changes.setdefault(before, after) != after:
            return None  # a word changed, or one name became two different ones
    for before, after in changes.items():
        pattern = re.compile(rf"(?<![A-Za-z0-9_.]){re.escape(before)}(?![A-Za-z0-9_])")
        if len(pattern.findall(translation)) != len(pattern.findall(old_english)) \
                or len(pattern.findall(new_english)):
            return None  # the translation writes it otherwise, or the English kept it somewhere
        translation = pattern.sub(after.replace("\\", "\\\\"), translation)
    return translation


def _was(catalog: Catalog, message: Message) -> Message | None:
    """The obsolete entry that keeps the English (and the translation) a fuzzy entry was translated from."""
    return next((m for m in catalog.obsolete.values() if m.context == message.context and m.string == message.string),
                None)


def stale(lang: str, source: str) -> list[str]:
    """Every unit of ``source`` without a current translation, named."""
    catalog = read_catalog(po_path(lang, source))
    po = po_path(lang, source).relative_to(ROOT)
    problems = []
    for unit in units_of(source):
        message = catalog.get(unit.english, context=unit.context)
        if message is None:
            problems.append(f"{unit.where}: no translation in {po} (run tools/i18n/editions.py update, then "
                            "translate the new entry)")
        elif message.fuzzy:
            problems.append(f"{unit.where}: the English changed since it was translated (fuzzy entry in {po})")
        elif not message.string:
            problems.append(f"{unit.where}: not translated yet ({po})")
        elif f"source-sha256: {sha(unit.english)}" not in message.auto_comments:
            problems.append(f"{unit.where}: its source-sha256 does not match the English (run update)")
    return problems


def translated(catalog: Catalog, context: str | None, english: str) -> str | None:
    """The current translation of ``english``; None where it is missing, empty or fuzzy (the English shows then,
    never an outdated translation)."""
    message = catalog.get(english, context=context)
    return str(message.string) if message is not None and message.string and not message.fuzzy else None


def with_lag_note(text: str, lang: str) -> str:
    """``text`` with the "not yet translated" note: after its heading when it starts with one, else above it."""
    if not _PLACEHOLDER.sub("", text).strip():
        return text
    first, _newline, rest = text.partition("\n")
    if _HEADING.match(first):
        rest = rest.lstrip("\n")
        return f"{first}\n\n{lag_note(lang)}" + (f"\n\n{rest}" if rest else "")
    return f"{lag_note(lang)}\n\n{text}"


def translated_markdown(text: str, pieces: list[units_module.Piece], context: str | None, lang: str,
                        catalog: Catalog) -> str:
    """``text`` with each of ``pieces`` translated, or in English under one "not yet translated" note per run."""
    out, last, noted = [], 0, False
    for piece in pieces:
        found = translated(catalog, context, piece.text)
        block = found if found is not None else piece.text if noted else with_lag_note(piece.text, lang)
        noted = found is None and (noted or bool(_PLACEHOLDER.sub("", piece.text).strip()))
        out += [text[last:piece.start], block]
        last = piece.end
    return "".join(out) + text[last:]


def translated_code(source: str, context: str, lang: str, catalog: Catalog) -> str:
    """The English code with each translated comment and shown string in ``lang`` (``tools/i18n/units.py``), and
    ``setup_notebook(lang=...)``."""
    for piece in reversed(units_module.code_pieces(source)):
        found = translated(catalog, context, piece.text)
        if found is not None and found != piece.text:
            source = source[:piece.start] + units_module.written_back(source, piece, found) + source[piece.end:]
    return localized_code(source, lang)


# -- headings and the links to them ----------------------------------------------------------------------------
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def headings(markdown: str) -> list[tuple[int, str]]:
    """(level, text) of each Markdown heading outside fenced code."""
    found, fenced = [], False
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            found.append((len(match[1]), match[2]))
    return found


def anchor(heading: str) -> str:
    """JupyterLab's anchor of a heading: its rendered text (no code marks, emphasis or link targets), spaces as '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("**", "")
    return text.replace(" ", "-")


def anchor_map(lang: str) -> dict[str, dict[str, str]]:
    """notebook name -> {English anchor: translated anchor} (computed once while no notebook or PO file changes)."""
    files = [f for path in english_notebooks() for f in (path, po_path(lang, str(path.relative_to(ROOT))))]
    return _anchor_map(lang, tuple((f, f.stat().st_mtime_ns if f.exists() else 0) for f in files))


@functools.lru_cache(maxsize=4)
def _anchor_map(lang: str, _files: tuple[tuple[Path, int], ...]) -> dict[str, dict[str, str]]:
    mapping: dict[str, dict[str, str]] = {}
    for path in english_notebooks():
        catalog = read_catalog(po_path(lang, str(path.relative_to(ROOT))))
        pairs: dict[str, str] = {}
        for unit in [u for u in notebook_units(path) if u.kind == "text"]:
            english = headings(unit.english)
            theirs = headings(translated(catalog, unit.context, unit.english) or unit.english)
            if [level for level, _ in english] == [level for level, _ in theirs]:
                pairs.update({anchor(e): anchor(t) for (_, e), (_, t) in zip(english, theirs, strict=True)})
        mapping[path.name] = pairs
    return mapping


_LINK_TARGET = re.compile(r"\]\((?P<target>(?:[^()\s]|\([^()\s]*\))+)\)")


def retarget_links(text: str, lang: str, english_file: str, built_file: str,
                   anchors: dict[str, dict[str, str]]) -> str:
    """``english_file``'s relative links, for its text at ``built_file``: a notebook or guide's link goes to its
    translation (a section link to the translated heading)."""
    english_dir, built_dir = posixpath.dirname(english_file), posixpath.dirname(built_file)

    def section(notebook: str, fragment: str) -> str:
        target = anchors.get(posixpath.basename(notebook), {}).get(unquote(fragment))
        if target is None:
            return fragment
        return quote(target, safe="-_.~()',!*:") if "%" in fragment else target

    def relink(match: re.Match[str]) -> str:
        target = match["target"]
        if re.match(r"[a-z][\w+.-]*:", target):  # https:, mailto:
            return match[0]
        file, hashmark, fragment = target.partition("#")
        if not file:  # a section of this very file
            return f"](#{section(english_file, fragment)})" if english_file.endswith(".ipynb") else match[0]
        english = posixpath.normpath(posixpath.join(english_dir, unquote(file)))
        if re.fullmatch(r"notebooks/\d\d_\w+\.ipynb", english):  # its translation
            new = f"notebooks/{lang}/{english.split('/', 1)[1]}"
        else:
            new = GUIDES[english].format(lang=lang) if english in GUIDES else english
        if fragment and new.endswith(".ipynb"):
            fragment = section(english, fragment)
        relative = posixpath.relpath(new, built_dir or ".")
        return f"]({relative}{hashmark}{fragment})"

    return _LINK_TARGET.sub(relink, text)


# -- building -----------------------------------------------------------------------------------------------
def built_notebook(lang: str, english_path: Path, anchors: dict[str, dict[str, str]] | None = None) -> dict:
    """The notebook ``english_path`` in ``lang``; a code cell whose code is as it was keeps the stored outputs."""
    notebook = json.loads(english_path.read_text())
    catalog = read_catalog(po_path(lang, str(english_path.relative_to(ROOT))))
    target = NOTEBOOKS / lang / english_path.name
    previous = {c["id"]: c for c in json.loads(target.read_text())["cells"]} if target.exists() else {}
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            text, regions = without_regions(source)
            text = translated_markdown(text, units_module.markdown_blocks(text), cell["id"], lang, catalog)
            source = retarget_links(with_regions(text, regions, lang, english_path.name), lang,
                                    str(english_path.relative_to(ROOT)), f"notebooks/{lang}/{english_path.name}",
                                    anchors or anchor_map(lang))
        elif cell["cell_type"] == "code":
            source = translated_code(source, cell["id"], lang, catalog)
            before = previous.get(cell["id"])
            if before is not None and "".join(before["source"]) == source:  # keep what `make refresh` stored
                cell["outputs"], cell["execution_count"] = before["outputs"], before["execution_count"]
            else:  # the English outputs stand in until a run: marked never run, so make sync lists it for refresh
                cell["execution_count"] = None
        cell["source"] = source.splitlines(keepends=True)
    notebook["metadata"]["language_edition"] = {
        "lang": lang, "english": english_path.name,
        "generated_by": "make sync (tools/i18n/editions.py): edit the English notebook and translations/, "
                        "not this file"}
    return notebook


def built_guide(lang: str, source: str, anchors: dict[str, dict[str, str]] | None = None) -> str:
    """The guide ``source`` in ``lang``, with a link back to the English where the English links the translation."""
    text, regions = without_regions((ROOT / source).read_text())
    catalog = read_catalog(po_path(lang, source))
    target = GUIDES[source].format(lang=lang)
    out = translated_markdown(text, guide_pieces(text, source), None, lang, catalog)
    out = re.sub(rf"^{re.escape(_SWITCH)}[^\n]*", _SWITCH_BACK, out, flags=re.MULTILINE)
    out = retarget_links(with_regions(out, regions, lang), lang, source, target, anchors or anchor_map(lang))
    back = posixpath.relpath(source, posixpath.dirname(target) or ".")
    out = out.replace(_SWITCH_BACK, f"**English:** [{posixpath.basename(source)}]({back})")
    header = (f"<!-- {lang}: generated from {source} by make sync (tools/i18n/editions.py); edit translations/{lang}/, "
              "not this file -->\n")
    return header + out


def dump_notebook(notebook: dict) -> str:
    """As ``nbformat.write`` (and so ``make refresh``) writes it: a rebuilt, refreshed notebook is byte-identical."""
    import nbformat

    text = nbformat.writes(nbformat.from_dict(notebook))
    return text if text.endswith("\n") else text + "\n"


def build(lang: str) -> list[Path]:
    anchors = anchor_map(lang)
    (NOTEBOOKS / lang).mkdir(exist_ok=True)
    built = {NOTEBOOKS / lang / path.name: dump_notebook(built_notebook(lang, path, anchors))
             for path in english_notebooks()}
    built |= {ROOT / pattern.format(lang=lang): built_guide(lang, source, anchors)
              for source, pattern in GUIDES.items()}
    for target, text in built.items():
        target.write_text(text)
    return list(built)


def check_string(english: str, translation: str, where: str, fstring: bool = True) -> None:
    """A ``ValueError`` saying what to fix unless a string's translation keeps the English ``{fields}`` (in any order)
    and stays a literal."""
    want = sorted(units_module.fields(english, fstring))
    have = sorted(units_module.fields(translation, fstring))
    if want != have:
        raise ValueError(f"{where}: keep the fields {want} exactly as in the English (the translation has {have})")
    for mark in ('"', "'", '"""', "'''"):
        try:
            compile(f"f{mark}{translation}{mark}" if want else f"{mark}{translation}{mark}", where, "eval")
            return
        except SyntaxError:
            continue
    raise ValueError(f"{where}: not a valid string literal: escape a quote or backslash with \\")


_KEY = re.compile(r"^@@ (\S+)[ \t]*$", re.MULTILINE)


def _keyed(lang: str, source: str) -> tuple[Catalog, dict[str, Message]]:
    """The entries by key: a guide's paragraph by its number; a notebook's unit by its cell id, and ``.2``, ``.3``
    ... after it for a cell's further units."""
    catalog = read_catalog(po_path(lang, source))
    keyed: dict[str, Message] = {}
    for number, message in enumerate((m for m in catalog if m.id), 1):
        key = message.context if message.context is not None else str(number)
        count = sum(1 for k in keyed if k == key or k.startswith(f"{key}."))
        keyed[f"{key}.{count + 1}" if count and message.context is not None else key] = message
    return catalog, keyed


_KIND_NOTES = {"comment": "@| a comment of the code: its lines become # lines",
               "string": "@| a string of the code, written between its quotes: keep each {field} and \\ escape"}


def _kinds(source: str) -> dict[tuple[str | None, str], str]:
    """(context, English) -> ``text``, ``comment``, ``string`` or ``fstring``."""
    return {(unit.context, unit.english): "fstring" if unit.fstring else unit.kind for unit in units_of(source)}


_NOTE = "@|"  # a line of context in the plain-text form: shown to the translator, ignored by import


def _quoted(label: str, text: str) -> str:
    return f"{_NOTE} {label}\n" + "".join(f"{_NOTE}   {line}\n" for line in text.split("\n"))


def export_text(lang: str, source: str, *, only_missing: bool = False) -> str:
    """The entries of ``source`` as ``@@ KEY`` + the English; an out-of-date one as the English now and before (on
    ``@|`` lines) + its old translation."""
    catalog, keyed = _keyed(lang, source)
    kinds = _kinds(source)
    out = []
    for key, message in keyed.items():
        if only_missing and message.string and not message.fuzzy:
            continue
        english = str(message.id)
        note = _KIND_NOTES.get(kinds.get((message.context, english), "").replace("fstring", "string"))
        key = f"{key}\n{note}" if note else key
        if message.fuzzy and message.string:
            was = _was(catalog, message)
            context = _quoted("The English changed since it was translated. The English now:", english)
            if was is not None:
                context += _quoted("The English before:", str(was.id))
            context += f"{_NOTE} Its old translation, to bring up to date (left as it is, it stays out of date):\n"
            out.append(f"@@ {key}\n{context}{message.string}\n\n")
        else:
            out.append(f"@@ {key}\n{message.id}\n\n")
    return "".join(out)


def import_text(lang: str, source: str, text: str, unchanged: list[str] | None = None) -> int:
    """Put ``text``'s translations (``@@ KEY`` + translation) into ``source``'s PO file; returns how many. An old
    translation given back unchanged stays out of date (its key goes to ``unchanged``)."""
    catalog, keyed = _keyed(lang, source)
    kinds = _kinds(source)
    pieces = _KEY.split(text)
    if pieces[0].strip():
        raise ValueError("the text must start with an '@@ KEY' line")
    count = 0
    for key, body in zip(pieces[1::2], pieces[2::2], strict=True):
        if key not in keyed:
            raise ValueError(f"{source} has no entry {key!r}: keys are {', '.join(keyed)}")
        message = keyed[key]
        body = "\n".join(line for line in body.split("\n") if not line.startswith(_NOTE)).strip("\n")
        english = str(message.id)
        english_regions = set(_PLACEHOLDER.findall(english))
        if set(_PLACEHOLDER.findall(body)) != english_regions:
            raise ValueError(f"entry {key}: keep the placeholders {sorted(english_regions)} exactly as in the English")
        if kinds.get((message.context, english)) in ("string", "fstring"):
            check_string(english, body, f"entry {key}", kinds[message.context, english] == "fstring")
        if message.fuzzy and body == str(message.string).strip("\n"):
            if unchanged is not None:
                unchanged.append(key)
            continue
        was = _was(catalog, message) if message.fuzzy else None
        message.string = body
        message.flags.discard("fuzzy")
        if was is not None:
            del catalog.obsolete[(str(was.id), was.context) if was.context is not None else str(was.id)]
        count += 1
    write_catalog(po_path(lang, source), catalog)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("update", "build", "stale", "export", "import"))
    parser.add_argument("source", nargs="?", help="export/import: the English notebook or guide")
    parser.add_argument("text", nargs="?", type=Path, help="import: the file of @@ KEY entries")
    parser.add_argument("--lang", default="zh", choices=LANGUAGES[1:])
    parser.add_argument("--missing", action="store_true", help="export: only entries without a current translation")
    args = parser.parse_intermixed_args(argv)  # export --missing SOURCE and --missing export SOURCE alike
    if args.command in ("export", "import"):
        if args.source is None or (args.command == "import" and args.text is None):
            parser.error(f"{args.command} needs the English source"
                         + (" and the text file" if args.command == "import" else ""))
        source = str(Path(args.source).resolve().relative_to(ROOT))
        if args.command == "export":
            sys.stdout.write(export_text(args.lang, source, only_missing=args.missing))
        else:
            unchanged: list[str] = []
            print(f"{import_text(args.lang, source, args.text.read_text(), unchanged)} entries imported into "
                  f"{po_path(args.lang, source).relative_to(ROOT)}")
            if unchanged:
                print(f"still out of date (the old translation came back unchanged): {', '.join(unchanged)}")
        return 0
    if args.command == "update":
        for source in all_sources():
            added, changed = update(args.lang, source)
            if added or changed:
                print(f"{po_path(args.lang, source).relative_to(ROOT)}: {added} new, {changed} changed (fuzzy)")
        return 0
    if args.command == "build":
        for path in build(args.lang):
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    problems = [p for source in all_sources() for p in stale(args.lang, source)]
    print("\n".join(problems) if problems else f"{args.lang}: every cell and paragraph translated and current")
    if problems and SETTINGS.translations_may_lag:
        print(f"{len(problems)} not translated yet: they show the English with a note "
              "(translations_may_lag = true in course_utils/course.toml)")
        return 0
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
