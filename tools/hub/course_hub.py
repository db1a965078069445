"""The classroom hub behind ``make hub``: settings, safety checks, the authenticator and the spawn hook.

``tools/hub/jupyterhub_config.py`` calls :func:`configure` with :class:`Settings` read from ``HUB_*`` environment
variables (``tools/hub/serve.py`` sets them), then :func:`refuse_unsafe`. Everything here is importable without
side effects, so the tests check the configuration without starting a hub.

Run as root, every learner is a separate system user (created on first login, in the group
``HUB_LEARNER_GROUP``, home mode 0700). Not run as root, all learners share the account that runs the hub, and
the hub serves 127.0.0.1 only.

Usage: ``configure(c, Settings.from_env())`` inside a JupyterHub config file.
"""

from __future__ import annotations

import asyncio
import grp
import ipaddress
import os
import pwd
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
DEFAULT_STATE = ROOT / ".hub"
LOOPBACK = "127.0.0.1"
# A name that is a valid system user name and a valid JupyterHub name; lower case (NativeAuthenticator lowers).
USERNAME_PATTERN = r"^[a-z][a-z0-9_-]{1,31}$"
NEVER_LEARNERS = frozenset({"root", "nobody", "daemon", "bin", "sys", "sync", "games", "man", "mail", "www-data"})
# Authenticators that let anybody in (or accept any password): never allowed for a course hub.
OPEN_AUTHENTICATORS = ("DummyAuthenticator", "NullAuthenticator")
# The instructor's name is never blocked after failed logins, so its password must be out of guessing range.
ADMIN_PASSWORD_LENGTH = 16


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
    memory_max: str = "2.5G"  # per process of a learner (RLIMIT_DATA): the capacity benchmark's 1.6 GB, plus room
    tasks_max: int = 512  # processes and threads per learner (RLIMIT_NPROC)
    file_max: str = "4G"  # largest file a learner's process may write (RLIMIT_FSIZE)
    allowed_failed_logins: int = 10  # wrong passwords that block a learner's name for a minute (never the instructor's)
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
        s.extra_config = env.get("HUB_EXTRA_CONFIG", "")
        s.lang = (env.get("HUB_LANG", s.lang) or s.lang).strip().lower()
        return s

    @property
    def private(self) -> Path:
        """Secrets and the database (mode 0700); the state folder itself is only traversable (learner-env)."""
        return self.state / "private"

    @property
    def password_file(self) -> Path:
        return self.private / "instructor-password"

    @property
    def logs(self) -> Path:
        """One log file per learner's server (``NAME.log``), readable by root only."""
        return self.private / "logs"

    @property
    def retired_names(self) -> Path:
        """Names of learners removed with ``serve.py remove-learner``: never given out again."""
        return self.private / "retired-names"

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
    for name, value in (("HUB_MEMORY_MAX", s.memory_max), ("HUB_FILE_MAX", s.file_max)):
        try:
            parse_size(value)
        except ValueError:
            raise UnsafeHub(f"{name}={value!r}: give a size such as 2.5G or 800M.") from None
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
    if runs_as(str(venv_python), nobody.pw_uid, nobody.pw_gid, probe):
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
    s.logs.mkdir(exist_ok=True)
    s.logs.chmod(0o700)
    instructor_password(s)


def instructor_password(s: Settings) -> str:
    """The instructor's first password: made once (mode 0600), kept across restarts; change it at /hub/change-password."""
    if not s.password_file.exists():
        import secrets

        descriptor = os.open(s.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(12) + "\n")
    return s.password_file.read_text(encoding="utf-8").strip()


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
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


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
    variant, plus what the course adds: a log file per server, a private ``TMPDIR`` and caches, resource limits,
    and, on stop, the end of every process the learner started (also those that left the server's process group)."""
    from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner

    base = LocalProcessSpawner if s.as_root else SimpleLocalProcessSpawner

    class CourseSpawner(base):  # type: ignore[misc, valid-type]
        def _home(self) -> str:
            return pwd.getpwnam(self.user.name).pw_dir if s.as_root else str(s.state / "homes" / self.user.name)

        def get_env(self) -> dict[str, str]:
            env = super().get_env()
            env.update(private_environment(self._home()))
            return env

        def make_preexec_fn(self, name: str):  # type: ignore[no-untyped-def]
            become = super().make_preexec_fn(name)
            env = private_environment(self._home())

            def preexec() -> None:
                if s.as_root:
                    limit_resources(s)
                become()
                make_private_dirs(env)

            return preexec

        async def start(self):  # type: ignore[no-untyped-def]
            """The server's output goes to ``private/logs/NAME.log`` (root's), never to the hub's terminal."""
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
                    ended = await asyncio.get_running_loop().run_in_executor(None, end_learner_processes, uid)
                    if ended:
                        self.log.info("Ended %d more process(es) of %s", len(ended), self.user.name)

    return CourseSpawner


def authenticator_classes() -> tuple[type, type]:
    """(separate system users, one shared account): NativeAuthenticator plus what a course needs."""
    import bcrypt
    from jupyterhub.auth import LocalAuthenticator
    from jupyterhub import orm
    from nativeauthenticator import NativeAuthenticator
    from nativeauthenticator.handlers import DiscardHandler, ToggleAuthorizationHandler
    from nativeauthenticator.handlers import LoginHandler as NativeLoginHandler
    from nativeauthenticator.orm import UserInfo
    from tornado.escape import url_escape
    from tornado.httputil import url_concat
    from traitlets import Unicode

    class NoStatsd:
        """JupyterHub 6 has no statsd client; NativeAuthenticator 1.3.0's login still times itself with one."""

        def timer(self, name: str) -> NoStatsd:
            return self

        def start(self) -> NoStatsd:
            return self

        def stop(self, send: bool = True) -> None:
            return None

    class CourseLoginHandler(NativeLoginHandler):
        """NativeAuthenticator 1.3.0's login page, working on JupyterHub 6 (found here: its POST /hub/login fails
        with AttributeError 'statsd', and its error page with "_render() got an unexpected keyword 'sync'")."""

        statsd = NoStatsd()

        def _render(self, login_error: str | None = None, username: str | None = None, sync: bool = False,
                    **kwargs: Any) -> Any:
            return self.render_template(
                "native-login.html", sync=sync,
                next=url_escape(self.get_argument("next", default="")), username=username, login_error=login_error,
                custom_html=self.authenticator.custom_html, login_url=self.settings["login_url"],
                enable_signup=self.authenticator.enable_signup, two_factor_auth=self.authenticator.allow_2fa,
                authenticator_login_url=url_concat(self.authenticator.login_url(self.hub.base_url),
                                                   {"next": self.get_argument("next", "")}),
            )

    class PostOnlyToggleAuthorization(ToggleAuthorizationHandler):
        """/hub/authorize/NAME: NativeAuthenticator 1.3.0 approves (or withdraws) on a GET, so any page the
        instructor visits could approve an account with an ``<img src>``. Here a GET changes nothing; the change is a
        POST, which JupyterHub accepts only with the form's XSRF token (tools/hub/templates/authorization-area.html)."""

        async def get(self, slug: str) -> None:  # type: ignore[override]
            self.redirect(self.hub.base_url + "authorize")

        async def post(self, slug: str) -> None:
            await ToggleAuthorizationHandler.get.__wrapped__(self, slug)  # type: ignore[attr-defined]

    class PostOnlyDiscard(DiscardHandler):
        """/hub/discard/NAME: the same, for discarding a sign-up."""

        async def get(self, user_name: str) -> None:  # type: ignore[override]
            self.redirect(self.hub.base_url + "authorize")

        async def post(self, user_name: str) -> None:
            await DiscardHandler.get.__wrapped__(self, user_name)  # type: ignore[attr-defined]

    from jupyterhub.scopes import needs_scope

    PostOnlyToggleAuthorization.post = needs_scope("admin:users")(PostOnlyToggleAuthorization.post)
    PostOnlyDiscard.post = needs_scope("admin:users")(PostOnlyDiscard.post)
    replaced = {NativeLoginHandler: CourseLoginHandler, ToggleAuthorizationHandler: PostOnlyToggleAuthorization,
                DiscardHandler: PostOnlyDiscard}

    class CourseNativeAuthenticator(NativeAuthenticator):
        """Sign-up with instructor approval, a pre-made instructor account, and names that are safe as users."""

        instructor_password_file = Unicode("", config=True, help="File with the instructor's first password.")
        learner_group = Unicode("", config=True, help="System group of the learners the hub created (root only).")

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._ensure_instructors()

        retired_names_file = Unicode("", config=True, help="Names removed with serve.py remove-learner, one a line.")

        def get_handlers(self, app: Any) -> list[tuple[str, Any]]:
            return [(path, replaced.get(handler, handler)) for path, handler in super().get_handlers(app)]

        def is_blocked(self, username: str) -> bool:
            """Ten failed logins (``HUB_ALLOWED_FAILED_LOGINS``) block a learner's name for a minute; never the
            instructor's (anybody could keep the instructor out by failing on purpose). The instructor's password is
            long and random instead."""
            if self.normalize_username(username) in self.admin_users:
                return False
            return super().is_blocked(username)

        def change_password(self, username: str, new_password: str) -> bool:
            if self.normalize_username(username) in self.admin_users and len(new_password) < ADMIN_PASSWORD_LENGTH:
                return False  # never locked out, so never guessable: the instructor's password stays long
            return super().change_password(username, new_password)

        def retired(self) -> set[str]:
            path = Path(self.retired_names_file) if self.retired_names_file else None
            return set(path.read_text().split()) if path and path.exists() else set()

        def _ensure_instructors(self) -> None:
            """The instructor's account exists before anybody can sign up under that name (and become admin)."""
            if not self.instructor_password_file:
                return
            password = Path(self.instructor_password_file).read_text(encoding="utf-8").strip()
            for name in sorted(self.admin_users):
                if UserInfo.find(self.db, name) is None:
                    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
                    self.db.add(UserInfo(username=name, password=hashed, is_authorized=True))
                    self.db.commit()
                    self.log.info("Created the instructor account %s (first password in %s)", name,
                                  self.instructor_password_file)

        def validate_username(self, username: str) -> bool:
            if not re.match(USERNAME_PATTERN, username) or username in NEVER_LEARNERS:
                return False
            if username in self.retired():
                return False  # removed with serve.py remove-learner: this name is never given out again
            if self.learner_group:
                try:
                    pwd.getpwnam(username)
                except KeyError:
                    pass
                else:  # an existing account that the hub did not create (e.g. 'postgres'): never a learner's
                    try:
                        members = grp.getgrnam(self.learner_group).gr_mem
                    except KeyError:
                        return False
                    if username not in members:
                        return False
                    if UserInfo.find(self.db, username) is None and orm.User.find(self.db, username) is None:
                        return False  # an account left by a learner deleted in the hub: a sign-up must not claim it
            return super().validate_username(username)

    class CourseAuthenticator(CourseNativeAuthenticator, LocalAuthenticator):
        """Run as root: each learner becomes a system user (home mode 0700) on first login."""

        home_base = Unicode("/home", config=True, help="Where learners' homes are created.")

        def add_system_user(self, user: Any) -> None:
            if user.name in self.retired():
                raise RuntimeError(f"{user.name} was removed with serve.py remove-learner; the name is retired")
            home = Path(self.home_base) / user.name
            command = ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash",
                       "--user-group", "--groups", self.learner_group, "--key", "UMASK=0077", user.name]
            self.log.info("Creating system user %s (home %s)", user.name, home)
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode:
                raise RuntimeError(f"Failed to create system user {user.name}: {result.stdout}{result.stderr}")

        async def add_user(self, user: Any) -> None:
            await super().add_user(user)
            home = Path(pwd.getpwnam(user.name).pw_dir)
            if home.is_dir():
                home.chmod(0o700)  # no learner can list or read another's home, whatever the system default

    class SharedAccountAuthenticator(CourseNativeAuthenticator):
        """Not root: sign-up with approval, but every learner runs as the account that runs the hub."""

    return CourseAuthenticator, SharedAccountAuthenticator


def _workspace_hook(s: Settings, python: str):  # type: ignore[no-untyped-def]
    """The pre-spawn hook: the learner's own copy of the learner edition in ~/workspace, made as the learner."""

    async def prepare_learner_workspace(spawner: Any) -> None:
        name = spawner.user.name
        if s.as_root:
            from jupyterhub.spawner import set_user_setuid

            home = pwd.getpwnam(name).pw_dir
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
    import course_proxy

    course_proxy.redact_logs()  # this process is the hub: no token in its log either (JupyterHub misses some)
    prepare_state(s)
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
    c.JupyterHub.template_paths = [str(Path(__file__).resolve().parent / "templates")]
    c.JupyterHub.db_url = f"sqlite:///{s.private / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(s.private / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(s.private / "jupyterhub.pid")
    c.JupyterHub.cleanup_servers = True  # Ctrl-C stops every learner's server (and so their kernels)
    c.JupyterHub.cleanup_proxy = True
    c.JupyterHub.template_vars = {"announcement_login": "PyTorch Hooks, hands-on: sign up, then wait for the "
                                  "instructor to approve you."}

    course_auth, shared_auth = authenticator_classes()
    c.JupyterHub.authenticator_class = course_auth if s.as_root else shared_auth
    c.Authenticator.admin_users = {s.admin}
    c.Authenticator.allow_all = True  # NativeAuthenticator lets in only the accounts the instructor approved
    c.NativeAuthenticator.open_signup = False
    c.NativeAuthenticator.enable_signup = True
    c.NativeAuthenticator.minimum_password_length = 8
    c.NativeAuthenticator.check_common_password = True
    c.NativeAuthenticator.allowed_failed_logins = s.allowed_failed_logins
    c.NativeAuthenticator.seconds_before_next_try = 60
    c.CourseNativeAuthenticator.instructor_password_file = str(s.password_file)
    c.CourseNativeAuthenticator.retired_names_file = str(s.retired_names)
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
