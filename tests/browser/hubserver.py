"""A throw-away classroom hub for the tests and the benchmark: ``python -m tools.hub.serve`` (what ``make hub``
runs) on free loopback ports, with state, homes and learners' group private to this run. ``stop()`` is Ctrl-C and
reports what was still alive; ``cleanup()`` (on leaving the ``with``, also when a test fails) ends what is left, by
pid, and removes the run's system users, homes, group and state. ``private_clone(dest)``: a checkout in a 0700 folder.

Usage::

    with ThrowAwayHub(prefix="h1a2") as hub:
        hub.start()
        ...
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from hub_client import HubClient, read_db, wait_until_healthy

from tools.hub.course_hub import free_port

ROOT = Path(__file__).resolve().parents[2]


def private_clone(dest: Path) -> Path:
    """``git clone`` of this checkout into ``dest`` (made mode 0700, as ``mktemp -d`` makes a folder), with this working
    tree's files on top (what is being tested, committed or not) and the course's environment as ``.venv``. Returns
    the clone (``dest/course``)."""
    dest.mkdir(mode=0o700)
    clone = dest / "course"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True, timeout=120)
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           check=True, capture_output=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, files):
        source, target = ROOT / name, clone / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            target.chmod(source.stat().st_mode & 0o777)
    (clone / ".venv").symlink_to(os.path.realpath(ROOT / ".venv"))
    return clone


class ThrowAwayHub:
    """``make hub`` on 127.0.0.1 with its own state, homes base, learner group and ports."""

    def __init__(self, prefix: str | None = None, extra_env: dict[str, str] | None = None,
                 checkout: Path = ROOT, state: Path | None = None) -> None:
        self.prefix = prefix or f"h{secrets.token_hex(2)}"
        self.checkout = Path(checkout)
        # short (kernel socket paths lie under homes), and not in /tmp, which each learner's server replaces with
        # a folder of its own (it would not see its home there)
        self.base = Path(tempfile.mkdtemp(prefix=f"hub-{self.prefix}-", dir="/run"))
        self.base.chmod(0o755)  # learners pass through to their homes
        self.state = state or self.base / "state"
        self.homes = self.base / "homes"
        self.homes.mkdir()
        self.homes.chmod(0o755)
        self.group = f"{self.prefix}-learners"
        self.admin = f"{self.prefix}ins"
        self.port, self.hub_port = free_port(), free_port()  # the proxy's (the room's) and the hub's own
        self.url = f"http://localhost:{self.port}"  # learners: http://NAME.localhost:PORT (own origin each)
        self.log_path = self.base / "hub.log"
        self.extra_env = dict(extra_env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.known_pids: set[int] = set()

    # -- life cycle -----------------------------------------------------------------------------------------------
    def start(self, timeout: float = 120) -> None:
        env = dict(os.environ)
        env.update({
            "HUB_IP": "127.0.0.1", "HUB_PORT": str(self.port), "HUB_PROXY_API_PORT": str(free_port()),
            "HUB_HUB_PORT": str(self.hub_port), "HUB_STATE": str(self.state), "HUB_ADMIN": self.admin,
            "HUB_HOME_BASE": str(self.homes), "HUB_LEARNER_GROUP": self.group,
        })
        env.update(self.extra_env)
        self._log = os.fdopen(os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")  # root's
        self.process = subprocess.Popen([str(self.checkout / ".venv" / "bin" / "python"), "-m", "tools.hub.serve"],
                                        env=env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True, cwd=self.checkout)
        if not wait_until_healthy(f"http://127.0.0.1:{self.port}", self.process, timeout):
            raise RuntimeError(f"the hub did not start (exit {self.process.poll()}); log:\n{self.log()[-4000:]}")
        self.remember_processes()

    def user_url(self, name: str) -> str:
        """A learner's server, at its own origin (browsers resolve ``*.localhost`` to the loopback address)."""
        return f"http://{name}.localhost:{self.port}/user/{name}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def client(self, source: str) -> HubClient:
        """A visitor from ``source`` (another loopback address: another machine of the room, to the hub)."""
        return HubClient(f"http://127.0.0.1:{self.port}", host=f"localhost:{self.port}", source=source)

    def db(self, query: str, *args: object) -> list[tuple]:
        return read_db(self.state / "private" / "jupyterhub.sqlite", query, *args)

    @property
    def admin_password(self) -> str:
        return (self.state / "private" / "instructor-password").read_text().strip()

    # -- who is running -------------------------------------------------------------------------------------------
    def learner_uids(self) -> dict[str, int]:
        """System users the hub created in this run (members of this run's group)."""
        try:
            members = grp.getgrnam(self.group).gr_mem
        except KeyError:
            return {}
        return {name: pwd.getpwnam(name).pw_uid for name in members}

    def processes(self) -> list[object]:
        """Every live process of this hub: its process tree and anything running as one of its learners."""
        import psutil

        found: dict[int, psutil.Process] = {}
        if self.process is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                root = psutil.Process(self.process.pid)
                found.update((p.pid, p) for p in [root, *root.children(recursive=True)])
        uids = set(self.learner_uids().values())
        for proc in psutil.process_iter(["uids"]):
            try:
                if proc.info["uids"] and proc.info["uids"].real in uids:
                    found[proc.pid] = proc
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        for pid in list(self.known_pids):
            if pid not in found:
                try:
                    found[pid] = psutil.Process(pid)
                except psutil.NoSuchProcess:
                    self.known_pids.discard(pid)
        return [p for p in found.values() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    def remember_processes(self) -> None:
        self.known_pids |= {p.pid for p in self.processes()}  # type: ignore[attr-defined]

    # -- stopping ---------------------------------------------------------------------------------------------------
    def stop(self, timeout: float = 90) -> list[str]:
        """Ctrl-C: SIGINT to the hub's process group, as a terminal would. Returns what was still alive after."""
        if self.process is None:
            return []
        self.remember_processes()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return [f"the hub (pid {self.process.pid}) still runs {timeout:.0f} s after Ctrl-C"]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            alive = self.processes()
            if not alive:
                return []
            time.sleep(0.25)
        return [f"pid {p.pid} {' '.join(p.cmdline()[:4])}" for p in alive]  # type: ignore[attr-defined]

    def cleanup(self) -> None:  # noqa: C901 -- independent clean-up steps, each guarded so the next one runs
        """End anything left (by pid), remove this run's system users, homes, group and state."""
        import psutil

        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        for _ in range(3):
            alive = self.processes()
            if not alive:
                break
            for proc in alive:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()  # type: ignore[attr-defined]
            time.sleep(0.5)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
        for line in reversed(Path("/proc/self/mounts").read_text().splitlines()):  # the learners' homes (HUB_DISK_MAX)
            point = line.split()[1]
            if point.startswith((f"{self.base}/", f"{self.state}/")):
                subprocess.run(["umount", "--lazy", point], capture_output=True)
        for name in [*self.learner_uids(), self.admin]:  # the instructor's account is not in the learners' group
            subprocess.run(["userdel", "--remove", name], capture_output=True)
            for group in Path("/sys/fs/cgroup").glob(f"**/course-{name}"):  # left by a hub that was killed
                with contextlib.suppress(OSError):
                    group.rmdir()
        with contextlib.suppress(KeyError):
            grp.getgrnam(self.group)
            subprocess.run(["groupdel", self.group], capture_output=True)
        if getattr(self, "_log", None):
            self._log.close()
        keep = os.environ.get("COURSE_KEEP_HUB_LOG")
        if keep:
            shutil.copy(self.log_path, keep)
        shutil.rmtree(self.base, ignore_errors=True)
        if self.state != self.base / "state":
            shutil.rmtree(self.state, ignore_errors=True)

    def __enter__(self) -> ThrowAwayHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

