"""The classroom hub behind ``make hub``: its settings (``HUB_*``), the checks that refuse an unsafe hub, and the
JupyterHub configuration (system users, the spawner, the spawn hook). Sign-in: course_auth.py; what keeps learners
apart: isolation.py. As root every learner is a system user (home 0700); otherwise all share the hub's account and
the hub serves 127.0.0.1 only.

Usage: ``configure(c, Settings.from_env())`` inside a JupyterHub config file.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import os
import pwd
import subprocess
from pathlib import Path
from typing import Any

from traitlets import Bool, Integer, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from . import course_auth, isolation
from .course_auth import is_loopback
from .isolation import parse_size
from .learner_env import ROOT, VENV_PYTHON, learner_python

DEFAULT_STATE = ROOT / ".hub"
LOOPBACK = "127.0.0.1"
# Authenticators that let anybody in (or accept any password): never allowed for a course hub.
OPEN_AUTHENTICATORS = ("DummyAuthenticator", "NullAuthenticator")
# Kernels on unix sockets in their owner's runtime folder, not on loopback TCP ports, where any local user can
# subscribe to a kernel's output (IOPub needs no key to read).
KERNELS_ON_UNIX_SOCKETS = ("--KernelManager.transport=ipc",)
# Kernels without the debugger: debugpy listens on a loopback TCP port with no password (and goes on after it is
# switched off), so another learner could attach and run code as the kernel's owner.
KERNELS_WITHOUT_DEBUGGER = (
    "--ServerApp.kernel_spec_manager_class=course_utils.machinery.hub_kernel.HubKernelSpecManager",)
# nbgitpuller's /git-pull page off: it clones any repository, on a GET, to any targetpath -- a classmate's link
# would put their code in your kernel spec.
NO_NBGITPULLER = ("--ServerApp.jpserver_extensions=nbgitpuller=False",)


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


class UnsafeHub(SystemExit):
    """Raised (and printed) when the hub would start in a way that exposes learners."""


class Size(Unicode):
    """A size such as ``2.5G`` or ``800M`` (K, M, G, T: powers of 1024; a plain number is bytes; 0: none)."""

    def validate(self, obj: Any, value: Any) -> str:
        value = super().validate(obj, value)
        try:
            parse_size(value)
        except ValueError:
            self.error(obj, value, info="a size such as 2.5G or 800M")
        return value


class Settings(Configurable):
    """What ``make hub`` can be told: ``HUB_`` + each setting's name in capitals (``HUB_PORT=8001``), as traitlets.

    Usage: ``Settings.from_env()`` (from ``os.environ``), ``Settings.from_env({"HUB_PORT": "8001"})``"""

    ip = Unicode(LOOPBACK, help="The address the hub listens on (another needs root, HUB_PUBLIC_URL and TLS).")
    port = Integer(8000, help="The port learners open.")
    hub_port = Integer(0, help="The hub's internal API port (0: a free one, chosen at start).")
    proxy_api_port = Integer(0, help="The proxy's API port (0: a free one).")
    state = Unicode(str(DEFAULT_STATE), help="The hub's state folder (mode 0700).")
    admin = Unicode("instructor", help="The instructor's name (lower-case letters, digits, '-', '_'; not root).")
    home_base = Unicode("/home", help="Where learners' homes are made.")
    learner_group = Unicode("course-learners", help="The system group of the learners' accounts.")
    threads = Integer(1, min=1, help="Threads per kernel: one, so that a room does not oversubscribe the cores.")
    cull_idle = Integer(3600, min=1, help="Seconds without activity before a learner's server is stopped.")
    plain_http = Bool(False, help="Serve the network in plain HTTP (1): the instructor must say so.")
    learner_python = Unicode("", help="The interpreter learners run (default: learner_env.learner_python's).")
    public_url = Unicode("", help="What learners type; each learner's server gets its own origin NAME.<its host>.")
    learner_env = Unicode("", help="Where the learners' copy of the course's environment goes.")
    memory_max = Size("4G", help="Memory of a learner's server and all it starts, shared memory included (0: none).")
    disk_max = Size("2G", help="The size of a learner's home, a filesystem of its own (0: a plain folder).")
    shm_max = Size("512M", help="Each server's own /dev/shm, /tmp, /var/tmp, /run/lock, System V memory (0: shared).")
    file_max = Size("4G", help="The largest file a learner's process may write.")
    log_max = Size("64M", help="The most a learner's server log keeps (NAME.log, NAME.log.1: half each; 0: nothing).")
    tasks_max = Integer(512, min=1, help="Processes and threads per learner (a fork bomb stops there).")
    allowed_failed_logins = Integer(course_auth.ALLOWED_FAILED_LOGINS, min=1,
                                    help="Wrong passwords a minute from one browser, or for a learner's name.")
    failed_logins_per_address = Integer(course_auth.FAILED_LOGINS_PER_ADDRESS, min=1,
                                        help="Failed password checks a minute from one client.")
    signups_per_address = Integer(course_auth.SIGNUPS_PER_ADDRESS, min=1, help="Sign-ups a minute from one client.")
    extra_config = Unicode("", help="A JupyterHub config file of your own, loaded last (the safety checks after it).")
    lang = Unicode("en", help="The room's language: zh gives every learner the Chinese workspace and messages.")
    as_root = Bool(help="Whether the hub runs as root (not a HUB_ setting).")

    @default("as_root")
    def _as_root(self) -> bool:
        return os.geteuid() == 0

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        settings = cls()
        own = set(Configurable.class_trait_names()) | {"as_root"}
        for name, trait in cls.class_traits().items():
            raw = "" if name in own else env.get(f"HUB_{name.upper()}", "")
            if raw:
                try:
                    setattr(settings, name, trait.from_string(raw))
                except (TraitError, ValueError) as error:
                    raise UnsafeHub(f"HUB_{name.upper()}={raw!r}: {error} ({trait.help})") from None
        return settings

    @validate("state")
    def _state(self, proposal: Any) -> str:
        return str(Path(proposal.value).resolve())

    @validate("admin")
    def _admin(self, proposal: Any) -> str:
        try:
            return course_auth.instructor_name(proposal.value)
        except ValueError as error:
            raise TraitError(str(error)) from None

    @validate("lang")
    def _lang(self, proposal: Any) -> str:
        from course_utils.machinery.messages import LANGUAGES

        if proposal.value.strip().lower() not in LANGUAGES:
            raise TraitError(f"{proposal.value!r} is not a language of the course: use one of {', '.join(LANGUAGES)}")
        return proposal.value.strip().lower()

    @validate("public_url")
    def _public_url(self, proposal: Any) -> str:
        from urllib.parse import urlparse

        url = proposal.value.rstrip("/")
        host = urlparse(url).hostname or ""
        if url and (not url.startswith(("http://", "https://")) or not host or _is_ip(host)):
            raise TraitError(f"give the URL learners open, with a host name whose subdomains reach this machine "
                             f"(wildcard DNS *.{host or 'NAME'}), e.g. https://hub.example.org: each learner's server "
                             "is served at NAME.<that host>, its own origin. An IP address has no subdomains.")
        return url

    @property
    def private(self) -> Path:
        """Secrets, the database, logs, home images, retired names (mode 0700)."""
        return Path(self.state) / "private"

    @property
    def password_file(self) -> Path:
        return self.private / course_auth.PASSWORD_FILE

    @property
    def logs(self) -> Path:
        return self.private / "logs"

    @property
    def home_images(self) -> Path:
        return self.private / "homes"

    @property
    def retired_names(self) -> Path:
        return self.private / course_auth.RETIRED_FILE

    @property
    def hub_url(self) -> str:
        """The hub's public URL; learners at ``NAME.<host>`` (browsers resolve ``*.localhost`` to the loopback)."""
        return self.public_url or f"http://localhost:{self.port}"

    def learner_env_dir(self) -> Path:
        """The learners' copy of the environment: outside the checkout, which may be private to its owner."""
        if self.learner_env:
            return Path(self.learner_env)
        import hashlib

        return Path("/var/lib/course-hub") / f"learner-env-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]}"

    def check(self) -> None:
        """Refuse what each setting alone allows but together would expose learners; the message says what to do."""
        if self.as_root and parse_size(self.shm_max) and isolation.under_private_tmp(self.home_base):
            raise UnsafeHub(f"HUB_HOME_BASE={self.home_base} is in a folder that each learner's server replaces with "
                            f"one of its own ({', '.join(isolation.PRIVATE_TMPFS)}): choose another place, e.g. /home.")
        if is_loopback(self.ip):
            return
        if not self.as_root:
            raise UnsafeHub(
                f"HUB_IP={self.ip}: not running as root, every learner would share this account (and could read and "
                "change each other's work), so the hub serves 127.0.0.1 only. Run `sudo make hub HUB_IP=...`.")
        if not self.public_url:
            raise UnsafeHub(
                f"HUB_IP={self.ip}: learners' servers must each have their own origin (otherwise a page one learner "
                "serves runs script with another learner's or the instructor's cookies), so the hub serves each "
                "learner at NAME.<host>. Give the URL learners open, whose every subdomain reaches this machine "
                "(wildcard DNS): make hub HUB_IP=... HUB_PUBLIC_URL=http://hub.example.org:8000 (instructor guide, "
                "'One origin per learner').")
        if not self.plain_http:
            raise UnsafeHub(
                f"HUB_IP={self.ip}: the hub itself speaks plain HTTP, so passwords would cross the room's network in "
                "clear. Keep the default 127.0.0.1 and put a TLS proxy in front (instructor guide, 'TLS'), or, on a "
                "network you trust, say so explicitly: make hub HUB_IP=... HUB_PLAIN_HTTP=1.")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def check_isolation(s: Settings) -> None:
    """Refuse to start where learners' servers cannot be isolated (a container without CAP_SYS_ADMIN): tried once."""
    if not s.as_root:
        return
    try:
        isolation.try_isolation(parse_size(s.shm_max), parse_size(s.memory_max), parse_size(s.disk_max))
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        raise UnsafeHub(
            f"Each learner's server runs in namespaces of its own (a private /dev/shm, /tmp, /var/tmp, /run/lock of "
            f"HUB_SHM_MAX={s.shm_max}, System V memory of its own), a memory cgroup of HUB_MEMORY_MAX={s.memory_max} "
            f"and a home of HUB_DISK_MAX={s.disk_max} (an ext4 image on a loop device); this machine refused "
            f"({error}). Run the hub where root may create namespaces, cgroups and loop devices, or turn them off: "
            "HUB_SHM_MAX=0 (the machine's shared temporary folders), HUB_MEMORY_MAX=0 (no memory budget per learner), "
            "HUB_DISK_MAX=0 (no disk budget; instructor guide, 'Limits per learner').") from None


def refuse_unsafe(c: Any, s: Settings) -> None:
    """After all configuration (including HUB_EXTRA_CONFIG): never an open hub, never a hub without real passwords."""
    s.check()
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


def prepare_state(s: Settings) -> None:
    """The one state folder (0700): ``private/`` holds the database, secrets, the servers' logs and the homes."""
    for folder in (Path(s.state), s.private, s.logs, s.home_images):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
    course_auth.instructor_password(s.password_file)


def learner_environment(s: Settings, python: str) -> dict[str, str]:
    """Environment of every learner's server and kernels: one thread each, the course's settings, no stray PATH."""
    threads = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
    return {
        **dict.fromkeys(threads, str(s.threads)),
        "PYTHONHASHSEED": "0", "JUPYTER_PLATFORM_DIRS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "PATH": f"{Path(python).parent}:/usr/local/bin:/usr/bin:/bin",
        "COURSE_LANG": s.lang,  # check(), hint() and doctor() speak the room's language
    }


def spawner_class(s: Settings) -> type:  # noqa: C901 -- ruff counts the branches of the class it builds
    """``LocalProcessSpawner`` (root) or its shared-account variant, with a capped log per server, private
    ``TMPDIR``, caches and kernel sockets, as root isolation.py's isolation, and on stop the end of every process of
    the learner and of their files in the machine's temporary folders."""
    from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner

    class CourseSpawner(LocalProcessSpawner if s.as_root else SimpleLocalProcessSpawner):  # type: ignore[misc]
        cgroup: Path | None = None

        def _home(self) -> str:
            return pwd.getpwnam(self.user.name).pw_dir if s.as_root else f"{s.state}/homes/{self.user.name}"

        def get_env(self) -> dict[str, str]:
            return {**super().get_env(), **isolation.private_environment(self._home())}

        def make_preexec_fn(self, name: str):
            become, env = super().make_preexec_fn(name), isolation.private_environment(self._home())
            shm, cgroup = parse_size(s.shm_max) if s.as_root else 0, str(self.cgroup) if self.cgroup else None
            if shm:
                isolation._libc()  # loaded here, in the hub, not in the child after fork

            def preexec() -> None:
                if s.as_root:
                    isolation.limit_resources(s.tasks_max, parse_size(s.memory_max), parse_size(s.file_max))
                    isolation.isolate_server(shm, cgroup)
                become()
                isolation.make_private_dirs(env)

            return preexec

        async def start(self):
            """The server's output goes to ``private/logs/NAME.log`` (root's, ``HUB_LOG_MAX`` at most)."""
            runtime = isolation.private_environment(self._home())["JUPYTER_RUNTIME_DIR"]
            if len(runtime) + len(isolation.KERNEL_SOCKET_NAME) > isolation.SOCKET_PATH_MAX:
                raise RuntimeError(f"{self.user.name}'s kernels cannot listen in {runtime}: a unix socket's path "
                                   f"has at most {isolation.SOCKET_PATH_MAX} characters. Choose a shorter "
                                   f"{'HUB_HOME_BASE' if s.as_root else 'HUB_STATE'}.")
            memory = parse_size(s.memory_max) if s.as_root else 0
            self.cgroup = isolation.memory_cgroup(f"course-{self.user.name}", memory) if memory else None
            descriptor = isolation.capped_log(s.logs / f"{self.user.name}.log", parse_size(s.log_max))
            self.popen_kwargs: dict[str, Any] = {**self.popen_kwargs, "stdin": subprocess.DEVNULL, "stdout": descriptor,
                                 "stderr": subprocess.STDOUT}
            try:
                return await super().start()
            finally:
                os.close(descriptor)

        async def stop(self, now: bool = False) -> None:
            await super().stop(now=now)
            if not s.as_root or (uid := pwd.getpwnam(self.user.name).pw_uid) == 0:
                return
            loop = asyncio.get_running_loop()
            ended = await loop.run_in_executor(None, isolation.end_learner_processes, uid)
            removed = await loop.run_in_executor(None, isolation.remove_shared_temp_files, uid)
            if ended or removed:
                self.log.info("Ended %d more process(es) of %s; removed their files %s", len(ended), self.user.name,
                              ", ".join(removed) or "(none)")
            if self.cgroup:
                with contextlib.suppress(OSError):  # still busy: the next start reuses it
                    self.cgroup.rmdir()

    return CourseSpawner


@functools.cache
def authenticator_classes() -> tuple[type, type]:
    """(separate system users, one shared account): the course's sign-in, plus as root a system user per learner."""
    from jupyterhub.auth import LocalAuthenticator
    from traitlets import Unicode

    native = course_auth.course_authenticator_class()

    class CourseAuthenticator(native, LocalAuthenticator):  # type: ignore[misc, valid-type]
        """Run as root: each learner becomes a system user (home mode 0700) on first login."""

        home_base = Unicode("/home", config=True, help="Where learners' homes are created.")

        def add_system_user(self, user: Any) -> None:
            if user.name in self.retired():
                raise RuntimeError(f"{user.name} was removed with make hub-remove-learner; the name is retired")
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


def _workspace_hook(s: Settings, python: str):
    """The pre-spawn hook: the learner's home filesystem (as root), then their learner edition in ~/workspace."""

    async def prepare_learner_workspace(spawner: Any) -> None:
        name = spawner.user.name
        if s.as_root:
            from jupyterhub.spawner import set_user_setuid

            home, become = pwd.getpwnam(name).pw_dir, set_user_setuid(name)
            if parse_size(s.disk_max):  # before anything is written there
                await asyncio.get_running_loop().run_in_executor(None, isolation.mount_home, Path(home),
                                                                 s.home_images / f"{name}.img", parse_size(s.disk_max))
        else:
            home, become = f"{s.state}/homes/{name}", None
            Path(home).mkdir(parents=True, exist_ok=True)
        env = {**learner_environment(s, python), **isolation.private_environment(home), "HOME": home, "USER": name}

        def preexec() -> None:
            if become is not None:
                become()
            isolation.make_private_dirs(env)

        process = await asyncio.create_subprocess_exec(
            python, "-m", "course_utils.machinery.workspace", f"{home}/workspace", "--lang", s.lang, cwd=home, env=env,
            preexec_fn=preexec, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            output, _ = await asyncio.wait_for(process.communicate(), timeout=180)
        except TimeoutError:
            process.kill()
            raise RuntimeError(f"Preparing {name}'s workspace took more than 180 s") from None
        text = output.decode(errors="replace").strip()
        if process.returncode:
            raise RuntimeError(f"Could not prepare {name}'s workspace: {text[-2000:]}")
        spawner.log.info("Workspace of %s: %s", name, text.splitlines()[-1] if text else "ready")

    return prepare_learner_workspace


def configure(c: Any, s: Settings) -> str:
    """Fill the JupyterHub config ``c`` for the course; returns the note on which Python learners run."""
    from . import course_proxy, dashboard

    s.check()
    check_isolation(s)
    course_proxy.redact_logs()  # this process is the hub: no token in its log either (JupyterHub misses some)
    prepare_state(s)
    if s.as_root and parse_size(s.disk_max):
        isolation.mount_learner_homes(s.home_images)
    if s.learner_python:
        python, note = s.learner_python, f"learners run {s.learner_python} (HUB_LEARNER_PYTHON)"
    elif s.as_root:
        hidden = bool(parse_size(s.shm_max)) and isolation.under_private_tmp(VENV_PYTHON.parent.parent)
        try:
            python, note = learner_python(s.learner_env_dir(), hidden)
        except RuntimeError as error:
            raise UnsafeHub(str(error)) from None
    else:
        python, note = str(VENV_PYTHON), "not root: all learners share this account"

    c.JupyterHub.bind_url = f"http://{s.ip}:{s.port}"
    # One origin per learner (NAME.localhost:PORT): a learner's page never runs with another's cookies.
    c.JupyterHub.subdomain_host = s.hub_url
    c.JupyterHub.hub_ip = LOOPBACK
    c.JupyterHub.hub_port = s.hub_port or free_port()
    c.ConfigurableHTTPProxy.api_url = f"http://{LOOPBACK}:{s.proxy_api_port or free_port()}"
    # The pure-Python proxy (course_proxy.py). It gives up on a request after 20 s by default: the spawn page's
    # progress stream lasts as long as a spawn, so allow 5 minutes.
    c.ConfigurableHTTPProxy.command = [str(VENV_PYTHON), "-m", "tools.hub.course_proxy", "--proxy-timeout=300000"]
    c.JupyterHub.db_url = f"sqlite:///{s.private / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(s.private / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(s.private / "jupyterhub.pid")
    c.JupyterHub.cleanup_servers = True  # Ctrl-C stops every learner's server (and so their kernels)
    c.JupyterHub.cleanup_proxy = True
    c.JupyterHub.template_vars = {"announcement_login": "PyTorch Hooks, hands-on: sign up, then wait for the "
                                  "instructor to approve you."}

    separate_users, shared_account = authenticator_classes()
    # The course's sign-in, as the deploy/ recipes run it (tools/hub/course_auth.py).
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
        c.SimpleLocalProcessSpawner.home_dir_template = f"{s.state}/homes/{{username}}"
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
    c.Spawner.args = ["--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", *KERNELS_ON_UNIX_SOCKETS,
                      *KERNELS_WITHOUT_DEBUGGER, *NO_NBGITPULLER]

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
    dashboard.configure_dashboard(c, python=str(VENV_PYTHON), port=free_port(), admins={s.admin},
                                  state=Path(s.state), pythonpath=str(ROOT))
    return note
