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
    extra_config: str = ""
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
        s.extra_config = env.get("HUB_EXTRA_CONFIG", "")
        return s

    @property
    def private(self) -> Path:
        """Secrets and the database (mode 0700); the state folder itself is only traversable (learner-env)."""
        return self.state / "private"

    @property
    def password_file(self) -> Path:
        return self.private / "instructor-password"


class UnsafeHub(SystemExit):
    """Raised (and printed) when the hub would start in a way that exposes learners."""


def check_settings(s: Settings) -> None:
    """Refuse settings that would expose learners; the message says what to do instead."""
    if not re.match(USERNAME_PATTERN, s.admin) or s.admin in NEVER_LEARNERS:
        raise UnsafeHub(f"HUB_ADMIN={s.admin!r} is not a usable instructor name: lower-case letters, digits, '-' or "
                        f"'_', 2-32 characters, starting with a letter, and not a system account.")
    if s.threads < 1:
        raise UnsafeHub(f"HUB_THREADS={s.threads}: give at least 1 thread per learner.")
    if is_loopback(s.ip):
        return
    if not s.as_root:
        raise UnsafeHub(
            f"HUB_IP={s.ip}: not running as root, every learner would share this account (and could read and change "
            "each other's work), so the hub serves 127.0.0.1 only. Run `sudo make hub HUB_IP=...` for a room.")
    if not s.plain_http:
        raise UnsafeHub(
            f"HUB_IP={s.ip}: the hub itself speaks plain HTTP, so passwords would cross the room's network in clear. "
            "Keep the default 127.0.0.1 and put a TLS proxy in front (instructor guide, 'TLS'), or, on a network you "
            "trust, say so explicitly: make hub HUB_IP=... HUB_PLAIN_HTTP=1.")


def refuse_unsafe(c: Any, s: Settings) -> None:
    """After all configuration (including HUB_EXTRA_CONFIG): never an open hub, never a hub without real passwords."""
    check_settings(s)
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


def _site_packages(python: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return python.parent.parent / "lib" / version / "site-packages"


def learner_python(state: Path, venv_python: Path = VENV_PYTHON) -> tuple[str, str]:
    """The interpreter learners run, and a note for the instructor.

    The course's environment (``.venv``) is installed once and shared read-only. Learners need to execute its
    interpreter; when that interpreter lives where other users cannot read it (pyenv under /root, a home with mode
    0700), the hub builds ``STATE/learner-env``: a venv view whose ``site-packages``, ``share`` and ``etc`` are the course's
    own, on a system Python of the same minor version. Nothing is copied or installed.
    """
    nobody = pwd.getpwnam("nobody")
    probe = "import course_utils.machinery.workspace, jupyterhub.singleuser"
    if runs_as(str(venv_python), nobody.pw_uid, nobody.pw_gid, probe):
        return str(venv_python), f"learners run the course's environment {venv_python}"
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(p) / minor for p in ("/usr/local/bin", "/usr/bin")]
    base = next((p for p in candidates if p.exists() and runs_as(str(p), nobody.pw_uid, nobody.pw_gid)), None)
    real = Path(os.path.realpath(venv_python))
    if base is None:
        raise UnsafeHub(
            f"Learners cannot run the course's Python ({real}): a folder above it is private. Install Python "
            f"{sys.version_info.major}.{sys.version_info.minor} where everybody can read it (/usr/local, /opt) and "
            f"run `make clean && make venv PYTHON=/opt/.../{minor}`, or install {minor} from the system packages.")
    view = state / "learner-env"
    site = view / "lib" / minor / "site-packages"
    course_prefix = venv_python.parent.parent
    if (not (view / "bin" / "python").exists() or os.path.realpath(site) != str(_site_packages(venv_python))
            or not (view / "etc").exists()):
        import shutil

        shutil.rmtree(view, ignore_errors=True)
        (view / "bin").mkdir(parents=True)
        site.parent.mkdir(parents=True)
        version = subprocess.run([str(base), "-c", "import platform; print(platform.python_version())"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        (view / "pyvenv.cfg").write_text(
            f"home = {base.parent}\ninclude-system-site-packages = false\nversion = {version}\n"
            f"# made by tools/hub/course_hub.py: the course's packages ({_site_packages(venv_python)}) on {base}\n")
        (view / "bin" / "python").symlink_to(base)
        site.symlink_to(_site_packages(venv_python))
        (view / "share").symlink_to(course_prefix / "share")  # JupyterLab's extensions, kernel spec
        (view / "etc").symlink_to(course_prefix / "etc")  # which server extensions are on (jupyterlab, ...)
        for path in (view, view / "bin", view / "lib", site.parent):
            path.chmod(0o755)
    python = str(view / "bin" / "python")
    if not runs_as(python, nobody.pw_uid, nobody.pw_gid, probe):
        raise UnsafeHub(f"Learners cannot import the course from {python}: is {ROOT} readable by everybody?")
    return python, (f"the course's Python ({real}) is private to its owner, so learners run {base} with the course's "
                    f"packages from {_site_packages(venv_python)} (a view in {view}; nothing copied)")


def prepare_state(s: Settings) -> None:
    """The one state folder: ``learner-env`` (readable by learners) and ``private/`` (0700: database, secrets)."""
    s.state.mkdir(parents=True, exist_ok=True)
    s.state.chmod(0o711 if s.as_root else 0o700)  # learners may pass through to learner-env, never list
    s.private.mkdir(exist_ok=True)
    s.private.chmod(0o700)
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
    }


def authenticator_classes() -> tuple[type, type]:
    """(separate system users, one shared account): NativeAuthenticator plus what a course needs."""
    import bcrypt
    from jupyterhub.auth import LocalAuthenticator
    from nativeauthenticator import NativeAuthenticator
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

    class CourseNativeAuthenticator(NativeAuthenticator):
        """Sign-up with instructor approval, a pre-made instructor account, and names that are safe as users."""

        instructor_password_file = Unicode("", config=True, help="File with the instructor's first password.")
        learner_group = Unicode("", config=True, help="System group of the learners the hub created (root only).")

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._ensure_instructors()

        def get_handlers(self, app: Any) -> list[tuple[str, Any]]:
            return [(path, CourseLoginHandler if handler is NativeLoginHandler else handler)
                    for path, handler in super().get_handlers(app)]

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
            return super().validate_username(username)

    class CourseAuthenticator(CourseNativeAuthenticator, LocalAuthenticator):
        """Run as root: each learner becomes a system user (home mode 0700) on first login."""

        home_base = Unicode("/home", config=True, help="Where learners' homes are created.")

        def add_system_user(self, user: Any) -> None:
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
            preexec = set_user_setuid(name)
        else:
            home = str(s.state / "homes" / name)
            Path(home).mkdir(parents=True, exist_ok=True)
            preexec = None
        env = {**learner_environment(s, python), "HOME": home, "USER": name}
        process = await asyncio.create_subprocess_exec(
            python, "-m", "course_utils.machinery.workspace", f"{home}/workspace", cwd=home, env=env, preexec_fn=preexec,
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
    prepare_state(s)
    if s.learner_python:
        python, note = s.learner_python, f"learners run {s.learner_python} (HUB_LEARNER_PYTHON)"
    elif s.as_root:
        python, note = learner_python(s.state)
    else:
        python, note = str(VENV_PYTHON), "not root: all learners share this account"

    c.JupyterHub.bind_url = f"http://{s.ip}:{s.port}"
    c.JupyterHub.hub_ip = LOOPBACK
    if s.hub_port:
        c.JupyterHub.hub_port = s.hub_port
    c.ConfigurableHTTPProxy.api_url = f"http://{LOOPBACK}:{s.proxy_api_port or s.port + 1}"
    # The pure-Python proxy buffers whole responses and gives up on a request after 20 s by default: the spawn
    # page's progress stream lasts as long as a spawn, so allow 5 minutes (websockets are not affected).
    c.ConfigurableHTTPProxy.command = [str(VENV_PYTHON.parent / "configurable-http-proxy"), "--proxy-timeout=300000"]
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
    c.NativeAuthenticator.allowed_failed_logins = 10
    c.NativeAuthenticator.seconds_before_next_try = 60
    c.CourseNativeAuthenticator.instructor_password_file = str(s.password_file)
    if s.as_root:
        c.CourseNativeAuthenticator.learner_group = s.learner_group
        c.LocalAuthenticator.create_system_users = True
        c.CourseAuthenticator.home_base = str(s.home_base)
        c.JupyterHub.spawner_class = "jupyterhub.spawner.LocalProcessSpawner"
    else:
        c.JupyterHub.spawner_class = "jupyterhub.spawner.SimpleLocalProcessSpawner"
        c.SimpleLocalProcessSpawner.home_dir_template = str(s.state / "homes" / "{username}")

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
    return note
