"""Build the course's website into ``build/site/``: English at its root, Chinese in ``zh/``, the slides of each in
``slides/`` (``make site``). Open ``build/site/index.html``, or serve the folder as GitHub Pages does, which also gives
the search its page summaries: ``python -m http.server -d build/site``.

Usage: ``python -m tools.site [--out build/site] [--lang en --lang zh] [--no-slides] [--clean]``
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from tools.site.build import LANGUAGES, ROOT, build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.site", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    parser.add_argument("--cache", type=Path, default=ROOT / "build" / "site-cache",
                        help="the staged sources and Sphinx's doctrees (a second build reuses them)")
    parser.add_argument("--lang", action="append", choices=LANGUAGES, help="one language only (default: both)")
    parser.add_argument("--no-slides", dest="slides", action="store_false", help="leave the slides out")
    parser.add_argument("--clean", action="store_true", help="remove --out and --cache first")
    args = parser.parse_args(argv)
    if args.clean:
        shutil.rmtree(args.out, ignore_errors=True)
        shutil.rmtree(args.cache, ignore_errors=True)
    start = time.perf_counter()
    pages = build(args.out, args.cache, tuple(args.lang or LANGUAGES), slides=args.slides)
    print(f"site: {len(pages)} pages in {time.perf_counter() - start:.1f} s; open {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
