"""Fresh Pythons for tests that need many of them, without paying for ``import torch`` in each (2-3 CPU-seconds).

:class:`FreshPython` starts one server process that imports torch and nothing of the course, then forks a child per
:meth:`~FreshPython.run`: the child takes the environment and folder it is given, runs the code as ``python -c``
does (in ``__main__``), and exits; its stdout and stderr come back. The course is imported in the child, afresh,
under that child's environment (``COURSE_LANG``, ``COURSE_PROGRESS``, ...), exactly as in a new interpreter: only
torch was imported before (the fork happens before torch runs any parallel work, so no thread pool is copied).

Usage::

    with FreshPython(ROOT) as python:
        rc, out, err = python.run("print(1)", env={"COURSE_LANG": "zh"})
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from pathlib import Path
from typing import Any

# The server: reads one JSON request a line ({"code", "env", "cwd"}), answers one JSON line {"rc", "out", "err"}.
_SERVER = r'''
import json, os, sys, tempfile, traceback
import torch  # the cost every fresh Python would pay again; nothing of the course is imported here
channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
for line in sys.stdin:
    request = json.loads(line)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush(); sys.stderr.flush(); channel.flush()
        pid = os.fork()
        if pid == 0:  # the child: a fresh Python but for torch
            rc = 1
            try:
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0); os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
                os.chdir(request["cwd"])
                os.environ.clear(); os.environ.update(request["env"])
                sys.argv = ["-c"]
                namespace = {"__name__": "__main__", "__builtins__": __builtins__}
                try:
                    exec(compile(request["code"], "<string>", "exec"), namespace)
                    rc = 0
                except SystemExit as stop:
                    rc = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
                    if not isinstance(stop.code, (int, type(None))):
                        print(stop.code, file=sys.stderr)
                except BaseException:
                    traceback.print_exc()
                import atexit
                atexit._run_exitfuncs()
            finally:
                try:
                    sys.stdout.flush(); sys.stderr.flush()
                finally:
                    os._exit(rc)
        _, status = os.waitpid(pid, 0)
        out.seek(0); err.seek(0)
        answer = {"rc": os.waitstatus_to_exitcode(status), "out": out.read().decode("utf-8", "replace"),
                  "err": err.read().decode("utf-8", "replace")}
    channel.write(json.dumps(answer) + "\n"); channel.flush()
'''


class FreshPython:
    """A server of fresh Pythons (see the module); stopped on exit from the ``with`` block."""

    def __init__(self, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.cwd = cwd
        server_env = dict(os.environ if env is None else env)
        server_env["PYTHONIOENCODING"] = "utf-8"
        self.process = subprocess.Popen([sys.executable, "-c", _SERVER], cwd=cwd, env=server_env, text=True,
                                        encoding="utf-8", stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def run(self, code: str, env: dict[str, str], timeout: float = 300) -> tuple[int, str, str]:
        """Run ``code`` in a fresh child with exactly ``env`` as its environment; (exit status, stdout, stderr)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"code": code, "env": env, "cwd": str(self.cwd)}) + "\n")
        self.process.stdin.flush()
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                self.close()
                raise TimeoutError(f"a fresh Python did not finish within {timeout:.0f} s:\n{code}")
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the fresh-Python server died (exit {self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer["rc"], answer["out"], answer["err"]

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> FreshPython:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
