"""Where ``make test``'s time goes: a pytest plugin that measures each test's wall time and the CPU time of its
worker's process tree (kernels, servers, browsers included: its own, its waited-for children's via ``os.times()``, its
live descendants' via psutil; a process that ends unwaited takes its CPU with it), and a report by work unit
(tests/conftest.py's ``work_unit``) with the whole machine's busy CPU (/proc/stat) and the floor it sets.

Usage: ``make test-profile`` (the table is printed at the end); ``python -m tools profile`` prints the last one again
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
        user, nice, system, idle, iowait, irq, softirq, steal = map(
            int, Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9])
    except (OSError, ValueError):
        return None
    busy, tick = user + nice + system + irq + softirq + steal, os.sysconf("SC_CLK_TCK")
    return busy / tick, (busy + idle + iowait) / tick


# -- the plugin (pytest -p tools.test_profile) --------------------------------------------------------------------
_ROWS: list[dict[str, Any]] = []
_START, _MACHINE_START = time.time(), machine_cpu()
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
    cpu, start = tree_cpu(), time.time()
    yield
    _ROWS.append({"nodeid": item.nodeid, "worker": _WORKER, "start": start - _START, "wall": time.time() - start,
                  "cpu": tree_cpu() - cpu})


def pytest_sessionfinish(session: Any) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    if hasattr(session.config, "workerinput"):
        (OUT / f"worker-{_WORKER}.json").write_text(json.dumps(_ROWS))
        return
    times, rows = os.times(), list(_ROWS)  # the workers have ended and were waited for: their trees are in children_*
    for path in sorted(OUT.glob("worker-*.json")):
        rows += json.loads(path.read_text())
        path.unlink()
    profile = {"wall": time.time() - _START, "cores": len(os.sched_getaffinity(0)),
               "cpu": times.user + times.system + times.children_user + times.children_system, "tests": rows}
    if (machine := machine_cpu()) is not None and _MACHINE_START is not None:
        profile.update(machine_busy=machine[0] - _MACHINE_START[0], machine_all=machine[1] - _MACHINE_START[1])
    (OUT / "profile.json").write_text(json.dumps(profile))


def pytest_terminal_summary(terminalreporter: Any, config: Any) -> None:
    if not hasattr(config, "workerinput") and (OUT / "profile.json").exists():
        terminalreporter.write_sep("=", "where the time went (tools/test_profile.py)")
        terminalreporter.write_line(report(json.loads((OUT / "profile.json").read_text())))


# -- the report ------------------------------------------------------------------------------------------------------
def report(profile: dict[str, Any], top: int = 25) -> str:
    """The units by CPU, each worker's busy time, and the session's totals with the floor its CPU sets."""
    import runpy

    # tests/conftest.py, by its path (pytest has others)
    work_unit = runpy.run_path(str(Path(__file__).resolve().parents[1] / "tests" / "conftest.py"))["work_unit"]
    units: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    busy: dict[str, float] = defaultdict(float)
    for row in profile["tests"]:
        unit = units[work_unit(row["nodeid"])]
        unit[0], unit[1] = unit[0] + row["cpu"], unit[1] + row["wall"]
        busy[row["worker"]] += row["wall"]
    ranked = sorted(units.items(), key=lambda item: -item[1][0])
    lines = [f"{'CPU s':>8} {'wall s':>8} {'CPU/wall':>8}  unit"]
    lines += [f"{cpu:8.1f} {wall:8.1f} {cpu / wall if wall else 0:8.0%}  {name}" for name, (cpu, wall) in ranked[:top]]
    if rest := ranked[top:]:
        lines.append(f"{sum(u[0] for _, u in rest):8.1f} {sum(u[1] for _, u in rest):8.1f} {'':8}  "
                     f"the other {len(rest)} units")
    lines.append("busy per worker: " + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(busy.items())))
    cpu, cores = profile["cpu"], profile["cores"]
    lines.append(f"session: {profile['wall']:.0f} s wall, {cpu:.0f} CPU-s in the processes it waited for, on {cores} "
                 "cores")
    if "machine_busy" in profile:
        used, every = profile["machine_busy"], profile["machine_all"]
        lines.append(f"machine: {used:.0f} of {every:.0f} CPU-s busy ({used / every:.0%}), everything included; "
                     f"this much CPU needs at least {used / cores:.0f} s on {cores} cores")
    else:
        lines.append(f"this much CPU needs at least {cpu / cores:.0f} s on {cores} cores")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(json.loads(Path(sys.argv[1] if len(sys.argv) > 1 else OUT / "profile.json").read_text())))
