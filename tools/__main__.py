"""The course's one build command: ``python -m tools VERB [options]`` (each ``make`` target calls one verb).

Every verb reads the course's settings from ``course_utils/course.toml`` (``course_utils.machinery.layout``) and
runs the module named below with the rest of the command line (``python -m tools VERB --help`` lists its options).

Usage: ``python -m tools sync``; ``python -m tools learner --agenda half-day``; ``python -m tools`` lists the verbs
"""

from __future__ import annotations

import runpy
import sys

VERBS = {
    "sync": ("tools.sync", "run the generators whose inputs changed; list what still needs a person (make sync)"),
    "check": ("tools.check", "the tests of what changed since the last commit; --base main: of a branch (make check)"),
    "refresh": ("tools.notebook_runner", "re-execute notebooks and store their outputs (make refresh NB=...)"),
    "learner": ("tools.build_editions", "the learner edition in build/learner; --agenda, --notebooks: a part "
                "(make learner)"),
    "slides": ("tools.build_editions", "reveal.js slides in build/slides; --agenda, --notebooks: a part (make slides)"),
    "site": ("tools.site", "the website in build/site, both languages (make site)"),
    "timings": ("tools.notebook_runner", "measure each notebook's run time for the guide (make timings)"),
    "compat": ("tools.compat.run", "every notebook on Colab's packages and on the lock (make test-compat)"),
    "profile": ("tools.test_profile", "the table of the last make test-profile again"),
}


VERB_FIRST = {"tools.build_editions", "tools.notebook_runner"}  # modules of several verbs: the verb is their first word


def usage() -> str:
    return "usage: python -m tools VERB [options]\n\n" + "\n".join(
        f"  {verb:9} {text}" for verb, (_module, text) in VERBS.items())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in VERBS:
        print(usage(), file=sys.stderr if argv else sys.stdout)
        return 2 if argv and argv[0] not in ("-h", "--help") else 0
    verb, rest = argv[0], argv[1:]
    module = VERBS[verb][0]
    sys.argv = [f"python -m tools {verb}", *([verb] if module in VERB_FIRST else []), *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)  # its sys.exit() is this command's
    return 0


if __name__ == "__main__":
    sys.exit(main())
