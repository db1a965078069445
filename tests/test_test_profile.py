"""tools/test_profile.py (``make test-profile``): a test's CPU counts the processes it starts, and the report sums
units and names the least time the session's CPU needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tools import test_profile

ROOT = Path(__file__).resolve().parent.parent


def test_a_tests_cpu_includes_the_child_process_it_waits_for(tmp_path: Path) -> None:
    (tmp_path / "test_burn.py").write_text(textwrap.dedent("""
        import subprocess, sys

        def test_burns_in_a_child():
            code = "import time\\nend = time.process_time() + 0.6\\nwhile time.process_time() < end: pass"
            subprocess.run([sys.executable, "-c", code], check=True)

        def test_idle():
            pass
    """))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_TEST_PROFILE": str(tmp_path / "out")}  # tools, a package
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    # only the plugin under test: the installed ones (nbval, xdist, ...) cost 2 CPU-s to load and play no part here
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tools.test_profile",
                           "test_burn.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "where the time went" in done.stdout and "this much CPU needs at least" in done.stdout
    profile = json.loads((tmp_path / "out" / "profile.json").read_text())
    cpu = {row["nodeid"].split("::")[-1]: row["cpu"] for row in profile["tests"]}
    assert cpu["test_burns_in_a_child"] >= 0.5, cpu
    assert cpu["test_idle"] < 0.3, cpu
    assert profile["cpu"] >= cpu["test_burns_in_a_child"]


def test_the_report_sums_units_and_gives_the_floor() -> None:
    profile = {"wall": 100.0, "cores": 2, "cpu": 150.0, "tests": [
        {"nodeid": "tests/test_a.py::test_1", "worker": "gw0", "start": 0, "wall": 30.0, "cpu": 20.0},
        {"nodeid": "tests/test_a.py::test_2", "worker": "gw0", "start": 30, "wall": 10.0, "cpu": 10.0},
        {"nodeid": "tests/test_b.py::test_1", "worker": "gw1", "start": 0, "wall": 50.0, "cpu": 5.0},
    ]}
    lines = test_profile.report(profile).splitlines()
    assert lines[1].split() == ["30.0", "40.0", "75%", "tests/test_a.py"]
    assert lines[2].split() == ["5.0", "50.0", "10%", "tests/test_b.py"]
    assert "gw0 40 s, gw1 50 s" in lines[3]
    assert lines[4] == "session: 100 s wall, 150 CPU-s in the processes it waited for, on 2 cores"
    assert lines[5] == "this much CPU needs at least 75 s on 2 cores"
    profile.update(machine_busy=190.0, machine_all=200.0)
    assert test_profile.report(profile).splitlines()[5] == (
        "machine: 190 of 200 CPU-s busy (95%), everything included; this much CPU needs at least 95 s on 2 cores")


def test_the_machines_cpu_counts_up_where_there_is_proc_stat() -> None:
    first = test_profile.machine_cpu()
    if first is None:
        return  # no /proc/stat (macOS): the report leaves the line out
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    second = test_profile.machine_cpu()
    assert second is not None and second[0] - first[0] >= 0.2 and second[1] > first[1]
