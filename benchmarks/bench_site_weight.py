"""What a reader downloads for each page of the course's website, and what the notebooks weigh: measured in Chromium.

Every page of both languages is opened over HTTP (as GitHub Pages serves it, here on 127.0.0.1) in Debian's
Chromium at 390 x 844 (a phone); the bytes of every file it fetches are summed, uncompressed (the sizes on disk):

- ``first view``: what the page fetched by its ``load`` event (lazy images below the fold wait);
- ``whole page``: the same after every lazy image was loaded too, what a reader who scrolls to the end has fetched.

It prints, per language, the median and the largest page, the pages over the targets, the five heaviest files, and the
size of the stored notebooks (English and Chinese). Targets (issue 43): median page <= 1 MB and largest <= 2 MB
(whole page), both languages; exit status 1 when one is missed.

Usage: ``make site`` first, then ``.venv/bin/python -m benchmarks.bench_site_weight [--site build/site]``
"""

from __future__ import annotations

import argparse
import functools
import http.server
import statistics
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

ROOT = Path(__file__).resolve().parents[1]
MB = 1_000_000
MEDIAN_TARGET, LARGEST_TARGET = 1 * MB, 2 * MB
PHONE = {"width": 390, "height": 844}
LOAD_LAZY_IMAGES = """async () => {
  const lazy = [...document.images].filter(img => img.loading === "lazy" && !img.complete);
  lazy.forEach(img => { img.loading = "eager"; });
  await Promise.all(lazy.map(img => img.decode().catch(() => null)));
  await document.fonts.ready;
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass


@contextmanager
def serving(site: Path) -> Iterator[str]:
    """``site`` over HTTP on 127.0.0.1 (a port the system picks), as GitHub Pages serves it; stopped on exit.

    Usage: ``with serving(Path("build/site")) as url: ...`` (``url`` ends with ``/``)
    """
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def site_pages(site: Path) -> list[str]:
    """Every HTML page of the site, relative to its root (English at the root, Chinese in ``zh/``; not the slides)."""
    return sorted(path.relative_to(site).as_posix() for lang in ("", "zh") for path in (site / lang).glob("*.html"))


@dataclass
class Weight:
    """The files one page fetched: URL path -> bytes, at its first view and once every lazy image is in."""

    first_view: dict[str, int]
    whole: dict[str, int]

    @property
    def first_view_bytes(self) -> int:
        return sum(self.first_view.values())

    @property
    def whole_bytes(self) -> int:
        return sum(self.whole.values())


def measure(page: Any, url: str, site: Path) -> Weight:
    """Open ``url`` in the Playwright ``page`` and weigh what it fetched (files of ``site``, by their size on disk)."""
    fetched: dict[str, int] = {}

    def record(request: Any) -> None:
        path = unquote(urlparse(request.url).path).lstrip("/")
        file = site / path
        if file.is_file():
            fetched[path] = file.stat().st_size

    page.on("requestfinished", record)
    try:
        page.goto(url, wait_until="load")
        first_view = dict(fetched)
        page.evaluate(LOAD_LAZY_IMAGES)
    finally:
        page.remove_listener("requestfinished", record)
    return Weight(first_view, dict(fetched))


def weigh_site(site: Path, chromium: Path, pages: list[str] | None = None) -> dict[str, Weight]:
    """Every page of ``site`` (or ``pages``), each in a fresh tab with an empty cache, on a phone's screen."""
    from playwright.sync_api import sync_playwright

    weights = {}
    with serving(site) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), headless=True,
                                             args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            for name in pages or site_pages(site):
                context = browser.new_context(viewport=PHONE)
                try:
                    weights[name] = measure(context.new_page(), url + name, site)
                finally:
                    context.close()
        finally:
            browser.close()
    return weights


def notebook_bytes() -> dict[str, int]:
    """The stored notebooks' total size, by edition."""
    return {lang: sum(path.stat().st_size for path in folder.glob("[0-9][0-9]_*.ipynb"))
            for lang, folder in (("en", ROOT / "notebooks"), ("zh", ROOT / "notebooks" / "zh"))}


def report(weights: dict[str, Weight]) -> list[str]:
    """Print the table; the targets missed."""
    missed = []
    print(f"{'edition':8} {'pages':>5} {'median first view':>18} {'median page':>12} {'largest page':>28}")
    for lang in ("en", "zh"):
        mine = {name: w for name, w in weights.items() if name.startswith("zh/") == (lang == "zh")}
        if not mine:
            continue
        heaviest = max(mine, key=lambda name: mine[name].whole_bytes)
        median = statistics.median(w.whole_bytes for w in mine.values())
        largest = mine[heaviest].whole_bytes
        print(f"{lang:8} {len(mine):>5} {statistics.median(w.first_view_bytes for w in mine.values()) / MB:>15.2f} MB"
              f" {median / MB:>9.2f} MB {largest / MB:>9.2f} MB ({heaviest})")
        if median > MEDIAN_TARGET:
            missed.append(f"{lang}: median page {median / MB:.2f} MB > {MEDIAN_TARGET / MB:.0f} MB")
        if largest > LARGEST_TARGET:
            missed.append(f"{lang}: largest page {heaviest} {largest / MB:.2f} MB > {LARGEST_TARGET / MB:.0f} MB")
    files = {path: size for w in weights.values() for path, size in w.whole.items()}
    shared = {path: sum(path in w.whole for w in weights.values()) for path in files}
    print("heaviest files:", "; ".join(f"{path} {files[path] / 1000:.0f} kB on {shared[path]} pages"
                                       for path in sorted(files, key=files.get, reverse=True)[:5]))
    print("stored notebooks:", ", ".join(f"{lang} {size / MB:.2f} MB" for lang, size in notebook_bytes().items()))
    return missed


def main() -> int:
    sys.path.insert(0, str(ROOT / "tests"))
    from chromium_path import CHROMIUM

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "build" / "site")
    args = parser.parse_args()
    if not (args.site / "index.html").is_file():
        raise SystemExit(f"No site in {args.site}: run `make site` first.")
    missed = report(weigh_site(args.site, CHROMIUM))
    print("targets (median <= 1 MB, largest <= 2 MB, both languages):", "; ".join(missed) if missed else "met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
