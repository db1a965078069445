"""The Python kernel a course hub gives its learners: ipykernel's, without the debugger.

JupyterLab's debugger makes ipykernel start debugpy, which listens on a TCP port of 127.0.0.1 with no
authentication, and goes on listening after the learner switches the debugger off. On a machine learners share
(``make hub``, The Littlest JupyterHub) another learner can then attach to that port and run code in the kernel, as
its owner: read their files, change their work. So a learner's server on such a hub starts its Python kernels as
:class:`NoDebuggerKernel` (through :class:`HubKernelSpecManager`): the kernel does not offer the debugger (JupyterLab
shows no debugger switch) and refuses every debug request, so debugpy never starts. (Zero to JupyterHub gives each
learner a pod of their own, whose loopback nobody else reaches: it keeps the debugger. A kernel a learner installs
from another environment keeps its own debugger: it could not import this module.)

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


def runs_this_environments_ipykernel(argv: list[str]) -> bool:
    """Whether a kernel spec's command is ``python -m ipykernel_launcher ...`` with this environment's Python (the
    name ``python`` or ``python3``, which jupyter_client replaces with this Python, or this very interpreter): the
    Python that can import course_utils. A kernel of another environment, or a command wrapped in a shell, is left
    as it is (it could not import :class:`NoDebuggerKernel`; a learner who installs one chooses its debugger)."""
    return (len(argv) >= 3 and argv[0] in ("python", "python3", sys.executable)
            and argv[1:3] == ["-m", "ipykernel_launcher"])


class HubKernelSpecManager(KernelSpecManager):
    """The kernel specs as usual, except that this environment's ipykernel spec starts :class:`NoDebuggerKernel`
    and says it has no debugger.

    Usage: ``HubKernelSpecManager().get_kernel_spec("python3").argv`` (ends with :data:`KERNEL_CLASS_ARGUMENT`)"""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        spec = super().get_kernel_spec(kernel_name)
        if runs_this_environments_ipykernel(spec.argv) and KERNEL_CLASS_ARGUMENT not in spec.argv:
            spec.argv = [*spec.argv, KERNEL_CLASS_ARGUMENT]
            spec.metadata = {**spec.metadata, "debugger": False}
        return spec
