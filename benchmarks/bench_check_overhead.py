"""What ``check()``'s guard costs per call: a check of a validator that does nothing, and real checks against their
validators called bare (same answer, same cases, timed in turn).

Not a test: it prints a table of medians (ms) and ratios. Progress recording is off, printed lines are discarded.
Usage: ``.venv/bin/python -m benchmarks.bench_check_overhead [--repeat 30]``
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import platform
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from course_utils.machinery import checks
from course_utils.machinery.exercise_kit import Verdict
from tests.exercise_cases import all_cases


def median_ms(run, repeat: int) -> float:
    """Median wall time of ``run()`` in ms (after one warm-up call), printed output discarded."""
    return paired_ms(run, run, repeat)[0]


def paired_ms(first, second, repeat: int) -> tuple[float, float]:
    """Medians of ``first()`` and ``second()`` in ms, timed in turn (so that a busy machine slows both alike)."""
    timings: tuple[list[float], list[float]] = ([], [])
    with contextlib.redirect_stdout(io.StringIO()):
        first(), second()
        for _ in range(repeat):
            for run, times in ((first, timings[0]), (second, timings[1])):
                start = time.perf_counter()
                run()
                times.append(time.perf_counter() - start)
    return 1000 * statistics.median(timings[0]), 1000 * statistics.median(timings[1])


_FIRST = """
import contextlib, dataclasses, io, os, sys, time
os.environ["COURSE_PROGRESS"] = "off"
from course_utils.machinery import checks
from course_utils.machinery.exercise_kit import Verdict
table = dict(checks.catalogue())
table["99.1"] = dataclasses.replace(table["05.2"], id="99.1", validate=lambda answer: Verdict(True))
checks.catalogue = lambda: table
with contextlib.redirect_stdout(io.StringIO()):
    start = time.perf_counter()
    checks.check("99.1", "b")
    first = time.perf_counter() - start
print(1000 * first)
"""


def first_check_ms(repeat: int) -> float:
    """Median over fresh processes of the first check() (of a validator that does nothing) in the process."""
    runs = [float(subprocess.run([sys.executable, "-c", _FIRST], capture_output=True, text=True, check=True,
                                 cwd=Path(__file__).resolve().parents[1]).stdout) for _ in range(repeat)]
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    repeat = parser.parse_args().repeat
    os.environ["COURSE_PROGRESS"] = "off"
    table = dict(checks.catalogue())
    table["99.1"] = dataclasses.replace(table["05.2"], id="99.1", validate=lambda answer: Verdict(True))
    real = checks.catalogue
    checks.catalogue = lambda: table  # type: ignore[assignment]
    try:
        trivial = median_ms(lambda: checks.check("99.1", "b"), repeat)
    finally:
        checks.catalogue = real  # type: ignore[assignment]
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"check() of a validator that does nothing: {trivial:.2f} ms (median of {repeat})")
    print(f"the first check() in a fresh process (same validator): {first_check_ms(5):.1f} ms (median of 5 processes)")
    print(f"{'exercise':10} {'bare validator ms':>18} {'check() ms':>11} {'overhead ms':>12} {'ratio':>6}")
    cases = all_cases()
    for exercise_id in ("01.1", "03.2", "05.1", "05.3", "07.2"):
        item, answer = checks.exercise(exercise_id), cases[exercise_id].right[0]
        bare, full = paired_ms(partial(item.validate, answer), partial(checks.check, exercise_id, answer), repeat)
        print(f"{exercise_id:10} {bare:18.2f} {full:11.2f} {full - bare:12.2f} {full / bare:6.2f}")


if __name__ == "__main__":
    main()
