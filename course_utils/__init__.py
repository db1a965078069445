"""course_utils: the small helper package behind the *PyTorch Hooks, hands-on* notebooks, in two kinds.

**The library the notebooks teach with** (here, one module per concept):

- ``hooks``      -- ``HookRegistry`` owns hooks and removes them; ``count_hooks``, ``assert_no_hooks``, ``hook_report``
- ``timeline``   -- ``HookTimeline`` records which hook fires when, and draws it
- ``recorder``   -- ``ActivationRecorder`` records outputs, inputs and gradients by layer name
- ``saliency``   -- vanilla gradient, Guided Backprop, Grad-CAM, Guided Grad-CAM (``images``, ``libraries`` help;
  ``widgets.SaliencyExplorer`` explores them)
- ``regularize`` -- DropBlock / Dropout2d plug-ins and gradient clipping through hooks
- ``memory``, ``optim_hooks``, ``comm_hooks``, ``distributed`` -- saved-tensor, optimizer and DDP communication
  hooks, and the two-process gloo runner behind them
- ``recompiles`` -- how many graphs ``torch.compile`` builds per call for a hook used one way or another
- ``figures``    -- ``show_figure``: every figure the course draws, with its alt text (the one mechanism, documented
  there); ``widgets`` -- ``FigureExplorer``, a figure redrawn from controls; ``charts`` -- what the explorers draw
- ``models``     -- the articles' fixed-weight MLP (``seed_mlp``) and ``LeNet``
- ``transformer``, ``attention_view`` -- notebook 12's two-layer language model and its task; its attention
  patterns, drawn (``draw_pattern``) and explored (``attention_explorer``, a ``widgets.FigureExplorer``)
- ``hf_model``   -- notebook 13: the same trained model as a Hugging Face ``transformers`` ``GPT2LMHeadModel``
  (``induction_gpt2``, ``to_gpt2``), exact to float32 rounding

**The course's machinery** (``course_utils.machinery``: checks, exercises, editions, workspace, set-up, doctor,
progress record, ...): see its own docstring.

Usage: ``from course_utils import setup_notebook, HookRegistry, assert_no_hooks, check, hint, progress``
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from course_utils.hooks import HookRegistry, UnknownLayerError, assert_no_hooks, count_hooks, hook_report
    from course_utils.machinery.checks import check, hint
    from course_utils.machinery.env_check import doctor
    from course_utils.machinery.notebook import print_warnings, setup_notebook
    from course_utils.machinery.progress import progress

# The names above, imported when first used (PEP 562): ``import course_utils.machinery.workspace`` -- what
# ``make lab`` and the hub run for each learner -- then does not import torch (2-3 CPU-seconds) through this file.
_HOME = {
    "HookRegistry": "course_utils.hooks", "UnknownLayerError": "course_utils.hooks",
    "assert_no_hooks": "course_utils.hooks", "count_hooks": "course_utils.hooks", "hook_report": "course_utils.hooks",
    "check": "course_utils.machinery.checks", "hint": "course_utils.machinery.checks",
    "doctor": "course_utils.machinery.env_check",
    "print_warnings": "course_utils.machinery.notebook", "setup_notebook": "course_utils.machinery.notebook",
    "progress": "course_utils.machinery.progress",
}


def __getattr__(name: str) -> Any:
    """A name of ``__all__`` (imported now, then kept), or a submodule (``course_utils.hooks``)."""
    if name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
        globals()[name] = value
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__version__ = "0.1.0"

__all__ = [
    "HookRegistry",
    "UnknownLayerError",
    "assert_no_hooks",
    "check",
    "count_hooks",
    "doctor",
    "hint",
    "hook_report",
    "print_warnings",
    "progress",
    "setup_notebook",
]
