"""Answers for the checks of notebooks/07_hooks_in_training.ipynb."""

from __future__ import annotations

from course_utils.regularize import drop_block, dropout2d
from tests.exercise_cases import Cases

CASES = {
    "07.1": Cases(
        right=[lambda model: dropout2d(model, "2", 0.5)],
        wrong=[
            (lambda model: dropout2d(model, ["0", "2"], 0.5), "Exactly one forward hook"),
            (lambda model: drop_block(model, "2", 0.0, 3), "zeroed"),
        ],
    ),
    "07.2": Cases(right=["blocks overlap and fewer blocks cover the borders"],
                  wrong=[("gamma is rounded down", ""), ("the hook runs only every other batch", "")]),
    "07.3": Cases(right=["post-accumulate-grad hook"],
                  wrong=[("tensor hook on the parameter", ""), ("forward hook", "")]),
}
