"""The learners' kernel spec on a shared hub (course_utils/machinery/hub_kernel.py): this environment's ipykernel
spec starts the kernel without the debugger; a kernel of another environment, or a wrapped command, is left as it is
(it could not import the course's kernel class, and would not start). The attack itself, on a real hub:
tests/browser/test_hub.py's debugger test."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from course_utils.machinery.hub_kernel import KERNEL_CLASS_ARGUMENT, HubKernelSpecManager


def test_only_this_environments_ipykernel_spec_loses_its_debugger(tmp_path: Path) -> None:
    specs = {
        "python3": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "this-python": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "other-env": ["/opt/other-env/bin/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "wrapped": ["bash", "-c", "exec python -m ipykernel_launcher -f {connection_file}"],
    }
    for name, argv in specs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "kernel.json").write_text(json.dumps(
            {"argv": argv, "display_name": name, "language": "python", "metadata": {"debugger": True}}))
    manager = HubKernelSpecManager(kernel_dirs=[str(tmp_path)], ensure_native_kernel=False)
    for name in ("python3", "this-python"):
        spec = manager.get_kernel_spec(name)
        assert spec.argv == [*specs[name], KERNEL_CLASS_ARGUMENT] and spec.metadata["debugger"] is False, name
    for name in ("other-env", "wrapped"):
        spec = manager.get_kernel_spec(name)
        assert spec.argv == specs[name] and spec.metadata["debugger"] is True, name
    listed = manager.get_all_specs()  # what JupyterLab's launcher reads
    assert listed["python3"]["spec"]["metadata"]["debugger"] is False
    assert listed["python3"]["spec"]["argv"][-1] == KERNEL_CLASS_ARGUMENT
