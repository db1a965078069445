"""Which Chromium the browser tests drive: ``COURSE_CHROMIUM`` (``make test CHROMIUM=...``) when given, else Debian's
headless shell (package chromium-headless-shell: the old headless mode, no browser UI behind it; a JupyterLab page
load costs it about 2.9 CPU-s against 4.5 for the full browser's headless mode, measured on a 2-core machine), else
Debian's chromium. The Makefile names the same two paths for ``make test``.

Usage: ``from chromium_path import CHROMIUM`` (tests/ is on sys.path: tests/conftest.py)
"""

from __future__ import annotations

import os
from pathlib import Path

CANDIDATES = ("/usr/bin/chromium-headless-shell", "/usr/bin/chromium")
CHROMIUM = Path(os.environ.get("COURSE_CHROMIUM") or next(
    (path for path in CANDIDATES if os.access(path, os.X_OK)), CANDIDATES[-1]))
