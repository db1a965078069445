"""JupyterHub started here with a ``deploy/`` recipe's own settings, for tests/test_deploy_configs.py.

The Littlest JupyterHub needs a VM with systemd and Zero to JupyterHub a Kubernetes cluster; neither runs here. What
they do with the recipe's files is small, and read from their source:

- TLJH (tljh/jupyterhub_config.py, tljh/configurer.py) applies ``config.yaml``: ``auth.type`` becomes
  ``JupyterHub.authenticator_class``, each ``auth.<Class>.<key>`` becomes ``c.<Class>.<key>``, ``users.admin``
  ``Authenticator.admin_users``, ``limits`` the spawner's limits; then it loads every ``jupyterhub_config.d/*.py``
  into the same configuration (the hub runs in ``/opt/tljh/state``, ``TLJH_INSTALL_PREFIX=/opt/tljh``).
- The Z2JH chart (jupyterhub/files/hub/jupyterhub_config.py) puts its configuration folder, where it mounts
  ``hub.extraFiles``, on the Python path, passes ``hub.config`` through section by section, then runs each
  ``hub.extraConfig`` in key order.

:func:`tljh_config` and :func:`z2jh_config` do exactly that. :class:`RecipeHub` starts a real JupyterHub with it on
127.0.0.1, with a local spawner in place of SystemdSpawner or KubeSpawner, no proxy (the tests talk to the hub's own
port) and the site's REPLACE-ME host replaced by the local one; stopped on exit. ``COURSE_RECIPE_HUB_PYTHON`` names
another Python to run the hub (one with the JupyterHub that TLJH or the chart ships, say); the default is this one.

Usage::

    with RecipeHub("z2jh", tmp_path) as hub:
        hub.start()
        hub.client().log_in("instructor", hub.instructor_password())
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
TLJH_STATE = "/opt/tljh/state"
Z2JH_STATE = "/srv/jupyterhub"
RECIPES = ("tljh", "z2jh")


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def tljh_config(c: Any, install_prefix: str = "/opt/tljh", course: Path = ROOT) -> Any:
    """``c`` as TLJH builds it from deploy/tljh/config.yaml and jupyterhub_config.d/course.py (see above), with the
    course's clone at ``course`` and TLJH installed under ``install_prefix``."""
    config = load(DEPLOY / "tljh" / "config.yaml")
    auth = config["auth"]
    c.JupyterHub.authenticator_class = auth["type"]
    for section, values in auth.items():
        if section != "type":
            for key, value in values.items():
                if value is not None:
                    setattr(c[section], key, value)
    users = config.get("users", {})
    c.Authenticator.allowed_users = set(users.get("allowed", []))
    c.Authenticator.blocked_users = set(users.get("banned", []))
    c.Authenticator.admin_users = set(users.get("admin", []))
    c.Spawner.mem_limit = config.get("limits", {}).get("memory")
    c.Spawner.cpu_limit = config.get("limits", {}).get("cpu")
    c.SystemdSpawner.username_template = "jupyter-{USERNAME}"
    c.JupyterHub.services = [{"name": "cull-idle", "admin": True, "command": ["python", "-m", "jupyterhub_idle_culler"]}]
    environment = {"PYTORCH_HOOKS_COURSE": str(course), "TLJH_INSTALL_PREFIX": install_prefix}
    saved = {key: os.environ.get(key) for key in environment}
    os.environ.update(environment)
    try:
        source = DEPLOY / "tljh" / "jupyterhub_config.d" / "course.py"
        exec(compile(source.read_text(), str(source), "exec"), {"get_config": lambda: c})
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return c


def z2jh_config(c: Any, state: str = Z2JH_STATE) -> Any:
    """``c`` as the Z2JH chart builds it from deploy/z2jh/values.yaml (see above), the files given with
    ``--set-file`` being the course's own (checked by the tests), and the hub's volume at ``state``."""
    hub = load(DEPLOY / "z2jh" / "values.yaml")["hub"]
    here = str(ROOT / "tools" / "hub")  # the chart's configuration folder, where --set-file mounted course_auth.py
    if here not in sys.path:
        sys.path.insert(0, here)
    for section, values_ in hub.get("config", {}).items():
        c[section].update(values_)
    for key, code in sorted(hub.get("extraConfig", {}).items()):
        assert code.count(Z2JH_STATE) <= 1, code
        exec(compile(code.replace(Z2JH_STATE, state), f"hub.extraConfig.{key}", "exec"), {"c": c, "get_config": lambda: c})
    return c


def no_proxy() -> type:
    """A proxy that routes nothing: the tests send their requests to the hub's own port."""
    from jupyterhub.proxy import Proxy

    class NoProxy(Proxy):
        should_start = False

        async def add_route(self, routespec: str, target: str, data: dict) -> None:
            return None

        async def delete_route(self, routespec: str) -> None:
            return None

        async def get_all_routes(self) -> dict:
            return {}

    return NoProxy


def run_here(c: Any, state: Path, port: int) -> None:
    """The local stand-ins: ports, files, spawner and proxy of a hub on 127.0.0.1 (nothing the sign-in reads)."""
    c.JupyterHub.spawner_class = "jupyterhub.spawner.SimpleLocalProcessSpawner"  # for SystemdSpawner / KubeSpawner
    c.SimpleLocalProcessSpawner.home_dir_template = str(state / "homes" / "{username}")
    c.JupyterHub.proxy_class = no_proxy()
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = port
    c.JupyterHub.subdomain_host = f"http://localhost:{port}"  # the recipe's https://REPLACE-ME.example.org
    c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
    # the TLJH dashboard runs TLJH's user environment's Python (/opt/tljh/user), which is not here
    c.JupyterHub.services = []
    c.JupyterHub.load_roles = []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


CONFIG = """# written by tests/recipe_hub.py: the {recipe} recipe's settings, then the local stand-ins
import sys
sys.path.insert(0, {tests!r})
import recipe_hub
from pathlib import Path
c = get_config()
recipe_hub.{recipe}_config(c, {where!r})
for line in {overrides!r}:
    exec(line)
recipe_hub.run_here(c, Path({state!r}), {port})
"""


class RecipeHub:
    """JupyterHub with ``recipe``'s settings (``tljh`` or ``z2jh``) on 127.0.0.1, its files under ``base``.
    ``overrides``: config lines run after the recipe's (e.g. a smaller block for a quicker test)."""

    def __init__(self, recipe: str, base: Path, overrides: tuple[str, ...] = ()) -> None:
        if recipe not in RECIPES:
            raise ValueError(f"recipe is one of {RECIPES}")
        self.recipe, self.base, self.port = recipe, Path(base), free_port()
        # the hub's state folder and working directory: TLJH's /opt/tljh/state, Z2JH's /srv/jupyterhub
        self.state = self.base / "tljh" / "state" if recipe == "tljh" else self.base / "srv-jupyterhub"
        self.state.mkdir(parents=True, mode=0o700)
        where = str(self.state.parent) if recipe == "tljh" else str(self.state)  # TLJH_INSTALL_PREFIX, or the state
        self.config = self.base / "jupyterhub_config.py"
        self.config.write_text(CONFIG.format(recipe=recipe, tests=str(Path(__file__).resolve().parent), where=where,
                                             overrides=tuple(overrides), state=str(self.state), port=self.port))
        self.log_path = self.base / "hub.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{self.port}"
        self.host = f"localhost:{self.port}"

    def start(self, timeout: float = 90) -> None:
        env = dict(os.environ)
        with open(self.log_path, "wb") as log:
            python = os.environ.get("COURSE_RECIPE_HUB_PYTHON") or sys.executable
            self.process = subprocess.Popen([python, "-m", "jupyterhub", "-f", str(self.config)],
                                            cwd=self.state, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        from hub_client import wait_until_healthy

        if not wait_until_healthy(self.url, self.process, timeout):
            raise RuntimeError(f"the {self.recipe} hub did not start (exit {self.process.poll()}):\n"
                               f"{self.log()[-4000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def client(self, source: str = "127.0.0.1") -> Any:
        from hub_client import HubClient

        return HubClient(self.url, host=self.host, source=source)

    def instructor_password(self) -> str:
        return (self.state / "instructor-password").read_text().strip()

    def db(self, query: str, *args: object) -> list[tuple]:
        import sqlite3

        with sqlite3.connect(f"file:{self.state / 'jupyterhub.sqlite'}?mode=ro", uri=True) as db:
            return db.execute(query, args).fetchall()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def __enter__(self) -> RecipeHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
