"""Where ``make test``'s time goes: a pytest plugin that measures each test's wall time and the CPU time of its
worker's whole process tree (kernels, servers, browsers and learners' processes included), and a report by work
unit (tests/conftest.py's ``work_unit``: a file, or a half of the JupyterLab notebooks).

The CPU of a test is the change, from its start to its end, of: the worker's own CPU, what its finished children
left in it (``os.times()``), and the CPU of its live descendants. A process that ends without being waited for by
one of them (Chromium's helpers, a learner's server killed by the hub) takes its CPU away with it: the test where it
ends shows less, or a negative number; the sum over a unit is still close. The session's own total is what
``/usr/bin/time`` counts: everything the run waited for. Processes nobody waits for (Chromium's helpers, learners'
servers ended by the hub, orphans) are missing from it, so the report also gives the whole machine's busy CPU over
the session (Linux: /proc/stat): on a machine with nothing else running, that is the run's real cost, and its floor.

Usage::

    make test-profile            # make test with this plugin; the table is printed at the end
    python -m tools.test_profile build/test-profile/profile.json   # the table again
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

OUT = Path(os.environ.get("COURSE_TEST_PROFILE", Path(__file__).resolve().parents[1] / "build" / "test-profile"))


def tree_cpu() -> float:
    """CPU seconds of this process, its waited-for children and its live descendants."""
    import psutil

    times = os.times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in psutil.Process().children(recursive=True):
        try:
            cpu = child.cpu_times()
        except psutil.Error:
            continue
        total += cpu.user + cpu.system + getattr(cpu, "children_user", 0.0) + getattr(cpu, "children_system", 0.0)
    return total


def machine_cpu() -> tuple[float, float] | None:
    """(busy, all) CPU seconds of the whole machine since boot, from /proc/stat; None where there is none."""
    try:
        fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    tick = os.sysconf("SC_CLK_TCK")
    busy = user + nice + system + irq + softirq + steal
    return busy / tick, (busy + idle + iowait) / tick


# -- the plugin (pytest -p tools.test_profile) --------------------------------------------------------------------
_ROWS: list[dict[str, Any]] = []
_START = time.time()
_MACHINE_START = machine_cpu()


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
    cpu, start = tree_cpu(), time.time()
    yield
    _ROWS.append({"nodeid": item.nodeid, "worker": _worker(), "start": start - _START, "wall": time.time() - start,
                  "cpu": tree_cpu() - cpu})


def pytest_sessionfinish(session: Any) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    if hasattr(session.config, "workerinput"):
        (OUT / f"worker-{_worker()}.json").write_text(json.dumps(_ROWS))
        return
    times = os.times()  # the workers have ended and were waited for: their trees are in children_*
    rows = list(_ROWS)
    for path in sorted(OUT.glob("worker-*.json")):
        rows += json.loads(path.read_text())
        path.unlink()
    profile = {"wall": time.time() - _START, "cores": len(os.sched_getaffinity(0)),
               "cpu": times.user + times.system + times.children_user + times.children_system, "tests": rows}
    machine = machine_cpu()
    if machine is not None and _MACHINE_START is not None:
        profile["machine_busy"] = machine[0] - _MACHINE_START[0]
        profile["machine_all"] = machine[1] - _MACHINE_START[1]
    (OUT / "profile.json").write_text(json.dumps(profile))


def pytest_terminal_summary(terminalreporter: Any, config: Any) -> None:
    if hasattr(config, "workerinput") or not (OUT / "profile.json").exists():
        return
    terminalreporter.write_sep("=", "where the time went (tools/test_profile.py)")
    terminalreporter.write_line(report(json.loads((OUT / "profile.json").read_text())))


# -- the report ------------------------------------------------------------------------------------------------------
def _tests_conftest() -> Any:
    """tests/conftest.py, loaded by its path (inside pytest, ``conftest`` may name another folder's)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "tests" / "conftest.py"
    spec = importlib.util.spec_from_file_location("course_tests_conftest", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def report(profile: dict[str, Any], top: int = 25) -> str:
    """The units by CPU, each worker's busy time, and the session's totals with the floor its CPU sets."""
    work_unit = _tests_conftest().work_unit

    units: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    busy: dict[str, float] = defaultdict(float)
    for row in profile["tests"]:
        unit = units[work_unit(row["nodeid"])]
        unit[0] += row["cpu"]
        unit[1] += row["wall"]
        busy[row["worker"]] += row["wall"]
    lines = [f"{'CPU s':>8} {'wall s':>8} {'CPU/wall':>8}  unit"]
    ranked = sorted(units.items(), key=lambda item: -item[1][0])
    for name, (cpu, wall) in ranked[:top]:
        lines.append(f"{cpu:8.1f} {wall:8.1f} {cpu / wall if wall else 0:8.0%}  {name}")
    rest = ranked[top:]
    if rest:
        lines.append(f"{sum(u[0] for _, u in rest):8.1f} {sum(u[1] for _, u in rest):8.1f} {'':8}  "
                     f"the other {len(rest)} units")
    lines.append("busy per worker: " + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(busy.items())))
    cpu, wall, cores = profile["cpu"], profile["wall"], profile["cores"]
    lines.append(f"session: {wall:.0f} s wall, {cpu:.0f} CPU-s in the processes it waited for, on {cores} cores")
    if "machine_busy" in profile:
        busy, every = profile["machine_busy"], profile["machine_all"]
        lines.append(f"machine: {busy:.0f} of {every:.0f} CPU-s busy ({busy / every:.0%}), everything included; "
                     f"this much CPU needs at least {busy / cores:.0f} s on {cores} cores")
    else:
        lines.append(f"this much CPU needs at least {cpu / cores:.0f} s on {cores} cores")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the report of a profile written by ``make test-profile`` (the last one by default)."""
    import argparse

    parser = argparse.ArgumentParser(description="The table of a make test-profile run, again.")
    parser.add_argument("profile", nargs="?", type=Path, default=OUT / "profile.json")
    args = parser.parse_args(argv)
    print(report(json.loads(args.profile.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
