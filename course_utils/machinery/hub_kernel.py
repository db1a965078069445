"""The Python kernel a course hub gives its learners: ipykernel's, without the debugger.

JupyterLab's debugger makes ipykernel start debugpy, which listens on a TCP port of 127.0.0.1 with no password, even
after the debugger is switched off: on a machine learners share (``make hub``, TLJH) another learner could attach and
run code as the kernel's owner. :class:`NoDebuggerKernel` neither offers the debugger nor answers a debug request.
(Zero to JupyterHub's pods have a loopback of their own: they keep it.)

Usage (a learner's server, as tools/hub/course_hub.py starts it):
``jupyterhub-singleuser --ServerApp.kernel_spec_manager_class=course_utils.machinery.hub_kernel.HubKernelSpecManager``
"""

from __future__ import annotations

import sys
from typing import Any

from ipykernel.ipkernel import IPythonKernel
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

KERNEL_CLASS_ARGUMENT = f"--IPKernelApp.kernel_class={__name__}.NoDebuggerKernel"
DEBUGGER_OFF = ("The debugger is off on this course hub: debugpy would listen on a TCP port that every learner on "
                "this machine can reach, with no password.")


class NoDebuggerKernel(IPythonKernel):
    """ipykernel's Python kernel that neither offers nor starts the debugger (see the module's text)."""

    @property
    def kernel_info(self) -> dict[str, Any]:
        info = dict(super().kernel_info)
        info["supported_features"] = [f for f in info.get("supported_features", []) if f != "debugger"]
        return info

    async def do_debug_request(self, msg: dict[str, Any]) -> dict[str, Any]:
        return {"type": "response", "seq": 0, "request_seq": msg.get("seq", 0), "success": False,
                "command": msg.get("command", ""), "message": DEBUGGER_OFF}


class HubKernelSpecManager(KernelSpecManager):
    """The kernel specs, this environment's ipykernel one starting :class:`NoDebuggerKernel`, with no debugger.

    Usage: ``HubKernelSpecManager().get_kernel_spec("python3").argv`` (ends with :data:`KERNEL_CLASS_ARGUMENT`)"""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        spec = super().get_kernel_spec(kernel_name)
        # `python -m ipykernel_launcher ...` with this environment's Python (which can import course_utils); another
        # environment's kernel is left as it is (a learner who installs one chooses)
        ours = spec.argv[1:3] == ["-m", "ipykernel_launcher"] and spec.argv[0] in ("python", "python3", sys.executable)
        if ours and KERNEL_CLASS_ARGUMENT not in spec.argv:
            spec.argv = [*spec.argv, KERNEL_CLASS_ARGUMENT]
            spec.metadata = {**spec.metadata, "debugger": False}
        return spec
