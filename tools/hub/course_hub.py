"""The classroom hub behind ``make hub``: settings, safety checks, the authenticator and the spawn hook.

``tools/hub/jupyterhub_config.py`` calls :func:`configure` with :class:`Settings` read from ``HUB_*`` environment
variables (``tools/hub/serve.py`` sets them), then :func:`refuse_unsafe`. Everything here is importable without
side effects, so the tests check the configuration without starting a hub. Who may log in, and where the hub's
pages answer, is tools/hub/course_auth.py: the same module the deploy/ recipes load.

Run as root, every learner is a separate system user (created on first login, in the group
``HUB_LEARNER_GROUP``, home mode 0700). Not run as root, all learners share the account that runs the hub, and
the hub serves 127.0.0.1 only.

Usage: ``configure(c, Settings.from_env())`` inside a JupyterHub config file.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import grp
import ipaddress
import os
import pwd
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import course_auth
from course_auth import ADMIN_PASSWORD_LENGTH, NEVER_LEARNERS, USERNAME_PATTERN  # noqa: F401 (also make hub's)

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
DEFAULT_STATE = ROOT / ".hub"
LOOPBACK = "127.0.0.1"
# Authenticators that let anybody in (or accept any password): never allowed for a course hub.
OPEN_AUTHENTICATORS = ("DummyAuthenticator", "NullAuthenticator")
# Kernels listen on unix sockets in their owner's runtime folder, not on TCP ports of the machine's loopback, where
# any local user can subscribe to a kernel's output (IOPub needs no key to read). jupyter_client puts a kernel's
# sockets beside its connection file: <runtime>/kernel-<id>-ipc-<1..5> (PRIVATE_DIRS gives a short runtime folder).
KERNELS_ON_UNIX_SOCKETS = ("--KernelManager.transport=ipc",)
# Python kernels without the debugger: debugpy listens on a TCP port of the loopback with no password and goes on
# listening after the debugger is switched off, so another learner could attach and run code as the kernel's owner
# (course_utils/machinery/hub_kernel.py; course_utils is in the learners' environment).
KERNELS_WITHOUT_DEBUGGER = (
    "--ServerApp.kernel_spec_manager_class=course_utils.machinery.hub_kernel.HubKernelSpecManager",)
# nbgitpuller's server extension off (it is installed for the recipes' gitpuller command): its /git-pull page clones
# any repository, on a GET, to any targetpath -- a classmate's link would put their code in your kernel spec.
NO_NBGITPULLER = ("--ServerApp.jpserver_extensions=nbgitpuller=False",)
SOCKET_PATH_MAX = 107  # sun_path: 108 bytes with the final NUL (Linux)
KERNEL_SOCKET_NAME = "/kernel-" + "0" * 36 + "-ipc-10"  # the longest name jupyter_client gives (a uuid4, port 1..10)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the hub's API and the proxy's API need one each)."""
    import socket

    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def port_in_use(ip: str, port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((ip, port))
        except OSError:
            return True
    return False


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def is_loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return ip == "localhost"


@dataclass
class Settings:
    """What ``make hub`` can be told (each field is an ``HUB_*`` environment variable of the same name)."""

    ip: str = LOOPBACK
    port: int = 8000
    hub_port: int = 0  # the hub's internal API port; 0: a free one chosen at start
    proxy_api_port: int = 0
    state: Path = DEFAULT_STATE
    admin: str = "instructor"
    home_base: Path = Path("/home")
    learner_group: str = "course-learners"
    threads: int = 1
    cull_idle: int = 3600  # seconds without activity before a learner's server is stopped
    plain_http: bool = False  # on the network without TLS: the instructor must say so
    learner_python: str = ""  # the interpreter learners' servers and kernels run (see learner_python())
    public_url: str = ""  # what learners type; each learner's server gets its own origin NAME.<its host>
    learner_env: str = ""  # where the learners' copy of the course's environment goes (see learner_python())
    memory_max: str = "4G"  # per learner: their server and all it starts, shared memory included (a memory cgroup;
    # also each process's RLIMIT_DATA): the capacity benchmark's 1.6 GB for the heaviest notebook, and room for a second
    disk_max: str = "2G"  # per learner: their home is a filesystem of this size ("0": a plain folder, no budget)
    tasks_max: int = 512  # processes and threads per learner (RLIMIT_NPROC)
    file_max: str = "4G"  # largest file a learner's process may write (RLIMIT_FSIZE)
    allowed_failed_logins: int = course_auth.ALLOWED_FAILED_LOGINS  # wrong passwords that block a learner's name
    # for a minute (never the instructor's)
    failed_logins_per_address: int = course_auth.FAILED_LOGINS_PER_ADDRESS  # failed logins a minute from one address
    signups_per_address: int = course_auth.SIGNUPS_PER_ADDRESS  # sign-ups a minute from one address
    shm_max: str = "512M"  # each learner's server: its own /dev/shm, /tmp, /var/tmp, /run/lock of this size each, and
    # at most this much System V memory ("0": no namespaces, the machine's shared folders)
    extra_config: str = ""
    lang: str = "en"  # the room's language: "zh" gives every learner the Chinese workspace and Chinese check()/hint()
    as_root: bool = field(default_factory=is_root)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        s = cls()
        s.ip = env.get("HUB_IP", s.ip) or s.ip
        s.port = int(env.get("HUB_PORT", s.port) or s.port)
        s.hub_port = int(env.get("HUB_HUB_PORT", 0) or 0)
        s.proxy_api_port = int(env.get("HUB_PROXY_API_PORT", 0) or 0)
        s.state = Path(env.get("HUB_STATE") or s.state).resolve()
        s.admin = (env.get("HUB_ADMIN") or s.admin).lower()
        s.home_base = Path(env.get("HUB_HOME_BASE") or s.home_base)
        s.learner_group = env.get("HUB_LEARNER_GROUP") or s.learner_group
        s.threads = int(env.get("HUB_THREADS", s.threads) or s.threads)
        s.cull_idle = int(env.get("HUB_CULL_IDLE", s.cull_idle) or s.cull_idle)
        s.plain_http = env.get("HUB_PLAIN_HTTP", "") in ("1", "yes", "true")
        s.learner_python = env.get("HUB_LEARNER_PYTHON", "")
        s.public_url = (env.get("HUB_PUBLIC_URL", "") or "").rstrip("/")
        s.learner_env = env.get("HUB_LEARNER_ENV", "")
        s.memory_max = env.get("HUB_MEMORY_MAX") or s.memory_max
        s.tasks_max = int(env.get("HUB_TASKS_MAX") or s.tasks_max)
        s.file_max = env.get("HUB_FILE_MAX") or s.file_max
        s.allowed_failed_logins = int(env.get("HUB_ALLOWED_FAILED_LOGINS") or s.allowed_failed_logins)
        s.failed_logins_per_address = int(env.get("HUB_FAILED_LOGINS_PER_ADDRESS") or s.failed_logins_per_address)
        s.signups_per_address = int(env.get("HUB_SIGNUPS_PER_ADDRESS") or s.signups_per_address)
        s.shm_max = env.get("HUB_SHM_MAX") or s.shm_max
        s.disk_max = env.get("HUB_DISK_MAX") or s.disk_max
        s.extra_config = env.get("HUB_EXTRA_CONFIG", "")
        s.lang = (env.get("HUB_LANG", s.lang) or s.lang).strip().lower()
        return s

    @property
    def private(self) -> Path:
        """Secrets and the database (mode 0700); the state folder itself is only traversable (learner-env)."""
        return self.state / "private"

    @property
    def password_file(self) -> Path:
        return self.private / course_auth.PASSWORD_FILE

    @property
    def logs(self) -> Path:
        """One log file per learner's server (``NAME.log``), readable by root only."""
        return self.private / "logs"

    @property
    def home_images(self) -> Path:
        """Each learner's home as a filesystem of HUB_DISK_MAX (``NAME.img``, see mount_home)."""
        return self.private / "homes"

    def home_image(self, name: str) -> Path:
        return self.home_images / f"{name}.img"

    @property
    def retired_names(self) -> Path:
        """Names of learners removed with ``serve.py remove-learner`` or deleted in the hub: never given out again."""
        return self.private / course_auth.RETIRED_FILE

    @property
    def hub_url(self) -> str:
        """The hub's public URL. Every learner's server is served at ``NAME.<host>`` (its own origin): on 127.0.0.1
        that is ``http://localhost:PORT`` (browsers resolve every ``*.localhost`` name to the loopback address)."""
        return self.public_url or f"http://localhost:{self.port}"

    def learner_env_dir(self) -> Path:
        """Where learners' copy of the environment lives: outside the checkout, which may be private to its owner."""
        if self.learner_env:
            return Path(self.learner_env)
        import hashlib

        return Path("/var/lib/course-hub") / f"learner-env-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]}"


class UnsafeHub(SystemExit):
    """Raised (and printed) when the hub would start in a way that exposes learners."""


def check_settings(s: Settings) -> None:
    """Refuse settings that would expose learners; the message says what to do instead."""
    from course_utils.machinery.messages import LANGUAGES

    if s.lang not in LANGUAGES:
        raise UnsafeHub(f"HUB_LANG={s.lang!r} is not a language of the course: use one of {', '.join(LANGUAGES)} "
                        "(zh: the Chinese workspace and messages).")
    if not re.match(USERNAME_PATTERN, s.admin) or s.admin in NEVER_LEARNERS:
        raise UnsafeHub(f"HUB_ADMIN={s.admin!r} is not a usable instructor name: lower-case letters, digits, '-' or "
                        f"'_', 2-32 characters, starting with a letter, and not a system account.")
    if s.threads < 1:
        raise UnsafeHub(f"HUB_THREADS={s.threads}: give at least 1 thread per learner.")
    if s.allowed_failed_logins < 1:  # NativeAuthenticator reads 0 as "never block": guessing without end
        raise UnsafeHub(f"HUB_ALLOWED_FAILED_LOGINS={s.allowed_failed_logins}: give at least 1 (the default, 10, "
                        "blocks a learner's name for a minute after ten wrong passwords).")
    if s.failed_logins_per_address < 1:
        raise UnsafeHub(f"HUB_FAILED_LOGINS_PER_ADDRESS={s.failed_logins_per_address}: give at least 1 (the default, "
                        f"{course_auth.FAILED_LOGINS_PER_ADDRESS}, refuses a client address's logins without checking "
                        "the password once it failed that many times in a minute).")
    if s.signups_per_address < 1:
        raise UnsafeHub(f"HUB_SIGNUPS_PER_ADDRESS={s.signups_per_address}: give at least 1 (the default, "
                        f"{course_auth.SIGNUPS_PER_ADDRESS}, refuses a client address's sign-ups without hashing "
                        "their passwords once it signed up that many times in a minute).")
    for name, value in (("HUB_MEMORY_MAX", s.memory_max), ("HUB_FILE_MAX", s.file_max), ("HUB_SHM_MAX", s.shm_max),
                        ("HUB_DISK_MAX", s.disk_max)):
        try:
            parse_size(value)
        except ValueError:
            raise UnsafeHub(f"{name}={value!r}: give a size such as 2.5G or 800M.") from None
    if s.as_root and parse_size(s.shm_max) and under_private_tmp(s.home_base):
        raise UnsafeHub(f"HUB_HOME_BASE={s.home_base} is in a folder that each learner's server replaces with one of "
                        f"its own ({', '.join(PRIVATE_TMPFS)}): choose another place, such as /home.")
    if s.public_url:
        from urllib.parse import urlparse

        host = urlparse(s.public_url).hostname or ""
        if not s.public_url.startswith(("http://", "https://")) or not host or _is_ip(host):
            raise UnsafeHub(f"HUB_PUBLIC_URL={s.public_url!r}: give the URL learners open, with a host name whose "
                            f"subdomains reach this machine (wildcard DNS *.{host or 'NAME'}), e.g. "
                            "https://hub.example.org: each learner's server is served at NAME.<that host>, its own "
                            "origin. An IP address has no subdomains.")
    if is_loopback(s.ip):
        return
    if not s.as_root:
        raise UnsafeHub(
            f"HUB_IP={s.ip}: not running as root, every learner would share this account (and could read and change "
            "each other's work), so the hub serves 127.0.0.1 only. Run `sudo make hub HUB_IP=...` for a room.")
    if not s.public_url:
        raise UnsafeHub(
            f"HUB_IP={s.ip}: learners' servers must each have their own origin (otherwise a page one learner serves "
            "runs script with another learner's or the instructor's cookies), so the hub serves each learner at "
            "NAME.<host>. Give the URL learners open, whose every subdomain reaches this machine (wildcard DNS): "
            "make hub HUB_IP=... HUB_PUBLIC_URL=http://hub.example.org:8000 (instructor guide, 'One origin per learner').")
    if not s.plain_http:
        raise UnsafeHub(
            f"HUB_IP={s.ip}: the hub itself speaks plain HTTP, so passwords would cross the room's network in clear. "
            "Keep the default 127.0.0.1 and put a TLS proxy in front (instructor guide, 'TLS'), or, on a network you "
            "trust, say so explicitly: make hub HUB_IP=... HUB_PLAIN_HTTP=1.")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def parse_size(text: str) -> int:
    """``"2.5G"`` -> bytes (K, M, G, T: powers of 1024; a plain number is bytes)."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)i?B?\s*", str(text), re.IGNORECASE)
    if not match:
        raise ValueError(f"not a size: {text!r}")
    return int(float(match.group(1)) * 1024 ** " KMGT".index(match.group(2).upper() or " "))


def refuse_unsafe(c: Any, s: Settings) -> None:
    """After all configuration (including HUB_EXTRA_CONFIG): never an open hub, never a hub without real passwords."""
    check_settings(s)
    if not c.JupyterHub.get("subdomain_host"):
        raise UnsafeHub("JupyterHub.subdomain_host is empty: every learner's server would share the hub's origin, so "
                        "a page one learner serves could act with another's cookies. Keep make hub's subdomains.")
    auth = c.JupyterHub.authenticator_class
    name = auth if isinstance(auth, str) else getattr(auth, "__name__", str(auth))
    if any(open_name.lower() in str(name).lower() for open_name in OPEN_AUTHENTICATORS) or name in ("dummy", "null"):
        raise UnsafeHub(f"authenticator {name} lets anybody in: a course hub needs real passwords "
                        "(the default NativeAuthenticator: learners sign up, the instructor approves).")
    sections = ("NativeAuthenticator", "CourseNativeAuthenticator", "CourseAuthenticator", "SharedAccountAuthenticator")
    if any(section in c and c[section].get("open_signup", False) for section in sections):
        raise UnsafeHub("NativeAuthenticator.open_signup=True lets anybody who reaches the hub sign up and log in "
                        "without approval: that is an open hub. Leave it False and approve learners at /hub/authorize.")
    if "SharedPasswordAuthenticator" in str(name) and not c.SharedPasswordAuthenticator.get("user_password"):
        raise UnsafeHub("SharedPasswordAuthenticator without user_password: set the workshop password.")


def runs_as(python: str, uid: int, gid: int, code: str = "import sys") -> bool:
    """Whether ``python -c code`` works for an unprivileged user (the learners' point of view)."""
    try:
        result = subprocess.run([python, "-c", code], user=uid, group=gid, extra_groups=[], cwd="/",
                                capture_output=True, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": "/"})
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0


# What a learner's Python must import (the spawn hook's workspace, the server), checked as ``nobody``: each module is
# found and its file read, without running it (importing jupyterhub.singleuser alone costs ~2.5 CPU-seconds, at
# every start). Finding a module imports its parent packages, so an unreadable folder or package fails here too.
LEARNER_IMPORTS_PROBE = (
    "import importlib.util\n"
    "for name in ('course_utils.machinery.workspace', 'jupyterhub.singleuser'):\n"
    "    spec = importlib.util.find_spec(name)\n"
    "    open(spec.origin, 'rb').close()\n"
)


def _site_packages(python: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return python.parent.parent / "lib" / version / "site-packages"


# What learners need from the checkout besides the installed packages: the course package and what it reads.
COURSE_FILES = ("course_utils", "notebooks", "requirements.txt", "pyproject.toml", "environment.yml")
STAMP = ".course-hub-stamp"


def _stamp(venv_python: Path) -> str:
    """Changes when the checkout's course files or the installed packages change (a refresh is then due)."""
    import hashlib

    digest = hashlib.sha256()
    prefix = Path(os.path.realpath(venv_python.parent.parent))
    for marker in sorted(prefix.glob(".installed-*")) + [_site_packages(prefix / "bin" / "python")]:
        digest.update(f"{marker.name}:{marker.stat().st_mtime_ns}\n".encode())
    for name in COURSE_FILES:
        top = ROOT / name
        for path in sorted([top] if top.is_file() else top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and ".ipynb_checkpoints" not in path.parts:
                content = hashlib.sha256(path.read_bytes()).hexdigest()  # by content: a fresh clone is no change
                digest.update(f"{path.relative_to(ROOT)}:{content}\n".encode())
    return digest.hexdigest()


def _copy_readable(source: Path, dest: Path) -> None:
    """Copy a tree for learners: hard links where the file is readable by everybody and on the same disk (no space,
    no time), real copies otherwise; folders 0755, files 0644 (0755 if executable)."""
    import shutil

    def copy(src: str, dst: str) -> None:
        info = os.stat(src)
        if info.st_mode & 0o004:
            try:
                os.link(src, dst)
                return
            except OSError:
                pass
        shutil.copy2(src, dst)
        os.chmod(dst, 0o755 if info.st_mode & 0o111 else 0o644)

    shutil.copytree(source, dest, symlinks=True, copy_function=copy,
                    ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    for folder, _, _ in os.walk(dest):
        os.chmod(folder, 0o755)


def build_learner_env(dest: Path, base: Path, venv_python: Path = VENV_PYTHON) -> bool:
    """Learners' own copy of the course's environment at ``dest`` (True if it was (re)built).

    A venv on the system Python ``base`` (same minor version), whose ``site-packages``, ``share`` and ``etc`` are
    copies of the course's (hard links where possible), and a copy of the course itself (``course/``: the
    ``course_utils`` package, the notebooks and the pins) instead of the editable install that points into the
    checkout. Rebuilt when the checkout or the installed packages changed; built beside and swapped in, so a
    learner's running server keeps the files it opened.
    """
    import shutil

    stamp = _stamp(venv_python)
    if (dest / STAMP).exists() and (dest / STAMP).read_text() == stamp and (dest / "bin" / "python").exists():
        return False
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    prefix = Path(os.path.realpath(venv_python.parent.parent))
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(dest.parent, 0o755)
    building = dest.parent / f".{dest.name}.building"
    shutil.rmtree(building, ignore_errors=True)
    (building / "bin").mkdir(parents=True)
    (building / "lib").mkdir()
    version = subprocess.run([str(base), "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (building / "pyvenv.cfg").write_text(
        f"home = {base.parent}\ninclude-system-site-packages = false\nversion = {version}\n"
        f"# made by tools/hub/course_hub.py: a copy of {prefix}'s packages and of the course in {ROOT}, on {base}\n")
    (building / "bin" / "python").symlink_to(base)
    (building / "bin" / "python3").symlink_to("python")
    site = building / "lib" / minor / "site-packages"
    _copy_readable(_site_packages(prefix / "bin" / "python"), site)
    for name in ("share", "etc"):  # JupyterLab's extensions and kernel spec; which server extensions are on
        if (prefix / name).is_dir():
            _copy_readable(prefix / name, building / name)
    for editable in site.glob("__editable__*course_utils*"):
        editable.unlink()  # the editable install points into the checkout: the copy below replaces it
    course = building / "course"
    course.mkdir()
    for name in COURSE_FILES:
        if (ROOT / name).is_dir():
            _copy_readable(ROOT / name, course / name)
        elif (ROOT / name).is_file():
            shutil.copyfile(ROOT / name, course / name)
            os.chmod(course / name, 0o644)
    (site / "course-hub-course.pth").write_text(f"{dest / 'course'}\n")
    for path in (building, building / "bin", building / "lib", site.parent, course):
        os.chmod(path, 0o755)
    (building / STAMP).write_text(stamp)
    old = dest.parent / f".{dest.name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        dest.rename(old)
    building.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return True


def learner_python(s: Settings, venv_python: Path = VENV_PYTHON) -> tuple[str, str]:
    """The interpreter learners run, and a note for the instructor.

    When everybody can run the course's ``.venv`` and import the course from it, learners share it read-only.
    Otherwise (the checkout is private to its owner -- a clone in a 0700 folder, a 0750 home --, or the venv's
    Python lives under pyenv in /root), learners get their own copy (:func:`build_learner_env`) outside the checkout:
    the same packages and course files on the system Python of the same minor version, refreshed at start when the
    checkout changed.
    """
    nobody = pwd.getpwnam("nobody")
    probe = LEARNER_IMPORTS_PROBE
    hidden = parse_size(s.shm_max) and under_private_tmp(venv_python.parent.parent)  # e.g. a clone in /tmp
    if not hidden and runs_as(str(venv_python), nobody.pw_uid, nobody.pw_gid, probe):
        return str(venv_python), f"learners run the course's environment {venv_python}"
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(p) / minor for p in ("/usr/local/bin", "/usr/bin")]
    base = next((p for p in candidates if p.exists() and runs_as(str(p), nobody.pw_uid, nobody.pw_gid)), None)
    if base is None:
        raise UnsafeHub(
            f"Learners cannot run the course's Python ({os.path.realpath(venv_python)}): a folder above it is "
            f"private. Install Python {sys.version_info.major}.{sys.version_info.minor} where everybody can read it "
            f"(/usr/local, /opt) and run `make clean && make venv PYTHON=/opt/.../{minor}`, or install {minor} from "
            "the system packages.")
    view = s.learner_env_dir()
    rebuilt = build_learner_env(view, base, venv_python)
    python = str(view / "bin" / "python")
    if not runs_as(python, nobody.pw_uid, nobody.pw_gid, probe):
        raise UnsafeHub(f"Learners cannot import the course from {python}: is {view.parent} readable by everybody? "
                        "Name another place with HUB_LEARNER_ENV=/srv/course-learner-env.")
    return python, (f"learners run {base} with a copy of the course's packages and of the course in {view} "
                    f"({'made now' if rebuilt else 'up to date'}; the checkout {ROOT} needs no permission change)")


def prepare_state(s: Settings) -> None:
    """The one state folder (0700): ``private/`` holds the database, secrets and the learners' server logs."""
    s.state.mkdir(parents=True, exist_ok=True)
    s.state.chmod(0o700)
    s.private.mkdir(exist_ok=True)
    s.private.chmod(0o700)
    for folder in (s.logs, s.home_images):
        folder.mkdir(exist_ok=True)
        folder.chmod(0o700)
    instructor_password(s)


def mount_learner_homes(images: Path) -> None:
    """At the hub's start: every learner's home whose filesystem (``images/ACCOUNT.img``) exists is mounted (again,
    after a reboot), so that the dashboard reads their record before they log in."""
    for image in sorted(images.glob("*.img")):
        try:
            mount_home(Path(pwd.getpwnam(image.stem).pw_dir), image, 0)
        except (KeyError, OSError, subprocess.CalledProcessError):
            continue


def instructor_password(s: Settings) -> str:
    """The instructor's first password: made once (mode 0600), kept across restarts; change it at /hub/change-password."""
    return course_auth.instructor_password(s.password_file)


def learner_environment(s: Settings, python: str) -> dict[str, str]:
    """Environment of every learner's server and kernels: one thread each, the course's settings, no stray PATH."""
    threads = str(s.threads)
    return {
        "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads,
        "NUMEXPR_NUM_THREADS": threads,
        "PYTHONHASHSEED": "0", "JUPYTER_PLATFORM_DIRS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "PATH": f"{Path(python).parent}:/usr/local/bin:/usr/bin:/bin",
        "COURSE_LANG": s.lang,  # check(), hint() and doctor() speak the room's language
    }


# Every place a learner's tools write temporary or cached files, under their own home (0700), never in the shared
# /tmp: torch.compile's caches hold code that runs, so a folder another learner made first would run their code.
PRIVATE_DIRS = {
    "TMPDIR": ".cache/tmp",
    "XDG_CACHE_HOME": ".cache",
    "TORCHINDUCTOR_CACHE_DIR": ".cache/torchinductor",
    "TRITON_CACHE_DIR": ".cache/triton",
    "TORCH_EXTENSIONS_DIR": ".cache/torch_extensions",
    "MPLCONFIGDIR": ".cache/matplotlib",
    "PYTHONPYCACHEPREFIX": ".cache/pycache",
    "JUPYTER_RUNTIME_DIR": ".cache/run",  # connection files and the kernels' unix sockets: short (see SOCKET_PATH_MAX)
}


def private_environment(home: str) -> dict[str, str]:
    """``TMPDIR`` and the caches of one learner, all under ``home`` (see :data:`PRIVATE_DIRS`)."""
    return {name: f"{home}/{relative}" for name, relative in PRIVATE_DIRS.items()}


def make_private_dirs(env: dict[str, str]) -> None:
    """Run as the learner (after setuid): create the private folders, mode 0700, refusing one that is not theirs."""
    for name in PRIVATE_DIRS:
        path = env[name]
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
        if info.st_uid != os.getuid() or not os.path.isdir(path) or os.path.islink(path):
            raise PermissionError(f"{path} ({name}) is not a folder of this learner's own")
        os.chmod(path, 0o700)


def limit_resources(s: Settings) -> None:
    """Run in a learner's server before it starts (inherited by its kernels and terminals): processes per learner,
    memory per process, file size. See the instructor guide, 'Limits per learner'."""
    import resource

    memory, file_size = parse_size(s.memory_max), parse_size(s.file_max)
    resource.setrlimit(resource.RLIMIT_NPROC, (s.tasks_max, s.tasks_max))
    if memory:  # a big allocation fails in the process that asks (MemoryError), before the cgroup ends a process
        resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# Each learner's server (and everything it starts) runs isolated, as root sets it up before becoming the learner:
# - namespaces of its own (Linux unshare(2), mount(2): root's CAP_SYS_ADMIN): a mount namespace whose /dev/shm, /tmp,
#   /var/tmp and /run/lock -- the places every user may write -- are fresh tmpfs of HUB_SHM_MAX each, seen by nobody
#   else and gone when the server stops; and an IPC namespace, so System V shared memory and message queues are the
#   server's own (at most HUB_SHM_MAX of SysV memory) and are removed by the kernel when its last process ends;
# - a memory cgroup of HUB_MEMORY_MAX (below the hub's own): the server's processes together, shared memory (tmpfs,
#   SysV, MAP_SHARED) included -- RLIMIT_DATA counts none of it. Past it, the kernel ends the biggest process there;
# - a home that is a filesystem of HUB_DISK_MAX of its own (an ext4 image on a loop device, mount_home): past it,
#   a write fails with "No space left on device" (bytes and files), and the machine's disk keeps its room.
CLONE_NEWNS, CLONE_NEWIPC, MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x00020000, 0x08000000, 2, 4, 16384, 1 << 18
PRIVATE_TMPFS = ("/dev/shm", "/tmp", "/var/tmp", "/run/lock")


def under_private_tmp(path: str | Path) -> bool:
    """Whether ``path`` is in a folder that each learner's server replaces with one of its own (so it cannot see it)."""
    return any(Path(os.path.abspath(path)).is_relative_to(place) for place in PRIVATE_TMPFS)


@functools.cache
def _libc() -> Any:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.unshare.argtypes = [ctypes.c_int]
    return libc


def isolate_server(shm: int, cgroup: str | None) -> None:
    """Run in a learner's server before it starts (root, before setuid; see above): join the memory cgroup
    ``cgroup`` (a folder, or None), then, if ``shm``, namespaces of its own with private temporary folders of ``shm``
    bytes each. Raises OSError where the system refuses."""
    import ctypes

    if cgroup:
        descriptor = os.open(f"{cgroup}/cgroup.procs", os.O_WRONLY)
        try:
            os.write(descriptor, b"0")  # this process, and so everything it starts
        finally:
            os.close(descriptor)
    if not shm:
        return
    libc = _libc()  # loaded by the parent (spawner_class's preexec), not after fork
    calls = [(libc.unshare, (CLONE_NEWNS | CLONE_NEWIPC,)),
             (libc.mount, (b"none", b"/", None, MS_REC | MS_PRIVATE, None))]  # nothing leaks back out
    calls += [(libc.mount, (b"tmpfs", place.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, f"size={shm},mode=1777".encode()))
              for place in PRIVATE_TMPFS if os.path.isdir(place)]
    for call, args in calls:
        if call(*args) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"{call.__name__}{args[:2]}: {os.strerror(error)}")
    for name, value in (("shmmax", shm), ("shmall", shm // os.sysconf("SC_PAGE_SIZE"))):  # this IPC namespace's
        with open(f"/proc/sys/kernel/{name}", "w") as handle:
            handle.write(str(value))


def memory_cgroup(name: str, limit: int) -> Path:
    """A memory cgroup of ``limit`` bytes named ``name`` below this process's own (cgroup v1's memory hierarchy, or
    v2 where this process may hand the memory controller down), made if needed. Raises OSError where it may not."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            parent, limit_file = Path("/sys/fs/cgroup/memory", path.lstrip("/")), "memory.limit_in_bytes"
            break
    else:
        parent, limit_file = Path("/sys/fs/cgroup", path.lstrip("/")), "memory.max"
        if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
            (parent / "cgroup.subtree_control").write_text("+memory")
    group = parent / name
    group.mkdir(exist_ok=True)
    (group / limit_file).write_text(str(limit))
    return group


def mount_home(home: Path, image: Path, size: int) -> bool:
    """``home`` as a filesystem of ``size`` bytes of its own: the ext4 file ``image`` on a loop device (made on first
    use, holding what ``home`` held, owner and mode kept); mounted again after a restart. True if it mounts it now.

    Usage: ``mount_home(Path("/home/ann"), Path(".hub/private/homes/ann.img"), 2 << 30)`` (as root)"""
    if os.path.ismount(home):
        return False
    mount = ["mount", "-o", "loop,nosuid,nodev", str(image)]
    if not image.exists():
        import tempfile

        info = home.stat()
        os.close(os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.truncate(image, size)  # sparse: the disk holds what the learner writes, no more
        try:
            subprocess.run(["mkfs.ext4", "-q", "-m", "0", "-i", "16384",  # a file per 16 KiB at most
                            "-E", f"root_owner={info.st_uid}:{info.st_gid}", str(image)], check=True, capture_output=True)
            with tempfile.TemporaryDirectory() as staging:
                subprocess.run([*mount, staging], check=True, capture_output=True)
                try:
                    os.rmdir(f"{staging}/lost+found")
                    subprocess.run(["cp", "-a", f"{home}/.", staging], check=True, capture_output=True)
                finally:
                    subprocess.run(["umount", staging], check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError) as error:
            image.unlink()
            raise RuntimeError(f"could not give {home} a filesystem of its own ({getattr(error, 'stderr', b'')!r}"
                               f" {error}): does it hold more than HUB_DISK_MAX?") from None
        for entry in os.scandir(home):  # now in the image: the machine's disk keeps no second copy
            shutil.rmtree(entry.path) if entry.is_dir(follow_symlinks=False) else os.unlink(entry.path)
    subprocess.run([*mount, str(home)], check=True, capture_output=True)
    return True


def check_isolation(s: Settings) -> None:
    """Refuse to start when learners' servers cannot be isolated as :func:`isolate_server`, :func:`memory_cgroup` and
    :func:`mount_home` do it (a container without CAP_SYS_ADMIN, say): tried once, in a throw-away child and a tiny
    image, exactly as each learner's server will be started."""
    import tempfile

    shm, memory, disk = parse_size(s.shm_max), parse_size(s.memory_max), parse_size(s.disk_max)
    if not s.as_root:
        return
    _libc()
    try:
        group = memory_cgroup(f"course-probe-{os.getpid()}", 1 << 30) if memory else None
        try:
            subprocess.run(["/bin/sh", "-c", ""], check=True, timeout=60,
                           preexec_fn=lambda: isolate_server(min(shm, 1 << 20), str(group) if group else None))
        finally:
            if group is not None:
                group.rmdir()
    except (OSError, subprocess.SubprocessError) as error:
        raise UnsafeHub(
            f"Each learner's server runs in namespaces of its own (a private /dev/shm, /tmp, /var/tmp, /run/lock of "
            f"HUB_SHM_MAX={s.shm_max}, System V memory of its own) and a memory cgroup of HUB_MEMORY_MAX="
            f"{s.memory_max}; this machine refused ({error}). Run the hub where root may create namespaces and "
            "cgroups, or turn them off: HUB_SHM_MAX=0 (the machine's shared temporary folders), HUB_MEMORY_MAX=0 (no "
            "memory budget per learner; instructor guide, 'Limits per learner').") from None
    if disk:
        with tempfile.TemporaryDirectory() as folder:
            home = Path(folder, "home")
            home.mkdir()
            try:
                mount_home(home, Path(folder, "home.img"), 16 << 20)
                subprocess.run(["umount", str(home)], check=True, capture_output=True)
            except (OSError, RuntimeError, subprocess.SubprocessError) as error:
                raise UnsafeHub(f"Each learner's home is a filesystem of HUB_DISK_MAX={s.disk_max} of its own (an ext4 "
                                f"image on a loop device); this machine refused ({error}). Run the hub where root may "
                                "use loop devices (mkfs.ext4, mount), or turn it off: HUB_DISK_MAX=0 (no disk budget "
                                "per learner).") from None


SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


def remove_shared_temp_files(uid: int, places: tuple[str, ...] = SHARED_TEMP) -> list[str]:
    """Remove what ``uid`` left at the top of the machine's shared temporary folders (files, folders, links);
    returns what was removed. Run when a learner's server stops and when a learner is removed."""
    import shutil
    import stat

    if uid == 0:
        raise ValueError("refusing to remove root's files")
    removed = []
    for place in places:
        try:
            entries = list(os.scandir(place))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
                if info.st_uid != uid:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(entry.path)  # never follows a link (fd-based on Linux)
                else:
                    os.unlink(entry.path)
                removed.append(entry.path)
            except OSError:
                continue
    return removed


def learner_processes(uid: int) -> list[Any]:
    """Every process that runs as ``uid`` (a learner the hub created), wherever it was started from."""
    import psutil

    found = []
    for proc in psutil.process_iter(["uids"]):
        try:
            if proc.info["uids"] and uid in (proc.info["uids"].real, proc.info["uids"].effective):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def end_learner_processes(uid: int, grace: float = 5.0) -> list[int]:
    """SIGTERM, then SIGKILL after ``grace`` seconds, to every process of ``uid``; returns the pids that were ended."""
    import psutil

    if uid == 0:
        raise ValueError("refusing to end root's processes")
    procs = learner_processes(uid)
    for proc in procs:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=grace)
    return [p.pid for p in procs]


def spawner_class(s: Settings) -> type:
    """The learners' spawner: ``LocalProcessSpawner`` (one system user per learner, root) or its shared-account
    variant, plus what the course adds: a log file per server, a private ``TMPDIR``, caches and kernel sockets,
    resource limits, a private /dev/shm (root), and, on stop, the end of every process the learner started (also
    those that left the server's process group) and the removal of their files in /tmp, /var/tmp and /dev/shm."""
    from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner

    base = LocalProcessSpawner if s.as_root else SimpleLocalProcessSpawner

    class CourseSpawner(base):  # type: ignore[misc, valid-type]
        cgroup: Path | None = None

        def _home(self) -> str:
            return pwd.getpwnam(self.user.name).pw_dir if s.as_root else str(s.state / "homes" / self.user.name)

        def get_env(self) -> dict[str, str]:
            env = super().get_env()
            env.update(private_environment(self._home()))
            return env

        def make_preexec_fn(self, name: str):  # type: ignore[no-untyped-def]
            become = super().make_preexec_fn(name)
            env = private_environment(self._home())
            shm = parse_size(s.shm_max) if s.as_root else 0
            cgroup = str(self.cgroup) if self.cgroup else None
            if shm:
                _libc()  # loaded here, in the hub, not in the child after fork

            def preexec() -> None:
                if s.as_root:
                    limit_resources(s)
                    isolate_server(shm, cgroup)
                become()
                make_private_dirs(env)

            return preexec

        async def start(self):  # type: ignore[no-untyped-def]
            """The server's output goes to ``private/logs/NAME.log`` (root's), never to the hub's terminal; run as
            root, it runs in its own memory cgroup (see isolate_server)."""
            runtime = private_environment(self._home())["JUPYTER_RUNTIME_DIR"]
            if len(runtime) + len(KERNEL_SOCKET_NAME) > SOCKET_PATH_MAX:
                raise RuntimeError(f"{self.user.name}'s kernels cannot listen in {runtime}: a unix socket's path "
                                   f"has at most {SOCKET_PATH_MAX} characters. Choose a shorter "
                                   f"{'HUB_HOME_BASE' if s.as_root else 'HUB_STATE'}.")
            memory = parse_size(s.memory_max) if s.as_root else 0
            self.cgroup = memory_cgroup(f"course-{self.user.name}", memory) if memory else None
            log_path = s.logs / f"{self.user.name}.log"
            descriptor = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
            self.popen_kwargs = {**self.popen_kwargs, "stdin": subprocess.DEVNULL, "stdout": descriptor,
                                 "stderr": subprocess.STDOUT}
            try:
                return await super().start()
            finally:
                os.close(descriptor)

        async def stop(self, now: bool = False) -> None:
            await super().stop(now=now)
            if s.as_root:
                uid = pwd.getpwnam(self.user.name).pw_uid
                if uid != 0:
                    loop = asyncio.get_running_loop()
                    ended = await loop.run_in_executor(None, end_learner_processes, uid)
                    if ended:
                        self.log.info("Ended %d more process(es) of %s", len(ended), self.user.name)
                    removed = await loop.run_in_executor(None, remove_shared_temp_files, uid)
                    if removed:
                        self.log.info("Removed %s's files in the shared temporary folders: %s", self.user.name,
                                      ", ".join(removed))
                if getattr(self, "cgroup", None):
                    with contextlib.suppress(OSError):  # still busy: the next start reuses it
                        self.cgroup.rmdir()

    return CourseSpawner


@functools.cache
def authenticator_classes() -> tuple[type, type]:
    """(separate system users, one shared account): the course's sign-in (tools/hub/course_auth.py, the one the
    deploy/ recipes run too) plus, run as root, a system user for each learner."""
    from jupyterhub.auth import LocalAuthenticator
    from traitlets import Unicode

    native = course_auth.course_authenticator_class()

    class CourseAuthenticator(native, LocalAuthenticator):  # type: ignore[misc, valid-type]
        """Run as root: each learner becomes a system user (home mode 0700) on first login."""

        home_base = Unicode("/home", config=True, help="Where learners' homes are created.")

        def add_system_user(self, user: Any) -> None:
            if user.name in self.retired():
                raise RuntimeError(f"{user.name} was removed with serve.py remove-learner; the name is retired")
            home = Path(self.home_base) / user.name
            learner = [] if user.name in self.admin_users else ["--groups", self.learner_group]  # not the instructor
            command = ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash",
                       "--user-group", *learner, "--key", "UMASK=0077", user.name]
            self.log.info("Creating system user %s (home %s)", user.name, home)
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode:
                raise RuntimeError(f"Failed to create system user {user.name}: {result.stdout}{result.stderr}")

        async def add_user(self, user: Any) -> None:
            await super().add_user(user)
            home = Path(pwd.getpwnam(user.name).pw_dir)
            if home.is_dir():
                home.chmod(0o700)  # no learner can list or read another's home, whatever the system default

    class SharedAccountAuthenticator(native):  # type: ignore[misc, valid-type]
        """Not root: sign-up with approval, but every learner runs as the account that runs the hub."""

    return CourseAuthenticator, SharedAccountAuthenticator


def _workspace_hook(s: Settings, python: str):  # type: ignore[no-untyped-def]
    """The pre-spawn hook: the learner's own copy of the learner edition in ~/workspace, made as the learner."""

    async def prepare_learner_workspace(spawner: Any) -> None:
        name = spawner.user.name
        if s.as_root:
            from jupyterhub.spawner import set_user_setuid

            home = pwd.getpwnam(name).pw_dir
            if parse_size(s.disk_max):  # the home's own filesystem, before anything is written there
                await asyncio.get_running_loop().run_in_executor(None, mount_home, Path(home), s.home_image(name),
                                                                 parse_size(s.disk_max))
            become = set_user_setuid(name)
        else:
            home = str(s.state / "homes" / name)
            Path(home).mkdir(parents=True, exist_ok=True)
            become = None
        env = {**learner_environment(s, python), **private_environment(home), "HOME": home, "USER": name}

        def preexec() -> None:
            if become is not None:
                become()
            make_private_dirs(env)

        process = await asyncio.create_subprocess_exec(
            python, "-m", "course_utils.machinery.workspace", f"{home}/workspace", "--lang", s.lang, cwd=home, env=env, preexec_fn=preexec,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            output, _ = await asyncio.wait_for(process.communicate(), timeout=180)
        except asyncio.TimeoutError:
            process.kill()
            raise RuntimeError(f"Preparing {name}'s workspace took more than 180 s") from None
        text = output.decode(errors="replace").strip()
        if process.returncode:
            raise RuntimeError(f"Could not prepare {name}'s workspace: {text[-2000:]}")
        spawner.log.info("Workspace of %s: %s", name, text.splitlines()[-1] if text else "ready")

    return prepare_learner_workspace


def configure(c: Any, s: Settings) -> str:
    """Fill the JupyterHub config ``c`` for the course; returns the note on which Python learners run."""
    check_settings(s)
    check_isolation(s)
    import course_proxy

    course_proxy.redact_logs()  # this process is the hub: no token in its log either (JupyterHub misses some)
    prepare_state(s)
    if s.as_root and parse_size(s.disk_max):
        mount_learner_homes(s.home_images)
    if s.learner_python:
        python, note = s.learner_python, f"learners run {s.learner_python} (HUB_LEARNER_PYTHON)"
    elif s.as_root:
        python, note = learner_python(s)
    else:
        python, note = str(VENV_PYTHON), "not root: all learners share this account"

    c.JupyterHub.bind_url = f"http://{s.ip}:{s.port}"
    # One origin per learner: NAME.localhost:PORT (or NAME.<HUB_PUBLIC_URL's host>). A page a learner's server
    # serves then runs in that learner's origin only, never with the hub's or another learner's cookies.
    c.JupyterHub.subdomain_host = s.hub_url
    c.JupyterHub.hub_ip = LOOPBACK
    c.JupyterHub.hub_port = s.hub_port or free_port()
    c.ConfigurableHTTPProxy.api_url = f"http://{LOOPBACK}:{s.proxy_api_port or free_port()}"
    # The pure-Python proxy, with host routing fixed and tokens kept out of its log (tools/hub/course_proxy.py). It
    # buffers whole responses and gives up on a request after 20 s by default: the spawn page's progress stream lasts
    # as long as a spawn, so allow 5 minutes (websockets are not affected).
    c.ConfigurableHTTPProxy.command = [str(VENV_PYTHON), str(Path(__file__).resolve().parent / "course_proxy.py"),
                                       "--proxy-timeout=300000"]
    c.JupyterHub.db_url = f"sqlite:///{s.private / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(s.private / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(s.private / "jupyterhub.pid")
    c.JupyterHub.cleanup_servers = True  # Ctrl-C stops every learner's server (and so their kernels)
    c.JupyterHub.cleanup_proxy = True
    c.JupyterHub.template_vars = {"announcement_login": "PyTorch Hooks, hands-on: sign up, then wait for the "
                                  "instructor to approve you."}

    separate_users, shared_account = authenticator_classes()
    # The course's sign-in, as the deploy/ recipes run it (tools/hub/course_auth.py): the instructor's account first,
    # approval by POST, failed logins limited per name and per address, sign-ups per address, names never handed
    # down, /hub/ on its host.
    course_auth.configure_sign_in(
        c, admins={s.admin}, state=s.private, system_users="same" if s.as_root else "",
        authenticator=separate_users if s.as_root else shared_account,
        allowed_failed_logins=s.allowed_failed_logins, failed_logins_per_address=s.failed_logins_per_address,
        signups_per_address=s.signups_per_address)
    if s.as_root:
        c.CourseNativeAuthenticator.learner_group = s.learner_group
        c.LocalAuthenticator.create_system_users = True
        c.CourseAuthenticator.home_base = str(s.home_base)
    else:
        c.SimpleLocalProcessSpawner.home_dir_template = str(s.state / "homes" / "{username}")
    c.JupyterHub.spawner_class = spawner_class(s)

    c.Spawner.cmd = [python, "-m", "jupyterhub.singleuser"]
    c.Spawner.notebook_dir = "~/workspace"
    c.Spawner.default_url = "/lab/tree/00_start_here.ipynb"
    c.Spawner.env_keep = ["LANG", "LC_ALL"]
    c.Spawner.environment = learner_environment(s, python)
    c.Spawner.pre_spawn_hook = _workspace_hook(s, python)
    c.Spawner.start_timeout = 180  # a room logging in at once on a small machine
    c.Spawner.http_timeout = 120
    c.LocalProcessSpawner.interrupt_timeout = 10
    c.LocalProcessSpawner.term_timeout = 10
    c.Spawner.args = [
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        *KERNELS_ON_UNIX_SOCKETS,
        *KERNELS_WITHOUT_DEBUGGER,
        *NO_NBGITPULLER,
    ]

    c.JupyterHub.services = [{
        "name": "idle-culler",
        "command": [str(VENV_PYTHON), "-m", "jupyterhub_idle_culler", f"--timeout={s.cull_idle}",
                    f"--cull-every={max(60, min(600, s.cull_idle // 4))}"],
    }]
    c.JupyterHub.load_roles = [{
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    }]
    # The instructor's view of the room (admins only): each learner's progress record, nothing else.
    import dashboard

    dashboard.configure_dashboard(c, python=str(VENV_PYTHON), port=free_port(), admins={s.admin}, state=s.state,
                                  pythonpath=str(ROOT))
    return note
