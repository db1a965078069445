"""The course's website in Chromium (``make site``; the files themselves: tests/test_website.py).

The site is built once per run (``course_site``, tests/conftest.py) and served as GitHub Pages serves it, over HTTP,
here on 127.0.0.1 only. One browser opens every page of both languages once (``visits``) and records what each did:
console errors and script errors, requests that left the machine or failed, the formulas KaTeX typeset, and what
axe-core (from npm, ``make test`` installs it: package.json) finds against WCAG 2.1 A and AA and its best practices.
Then: no page has a console error or a request off the machine; axe-core finds nothing serious or critical (the
report, ``build/browser/site-axe.json``, names every rule that failed anywhere); the sidebar reaches every notebook;
the language switch lands on the twin page; the search finds ``register_full_backward_hook`` in 04 and 11 and 钩子 in
the Chinese pages; a launch button opens the page's own notebook; screenshots of a notebook page in both languages.

Run with ``make test-browser`` (or ``pytest tests/browser/test_site.py``).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import pytest

from course_utils.machinery import cloud
from labserver import CHROMIUM, CHROMIUM_FLAGS, LOOPBACK, SCREENSHOTS

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
NOTEBOOKS = sorted(path.stem for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
BLOCKING = ("serious", "critical")
SCREENSHOT_PAGE = "06_grad_cam"
# Formula source left as text outside code and typeset maths (the same check as the slides': test_static_maths).
RAW_TEXT = """() => {
  const skip = "PRE, CODE, SCRIPT, STYLE, TEXTAREA, .katex, .katex-display, .highlight";
  const walker = document.createTreeWalker(document.querySelector("article") || document.body, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.parentElement.closest(skip)) texts.push(node.textContent);
  }
  return texts.join("\\n");
}"""


def require_browser_tools() -> None:
    missing = [f"Chromium at {CHROMIUM} (apt-get install chromium-headless-shell)"] if not CHROMIUM.exists() else []
    if not AXE.exists():
        missing.append(f"axe-core at {AXE.relative_to(ROOT)} (make test installs it: npm ci)")
    if missing:
        message = "Missing for the website's browser tests: " + "; ".join(missing)
        if os.environ.get("COURSE_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(scope="module")
def served(course_site: Path) -> Iterator[str]:
    """The site over HTTP on 127.0.0.1 (a port the system picks), stopped at the module's end whatever happens."""
    require_browser_tools()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(course_site)))
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(served: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        context = chromium.new_context(viewport={"width": 1400, "height": 900}, color_scheme="light")
        try:
            yield context
        finally:
            context.close()
            chromium.close()


@dataclass
class Visit:
    """What one page did when it loaded, and what axe-core found on it."""

    console_errors: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    maths: int = 0
    maths_errors: int = 0
    raw_maths: str = ""
    violations: list[dict[str, Any]] = field(default_factory=list)
    rules_run: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)  # rules axe-core left for a person to check on this page
    sidebar: list[str] = field(default_factory=list)  # where the sidebar's links lead, as URLs
    launch: dict[str, str] = field(default_factory=dict)  # the launch menu's buttons: name -> URL


def site_pages(site: Path) -> list[str]:
    """Every HTML page of the site, relative to its root (the slides are tested as decks: test_static_maths)."""
    return sorted(path.relative_to(site).as_posix() for lang in ("", "zh") for path in (site / lang).glob("*.html"))


class Recorder:
    """The listeners of one tab, writing into the visit of the page it is on now."""

    def __init__(self, page: Any) -> None:
        self.visit = Visit()
        page.on("console", lambda message: message.type == "error" and self.visit.console_errors.append(message.text))
        page.on("pageerror", lambda error: self.visit.console_errors.append(f"script error: {error}"))
        page.on("request", self.request)
        page.on("requestfailed", lambda req: self.visit.failed.append(f"{req.url} ({req.failure})"))

    def request(self, req: Any) -> None:
        parsed = urlparse(req.url)
        if parsed.scheme in ("http", "https", "ws", "wss") and parsed.hostname not in LOOPBACK:
            self.visit.outside.append(req.url)


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


@pytest.fixture(scope="module")
def tab(browser: Any) -> Iterator[Any]:
    page = browser.new_page()
    try:
        yield page
    finally:
        page.close()


@pytest.fixture(scope="module")
def visits(course_site: Path, served: str, browser: Any) -> dict[str, Visit]:
    """Every page of both languages, opened once, one after the other in one tab: what it did, axe-core's verdict."""
    axe = AXE.read_text(encoding="utf-8")
    results: dict[str, Visit] = {}
    page = browser.new_page()
    recorder = Recorder(page)
    try:
        for name in site_pages(course_site):
            visit = recorder.visit = results[name] = Visit()
            page.goto(served + name, wait_until="load")
            if page.locator(".math").count():
                page.wait_for_function("() => document.querySelectorAll('.math .katex').length > 0", timeout=15_000)
            visit.maths = page.locator(".math .katex").count()
            visit.maths_errors = page.locator(".katex-error").count()
            visit.raw_maths = page.evaluate(RAW_TEXT)
            visit.sidebar = page.eval_on_selector_all("nav.bd-docs-nav a", "links => links.map(a => a.href)")
            visit.launch = dict(page.eval_on_selector_all(
                ".dropdown-launch-buttons a", "links => links.map(a => [a.textContent.trim(), a.href])"))
            if name.removeprefix("zh/") == f"{SCREENSHOT_PAGE}.html":
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOTS / f"site-{SCREENSHOT_PAGE}-{'zh' if name.startswith('zh/') else 'en'}.png"))
            page.evaluate(ONE_TOKEN_PER_CLASS)
            page.evaluate(axe)
            found = page.evaluate(AXE_RUN, AXE_TAGS)
            visit.violations, visit.rules_run, visit.undecided = found["violations"], found["ran"], found["undecided"]
    finally:
        recorder.visit = Visit()  # what the page does while it closes is no page's
        page.close()
    return results


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


# -- every page --------------------------------------------------------------------------------------------------
def test_every_page_loads_with_no_console_error_and_no_request_off_the_machine(visits: dict[str, Visit]) -> None:
    assert len(visits) == 2 * (len(NOTEBOOKS) + 4), sorted(visits)  # + landing, cheat-sheet, guide, search
    problems = [f"{name}: {what}: {found[:3]}" for name, visit in visits.items()
                for what, found in (("console errors", visit.console_errors), ("requests off the machine", visit.outside),
                                    ("failed requests", visit.failed)) if found]
    assert not problems, "\n".join(problems)


def test_axe_core_finds_nothing_serious_or_critical_on_any_page(visits: dict[str, Visit]) -> None:
    failed = write_axe_report(visits)
    assert all(len(visit.rules_run) > 30 for visit in visits.values()), "axe-core ran too few rules: is it axe?"
    blocking = {rule: info for rule, info in failed.items() if info["impact"] in BLOCKING}
    assert not blocking, "axe-core (report: build/browser/site-axe.json): " + "; ".join(
        f"{rule} [{info['impact']}] {info['help']} on {len(info['pages'])} pages, e.g. {next(iter(info['pages'].items()))}"
        for rule, info in blocking.items())


def test_formulas_are_typeset_offline_with_no_source_left_as_text(visits: dict[str, Visit]) -> None:
    import re

    raw = re.compile(r"\$[^$\s][^$\n]*\$|\\\(|\\\[|\\(?:partial|sum|frac|alpha|cdot|max)\b")
    for name in ("01_tensor_hooks.html", "zh/01_tensor_hooks.html"):
        assert visits[name].maths > 5, f"{name}: no typeset formula"
    for name, visit in visits.items():
        assert visit.maths_errors == 0, f"{name}: {visit.maths_errors} formula(s) KaTeX could not parse"
        assert not raw.findall(visit.raw_maths), f"{name}: formula source left as text: {raw.findall(visit.raw_maths)[:3]}"


# -- navigation --------------------------------------------------------------------------------------------------
def test_the_sidebar_reaches_every_notebook_in_both_languages(served: str, tab: Any, visits: dict[str, Visit]) -> None:
    for name, visit in visits.items():
        lang = "zh/" if name.startswith("zh/") else ""
        reached = {url.removeprefix(served + lang).split("#")[0] for url in visit.sidebar}
        missing = [notebook for notebook in NOTEBOOKS if f"{notebook}.html" not in reached]
        assert not missing, f"{name}: the sidebar does not reach {missing}"
    for lang in ("", "zh/"):  # and a click on it lands there, with previous and next beside the article
        tab.goto(f"{served}{lang}index.html")
        tab.locator('nav.bd-docs-nav a[href="06_grad_cam.html"]').click()
        tab.wait_for_url(f"{served}{lang}06_grad_cam.html")
        assert tab.locator("article h1").first.inner_text().startswith("06 · Grad-CAM")
        assert tab.locator(".prev-next-area a.left-prev").get_attribute("href") == "05_guided_backprop.html"
        assert tab.locator(".prev-next-area a.right-next").get_attribute("href") == "07_hooks_in_training.html"


def test_the_language_switch_lands_on_the_twin_page_and_back(served: str, tab: Any) -> None:
    tab.goto(f"{served}04_backward_hooks.html#2-·-Example-M3:-a-deprecated-hook-on-the-whole-model")
    tab.locator("a.course-language-switch").click()
    tab.wait_for_url(f"{served}zh/04_backward_hooks.html")
    assert tab.evaluate("document.documentElement.lang") == "zh-CN"
    assert tab.locator("article h1").first.inner_text().startswith("04 · 模块上的反向钩子")
    tab.locator("a.course-language-switch").click()
    tab.wait_for_url(f"{served}04_backward_hooks.html")
    assert tab.evaluate("document.documentElement.lang") == "en"


@pytest.mark.parametrize(("lang", "query", "expected"), [
    ("", "register_full_backward_hook", {"04_backward_hooks", "11_hook_clinic"}),
    ("zh/", "钩子", set(NOTEBOOKS)),
], ids=["en-api", "zh-hook"])
def test_search_finds_the_pages(served: str, tab: Any, lang: str, query: str, expected: set[str]) -> None:
    tab.goto(f"{served}{lang}search.html?q={quote(query)}")
    tab.wait_for_function("() => document.querySelector('#search-results .search-summary')?.textContent.trim()",
                          timeout=30_000)
    found = {href.split(".html")[0] for href in tab.eval_on_selector_all(
        "#search-results ul.search li a", "links => links.map(a => a.getAttribute('href'))")}
    assert expected <= found, f"{lang}search.html?q={query}: {sorted(found)}"


def test_each_notebook_page_launches_its_own_notebook(visits: dict[str, Visit]) -> None:
    for notebook in NOTEBOOKS:
        for lang in ("", "zh/"):
            path = f"{lang}{notebook}.ipynb"
            expected = {"Colab": cloud.colab_url(path), "Kaggle": cloud.kaggle_url(path), "Binder": cloud.binder_url(path)}
            assert visits[f"{lang}{notebook}.html"].launch == expected, f"{lang}{notebook}"
            assert all(url.endswith(path) or url.endswith(f"/{notebook}.ipynb") for url in expected.values())
    assert not visits["index.html"].launch, "the landing page is no notebook"


def test_screenshots_of_a_notebook_page_in_both_languages(visits: dict[str, Visit]) -> None:
    for lang in ("en", "zh"):
        path = SCREENSHOTS / f"site-{SCREENSHOT_PAGE}-{lang}.png"
        assert path.stat().st_size > 50_000, path  # a page with text and a figure, not a blank one
