"""The Chinese edition, made from the English one: notebooks and guides rebuilt from English + translation files.

Translations live in ``translations/<lang>/``: one standard PO file per notebook (one entry per markdown cell:
``msgctxt`` is the cell id, ``msgid`` the English cell, a ``source-sha256`` comment its hash) and one per guide
(one entry per paragraph, list or table). Code cells are not translated: the built notebook's code is the English
code, except that ``setup_notebook(`` gets ``lang="zh"`` so that ``check()``, ``hint()`` and ``doctor()`` answer in
Chinese, and that each figure's alt text -- the literal ``alt="..."`` of a code cell, found by
``course_utils.figures.alt_literals`` -- is an entry of its own (``msgctxt`` the cell id and ``/alt1``, ``/alt2``,
...), written into the built code as a string literal of the translation. Generated regions (``<!-- cloud: ... -->``,
``<!-- X:start -->``, ...) are not translated either: the English region is copied at build time (links pointed at
the Chinese notebooks).

The tables generated from data (the README's course map and verified table, the instructor guide's timings and
agendas) are generated again in the translation's language, their words from the message catalogue
(``tools/i18n/messages.py``): a changed number or a new notebook needs no new translation.

When an English cell changes, ``update`` keeps the old translation marked fuzzy with the old English beside it
(an obsolete ``#~`` entry) and the build shows the English text under a "not yet translated" note until a translator
fixes the entry; ``stale`` (and the tests) name every such cell. Whether that fails ``make test`` is one setting,
``translations_may_lag`` in ``course_utils/course.toml``: ``false`` (the course's own) fails, ``true`` (a fork
that ships English first) warns with the list.

Usage::

    python -m tools.i18n.editions update     # after editing English: bring the PO files in line (never loses a translation)
    python -m tools.i18n.editions build      # write notebooks/zh/*.ipynb, notebooks/zh/*.md, README.zh.md, the site's landing page
    python -m tools.i18n.editions stale      # what is untranslated or out of date (exit 1 if anything, unless it may lag)
    python -m tools.i18n.editions export notebooks/03_forward_hooks.ipynb > 03.txt   # the entries as plain text
    python -m tools.i18n.editions export --missing notebooks/03_forward_hooks.ipynb > 03.txt   # only those to do
    python -m tools.i18n.editions import notebooks/03_forward_hooks.ipynb 03.txt  # translations back in

``make sync`` runs ``update`` and ``build``. The plain-text form is one ``@@ KEY`` line (the cell id, or the
paragraph's number in a guide) before each entry, then the text to translate. An entry whose English changed since it
was translated shows, on ``@|`` lines, the English now and the English before, then the old translation to edit;
``import`` ignores the ``@|`` lines and keeps an old translation imported unchanged out of date.
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from babel.messages.catalog import Catalog, Message
from babel.messages.pofile import read_po, write_po

from course_utils.machinery.course import course_map_markdown
from course_utils.machinery.layout import NOTEBOOK_GLOB, SETTINGS, read_settings
from course_utils.machinery.messages import LANGUAGES, N_, _, in_language

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
TRANSLATIONS = ROOT / "translations"
TRANSLATED = tuple(lang for lang in LANGUAGES if lang != "en")  # the editions made from the English one
PO_WIDTH = 100

# English guides and where their translation goes (relative to the repository root): course_utils/course.toml.
GUIDES: dict[str, str] = dict(SETTINGS.guides)

# <!-- cloud: ... --> ... <!-- /cloud -->   and   <!-- timings:start ... --> ... <!-- timings:end -->
_REGION = re.compile(
    r"<!-- (?P<name>[\w-]+)(?::start|:)[^>]*-->.*?<!-- (?:/(?P=name)|(?P=name):end) -->", re.DOTALL)
_PLACEHOLDER = re.compile(r"<!-- generated: ([\w-]+) -->")
# The English guides' first line after the title links the translation: "**中文版：** [...](...)". The translation gets
# a link back to the English there instead (made by the build, not translated).
_SWITCH = "**中文版：**"
_SWITCH_BACK = "\x00switch\x00"
_SETUP_CALL = re.compile(r"\bsetup_notebook\((\s*\)?)")
# Guides whose code blocks are translated too (their comments, and the Chinese README's quickstart, which opens the
# Chinese workspace first); the other guides' code is the English code.
FENCES_TRANSLATED = ("README.md",)

SETTINGS_FILE = ROOT / "course_utils" / "course.toml"
LAG_SETTING = "translations_may_lag"
# Shown above the English of a cell or paragraph whose translation is missing or out of date (always: with the
# setting false, make test fails until it is translated; with it true, the edition ships that way).
NOT_YET_TRANSLATED = N_("**Not yet translated:** this part is new or changed in English, and its translation has not "
                        "caught up yet; the English follows.")


class UntranslatedWarning(UserWarning):
    """Cells or paragraphs without a current translation, where ``translations_may_lag = true`` allows them."""


def translations_may_lag(settings: Path | None = None) -> bool:
    """The fork's choice in ``course_utils/course.toml`` (or in the settings file ``settings``).

    Usage: ``translations_may_lag()``
    """
    path = SETTINGS_FILE if settings is None else settings
    return read_settings(path.read_text(encoding="utf-8"), str(path)).translations_may_lag


def lag_note(lang: str) -> str:
    """The visible note above an English text in a translated edition (a Markdown quote, in ``lang``)."""
    with in_language(lang):
        return "> " + _(NOT_YET_TRANSLATED)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Generated regions: made again for the translation, in its language (the README's course map from the translated
# notebooks' openings; the links, the verified table, the guide's timings and agendas with the catalogue's words), so
# they are never translated by hand. Other regions (the capacity benchmark's notes) are prose and are translated like
# the text around them.
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
    def put_back(match: re.Match[str]) -> str:
        region = regions.get(match[1])
        if region is None:
            raise ValueError(f"the translation has a placeholder {match[0]!r} that the English text lacks")
        if match[1] == "course-map":
            return translated_course_map(region, lang)
        if match[1] in ("cloud", "verified"):
            from tools import cloud_badges

            if notebook is not None:  # the translated notebook's own links, in its language
                return cloud_badges.links_block(notebook, cloud_badges.verified(), lang)
            return cloud_badges.readme_table(english_notebooks(), cloud_badges.verified(), lang)
        if match[1] in ("timings", "agendas"):
            from tools import instructor_guide

            start, end = region.split("\n", 1)[0], region.rsplit("\n", 1)[-1]
            return f"{start}\n{instructor_guide.GENERATED[match[1]](lang=lang)}\n{end}"
        return region

    return _PLACEHOLDER.sub(put_back, text)


def translated_course_map(region: str, lang: str) -> str:
    """The README's course-map region made from the translated notebooks' openings (titles, summaries, minutes)."""
    start, end = region.split("\n", 1)[0], region.rsplit("\n", 1)[-1]
    table = course_map_markdown(NOTEBOOKS / lang, lang=lang)
    table = re.sub(r"\| `(\d\d_\w+\.ipynb)` \|", rf"| [`\1`](notebooks/{lang}/\1) |", table)
    return f"{start}\n{table}\n{end}"


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


def notebook_units(path: Path, alt_text: bool = True) -> list[Unit]:
    """The translatable units of a notebook: each markdown cell, and each ``alt="..."`` of a code cell (``alt_text``)."""
    cells = json.loads(path.read_text())["cells"]
    units = []
    for cell in cells:
        if cell["cell_type"] == "markdown":
            text, _regions = without_regions("".join(cell["source"]))
            units.append(Unit(cell["id"], text, f"{path.relative_to(ROOT)} cell {cell['id']}"))
        elif cell["cell_type"] == "code" and alt_text:
            for number, literal in enumerate(alt_literals("".join(cell["source"])), start=1):
                units.append(Unit(f"{cell['id']}/alt{number}", literal.text,
                                  f"{path.relative_to(ROOT)} cell {cell['id']} (alt text {number})"))
    return units


def alt_literals(source: str) -> list:
    """The ``alt="..."`` literals of a code cell (``course_utils.figures.alt_literals``)."""
    from course_utils.figures import alt_literals as find

    return find(source)


def translated_alts(source: str, cell_id: str, lang: str, catalog: Catalog) -> str:
    """``source`` with each ``alt="..."`` literal replaced by a literal of its translation (the English one while it
    has none): one line, or, where the English literal spanned lines, pieces of about 50 characters on lines of
    their own, joined by Python's implicit concatenation."""
    pieces, last = [], 0
    for number, literal in enumerate(alt_literals(source), start=1):
        text = translation(lang, catalog, Unit(f"{cell_id}/alt{number}", literal.text, ""))
        if text == literal.text:
            continue
        original = source[literal.start:literal.end]
        if "\n" in original:
            indent = " " * (literal.start - (source.rfind("\n", 0, literal.start) + 1))
            chunks = [text[i:i + 50] for i in range(0, len(text), 50)]
            replacement = ("\n" + indent).join(json.dumps(chunk, ensure_ascii=False) for chunk in chunks)
        else:
            replacement = json.dumps(text, ensure_ascii=False)
        pieces += [source[last:literal.start], replacement]
        last = literal.end
    return "".join(pieces) + source[last:]


def guide_blocks(text: str, fences: bool = False) -> list[tuple[int, str, bool]]:
    """(line, block, translate?) for each block of a Markdown file: paragraphs, lists, tables, fences (translated
    when ``fences``), regions."""
    text, _regions = without_regions(text)
    blocks: list[tuple[int, str, bool]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            blocks.append((i + 1, lines[i], False))
            i += 1
            continue
        start = i
        if lines[i].lstrip().startswith("```"):
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith("```"):
                i += 1
            i += 1
            blocks.append((start + 1, "\n".join(lines[start:i]), fences))
            continue
        while i < len(lines) and lines[i].strip() and not lines[i].lstrip().startswith("```"):
            i += 1
        block = "\n".join(lines[start:i])
        untranslated = _PLACEHOLDER.fullmatch(block.strip()) or block.startswith(_SWITCH)
        blocks.append((start + 1, block, not untranslated))
    return blocks


def guide_units(source: str) -> list[Unit]:
    text = (ROOT / source).read_text()
    return [Unit(None, block, f"{source} line {line}")
            for line, block, translate in guide_blocks(text, source in FENCES_TRANSLATED) if translate]


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
        write_po(handle, catalog, width=PO_WIDTH, omit_header=True, sort_output=False)


def update(lang: str, source: str) -> tuple[int, int]:
    """Bring ``source``'s PO file in line with the English; returns (new, changed) entries. Nothing is lost: a
    changed cell keeps its old translation, fuzzy, with the old English in comments."""
    path = po_path(lang, source)
    old = read_catalog(path)
    by_context = {m.context: m for m in old if m.id}
    new_catalog = Catalog(locale=lang, fuzzy=False)
    added = changed = 0
    units = units_of(source)
    # A guide's paragraphs have no id: a changed one is found again as the most similar paragraph that no longer
    # exists (difflib, as msgmerge's fuzzy matching does), so its translation is kept, fuzzy.
    current = {unit.english for unit in units}
    orphans = [m for m in old if m.id and m.context is None and m.string and m.id not in current]
    for unit in units:
        before = old.get(unit.english, context=unit.context)
        if before is None and unit.context is not None:
            before = by_context.get(unit.context)
        if before is None and unit.context is None and orphans:
            import difflib

            ratio, best = max((difflib.SequenceMatcher(None, m.id, unit.english).ratio(), m) for m in orphans)
            if ratio >= 0.6:
                before = best
                orphans.remove(best)
        message = Message(unit.english, context=unit.context, auto_comments=[f"source-sha256: {sha(unit.english)}"])
        if before is None:
            added += 1
        elif before.id == unit.english:
            message.string, message.flags = before.string, set(before.flags)
        else:
            changed += 1
            message.string = before.string
            message.flags = {"fuzzy"}
        if before is not None and "fuzzy" in message.flags:
            # The English the translation was made from, and that translation, as an obsolete entry ("#~") beside
            # it: the translator compares the two Englishes (Babel cannot round-trip a multi-line "#| msgid").
            was = old_english_entry(old, unit.context) if before.fuzzy else None
            was = was or Message(before.id, string=before.string, context=unit.context)
            if unit.context is None and before.fuzzy:  # a guide's paragraph changed twice: keep its first English
                was = old.obsolete.get(before.id) or was
            new_catalog.obsolete[was.id if unit.context is None else (was.id, unit.context)] = was
        if new_catalog.get(message.id, context=message.context) is None:
            new_catalog[message.id] = message
    write_catalog(path, new_catalog)
    return added, changed


def old_english_entry(catalog: Catalog, context: str | None) -> Message | None:
    """The obsolete entry that keeps the English (and translation) a fuzzy cell was translated from."""
    if context is None:
        return None
    return next((m for m in catalog.obsolete.values() if m.context == context), None)


def previous_english(catalog: Catalog, context: str) -> str | None:
    """The English the fuzzy entry of cell ``context`` was translated from."""
    entry = old_english_entry(catalog, context)
    return entry.id if entry is not None else None


def stale(lang: str, source: str) -> list[str]:
    """Every unit of ``source`` without a current translation, named."""
    catalog = read_catalog(po_path(lang, source))
    problems = []
    for unit in units_of(source):
        message = catalog.get(unit.english, context=unit.context)
        if message is None:
            problems.append(f"{unit.where}: no translation in {po_path(lang, source).relative_to(ROOT)} "
                            "(run tools/i18n/editions.py update, then translate the new entry)")
        elif not message.string or message.fuzzy:
            problems.append(f"{unit.where}: the English changed since it was translated (fuzzy entry in "
                            f"{po_path(lang, source).relative_to(ROOT)})" if message.fuzzy else
                            f"{unit.where}: not translated yet ({po_path(lang, source).relative_to(ROOT)})")
        elif not any(c == f"source-sha256: {sha(unit.english)}" for c in message.auto_comments):
            problems.append(f"{unit.where}: its source-sha256 does not match the English (run update)")
    return problems


def is_translated(catalog: Catalog, unit: Unit) -> bool:
    """Whether ``unit`` has a current translation in ``catalog`` (not missing, empty or fuzzy)."""
    message = catalog.get(unit.english, context=unit.context)
    return message is not None and bool(message.string) and not message.fuzzy


def translation(lang: str, catalog: Catalog, unit: Unit) -> str:
    if not is_translated(catalog, unit):
        return unit.english  # not translated (yet): the English, never an outdated translation
    return catalog.get(unit.english, context=unit.context).string


def with_lag_note(text: str, lang: str) -> str:
    """``text`` (English, for want of a current translation) with the "not yet translated" note: after its heading
    when it starts with one, else above it."""
    if not _PLACEHOLDER.sub("", text).strip():
        return text
    first, _newline, rest = text.partition("\n")
    if _HEADING.match(first):
        rest = rest.lstrip("\n")
        return f"{first}\n\n{lag_note(lang)}" + (f"\n\n{rest}" if rest else "")
    return f"{lag_note(lang)}\n\n{text}"


# -- headings and the links to them ----------------------------------------------------------------------------
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_NOTEBOOK_LINK = re.compile(r"\]\((?P<file>(?:\.\./)?(?:notebooks/)?(?:\d\d_\w+\.ipynb)?)#(?P<anchor>[^)\s]+)\)")


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
    """notebook name -> {English anchor: translated anchor}, from the translated headings of each cell (computed once
    while no notebook or PO file changes: every cell of a build asks for it)."""
    files = [f for path in english_notebooks() for f in (path, po_path(lang, str(path.relative_to(ROOT))))]
    return _anchor_map(lang, tuple((f, f.stat().st_mtime_ns if f.exists() else 0) for f in files))


@functools.lru_cache(maxsize=4)
def _anchor_map(lang: str, _files: tuple[tuple[Path, int], ...]) -> dict[str, dict[str, str]]:
    mapping: dict[str, dict[str, str]] = {}
    for path in english_notebooks():
        catalog = read_catalog(po_path(lang, str(path.relative_to(ROOT))))
        pairs: dict[str, str] = {}
        for unit in notebook_units(path, alt_text=False):
            english, translated = headings(unit.english), headings(translation(lang, catalog, unit))
            if [level for level, _ in english] == [level for level, _ in translated]:
                pairs.update({anchor(e): anchor(t) for (_, e), (_, t) in zip(english, translated)})
        mapping[path.name] = pairs
    return mapping


_LINK_TARGET = re.compile(r"\]\((?P<target>(?:[^()\s]|\([^()\s]*\))+)\)")


def translated_path(english: str, lang: str) -> str | None:
    """The translated counterpart of a repository path (``notebooks/03_x.ipynb``, a guide), else None."""
    if re.fullmatch(r"notebooks/\d\d_\w+\.ipynb", english):
        return f"notebooks/{lang}/{english.split('/', 1)[1]}"
    return GUIDES[english].format(lang=lang) if english in GUIDES else None


def retarget_links(text: str, lang: str, english_file: str, built_file: str,
                   anchors: dict[str, dict[str, str]]) -> str:
    """Relative links of ``english_file``'s text, for the same text at ``built_file``: a link to a notebook or guide goes
    to its translation (a section link to the translated heading), any other file is still reached from the new place."""
    import posixpath
    from urllib.parse import quote, unquote

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
        translated = translated_path(english, lang)
        new = translated or english
        if fragment and new.endswith(".ipynb"):
            fragment = section(english, fragment)
        relative = posixpath.relpath(new, built_dir or ".")
        return f"]({relative}{hashmark}{fragment})"

    return _LINK_TARGET.sub(relink, text)


# -- building -----------------------------------------------------------------------------------------------
def built_notebook(lang: str, english_path: Path, anchors: dict[str, dict[str, str]] | None = None) -> dict:
    english = json.loads(english_path.read_text())
    catalog = read_catalog(po_path(lang, str(english_path.relative_to(ROOT))))
    target = NOTEBOOKS / lang / english_path.name
    previous = {}
    if target.exists():
        previous = {c["id"]: c for c in json.loads(target.read_text())["cells"]}
    notebook = copy.deepcopy(english)
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            text, regions = without_regions(source)
            unit = Unit(cell["id"], text, "")
            translated = translation(lang, catalog, unit) if is_translated(catalog, unit) else with_lag_note(text, lang)
            english_file = str(english_path.relative_to(ROOT))
            source = retarget_links(with_regions(translated, regions, lang, english_path.name), lang, english_file,
                                    f"notebooks/{lang}/{english_path.name}",
                                    anchors if anchors is not None else anchor_map(lang))
        elif cell["cell_type"] == "code":
            source = localized_code(translated_alts(source, cell["id"], lang, catalog), lang)
            before = previous.get(cell["id"])
            if before is not None and "".join(before["source"]) == source:  # keep what `make refresh` stored
                cell["outputs"], cell["execution_count"] = before["outputs"], before["execution_count"]
            else:  # the English outputs stand in until a run: marked never run, so make sync lists it for refresh
                cell["execution_count"] = None
        cell["source"] = source.splitlines(keepends=True)
    notebook["metadata"]["language_edition"] = {
        "lang": lang, "english": english_path.name,
        "generated_by": "make sync (tools/i18n/editions.py): edit the English notebook and translations/, not this file"}
    return notebook


def built_guide(lang: str, source: str, anchors: dict[str, dict[str, str]] | None = None) -> str:
    text = (ROOT / source).read_text()
    _stripped, regions = without_regions(text)
    catalog = read_catalog(po_path(lang, source))
    target = GUIDES[source].format(lang=lang)
    parts = []
    for _line, block, translate in guide_blocks(text, source in FENCES_TRANSLATED):
        if block.startswith(_SWITCH):
            block = _SWITCH_BACK
        unit = Unit(None, block, "")
        if translate:
            block = translation(lang, catalog, unit) if is_translated(catalog, unit) else with_lag_note(block, lang)
        parts.append(block)
    out = with_regions("\n".join(parts), regions, lang)
    out = retarget_links(out, lang, source, target, anchors if anchors is not None else anchor_map(lang))
    import posixpath

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
    written = []
    anchors = anchor_map(lang)
    (NOTEBOOKS / lang).mkdir(exist_ok=True)
    for path in english_notebooks():
        target = NOTEBOOKS / lang / path.name
        target.write_text(dump_notebook(built_notebook(lang, path, anchors)))
        written.append(target)
    for source, pattern in GUIDES.items():
        target = ROOT / pattern.format(lang=lang)
        target.write_text(built_guide(lang, source, anchors))
        written.append(target)
    return written


_KEY = re.compile(r"^@@ (\S+)[ \t]*$", re.MULTILINE)


def _keyed(lang: str, source: str) -> tuple[Catalog, dict[str, Message]]:
    catalog = read_catalog(po_path(lang, source))
    messages = [m for m in catalog if m.id]
    keys = [m.context if m.context is not None else str(n) for n, m in enumerate(messages, 1)]
    return catalog, dict(zip(keys, messages))


_NOTE = "@|"  # a line of context in the plain-text form: shown to the translator, ignored by import


def _was(catalog: Catalog, message: Message) -> Message | None:
    """The obsolete entry that keeps the English (and the translation) a fuzzy entry was translated from."""
    if message.context is not None:
        return old_english_entry(catalog, message.context)
    return next((m for m in catalog.obsolete.values() if m.context is None and m.string == message.string), None)


def _quoted(label: str, text: str) -> str:
    return f"{_NOTE} {label}\n" + "".join(f"{_NOTE}   {line}\n" for line in text.split("\n"))


def export_text(lang: str, source: str, *, only_missing: bool = False) -> str:
    """The entries of ``source`` as ``@@ KEY`` + the text to translate, for translating in a plain editor.

    An entry not translated yet gives its English. An entry whose English changed since it was translated gives,
    on ``@|`` lines, the English now and the English before, then its old translation to bring up to date."""
    catalog, keyed = _keyed(lang, source)
    out = []
    for key, message in keyed.items():
        if only_missing and message.string and not message.fuzzy:
            continue
        if message.fuzzy and message.string:
            was = _was(catalog, message)
            context = _quoted("The English changed since it was translated. The English now:", message.id)
            if was is not None:
                context += _quoted("The English before:", was.id)
            context += f"{_NOTE} Its old translation, to bring up to date (left as it is, it stays out of date):\n"
            out.append(f"@@ {key}\n{context}{message.string}\n\n")
        else:
            out.append(f"@@ {key}\n{message.id}\n\n")
    return "".join(out)


def import_text(lang: str, source: str, text: str, unchanged: list[str] | None = None) -> int:
    """Put the translations of ``text`` (``@@ KEY`` + translation; ``@|`` lines ignored) into ``source``'s PO file;
    returns how many. An out-of-date entry given back with its old translation unchanged stays out of date (its
    key goes to ``unchanged``)."""
    catalog, keyed = _keyed(lang, source)
    pieces = _KEY.split(text)
    if pieces[0].strip():
        raise ValueError("the text must start with an '@@ KEY' line")
    count = 0
    for key, body in zip(pieces[1::2], pieces[2::2]):
        if key not in keyed:
            raise ValueError(f"{source} has no entry {key!r}: keys are {', '.join(keyed)}")
        message = keyed[key]
        body = "\n".join(line for line in body.split("\n") if not line.startswith(_NOTE)).strip("\n")
        english_regions = set(_PLACEHOLDER.findall(message.id))
        if set(_PLACEHOLDER.findall(body)) != english_regions:
            raise ValueError(f"entry {key}: keep the placeholders {sorted(english_regions)} exactly as in the English")
        if message.fuzzy and body == message.string.strip("\n"):
            if unchanged is not None:
                unchanged.append(key)
            continue
        message.string = body
        message.flags.discard("fuzzy")
        for old in [k for k, m in catalog.obsolete.items() if message.context is not None and m.context == message.context]:
            del catalog.obsolete[old]
        count += 1
    write_catalog(po_path(lang, source), catalog)
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("update", "build", "stale", "export", "import"))
    parser.add_argument("source", nargs="?", help="export/import: the English notebook or guide")
    parser.add_argument("text", nargs="?", type=Path, help="import: the file of @@ KEY entries")
    parser.add_argument("--lang", default="zh", choices=TRANSLATED)
    parser.add_argument("--missing", action="store_true", help="export: only entries without a current translation")
    args = parser.parse_intermixed_args(argv)  # export --missing SOURCE and --missing export SOURCE alike
    if args.command in ("export", "import"):
        if args.source is None or (args.command == "import" and args.text is None):
            parser.error(f"{args.command} needs the English source" + (" and the text file" if args.command == "import" else ""))
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
    if problems and translations_may_lag():
        print(f"{len(problems)} not translated yet: they show the English with a note "
              f"({LAG_SETTING} = true in {SETTINGS_FILE.relative_to(ROOT)})")
        return 0
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
