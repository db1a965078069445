"""The course's website in Chromium (``make site``; the files themselves: tests/test_website.py).

The site (``course_site``, tests/conftest.py) is served on 127.0.0.1 as GitHub Pages serves it. Every page of both
languages is opened once (``visits``) at 1366 x 768 and recorded: errors, requests off the machine, its weight
(benchmarks/bench_site_weight.py's measure), formulas, axe-core's findings (WCAG 2.1 A/AA and best practices; report in
build/browser/site-axe.json), keyboard focus, tables, solutions, launch and download menus; its width on a 390 px
phone and its code in the A4 print view. Then the sidebar, the language switch, the search and the copy button are
used as a reader uses them. Run with ``make test-browser``.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import nbformat
import pytest
from labserver import LOOPBACK, SCREENSHOTS, require_browser

from benchmarks.bench_site_weight import LARGEST_TARGET, MEDIAN_TARGET, PHONE, measure, serving, site_pages
from course_utils.machinery import cloud
from course_utils.machinery.learner_edition import BEGIN
from tools.site.extension import search_synonyms

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
NOTEBOOKS = sorted(path.stem for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
GUIDES = ("index", "hooks_cheatsheet", "instructor_guide", "glossary", "search")
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
BLOCKING = ("serious", "critical")
SCREENSHOT_PAGE = "06_grad_cam"
DESKTOP = {"width": 1366, "height": 768}
A4 = {"width": 718, "height": 1000}  # A4's 210 mm at 96 px an inch, less the print margins Chromium sets
# Formula source left as text outside code and typeset maths (the same check as the slides': test_static_maths).
RAW_TEXT = """() => {
  const skip = "PRE, CODE, SCRIPT, STYLE, TEXTAREA, math, .highlight";
  const walker = document.createTreeWalker(document.querySelector("article") || document.body, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.parentElement.closest(skip)) texts.push(node.textContent);
  }
  return texts.join("\\n");
}"""
# Each control a keyboard reaches, focused as a keyboard focuses it: those whose focus cannot be seen (no outline of
# at least 2 px, or the control itself hidden: the copy button, transparent until the mouse is over its cell).
FOCUS = """() => {
  const controls = [...document.querySelectorAll('a[href], button, input, select, textarea, summary, [tabindex]')]
    .filter((el) => el.tabIndex >= 0 && el.getClientRects().length && el.checkVisibility({visibilityProperty: true}));
  const unseen = [];
  for (const el of controls) {
    el.focus({focusVisible: true});
    if (document.activeElement !== el) continue;
    const style = getComputedStyle(el);
    const ring = style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2;
    if (!ring || !el.checkVisibility({opacityProperty: true, visibilityProperty: true})) {
      unseen.push(el.outerHTML.slice(0, 100));
    }
  }
  document.activeElement?.blur();
  return {count: controls.length, unseen};
}"""
# Tables whose content is wider than their box (a reader would have to scroll them sideways), and code cut at the
# right edge (in the print view, where nothing scrolls).
CUT_TABLES = """() => [...document.querySelectorAll("article table")]
  .filter((table) => table.scrollWidth > table.parentElement.clientWidth + 1)
  .map((table) => `${table.scrollWidth} px in ${table.parentElement.clientWidth}: ${table.innerText.slice(0, 40)}`)"""
PHONE_SCROLLING_TABLES = """() => [...document.querySelectorAll("article table")].filter((table) => {
  const box = table.parentElement;
  return box.scrollWidth > box.clientWidth && ["auto", "scroll"].includes(getComputedStyle(box).overflowX);
}).length"""
CUT_CODE = """() => [...document.querySelectorAll("article pre")].filter((pre) => pre.scrollWidth > pre.clientWidth + 1)
  .map((pre) => pre.innerText.split("\\n").find((line) => line.length > 60) || pre.innerText.slice(0, 60))"""
# Every exercise's solution cell: folded (a closed <details> whose code cannot be seen) or not.
SOLUTIONS = """() => [...document.querySelectorAll("div.cell")].filter((cell) => """ \
    """cell.innerText.includes("BEGIN SOLUTION")
    || [...cell.querySelectorAll("pre")].some((pre) => pre.textContent.includes("BEGIN SOLUTION")))
  .map((cell) => {
    const details = cell.querySelector("details");
    const code = [...cell.querySelectorAll("pre")].find((pre) => pre.textContent.includes("BEGIN SOLUTION"));
    return {folded: Boolean(details && !details.open), seen: Boolean(code && code.checkVisibility()),
            prompt: details ? details.querySelector("summary").innerText.trim() : ""};
  })"""


@pytest.fixture(scope="module")
def served(course_site: Path) -> Iterator[str]:
    """The site over HTTP on 127.0.0.1 (a port the system picks), stopped at the module's end whatever happens."""
    require_browser((AXE, "make test installs axe-core: npm ci"))
    with serving(course_site) as url:
        yield url


@pytest.fixture(scope="module")
def tab(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport=DESKTOP, color_scheme="light")
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    try:
        yield context.new_page()
    finally:
        context.close()


@dataclass
class Visit:
    """What one page did when it loaded, and what was found on it."""

    console_errors: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    weight: int = 0  # bytes of every file it fetched, every lazy image included
    maths: int = 0
    raw_maths: str = ""
    violations: list[dict[str, Any]] = field(default_factory=list)
    rules_run: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)  # rules axe-core left for a person to check on this page
    sidebar: list[str] = field(default_factory=list)  # where the sidebar's links lead, as URLs
    launch: dict[str, str] = field(default_factory=dict)  # the launch menu's buttons: name -> URL
    downloads: list[str] = field(default_factory=list)  # the download menu's links, in order, as URLs
    focus: dict[str, Any] = field(default_factory=dict)
    cut_tables: list[str] = field(default_factory=list)  # at 1366 px
    tables: int = 0
    phone_width: int = 0  # the page's width on a 390 px phone
    phone_scrolling_tables: int = 0  # tables that scroll sideways inside their own box there
    cut_code: list[str] = field(default_factory=list)  # in the print view at A4 width
    solutions: list[dict[str, Any]] = field(default_factory=list)


def record(page: Any, visit: Visit) -> None:
    """Listen to one tab for what a visit records of its requests and errors."""
    def request(req: Any) -> None:
        parsed = urlparse(req.url)
        if parsed.scheme in ("http", "https", "ws", "wss") and parsed.hostname not in LOOPBACK:
            visit.outside.append(req.url)

    page.on("console", lambda message: message.type == "error" and visit.console_errors.append(message.text))
    page.on("pageerror", lambda error: visit.console_errors.append(f"script error: {error}"))
    page.on("request", request)
    page.on("requestfailed", lambda req: visit.failed.append(f"{req.url} ({req.failure})"))


# Before axe-core runs, each code block keeps one token of each highlighting class and the rest becomes plain text:
# the same text, and every colour the block uses is still checked against its background (a class has one colour),
# but color-contrast no longer measures thousands of identical tokens (4 times faster on a notebook page).
ONE_TOKEN_PER_CLASS = """() => {
  const seen = new Set();
  const escape = (text) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;");
  for (const pre of document.querySelectorAll(".highlight pre")) {
    let html = "";
    for (const node of pre.childNodes) {
      const sample = node.nodeType === Node.ELEMENT_NODE && !seen.has(node.className);
      if (sample) seen.add(node.className);
      html += sample ? node.outerHTML : escape(node.textContent);
    }
    pre.innerHTML = html;
  }
}"""
AXE_RUN = """async (tags) => {
    const r = await axe.run(document, {runOnly: {type: "tag", values: tags}, resultTypes: ["violations"]});
    return {ran: [...r.passes, ...r.violations, ...r.incomplete].map(x => x.id), undecided: r.incomplete.map(x => x.id),
            violations: r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                                nodes: v.nodes.map(n => n.target.join(" "))}))};
}"""


def visit_page(browser: Any, url: str, name: str, site: Path, axe: str) -> Visit:
    """One page in a fresh tab (an empty cache: its weight counts every file it needs)."""
    visit = Visit()
    context = browser.new_context(viewport=DESKTOP, color_scheme="light")
    try:
        page = context.new_page()
        record(page, visit)
        visit.weight = measure(page, url + name, site).whole_bytes
        visit.maths = page.locator("article math").count()
        visit.raw_maths = page.evaluate(RAW_TEXT)
        visit.sidebar = page.eval_on_selector_all("nav.bd-docs-nav a", "links => links.map(a => a.href)")
        visit.launch = dict(page.eval_on_selector_all(
            ".dropdown-launch-buttons a", "links => links.map(a => [a.textContent.trim(), a.href])"))
        visit.downloads = page.eval_on_selector_all(".dropdown-download-buttons a", "links => links.map(a => a.href)")
        visit.solutions = page.evaluate(SOLUTIONS)
        visit.focus = page.evaluate(FOCUS)
        visit.cut_tables = page.evaluate(CUT_TABLES)
        visit.tables = page.locator("article table").count()
        if name.removeprefix("zh/") == f"{SCREENSHOT_PAGE}.html":
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            lang = "zh" if name.startswith("zh/") else "en"
            page.screenshot(path=str(SCREENSHOTS / f"site-{SCREENSHOT_PAGE}-{lang}.png"))
        page.evaluate(ONE_TOKEN_PER_CLASS)
        page.evaluate(axe)
        found = page.evaluate(AXE_RUN, AXE_TAGS)
        visit.violations, visit.rules_run, visit.undecided = found["violations"], found["ran"], found["undecided"]
        page.set_viewport_size(PHONE)
        visit.phone_width = page.evaluate("document.documentElement.scrollWidth")
        visit.phone_scrolling_tables = page.evaluate(PHONE_SCROLLING_TABLES)
        page.emulate_media(media="print")
        page.set_viewport_size(A4)
        visit.cut_code = page.evaluate(CUT_CODE)
    finally:
        context.close()
    return visit


@pytest.fixture(scope="module")
def visits(course_site: Path, served: str, chromium: Any) -> dict[str, Visit]:
    """Every page of both languages, each opened once: what it did and what was found on it."""
    axe = AXE.read_text(encoding="utf-8")
    return {name: visit_page(chromium, served, name, course_site, axe) for name in site_pages(course_site)}


def write_axe_report(visits: dict[str, Visit]) -> dict[str, dict[str, Any]]:
    """Per rule that failed anywhere: its impact, the pages and the elements; written to build/browser/site-axe.json
    with the rules that ran and passed everywhere."""
    failed: dict[str, dict[str, Any]] = {}
    for name, visit in visits.items():
        for violation in visit.violations:
            rule = failed.setdefault(violation["id"], {"impact": violation["impact"], "help": violation["help"],
                                                        "pages": {}})
            rule["pages"][name] = violation["nodes"]
    ran = sorted({rule for visit in visits.values() for rule in visit.rules_run})
    undecided: dict[str, list[str]] = {}
    for name, visit in visits.items():
        for rule in visit.undecided:
            undecided.setdefault(rule, []).append(name)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "site-axe.json").write_text(json.dumps({
        "axe_core": json.loads((AXE.parent / "package.json").read_text())["version"], "tags": AXE_TAGS,
        "pages": len(visits), "failed": failed, "no_violation_anywhere": [r for r in ran if r not in failed],
        "left_for_review": undecided,
    }, indent=1, ensure_ascii=False), encoding="utf-8")
    return failed


def problems(visits: dict[str, Visit], attribute: str) -> list[str]:
    return [f"{name}: {getattr(visit, attribute)[:3]}" for name, visit in visits.items() if getattr(visit, attribute)]


# -- every page --------------------------------------------------------------------------------------------------
def test_every_page_loads_with_no_console_error_and_no_request_off_the_machine(visits: dict[str, Visit]) -> None:
    assert len(visits) == 2 * (len(NOTEBOOKS) + len(GUIDES)), sorted(visits)
    found = [f"{what}: {line}" for what in ("console_errors", "outside", "failed") for line in problems(visits, what)]
    assert not found, "\n".join(found)


def test_axe_core_finds_no_violation_on_any_page(visits: dict[str, Visit]) -> None:
    failed = write_axe_report(visits)
    assert all(len(visit.rules_run) > 30 for visit in visits.values()), "axe-core ran too few rules: is it axe?"
    assert not failed, "axe-core (report: build/browser/site-axe.json): " + "; ".join(
        f"{rule} [{info['impact']}] {info['help']} on {len(info['pages'])} pages, "
        f"e.g. {next(iter(info['pages'].items()))}"
        for rule, info in failed.items())


def test_formulas_are_typeset_by_the_browser_with_no_source_left_as_text(visits: dict[str, Visit]) -> None:
    raw = re.compile(r"\$[^$\s][^$\n]*\$|\\\(|\\\[|\\(?:partial|sum|frac|alpha|cdot|max)\b")
    for name in ("01_tensor_hooks.html", "zh/01_tensor_hooks.html"):
        assert visits[name].maths > 5, f"{name}: no typeset formula"
    for name, visit in visits.items():
        assert not raw.findall(visit.raw_maths), \
            f"{name}: formula source left as text: {raw.findall(visit.raw_maths)[:3]}"


def test_no_page_is_wider_than_a_phone_no_table_cut_at_1366_px_nor_code_in_the_print_view(
        visits: dict[str, Visit]) -> None:
    wide = {name: visit.phone_width for name, visit in visits.items() if visit.phone_width > PHONE["width"]}
    assert not wide, f"pages wider than a {PHONE['width']} px phone (px): {wide}"
    assert not problems(visits, "cut_tables"), problems(visits, "cut_tables")
    assert not problems(visits, "cut_code"), "code cut at A4 width in print: " + "; ".join(problems(visits, "cut_code"))
    assert visits["hooks_cheatsheet.html"].tables >= 5 and visits["zh/hooks_cheatsheet.html"].tables >= 5
    # on a phone the cheat-sheet's tables scroll inside their own box (the page itself does not: above)
    assert visits["hooks_cheatsheet.html"].phone_scrolling_tables >= 5


def test_every_control_shows_where_the_keyboard_focus_is(visits: dict[str, Visit], served: str, tab: Any) -> None:
    for name, visit in visits.items():
        assert visit.focus["count"] > 5, f"{name}: too few controls found: {visit.focus}"
        assert not visit.focus["unseen"], f"{name}: a focus no one can see (WCAG 2.4.7): {visit.focus['unseen'][:3]}"
    tab.goto(f"{served}zh/04_backward_hooks.html")  # and with the keyboard itself: the first ten Tab stops
    for _ in range(10):
        tab.keyboard.press("Tab")
        ring = tab.evaluate("(() => { const s = getComputedStyle(document.activeElement); "
                            "return [document.activeElement.outerHTML.slice(0, 80), s.outlineStyle, s.outlineWidth]; "
                            "})()")
        assert ring[1] != "none" and float(ring[2].removesuffix("px")) >= 2, ring


def test_every_solution_is_folded_until_the_reader_opens_it(visits: dict[str, Visit], served: str, tab: Any) -> None:
    for lang, folder in (("", ROOT / "notebooks"), ("zh/", ROOT / "notebooks" / "zh")):
        for notebook in NOTEBOOKS:
            cells = nbformat.read(folder / f"{notebook}.ipynb", as_version=4).cells
            expected = sum(cell.cell_type == "code" and BEGIN in cell.source for cell in cells)
            shown = visits[f"{lang}{notebook}.html"].solutions
            assert len(shown) == expected, f"{lang}{notebook}: {len(shown)} solutions on the page, {expected} in it"
            prompt = "显示参考答案" if lang else "Show the solution"
            assert all(s["folded"] and not s["seen"] and s["prompt"] == prompt for s in shown), (lang, notebook, shown)
    tab.goto(f"{served}04_backward_hooks.html")
    tab.locator("div.cell details summary").first.click()  # opened on purpose: the solution shows
    assert tab.locator("div.cell details").first.evaluate("d => d.open")
    assert tab.locator("div.cell details pre").first.is_visible()


def test_the_pages_weigh_what_the_issue_asks(visits: dict[str, Visit]) -> None:
    for lang in ("en", "zh"):
        weights = {name: visit.weight for name, visit in visits.items() if name.startswith("zh/") == (lang == "zh")}
        heaviest = max(weights, key=weights.get)
        assert statistics.median(weights.values()) <= MEDIAN_TARGET, (lang, sorted(weights.items(), key=lambda i: i[1]))
        assert weights[heaviest] <= LARGEST_TARGET, (lang, heaviest, weights[heaviest])


# -- navigation --------------------------------------------------------------------------------------------------
def test_the_sidebar_reaches_every_notebook_in_both_languages(served: str, tab: Any, visits: dict[str, Visit]) -> None:
    for name, visit in visits.items():
        lang = "zh/" if name.startswith("zh/") else ""
        reached = {url.removeprefix(served + lang).split("#")[0] for url in visit.sidebar}
        missing = [page for page in [*NOTEBOOKS, "glossary"] if f"{page}.html" not in reached]
        assert not missing, f"{name}: the sidebar does not reach {missing}"
    for lang in ("", "zh/"):  # and a click on it lands there, with previous and next beside the article
        tab.goto(f"{served}{lang}index.html")
        tab.locator('nav.bd-docs-nav a[href="06_grad_cam.html"]').click()
        tab.wait_for_url(f"{served}{lang}06_grad_cam.html")
        assert tab.locator("article h1").first.inner_text().startswith("06 · Grad-CAM")
        assert tab.locator(".prev-next-area a.left-prev").get_attribute("href") == "05_guided_backprop.html"
        assert tab.locator(".prev-next-area a.right-next").get_attribute("href") == "07_hooks_in_training.html"


def section_ids(tab: Any) -> list[str]:
    return tab.eval_on_selector_all("article section[id]", "sections => sections.map(s => s.id)")


def settled(tab: Any, section: str) -> None:
    """Wait until the section's heading is where a link to it puts it (the theme's scroll-padding-top)."""
    tab.wait_for_function("""(id) => Math.abs(document.getElementById(id).getBoundingClientRect().top
        - parseFloat(getComputedStyle(document.documentElement).scrollPaddingTop)) < 2""", arg=section, timeout=10_000)


def test_the_language_switch_lands_on_the_same_section_of_the_twin_page(served: str, tab: Any) -> None:
    twins = {}
    for lang in ("", "zh/"):
        tab.goto(f"{served}{lang}04_backward_hooks.html")
        twins[lang] = section_ids(tab)
    assert len(twins[""]) == len(twins["zh/"]) > 5
    switch = tab.locator("a.course-language-switch")
    # from a link to a section, English -> Chinese, with the keyboard (focusing the switch scrolls the page)
    tab.goto(f"{served}04_backward_hooks.html#{quote(twins[''][3])}")
    settled(tab, twins[""][3])  # the reader reads there (the theme scrolls to an anchor smoothly), then switches
    switch.focus()
    tab.keyboard.press("Enter")
    tab.wait_for_url(f"{served}zh/04_backward_hooks.html#{quote(twins['zh/'][3])}")
    assert tab.evaluate("document.documentElement.lang") == "zh-CN"
    assert tab.locator("article h1").first.inner_text().startswith("04 · 模块上的反向钩子")
    settled(tab, twins["zh/"][3])  # its heading at the top of the window
    # from where the reader scrolled to, Chinese -> English, with the mouse
    tab.locator(f"#{twins['zh/'][6]}").evaluate("section => section.scrollIntoView()")
    settled(tab, twins["zh/"][6])
    switch.evaluate("link => link.click()")  # a click where it is (Playwright's own click scrolls to it first)
    tab.wait_for_url(f"{served}04_backward_hooks.html#{quote(twins[''][6])}")
    assert tab.evaluate("document.documentElement.lang") == "en"
    # from the top of a page: the top of its twin
    tab.goto(f"{served}index.html")
    switch.click()
    tab.wait_for_url(f"{served}zh/index.html")


# -- search ------------------------------------------------------------------------------------------------------
def search(tab: Any, served: str, lang: str, query: str) -> list[tuple[str, str]]:
    """The results of a query on the search page: (page, snippet) each, best first."""
    tab.goto(f"{served}{lang}search.html?q={quote(query)}")
    tab.wait_for_function("() => document.querySelector('#search-results .search-summary')?.textContent.trim()",
                          timeout=30_000)
    tab.wait_for_function("() => [...document.querySelectorAll('#search-results ul.search li')]"
                          ".every(li => li.querySelector('p.context'))", timeout=30_000)
    return [(href.split(".html")[0], text) for href, text in tab.eval_on_selector_all(
        "#search-results ul.search li", "lis => lis.map(li => [li.querySelector('a').getAttribute('href'), "
        "li.querySelector('p.context').textContent])")]


# What readers type, and the page that answers it (the titles name it); zh: the glossary's terms.
QUERIES = [
    ("", "saved tensor", "08_saved_tensor_hooks"), ("", "register_full_backward_hook", "04_backward_hooks"),
    ("", "grad-cam", "06_grad_cam"), ("", "guided backprop", "05_guided_backprop"),
    ("", "gradient clipping", "07_hooks_in_training"), ("", "forward pre-hook", "03_forward_hooks"),
    ("", "tensor hook", "01_tensor_hooks"), ("", "remove hook handle", "02_hook_lifecycle"),
    ("", "optimizer hook", "09_state_and_optimizer_hooks"), ("", "compile", "10_hooks_at_scale"),
    ("", "DDP communication hook", "10_hooks_at_scale"), ("", "activation patching", "12_transformer_hooks"),
    ("", "cheat sheet", "hooks_cheatsheet"), ("", "hook clinic", "11_hook_clinic"),
    ("zh/", "保存张量钩子", "08_saved_tensor_hooks"), ("zh/", "梯度裁剪", "07_hooks_in_training"),
    ("zh/", "前向钩子", "03_forward_hooks"), ("zh/", "反向钩子", "04_backward_hooks"),
    ("zh/", "导向反向传播", "05_guided_backprop"), ("zh/", "激活修补", "12_transformer_hooks"),
    ("zh/", "句柄", "02_hook_lifecycle"), ("zh/", "优化器钩子", "09_state_and_optimizer_hooks"),
    ("zh/", "编译", "10_hooks_at_scale"), ("zh/", "术语表", "glossary"),
]


@pytest.mark.parametrize(("lang", "query", "expected"), QUERIES, ids=[f"{lang}{q}" for lang, q, _ in QUERIES])
def test_search_puts_the_right_page_first_with_a_snippet_of_its_text(served: str, tab: Any, lang: str, query: str,
                                                                     expected: str) -> None:
    results = search(tab, served, lang, query)
    assert results and results[0][0] == expected, f"{lang}{query}: {[page for page, _ in results[:4]]}"
    for page, snippet in results[:5]:  # the article's words, not the theme's buttons or the page's contents column
        assert not re.search(r"System Settings|Light\s+Dark|亮色|暗色|Contents|目录|Color mode", snippet), \
            (page, snippet)


def test_search_finds_what_readers_type_for_a_glossary_term(served: str, tab: Any) -> None:
    assert "显存" in search_synonyms()["内存"]
    pages = {page for page, _ in search(tab, served, "zh/", "内存")}
    assert "08_saved_tensor_hooks" in pages and {page for page, _ in search(tab, served, "zh/", "显存")} == pages


def test_search_finds_the_pages_in_both_languages(served: str, tab: Any) -> None:
    assert {"04_backward_hooks", "11_hook_clinic"} <= {
        page for page, _ in search(tab, served, "", "register_full_backward_hook")}
    assert set(NOTEBOOKS) <= {page for page, _ in search(tab, served, "zh/", "钩子")}


# -- launching, downloading, copying -----------------------------------------------------------------------------
def test_each_notebook_page_launches_and_downloads_the_exercises_first(served: str, visits: dict[str, Visit]) -> None:
    for notebook in NOTEBOOKS:
        for lang in ("", "zh/"):
            path = f"{lang}{notebook}.ipynb"
            visit = visits[f"{lang}{notebook}.html"]
            assert visit.launch == {"Colab": cloud.colab_url(path), "Kaggle": cloud.kaggle_url(path),
                                    "Binder": cloud.binder_url(path)}, f"{lang}{notebook}"
            learner = "notebooks/" + (f"zh/{notebook}.ipynb" if lang else f"{notebook}.ipynb")
            assert visit.downloads == [served + learner, f"{served}{lang}_sources/{notebook}.ipynb"], visit.downloads
    assert not visits["index.html"].launch, "the landing page is no notebook"


def test_the_copy_button_copies_a_code_cell_and_not_its_output(served: str, tab: Any) -> None:
    tab.goto(f"{served}01_tensor_hooks.html")
    cells = tab.locator("div.cell_input")
    assert tab.locator("div.cell_input button.copybtn").count() == cells.count() > 10
    assert tab.locator("div.cell_output button.copybtn").count() == 0
    cell = cells.nth(1)
    cell.hover()
    cell.locator("button.copybtn").click()
    copied = tab.evaluate("navigator.clipboard.readText()")
    assert copied.strip() == cell.locator("pre").inner_text().strip() and "\n" in copied.strip()


def test_screenshots_of_a_notebook_page_in_both_languages(visits: dict[str, Visit]) -> None:
    for lang in ("en", "zh"):
        path = SCREENSHOTS / f"site-{SCREENSHOT_PAGE}-{lang}.png"
        assert path.stat().st_size > 50_000, path  # a page with text and a figure, not a blank one
