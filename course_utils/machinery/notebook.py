"""Make every notebook start the same way: seeded, single-threaded, readable numbers, stable output.

Usage (first code cell of every notebook)::

    from course_utils import setup_notebook
    print(setup_notebook())

:func:`print_warnings` shows a warning the lesson is about as one stable line (category and message)
instead of as stray stderr.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import random
import re
import sys
import warnings
from collections import Counter
from collections.abc import Iterator

import numpy as np
import torch

from course_utils.machinery.messages import _, language, set_language

__all__ = ["setup_notebook", "environment_line", "print_warnings", "EXPECTED_NOISE"]

# Library noise that says nothing about hooks: (category, message regex). Lessons that teach a warning
# capture it explicitly with print_warnings(), which ignores these filters.
EXPECTED_NOISE: tuple[tuple[type[Warning], str], ...] = (
    # JupyterLab/ipykernel start-up chatter that can reach a kernel's stderr on some machines.
    (DeprecationWarning, r".*Jupyter is migrating its paths.*"),
    # tqdm's notebook bar falls back to text when ipywidgets has no front end (e.g. under nbval).
    (UserWarning, r".*IProgress not found.*"),
)


# Fonts with Chinese glyphs, most likely first (Debian/Ubuntu, macOS, Windows): a Chinese notebook's figure titles and
# labels are Chinese, and matplotlib draws each glyph DejaVu Sans lacks with the first of these that is installed.
CJK_FONTS = ("WenQuanYi Micro Hei", "Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei",
             "SimHei")


def _configure_matplotlib(lang: str) -> None:
    import matplotlib
    from matplotlib import font_manager

    # 100 dpi (text stays at matplotlib's 10 pt): figures are readable at 100 % zoom.
    matplotlib.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "figure.figsize": (6.0, 3.5)})
    if lang != "en":
        installed = {font.name for font in font_manager.fontManager.ttflist}
        fallback = [name for name in CJK_FONTS if name in installed]
        matplotlib.rcParams["font.family"] = ["DejaVu Sans", *fallback]
        if not fallback:
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
            warnings.warn(_("The figures' Chinese needs a Chinese font, and none is installed: they show boxes instead "
                            "(install one, e.g. apt-get install fonts-wqy-microhei, then restart the kernel)."),
                          stacklevel=3)
    if "ipykernel" in sys.modules:
        # PNG only: nbval ignores PNG but compares SVG, whose element ids change from run to run.
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("png")


def _short_tracebacks() -> None:
    """Errors print as ``Type: message`` only: stored error cells then hold no machine-specific file paths.
    (Run ``%xmode Context`` in a cell to get full tracebacks back while debugging.)"""
    from IPython import get_ipython  # installed with ipywidgets

    shell = get_ipython()
    if shell is not None and hasattr(shell, "InteractiveTB"):
        shell.InteractiveTB.set_mode(mode="Minimal")


def environment_line(seed: int | None = None) -> str:
    """A short description of the environment that does not change between runs of the same set-up.

    No Python version: the course supports several (see ``env_check.SUPPORTED_PYTHONS``) and the stored
    outputs must be the same on each; ``doctor()`` reports the Python.
    """
    torch_version = torch.__version__.split("+")[0]
    try:  # the installed version, read without importing torchvision (whose import pulls in torch._dynamo: ~1.5 s)
        vision = f" | torchvision {importlib.metadata.version('torchvision').split('+')[0]}"
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - torchvision is pinned
        vision = ""
    threads = torch.get_num_threads()
    cpu = (_("CPU, {threads} thread") if threads == 1 else _("CPU, {threads} threads")).format(threads=threads)
    line = f"torch {torch_version}{vision} | {cpu}"
    return line if seed is None else f"{line} | " + _("seed {seed}").format(seed=seed)


def setup_notebook(seed: int = 0, *, threads: int = 1, lang: str | None = None) -> str:
    """Seed every generator, fix the thread count and print options, set PNG figures and short error
    messages; return the environment line.

    ``threads`` is torch's intra-op thread count. The default, one thread, is what the stored outputs were
    made with: results are bit-identical run to run only at a fixed thread count (1 vs 2 threads changes the
    low bits of weight gradients), so nbval and ``make refresh`` use one. More threads run the heavier cells
    faster on a learner's own machine, with printed digits that may then differ from the stored ones.

    ``lang`` chooses the language of ``check()``, ``hint()`` and ``doctor()`` (``"en"``, ``"zh"``); not given:
    ``COURSE_LANG``, else English. The Chinese notebooks (``notebooks/zh/``) call ``setup_notebook(lang="zh")``.

    Usage: ``print(setup_notebook())``, or ``print(setup_notebook(threads=4))`` for speed over stored digits.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(_("seed must be a non-negative int, got {seed}.").format(seed=repr(seed)))
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(
            _("threads must be a positive int (torch's thread count; 1 reproduces the stored outputs), got {threads}.")
            .format(threads=repr(threads))
        )
    if lang is not None:
        set_language(lang)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    torch.set_printoptions(precision=3, sci_mode=False)
    np.set_printoptions(precision=3, suppress=True)
    _configure_matplotlib(language())
    _short_tracebacks()
    for category, pattern in EXPECTED_NOISE:
        warnings.filterwarnings("ignore", message=pattern, category=category)
    return environment_line(seed)


@contextlib.contextmanager
def print_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Catch every warning raised in the block and print each as ``Category: message`` (repeats counted).

    Usage::

        with print_warnings():
            z.grad          # prints "UserWarning: The .grad attribute of a Tensor that is not a leaf ..."
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield caught
        finally:
            counts = Counter(f"{item.category.__name__}: {_clean_message(str(item.message))}" for item in caught)
            for line, count in counts.items():
                print(line if count == 1 else f"{line} [{count} times]")


_TRIGGERED_AT = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?")


def _clean_message(message: str) -> str:
    """One line, without the C++ source location torch appends (a build-machine path)."""
    return " ".join(_TRIGGERED_AT.sub("", message).split())
