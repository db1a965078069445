"""Exercises of notebooks/00_start_here.ipynb: getting around the course."""

from course_utils.exercise_kit import Exercise, expect_choice

_EXERCISE_00_1 = Exercise(
    "00.1",
    "Which object does every register_*hook call return?",
    expect_choice(
        "a handle",
        ["a handle", "the hook function", "None", "the module"],
        "Look at what you can call .remove() on.",
    ),
    praise="Keep the handle (or use a HookRegistry): it is the only way to remove the hook.",
    kind="choice",
)

_EXERCISE_00_2 = Exercise(
    "00.2",
    "A then-vs-now box says an article printed e.grad = 1 and PyTorch 2.14.1 gives 2. Which one does the course assert?",
    expect_choice(
        "today's value",
        ["the article's value", "today's value"],
        "The notebooks compute every number live on the installed PyTorch.",
    ),
    praise="Every number is computed live and asserted against today's PyTorch.",
    kind="choice",
)

EXERCISES = (_EXERCISE_00_1, _EXERCISE_00_2,)
