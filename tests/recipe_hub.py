"""JupyterHub's own ``MockHub`` (jupyterhub.tests.mocking) with a ``deploy/`` recipe's settings, for
tests/test_deploy_configs.py.

TLJH (a systemd VM) and Z2JH (Kubernetes) do not run here; what they do with the recipe's files is small, read from
their source: TLJH (tljh/configurer.py) maps ``config.yaml``'s ``auth``, ``users.admin`` and ``limits`` onto ``c`` and
loads every ``jupyterhub_config.d/*.py``; the Z2JH chart (files/hub/jupyterhub_config.py) puts ``hub.extraFiles`` on
the path, passes ``hub.config`` through and runs each ``hub.extraConfig`` in key order. :func:`tljh_config` and
:func:`z2jh_config` do that; :func:`recipe_hub` runs MockHub with it in a thread, on 127.0.0.1, with a local spawner,
no proxy (the tests talk to the hub's own port) and the local host for REPLACE-ME.

Usage::

    with recipe_hub("z2jh", tmp_path) as hub:
        hub.client("127.0.0.2").log_in("instructor", hub.instructor_password())
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import unittest.mock
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hub_client import HubClient, read_db

from tools.hub.course_hub import free_port

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
    c.JupyterHub.services = [{"name": "cull-idle", "admin": True,
                              "command": ["python", "-m", "jupyterhub_idle_culler"]}]
    source = DEPLOY / "tljh" / "jupyterhub_config.d" / "course.py"
    with unittest.mock.patch.dict(os.environ, PYTORCH_HOOKS_COURSE=str(course), TLJH_INSTALL_PREFIX=install_prefix):
        exec(compile(source.read_text(), str(source), "exec"), {"get_config": lambda: c})
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
        exec(compile(code.replace(Z2JH_STATE, state), f"hub.extraConfig.{key}", "exec"),
             {"c": c, "get_config": lambda: c})
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
    c.JupyterHub.hub_ip, c.JupyterHub.hub_port = "127.0.0.1", port
    c.JupyterHub.bind_url = f"http://127.0.0.1:{port}/"
    c.JupyterHub.subdomain_host = f"http://localhost:{port}"  # the recipe's https://REPLACE-ME.example.org
    c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
    # the TLJH dashboard runs TLJH's user environment's Python (/opt/tljh/user), which is not here
    c.JupyterHub.services = []
    c.JupyterHub.load_roles = []


@dataclass
class RunningHub:
    """A recipe's hub, running: its state folder, its own port's URL, and the ``Host`` a browser would send."""

    app: Any
    state: Path
    url: str
    host: str

    def client(self, source: str = "127.0.0.1") -> HubClient:
        return HubClient(self.url, host=self.host, source=source)

    def instructor_password(self) -> str:
        return (self.state / "instructor-password").read_text().strip()

    def db(self, query: str, *args: object) -> list[tuple]:
        return read_db(self.app.db_url.removeprefix("sqlite:///"), query, *args)


@contextlib.contextmanager
def recipe_hub(recipe: str, base: Path, overrides: Callable[[Any], None] = lambda c: None) -> Iterator[RunningHub]:
    """MockHub with ``recipe``'s settings (``tljh`` or ``z2jh``), then ``overrides(c)`` (a smaller block for a quicker
    test, say), its files under ``base``, running in a thread until the ``with`` block ends."""
    from jupyterhub.tests.mocking import MockHub
    from traitlets.config import Config

    if recipe not in RECIPES:
        raise ValueError(f"recipe is one of {RECIPES}")
    # the hub's state folder: TLJH's /opt/tljh/state, Z2JH's /srv/jupyterhub
    state = base / "tljh" / "state" if recipe == "tljh" else base / "srv-jupyterhub"
    state.mkdir(parents=True, mode=0o700)
    c = tljh_config(Config(), str(state.parent)) if recipe == "tljh" else z2jh_config(Config(), str(state))
    overrides(c)
    port = free_port()
    run_here(c, state, port)
    loop = asyncio.new_event_loop()
    app = MockHub(config=c)
    loop.run_until_complete(app.initialize([]))
    loop.run_until_complete(app.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield RunningHub(app, state, f"http://127.0.0.1:{port}", f"localhost:{port}")
    finally:
        asyncio.run_coroutine_threadsafe(app.stop(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()
