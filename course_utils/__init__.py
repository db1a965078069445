"""course_utils: the small helper package behind the *PyTorch Hooks, hands-on* notebooks.

One module per concept:

- ``notebook``  -- ``setup_notebook()`` (seeds, threads, print options, PNG figures), ``print_warnings()``
- ``env_check`` -- ``doctor()`` checks the environment against the pins and says what to do
- ``hooks``     -- ``HookRegistry`` owns hooks and removes them; ``count_hooks``, ``assert_no_hooks``
- ``checks``    -- ``check(exercise_id, answer)`` runs an exercise's check; ``hint(exercise_id)``
- ``exercise_kit`` / ``exercises`` -- what an exercise is; the catalogue, one module per notebook
- ``learner_edition``, ``workspace`` -- the edition with solutions stubbed, and the learner's own copy of it
- ``timeline``  -- ``HookTimeline`` records which hook fires when, and draws it
- ``recorder``  -- ``ActivationRecorder`` records outputs, inputs and gradients by layer name
- ``saliency``  -- vanilla gradient, Guided Backprop, Grad-CAM, Guided Grad-CAM (``images``, ``widgets``,
  ``libraries`` help)
- ``regularize`` -- DropBlock / Dropout2d plug-ins and gradient clipping through hooks
- ``models``    -- the articles' fixed-weight MLP (``seed_mlp``) and ``LeNet``
- ``course``    -- the course map, read from the notebooks' opening cells
- ``progress_record`` -- each ``check()`` appends a line to the learner's record; ``progress()`` sums it up

Usage: ``from course_utils import setup_notebook, HookRegistry, assert_no_hooks, check, hint, progress``
"""

from course_utils.checks import check, hint
from course_utils.env_check import doctor
from course_utils.hooks import HookRegistry, UnknownLayerError, assert_no_hooks, count_hooks, hook_report
from course_utils.notebook import print_warnings, setup_notebook
from course_utils.progress_record import progress

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
