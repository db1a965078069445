"""The Chinese edition is made from the English one and cannot fall behind it (tools/i18n/editions.py): current
translations, exactly what the build makes, the same cells and code, links that reach, a learner edition and workspace
that reveal no more than the English ones. Strict nbval runs on notebooks/zh/ too (``make test``)."""

from __future__ import annotations

import functools
import json
import re
import shutil
import tokenize
import warnings
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest

from course_utils.machinery.course import course_map
from course_utils.machinery.layout import SETTINGS, read_settings
from course_utils.machinery.learner_edition import learner_notebook
from course_utils.machinery.workspace import prepare_workspace
from tools.i18n import editions, units

ROOT = Path(__file__).resolve().parent.parent

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("course_utils/course.toml", "course_utils/machinery/locale/*/generated.po",
                              "course_utils/machinery/locale/*/tools.po")

LANG = "zh"
ENGLISH = editions.english_notebooks()
SOURCES = editions.all_sources()
_CJK = re.compile(r"[\u4e00-\u9fff]")


def zh_path(english: Path) -> Path:
    return ROOT / "notebooks" / LANG / english.name


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def markdown_of(path: Path) -> str:
    """A guide's text, or a notebook's markdown cells joined."""
    if path.suffix != ".ipynb":
        return path.read_text(encoding="utf-8")
    return "\n".join("".join(c["source"]) for c in cells(path) if c["cell_type"] == "markdown")


def require_translated(source: str, problems: list[str], may_lag: bool) -> None:
    """Fail naming each untranslated or outdated cell; where the fork lets the translation lag, warn with the list."""
    if not problems:
        return
    what = f"{len(problems)} untranslated or outdated in {source}"
    if may_lag:
        warnings.warn(editions.UntranslatedWarning(
            f"{what}; they show the English with a 'not yet translated' note (course_utils/course.toml: "
            "translations_may_lag = true):\n" + "\n".join(problems)), stacklevel=2)
        return
    pytest.fail(f"{what} (translate them: python -m tools.i18n.editions export --missing {source} > x.txt, write the "
                "Chinese, python -m tools.i18n.editions import " + source + " x.txt, then make sync; CONTRIBUTING.md, "
                "\"Update a translation\"):\n" + "\n".join(problems), pytrace=False)


@pytest.mark.parametrize("source", SOURCES)
def test_every_cell_and_paragraph_has_a_current_translation(source: str) -> None:
    require_translated(source, editions.stale(LANG, source), SETTINGS.translations_may_lag)


def test_the_setting_is_one_line_true_or_false() -> None:
    # The course commits `false` (its make test and CI strict); a fork changes this one line to `true`.
    text = (ROOT / "course_utils" / "course.toml").read_text(encoding="utf-8")
    line = f"\ntranslations_may_lag = {str(SETTINGS.translations_may_lag).lower()}\n"
    assert line in text, "one line, true or false"
    for value in ("true", "false"):
        assert read_settings(text.replace(line, f"\ntranslations_may_lag = {value}\n")).translations_may_lag is (
            value == "true")
    with pytest.raises(ValueError, match="true or false"):
        read_settings(text.replace(line, '\ntranslations_may_lag = "yes"\n'))


def test_a_fork_that_lets_the_translation_lag_gets_warnings_with_the_list() -> None:
    problems = ["notebooks/01_x.ipynb cell c003: the English changed since it was translated"]
    with pytest.warns(editions.UntranslatedWarning, match="c003") as caught:
        require_translated("notebooks/01_x.ipynb", problems, may_lag=True)
    assert "not yet translated" in str(caught[0].message)
    with pytest.raises(pytest.fail.Exception, match="c003"):
        require_translated("notebooks/01_x.ipynb", problems, may_lag=False)


GLOSSARY = ROOT / "translations" / LANG / "GLOSSARY.md"
_ROW = re.compile(r"^\| (.+?) \| (.+?) \|$")
_COMMA = re.compile(r"[\u4e00-\u9fff] ?,|, ?[\u4e00-\u9fff]")  # an ASCII comma next to a Chinese character
_EMPHASIS = re.compile(r"(?<![A-Za-z0-9_*])\*[^*\s][^*]*\*(?![A-Za-z0-9_*])")  # *...*, not (x*w)**2
_QUOTED = re.compile(r'\*[^*]+\*|“[^”]*”|"[^"]*"|`[^`]*`|\]\([^)]*\)')  # titles, quotes, code, link targets
# a space between Chinese characters (or full-width punctuation), left where a term was replaced: "一个 梯度累加后钩子"
_SPACE = re.compile(r"[\u4e00-\u9fff，。：；、（）“”] +[\u4e00-\u9fff，。：；、（）“”]")


@functools.cache
def glossary_tables() -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str]]]:
    """The rows of GLOSSARY.md's "Recurring labels", "Terms the test checks" and "Words a translation must not use"
    tables."""
    titles = ("Recurring labels", "Terms the test checks", "Words a translation must not use")
    tables: dict[str, list[tuple[str, str]]] = {title: [] for title in titles}
    current = None
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        current = next((title for title in titles if line.startswith(title)), current)
        row = _ROW.match(line)
        if current and row and not set(row[1]) <= set("-|") and row[1] not in ("English", "avoid"):
            tables[current].append((row[1], row[2]))
    assert all(tables.values()), f"{GLOSSARY.relative_to(ROOT)} lost one of its tables"
    return tables[titles[0]], tables[titles[1]], tables[titles[2]]


def glossary_problems(english: str, chinese: str, prose: bool = True) -> list[str]:
    """What in ``chinese`` (the translation of ``english``) goes against the glossary. A term in a title the English
    quotes (``*Sanity Checks for Saliency Maps*``) is the title's, not the course's. A string of the code
    (``prose=False``) may align columns with spaces and write a tuple with ASCII commas."""
    labels, terms, avoid = glossary_tables()
    problems = [f"{word!r} (write {instead})" for word, instead in avoid if word in chinese]
    prose_english = _QUOTED.sub(" ", english).lower()
    problems += [f"{term!r} not translated as {translated!r}" for term, translated in terms
                 if term.lower() in prose_english and translated not in chinese]
    text = re.sub(r"```.*?```|`[^`]*`", "x", chinese, flags=re.S)  # code: a placeholder, not a gap
    if prose:
        problems += [f"an ASCII comma in Chinese text: {match.group(0)!r}" for match in _COMMA.finditer(text)]
        problems += [f"a space between Chinese characters: {match.group(0)!r}" for match in _SPACE.finditer(text)]
    problems += [f"{label!r} not translated as {translated!r}" for label, translated in labels
                 if "..." not in label and not re.search(r"\d", label) and label in english
                 and translated not in chinese]
    return problems


def _literal_stars(markdown: str) -> int:
    def texts(tokens):
        for token in tokens:
            yield from texts(token.children) if token.children else [token.content] if token.type == "text" else []
    return sum(text.count("*") for text in texts(units._PARSER.parse(markdown)))


@pytest.mark.parametrize("source", SOURCES)
def test_the_translation_keeps_the_glossary_and_its_emphasis_renders(source: str) -> None:
    """Issue 36: one term, one translation (the post-accumulate-grad hook, clamp, dead ReLU, the then-vs-now label, the
    Binder sentence, ...), Chinese punctuation, in every notebook and guide of the Chinese edition. CommonMark does not
    close **…** after full-width punctuation that a Chinese character follows (**平手。**每), nor open *…* before one
    (是*“…”*): every translation renders as many asterisks as its English."""
    catalog = editions.read_catalog(editions.po_path(LANG, source))
    strings = {unit.english for unit in editions.units_of(source) if unit.kind == "string"}
    translated = [message for message in catalog if message.id and message.string]
    problems = [f"{message.context or 'paragraph'}: {problem}" for message in translated
                for problem in glossary_problems(message.id, message.string, prose=message.id not in strings)]
    problems += [f"{message.context}: a string the code prints or draws (an alt text...) is plain text, no Markdown "
                 "emphasis (*...*)" for message in translated if message.id in strings
                 and _EMPHASIS.search(message.string)]
    problems += [f"{message.context or 'paragraph'}: asterisks that do not render (put the full-width punctuation "
                 f"outside **…**): {message.string[:80]!r}" for message in translated
                 if _literal_stars(message.string) > _literal_stars(message.id)]
    assert not problems, f"{source} (see {GLOSSARY.relative_to(ROOT)}):\n" + "\n".join(problems)


def test_the_messages_keep_the_glossary_and_their_placeholders() -> None:
    """The same for check(), hint() and doctor(): their Chinese uses the glossary's terms and punctuation, and keeps
    each ``{placeholder}`` (a dropped or renamed one would raise KeyError, or lose a value, in format())."""
    from tools.i18n import messages as catalogue_tool

    def placeholders(text: str) -> set[str]:
        return set(re.findall(r"\{(\w*)\}", text))

    problems = []
    for path in catalogue_tool.parts(LANG):
        for message in [m for m in catalogue_tool.read_part(path) if m.id and m.string]:
            where = f"{path.name}: {message.id[:50]!r}"
            problems += [f"{where}: {problem}" for problem in glossary_problems(message.id, message.string)]
            if placeholders(message.id) != placeholders(message.string):
                problems.append(f"{where}: its placeholders changed")
    assert not problems, "\n".join(problems)


def test_the_glossary_check_finds_what_it_is_for() -> None:
    assert glossary_problems("a post-accumulate-grad hook", "一个 post-accumulate 钩子")
    assert glossary_problems("forward failed", "forward 失败了")
    assert glossary_problems("dead ReLU units", "死掉的 ReLU 单元")
    assert glossary_problems("(name, shape)", "(名称, 形状)")
    assert glossary_problems("Two kinds of raw hooks catch all of it", "两种原始钩子就能把它全部接住")
    assert glossary_problems("match nnsight to 1e-5", "与 nnsight 的结果吻合到 1e-5")
    assert glossary_problems("when GPU memory is what limits", "当 GPU 内存是瓶颈时")
    assert glossary_problems("Raw hooks first", "先写钩子")  # the term, at a sentence's start, left out
    assert not glossary_problems("*Sanity Checks for Saliency Maps*", "*Sanity Checks for Saliency Maps*")
    assert glossary_problems("another post-accumulate-grad hook", "另一个 梯度累加后钩子")
    assert not glossary_problems("the hook on `x`", "`x` 上的钩子，`fc1.weight` 的梯度累加后钩子，`y` 的 `z` 钩子")
    assert not glossary_problems("`(x, y)`", "`(x, y)` 与 (bias, x, Wᵀ)")


@pytest.mark.parametrize("source", list(editions.GUIDES))
def test_the_chinese_guides_are_what_the_build_makes(source: str) -> None:
    target = ROOT / editions.GUIDES[source].format(lang=LANG)
    assert target.exists(), f"{target.relative_to(ROOT)} is missing: run make translations"
    assert target.read_text(encoding="utf-8") == editions.built_guide(LANG, source), (
        f"{target.relative_to(ROOT)} is not what tools/i18n/editions.py builds: run make translations")


@functools.cache
def catalog_of(english: Path):
    return editions.read_catalog(editions.po_path(LANG, str(english.relative_to(ROOT))))


def built_code(english: Path, cell: dict) -> str:
    """The Chinese code of an English code cell: setup_notebook(lang="zh"), its comments and shown strings
    translated."""
    return editions.translated_code("".join(cell["source"]), cell["id"], LANG, catalog_of(english))


def code_tokens(source: str) -> list[tuple[int, str]]:
    """(type, text) of each token that runs, a run of adjacent string literals as one (its literals' bodies joined);
    comments and line breaks left out."""
    out: list[tuple[int, str]] = []
    for kind, text, _start, _end in units._tokens(source):
        if kind in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT):
            continue
        if kind == tokenize.STRING:
            literal = units._LITERAL.match(text)
            body = literal["prefix"].lower() + "|" + literal["body"]
            if out and out[-1][0] == tokenize.STRING:
                body = out.pop()[1] + literal["body"]
            out.append((kind, body))
        else:
            out.append((kind, text))
    return out


def code_differences(english: str, chinese: str) -> list[str]:
    """What differs between an English code cell and its Chinese twin beyond translated comments and shown strings
    (each of the same kind, with the same ``{fields}``) and ``setup_notebook(lang="zh")``: tokenized, not compared
    as text."""
    shown = {piece.text for piece in units.code_pieces(english) if piece.kind == "string"}
    ours, theirs = code_tokens(editions.localized_code(english, LANG)), code_tokens(chinese)
    if len(ours) != len(theirs):
        return [f"{len(ours)} tokens in English, {len(theirs)} in Chinese"]
    problems = []
    for (kind, en), (_kind, zh) in zip(ours, theirs, strict=True):
        if en == zh:
            continue
        en_prefix, _bar, en_body = en.partition("|")
        zh_prefix, _bar, zh_body = zh.partition("|")
        if kind != tokenize.STRING or en_body not in shown or en_prefix != zh_prefix:
            problems.append(f"{en[:60]!r} became {zh[:60]!r}")
        elif sorted(units.fields(en_body, "f" in en_prefix)) != sorted(units.fields(zh_body, "f" in en_prefix)):
            problems.append(f"the fields of {en_body[:60]!r} changed: {zh_body[:60]!r}")
    return problems


@pytest.mark.parametrize("english", ENGLISH, ids=[p.name for p in ENGLISH])
def test_the_chinese_notebook_is_what_the_build_makes_with_the_english_cells_and_code(english: Path) -> None:
    """notebooks/zh/ is what the build makes from the English and translations/zh/: the same cells, ids, metadata and
    tags, the same heading levels, and the English code (only comments, shown strings and ``setup_notebook``)."""
    target = zh_path(english)
    assert target.exists(), f"{target.relative_to(ROOT)} is missing: run make translations"
    stored = json.loads(target.read_text(encoding="utf-8"))
    assert stored["metadata"].get("language_edition", {}).get("lang") == LANG
    ours, theirs = cells(english), stored["cells"]
    assert [(c["cell_type"], c["id"]) for c in ours] == [(c["cell_type"], c["id"]) for c in theirs]
    for en, zh, built in zip(ours, theirs, editions.built_notebook(LANG, english)["cells"], strict=True):
        where = f"{english.name} cell {en['id']}"
        en_text, zh_text = "".join(en["source"]), "".join(zh["source"])
        assert zh_text == "".join(built["source"]), (
            f"{target.relative_to(ROOT)} cell {zh['id']} is not what tools/i18n/editions.py builds from the English "
            "and translations/zh/: it was edited by hand, or the English changed. Run make translations.")
        assert en["metadata"] == zh["metadata"], f"{where}: metadata (tags, slideshow, ...) differ"
        if en["cell_type"] == "code":
            assert not code_differences(en_text, zh_text), f"{where}: {code_differences(en_text, zh_text)}"
            for _kind, text, *_ in units._tokens(zh_text):  # issue 43: no {field} cut over two literals ({st" "art})
                literal = units._LITERAL.match(text) if _kind == 3 else None
                assert literal is None or literal["body"].count("{") == literal["body"].count("}"), f"{where}: {text}"
        else:
            levels = [level for level, _ in editions.headings(en_text)]
            assert [level for level, _ in editions.headings(zh_text)] == levels, f"{where}: heading levels differ"


def test_the_code_comparison_finds_what_it_is_for() -> None:
    english = 'x = f"layer {i}: {v:.2f} done"  # the value\nprint("a sum of two things", x)\n'
    chinese = 'x = f"第 {i} 层：{v:.2f} 完成"  # 取值\nprint("两样东西之和", x)\n'
    assert code_differences(english, chinese) == []
    assert code_differences(english, chinese.replace("{v:.2f}", "{v:.3f}"))  # a field changed
    assert code_differences(english, chinese.replace("x)", "y)"))  # the code changed
    assert code_differences(english, chinese.replace('f"第', '"第'))  # no longer an f-string
    assert code_differences('d = {"key one": 1}\n', 'd = {"键": 1}\n')  # a dict's key is data, even with two words
    assert code_differences('if x == "some words": pass\n', 'if x == "几个词": pass\n')  # so is what is compared
    assert code_differences('print("some words")\n', 'print("几个词")\n') == []


def test_setup_is_the_only_code_change_and_selects_chinese() -> None:
    assert editions.localized_code("print(setup_notebook())", "zh") == 'print(setup_notebook(lang="zh"))'
    assert editions.localized_code("setup_notebook(threads=4)", "zh") == 'setup_notebook(lang="zh", threads=4)'
    assert editions.localized_code("x = 1", "zh") == "x = 1"
    for english in ENGLISH:
        assert any('setup_notebook(lang="zh"' in "".join(c["source"]) for c in cells(zh_path(english))
                   if c["cell_type"] == "code"), f"{english.name}: the Chinese notebook never selects Chinese"


def test_the_course_map_reads_the_chinese_openings() -> None:
    english = course_map(ROOT / "notebooks")
    chinese = course_map(ROOT / "notebooks" / LANG)
    assert [row.file for row in chinese] == [row.file for row in english]
    assert [row.minutes for row in chinese] == [row.minutes for row in english]
    untranslated = [row.file for row in chinese if not _CJK.search(row.title + row.learn)]
    if untranslated and SETTINGS.translations_may_lag:
        warnings.warn(editions.UntranslatedWarning(f"the opening cells of {untranslated} are not in Chinese yet"),
                      stacklevel=2)
        return
    assert not untranslated, f"the opening cells of {untranslated} are not in Chinese"


def _anchors(path: Path) -> set[str]:
    return {editions.anchor(heading) for _level, heading in editions.headings(markdown_of(path))}


_LINK = re.compile(r"\]\((?!https?:|mailto:)((?:[^()\s]|\([^()\s]*\))+)\)")


@pytest.mark.parametrize("document", [*(p.name for p in ENGLISH), *editions.GUIDES], ids=str)
def test_links_of_the_chinese_edition_reach_files_and_headings(document: str) -> None:
    guide = editions.GUIDES.get(document)
    path = ROOT / guide.format(lang=LANG) if guide else ROOT / "notebooks" / LANG / document
    broken = []
    for target in _LINK.findall(markdown_of(path)):
        file, _, fragment = target.partition("#")
        resolved = (path.parent / unquote(file)).resolve() if file else path
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and resolved.suffix in (".ipynb", ".md") and resolved.parent.name == LANG:
            if unquote(fragment) not in _anchors(resolved):
                broken.append(f"{target} (no such heading in {resolved.name})")
    assert not broken, f"{path.relative_to(ROOT)}: broken links:\n" + "\n".join(broken)


def test_the_english_guides_link_their_chinese_versions() -> None:
    for source, pattern in editions.GUIDES.items():
        target = ROOT / pattern.format(lang=LANG)
        relative = Path(shutil.os.path.relpath(target, (ROOT / source).parent)).as_posix()
        assert f"]({relative})" in (ROOT / source).read_text(encoding="utf-8"), f"{source} does not link {relative}"


def test_the_chinese_learner_edition_hides_what_the_english_one_hides(monkeypatch: pytest.MonkeyPatch) -> None:
    """... and its stubs speak Chinese whatever the shell says, leaving the learner's own language as it was."""
    from course_utils.machinery.messages import language

    monkeypatch.delenv("COURSE_LANG", raising=False)
    for english in ENGLISH:
        en = learner_notebook(nbformat.read(english, as_version=4))
        zh = learner_notebook(nbformat.read(zh_path(english), as_version=4))
        assert zh.metadata["language_edition"]["lang"] == LANG
        for a, b in zip(en.cells, zh.cells, strict=True):
            if a.cell_type == "code":
                assert a.metadata.get("tags") == b.metadata.get("tags"), f"{english.name} cell {a.get('id')}"
                assert "### BEGIN SOLUTION" not in b.source
                if "learner-stub" not in a.metadata.get("tags", []):  # a stub's comment speaks the notebook's language
                    assert b.source == built_code(english, a), f"{english.name} cell {a.get('id')}"
                else:
                    assert len(b.source.splitlines()) == len(a.source.splitlines()), f"{english.name} {a.get('id')}"
                    assert _CJK.search(b.source), f"{english.name} {a.get('id')}: an English stub in Chinese"
    assert language() == "en", "learner_notebook() changed the learner's own language"


def test_a_chinese_workspace_is_made_and_never_overwrites(tmp_path: Path) -> None:
    prepare_workspace(tmp_path, quiet=True, lang=LANG)
    first = tmp_path / "01_tensor_hooks.ipynb"
    opening = "".join(nbformat.read(first, as_version=4).cells[0].source)
    assert _CJK.search(opening), "the Chinese workspace holds the English notebooks"
    assert (tmp_path / "hooks_cheatsheet.md").exists()
    first.write_text(first.read_text(encoding="utf-8") + " ", encoding="utf-8")
    mine = first.read_text(encoding="utf-8")
    prepare_workspace(tmp_path, quiet=True, lang=LANG)
    assert first.read_text(encoding="utf-8") == mine


# -- staleness, end to end on a copy: change an English cell, watch it fail, translate it again ------------------------
def _translate_everything(source: str) -> None:
    """Give every entry of ``source`` a made-up translation that keeps its placeholders and fields."""
    _catalog, keyed = editions._keyed(LANG, source)
    editions.import_text(LANG, source, "".join(
        f"@@ {key}\n" + " ".join(["译文", key, *units.fields(m.id)]) + "".join(
            f"\n<!-- generated: {name} -->" for name in editions._PLACEHOLDER.findall(m.id)) + "\n\n"
        for key, m in keyed.items()))


@pytest.fixture()
def course_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty course in tmp_path (notebooks/, translations/, no guide) that the editions read and write."""
    (tmp_path / "notebooks").mkdir()
    for name, value in (("ROOT", tmp_path), ("NOTEBOOKS", tmp_path / "notebooks"), ("GUIDES", {}),
                        ("TRANSLATIONS", tmp_path / "translations")):
        monkeypatch.setattr(editions, name, value)
    return tmp_path


@pytest.fixture()
def notebook_copy(course_copy: Path) -> Path:
    """A copy of notebook 01 whose translation the test makes up."""
    english = course_copy / "notebooks" / "01_tensor_hooks.ipynb"
    shutil.copy(ROOT / "notebooks" / english.name, english)
    editions.update(LANG, "notebooks/01_tensor_hooks.ipynb")
    _translate_everything("notebooks/01_tensor_hooks.ipynb")
    assert editions.stale(LANG, "notebooks/01_tensor_hooks.ipynb") == []
    return english


def _edit_cell(english: Path, cell_id: str, change) -> None:
    notebook = json.loads(english.read_text())
    cell = next(c for c in notebook["cells"] if c["id"] == cell_id)
    cell["source"] = change("".join(cell["source"]))
    english.write_text(json.dumps(notebook))


def test_a_changed_sentence_puts_only_its_paragraph_in_english(notebook_copy: Path, capsys) -> None:
    """Issue 46: one changed sentence of a cell with a heading and paragraphs makes only its paragraph untranslated;
    the heading and the other paragraphs stay Chinese, and the old translation is kept, fuzzy, until updated."""
    english, source = notebook_copy, "notebooks/01_tensor_hooks.ipynb"
    notebook = json.loads(english.read_text())
    cell = next(c for c in notebook["cells"] if c["cell_type"] == "markdown" and "".join(c["source"]).startswith("## ")
                and len(units.markdown_blocks("".join(c["source"]))) >= 3)
    blocks = units.markdown_blocks("".join(cell["source"]))
    changed = blocks[1].text
    _edit_cell(english, cell["id"], lambda text: text.replace(changed, changed + " One more English sentence."))
    problems = editions.stale(LANG, source)
    assert len(problems) == 1 and f"cell {cell['id']} line" in problems[0], problems

    assert editions.update(LANG, source) == (0, 1)  # keeps the old translation, fuzzy, with the old English beside it
    catalog = editions.read_catalog(editions.po_path(LANG, source))
    new_english = changed + " One more English sentence."
    message = catalog.get(new_english, context=cell["id"])
    assert message.fuzzy and message.string.startswith("译文")
    assert [m.id for m in catalog.obsolete.values()] == [changed], "the English before is kept"
    built = {c["id"]: "".join(c["source"]) for c in editions.built_notebook(LANG, english)["cells"]}[cell["id"]]
    assert built.startswith(f"译文 {cell['id']}\n"), "the heading stays translated"
    assert message.string not in built and "One more English sentence." in built, "outdated Chinese is never shown"
    assert editions.lag_note(LANG) in built and built.count(editions.lag_note(LANG)) == 1
    assert all(f"译文 {cell['id']}.{n}" in built for n in range(3, len(blocks) + 1)), "the other blocks stay Chinese"
    assert "fuzzy" in editions.po_path(LANG, source).read_text()
    editions.update(LANG, source)  # a second update keeps the same old English
    assert [m.id for m in editions.read_catalog(editions.po_path(LANG, source)).obsolete.values()] == [changed]

    # The translator's export: the English now and before on @| lines, then the old translation to edit; the
    # documented order of the arguments works (export --missing SOURCE), and giving it back unchanged changes nothing.
    capsys.readouterr()
    assert editions.main(["export", "--missing", str(english)]) == 0
    exported = capsys.readouterr().out
    key = f"{cell['id']}.2"
    assert exported.startswith(f"@@ {key}\n") and exported.count("@@ ") == 1, exported
    assert "@|   " + new_english.split("\n")[-1] in exported and "@| The English before:" in exported
    assert exported.rstrip().endswith(message.string), "the old translation is there to start from"
    unchanged: list[str] = []
    assert editions.import_text(LANG, source, exported, unchanged) == 0 and unchanged == [key]
    assert len(editions.stale(LANG, source)) == 1, "an old translation imported unchanged stays out of date"
    editions.import_text(LANG, source, f"@@ {key}\n新的译文\n")
    assert editions.stale(LANG, source) == []
    assert not editions.read_catalog(editions.po_path(LANG, source)).obsolete, "the English before is dropped"
    kinds = editions._kinds(source)
    with_fields = next(k for k, m in editions._keyed(LANG, source)[1].items()
                       if units.fields(m.id) and kinds[m.context, m.id] == "fstring")
    with pytest.raises(ValueError, match="keep the fields"):
        editions.import_text(LANG, source, f"@@ {with_fields}\n丢了字段\n")


def test_numbers_and_code_names_changed_in_english_are_carried_into_the_translation(notebook_copy: Path) -> None:
    """Issue 46: the opening's minutes 40 -> 85, or a renamed `name`, need no translator; a changed word does."""
    english, source = notebook_copy, "notebooks/01_tensor_hooks.ipynb"
    opening = json.loads(english.read_text())["cells"][0]
    minutes = re.search(r"\*\*Estimated time:\*\* (\d+) min", "".join(opening["source"]))
    _catalog, keyed = editions._keyed(LANG, source)
    key = next(k for k, m in keyed.items() if m.id == minutes[0])
    editions.import_text(LANG, source, f"@@ {key}\n**预计时间：** {minutes[1]} 分钟\n")
    _edit_cell(english, opening["id"], lambda text: text.replace(minutes[0], "**Estimated time:** 85 min"))
    assert editions.update(LANG, source) == (0, 0) and editions.stale(LANG, source) == []
    built = "".join(editions.built_notebook(LANG, english)["cells"][0]["source"])
    assert "**预计时间：** 85 分钟" in built and editions.lag_note(LANG) not in built

    assert editions.carried("hook `fc1` fires 2 times", "hook `fc2` fires 3 times", "`fc1` 上的钩子触发 2 次") \
        == "`fc2` 上的钩子触发 3 次"
    assert editions.carried("layer_1 of 12", "layer_2 of 12", "12 层中的 layer_1") == "12 层中的 layer_2"
    assert editions.carried("75 min", "75 hours", "75 分钟") is None  # a word changed
    assert editions.carried("75 min, 75 tokens", "85 min, 75 tokens", "75 分钟，75 个词元") is None  # which 75?
    assert editions.carried("0.5 of it", "0.25 of it", "它的一半") is None  # the translation writes it otherwise


def test_a_chinese_learner_notebook_runs_with_chinese_stubs_and_checks(tmp_path: Path) -> None:
    """The Chinese learner edition of 01, run in a kernel as a learner's workspace holds it: only the stubs fail, and
    check() reports them in Chinese (tests/learner_run.py knows both languages)."""
    from learner_run import learner_run_problems

    from tools.notebook_runner import execute

    prepare_workspace(tmp_path, quiet=True, lang=LANG)
    path = tmp_path / "01_tensor_hooks.ipynb"
    notebook = execute(path, allow_errors=True)
    problems = learner_run_problems(notebook, nbformat.read(zh_path(ROOT / "notebooks" / path.name), as_version=4))
    assert not problems, "\n".join(problems)
    printed = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
    assert "✗" in printed and _CJK.search(printed.split("✗", 1)[1][:200]), "check() did not answer in Chinese"


def test_a_changed_guide_paragraph_keeps_its_translation_fuzzy(course_copy: Path, monkeypatch) -> None:
    guide = course_copy / "GUIDE.md"
    guide.write_text("# Title\n\nThe first paragraph says one thing about hooks.\n\nA second, unrelated one.\n")
    monkeypatch.setattr(editions, "GUIDES", {"GUIDE.md": "GUIDE.{lang}.md"})
    editions.update(LANG, "GUIDE.md")
    editions.import_text(LANG, "GUIDE.md", "@@ 1\n# 标题\n\n@@ 2\n第一段讲钩子的一件事。\n\n@@ 3\n第二段。\n")
    assert editions.stale(LANG, "GUIDE.md") == []
    guide.write_text("# Title\n\nThe first paragraph says one more thing about hooks.\n\nA second, unrelated one.\n")
    problems = editions.stale(LANG, "GUIDE.md")
    assert len(problems) == 1 and "GUIDE.md line 3" in problems[0], problems
    assert editions.update(LANG, "GUIDE.md") == (0, 1)
    catalog = editions.read_catalog(editions.po_path(LANG, "GUIDE.md"))
    changed = catalog.get("The first paragraph says one more thing about hooks.")
    assert changed.fuzzy and changed.string == "第一段讲钩子的一件事。", "the old translation was lost"
    assert "The first paragraph says one thing about hooks." in catalog.obsolete, "the old English was lost"
    assert "The first paragraph says one more thing" in editions.built_guide(LANG, "GUIDE.md"), "outdated Chinese shown"


def test_a_po_file_of_the_old_form_is_refused_and_kept(notebook_copy: Path) -> None:
    """A PO file from before 2026-11-29 (one entry per markdown cell; cell-id/altN) would lose its translations in
    update: it is refused, saying how to migrate it, and left as it is."""
    source = "notebooks/01_tensor_hooks.ipynb"
    cell = next(c for c in json.loads(notebook_copy.read_text())["cells"] if c["cell_type"] == "markdown"
                and len(units.markdown_blocks("".join(c["source"]))) > 1)
    for context, english in ((cell["id"], "".join(cell["source"])), ("c001/alt1", "Two bars.")):
        catalog = editions.read_catalog(editions.po_path(LANG, source))
        catalog.add(english, "旧的整格译文", context=context)
        editions.write_catalog(editions.po_path(LANG, source), catalog)
        before = editions.po_path(LANG, source).read_bytes()
        with pytest.raises(SystemExit, match="PO form before 2026-11-29.*commit 18607bf"):
            editions.update(LANG, source)
        assert editions.po_path(LANG, source).read_bytes() == before
        catalog.delete(english, context=context)
        editions.write_catalog(editions.po_path(LANG, source), catalog)
