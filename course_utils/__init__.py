"""course_utils: the small helper package behind the *PyTorch Hooks, hands-on* notebooks, in two kinds.

**The library the notebooks teach with** (here, one module per concept):

- ``hooks``      -- ``HookRegistry`` owns hooks and removes them; ``count_hooks``, ``assert_no_hooks``, ``hook_report``
- ``timeline``   -- ``HookTimeline`` records which hook fires when, and draws it
- ``recorder``   -- ``ActivationRecorder`` records outputs, inputs and gradients by layer name
- ``saliency``   -- vanilla gradient, Guided Backprop, Grad-CAM, Guided Grad-CAM (``images``, ``widgets``,
  ``libraries`` help)
- ``regularize`` -- DropBlock / Dropout2d plug-ins and gradient clipping through hooks
- ``memory``, ``optim_hooks``, ``comm_hooks``, ``distributed`` -- saved-tensor, optimizer and DDP communication
  hooks, and the two-process gloo runner behind them
- ``models``     -- the articles' fixed-weight MLP (``seed_mlp``) and ``LeNet``

**The course's machinery** (``course_utils.machinery``: checks, exercises, editions, workspace, set-up, doctor,
progress record, ...): see its own docstring.

Usage: ``from course_utils import setup_notebook, HookRegistry, assert_no_hooks, check, hint, progress``
"""

from course_utils.machinery.checks import check, hint
from course_utils.machinery.env_check import doctor
from course_utils.hooks import HookRegistry, UnknownLayerError, assert_no_hooks, count_hooks, hook_report
from course_utils.machinery.notebook import print_warnings, setup_notebook
from course_utils.machinery.progress_record import progress

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
