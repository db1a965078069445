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


def paired_ms(first, second, repeat: int) -> tuple[float, float]:
    """Medians of ``first()`` and ``second()`` in ms, timed in turn (so that a busy machine slows both alike), after
    one warm-up call each, printed output discarded."""
    timings: tuple[list[float], list[float]] = ([], [])
    with contextlib.redirect_stdout(io.StringIO()):
        first(), second()
        for _ in range(repeat):
            for run, times in ((first, timings[0]), (second, timings[1])):
                start = time.perf_counter()
                run()
                times.append(time.perf_counter() - start)
    return 1000 * statistics.median(timings[0]), 1000 * statistics.median(timings[1])


def add_trivial_exercise() -> None:
    """Patch the catalogue with exercise "99.1", whose validator does nothing: ``checks.check("99.1", "b")``."""
    table = dict(checks.catalogue())
    table["99.1"] = dataclasses.replace(table["05.2"], id="99.1", validate=lambda answer: Verdict(True))
    checks.catalogue = lambda: table  # type: ignore[assignment]


def first_check_ms(repeat: int) -> float:
    """Median over fresh processes of the first check() (of a validator that does nothing) in the process."""
    return statistics.median(float(subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_check_overhead", "--first"], capture_output=True, text=True,
        check=True, cwd=Path(__file__).resolve().parents[1]).stdout) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--first", action="store_true", help="print the ms of this process's first check() only")
    args = parser.parse_args()
    os.environ["COURSE_PROGRESS"] = "off"
    real = checks.catalogue
    add_trivial_exercise()
    if args.first:
        with contextlib.redirect_stdout(io.StringIO()):
            start = time.perf_counter()
            checks.check("99.1", "b")
        print(1000 * (time.perf_counter() - start))
        return
    trivial = paired_ms(lambda: checks.check("99.1", "b"), lambda: checks.check("99.1", "b"), args.repeat)[0]
    checks.catalogue = real  # type: ignore[assignment]
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"check() of a validator that does nothing: {trivial:.2f} ms (median of {args.repeat})")
    print(f"the first check() in a fresh process (same validator): {first_check_ms(5):.1f} ms (median of 5 processes)")
    print(f"{'exercise':10} {'bare validator ms':>18} {'check() ms':>11} {'overhead ms':>12} {'ratio':>6}")
    cases = all_cases()
    for exercise_id in ("01.1", "03.2", "05.1", "05.3", "07.2"):
        item, answer = checks.exercise(exercise_id), cases[exercise_id].right[0]
        bare, full = paired_ms(partial(item.validate, answer), partial(checks.check, exercise_id, answer), args.repeat)
        print(f"{exercise_id:10} {bare:18.2f} {full:11.2f} {full - bare:12.2f} {full / bare:6.2f}")


if __name__ == "__main__":
    main()
