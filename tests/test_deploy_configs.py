"""The classroom's configuration files: make hub's settings and safety rules, Binder, TLJH and Zero to JupyterHub.

What can run here runs (the hub configuration built, each recipe's sign-in on JupyterHub's MockHub attacked, a
learner's server with each recipe's arguments sent a classmate's link, Binder's postBuild, each recipe's pull of a
published learner edition); what cannot (repo2docker, Docker, systemd, Kubernetes) is parsed and its keys checked.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import logging
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import recipe_hub  # tests/
import requests
from hub_client import flood_as, wait_until_healthy
from recipe_hub import load
from traitlets.config import Config

from course_utils.machinery.pins import parse_pins, read_pins
from tools.hub import course_auth, course_hub, course_proxy, dashboard, isolation, publish_learner_edition

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
BINDER = ROOT / "binder"
GUIDE = (ROOT / "notebooks" / "instructor_guide.md").read_text(encoding="utf-8")
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces, cgroups, mounts and accounts need root")

# nativeauthenticator 1.3.0 calls locale.getdefaultlocale() at import (deprecated in Python 3.11): not ours to fix
pytestmark = [pytest.mark.filterwarnings("ignore:'locale.getdefaultlocale' is deprecated:DeprecationWarning",
                                         "ignore:The shared database session:DeprecationWarning"),
              pytest.mark.reads("requirements.txt", "environment.yml", "binder/*", "deploy/*")]  # make check


# --- make hub: never an open hub, never learners exposed ---------------------------------------------------------

def test_make_hub_settings_have_their_defaults_and_refuse_what_would_expose_learners() -> None:
    defaults = course_hub.Settings.from_env({})
    assert (defaults.ip, defaults.allowed_failed_logins, defaults.failed_logins_per_address,
            defaults.signups_per_address) == ("127.0.0.1", 10, 20, 30)
    assert (defaults.shm_max, defaults.memory_max, defaults.disk_max) == ("512M", "4G", "2G")
    assert course_hub.Settings.from_env({"HUB_ALLOWED_FAILED_LOGINS": "3", "HUB_DISK_MAX": "0",
                                         "HUB_LANG": "ZH"}).allowed_failed_logins == 3
    for name, value, message in (("HUB_ALLOWED_FAILED_LOGINS", "0", "less than 1"), ("HUB_THREADS", "0", "less than"),
                                 ("HUB_FAILED_LOGINS_PER_ADDRESS", "0", "less than 1"), ("HUB_PORT", "x", "int"),
                                 ("HUB_SIGNUPS_PER_ADDRESS", "0", "less than 1"), ("HUB_MEMORY_MAX", "lots", "2.5G"),
                                 ("HUB_LANG", "fr", "not a language"), ("HUB_ADMIN", "root", "instructor name"),
                                 ("HUB_PUBLIC_URL", "http://192.168.1.10:8000", "no subdomains")):
        with pytest.raises(course_hub.UnsafeHub, match=f"{name}={value!r}: .*{message}"):
            course_hub.Settings.from_env({name: value})
    course_hub.Settings(as_root=False).check()  # loopback, not root: allowed (one shared account, said plainly)
    for changes, message in (({"ip": "0.0.0.0", "as_root": False, "plain_http": True}, "share this account"),
                             ({"ip": "192.168.1.10", "as_root": True, "plain_http": True}, "own origin"),
                             ({"ip": "192.168.1.10", "as_root": True, "public_url": "http://hub.lan:8000"}, "TLS"),
                             ({"as_root": True, "home_base": "/tmp/homes"}, "replaces with one of its own")):
        with pytest.raises(course_hub.UnsafeHub, match=message):
            course_hub.Settings(**changes).check()
    said = course_hub.Settings(ip="192.168.1.10", as_root=True, plain_http=True, public_url="http://hub.lan:8000")
    said.check()
    assert isolation.parse_size("2.5G") == int(2.5 * 2**30) and isolation.parse_size("800M") == 800 * 2**20


def built_config(tmp_path: Path, **settings: Any) -> tuple[Config, course_hub.Settings]:
    """make hub's configuration with ``settings``, its state under ``tmp_path``."""
    c, s = Config(), course_hub.Settings(state=str(tmp_path / "state"), learner_python=sys.executable, **settings)
    course_hub.configure(c, s)
    return c, s


@pytest.mark.parametrize("as_root", [pytest.param(True, marks=ROOT_ONLY), False])
def test_make_hub_configuration(tmp_path: Path, as_root: bool) -> None:
    from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner
    from nativeauthenticator import NativeAuthenticator

    c, s = built_config(tmp_path, as_root=as_root)
    assert c.JupyterHub.bind_url == "http://127.0.0.1:8000" and c.JupyterHub.hub_ip == "127.0.0.1"
    assert issubclass(c.JupyterHub.authenticator_class, NativeAuthenticator)
    assert c.NativeAuthenticator.open_signup is False and c.Authenticator.admin_users == {"instructor"}
    assert c.JupyterHub.cleanup_servers is True and c.JupyterHub.cleanup_proxy is True
    assert c.Spawner.environment["OMP_NUM_THREADS"] == "1" and c.Spawner.notebook_dir == "~/workspace"
    assert callable(c.Spawner.pre_spawn_hook)
    culler = [service for service in c.JupyterHub.services if service["name"] == "idle-culler"]
    assert culler and "jupyterhub_idle_culler" in culler[0]["command"] and "--timeout=3600" in culler[0]["command"]
    assert {"delete:servers", "read:users:activity"} <= set(c.JupyterHub.load_roles[0]["scopes"])
    assert c.JupyterHub.db_url.startswith(f"sqlite:///{s.private}")  # the state is in one folder
    assert (s.private.stat().st_mode & 0o077) == 0 and oct(s.password_file.stat().st_mode & 0o777) == "0o600"
    assert len(course_auth.instructor_password(s.password_file)) >= 12  # made once, kept
    assert issubclass(c.JupyterHub.spawner_class, LocalProcessSpawner if as_root else SimpleLocalProcessSpawner)
    assert c.JupyterHub.subdomain_host == "http://localhost:8000"  # every learner's server: its own origin
    assert c.ConfigurableHTTPProxy.command[1:3] == ["-m", "tools.hub.course_proxy"]
    # issues 34.2, 41.1: kernels on unix sockets, with a path that fits; no debugger; no /git-pull page
    assert {*course_hub.KERNELS_ON_UNIX_SOCKETS, *course_hub.KERNELS_WITHOUT_DEBUGGER,
            *course_hub.NO_NBGITPULLER} <= set(c.Spawner.args)
    runtime = isolation.private_environment("/home/" + "n" * 32)["JUPYTER_RUNTIME_DIR"]
    assert len(runtime) + len(isolation.KERNEL_SOCKET_NAME) <= isolation.SOCKET_PATH_MAX  # the longest name fits
    assert all(v.startswith("/home/ann/") for v in isolation.private_environment("/home/ann").values())
    course_hub.refuse_unsafe(c, s)  # the configuration as built is accepted; what an extra configuration may not do:
    for section, key, value, message in (("JupyterHub", "subdomain_host", "", "origin"),
                                         ("NativeAuthenticator", "open_signup", True, "open hub"),
                                         ("JupyterHub", "authenticator_class", "dummy", "anybody")):
        changed = copy.deepcopy(c)
        changed[section][key] = value
        with pytest.raises(course_hub.UnsafeHub, match=message):
            course_hub.refuse_unsafe(changed, s)


def test_the_proxy_redacts_credentials_from_urls_in_its_log() -> None:
    assert course_proxy.redact("404 GET /user/a/x?token=abc123&y=1 (127.0.0.1)") == \
        "404 GET /user/a/x?token=[secret]&y=1 (127.0.0.1)"
    assert "s3cr3t" not in course_proxy.redact("/hub/api/oauth2/authorize?code=s3cr3t&state=s3cr3t&_xsrf=s3cr3t")
    assert course_proxy.redact("/hub/login?next=%2Fuser%2Fa%3Ftoken%3Ds3cr3t%26x%3D1") == \
        "/hub/login?next=%2Fuser%2Fa%3Ftoken%3D[secret]%26x%3D1"  # inside an encoded URL: JupyterHub misses it


@ROOT_ONLY
@pytest.mark.hub
def test_a_learners_server_is_isolated_as_the_spawner_isolates_it(tmp_path: Path) -> None:
    """Issues 34.4, 41.4, 41.5's mechanisms, as the spawner runs them before a learner's server (the attacks on a real
    hub: tests/browser/test_hub.py): a child with private temporary folders of 1 MiB cannot write 2 MiB to /tmp, its
    files there are not the machine's, its IPC namespace is its own (System V segments up to 1 MiB), and it runs in
    the memory cgroup it was given; a home of 16 MiB of its own refuses 20 MiB, keeps what it held, and mounts again
    after an unmount."""
    name = f"course-isolation-test-{os.getpid()}"
    code = (f"import ctypes, os\nfor place in ('/dev/shm', '/tmp', '/run/lock'):\n    open(f'{{place}}/{name}', 'w')\n"
            f"try:\n    open('/tmp/{name}-big', 'wb').write(b'0' * (2 << 20))\nexcept OSError as error:\n"
            "    print(error.strerror)\nlibc = ctypes.CDLL(None)\n"
            "print(libc.shmget(0, 2 << 20, 0o1600), libc.shmget(0, 1 << 20, 0o1600))\n"
            "print(os.readlink('/proc/self/ns/ipc'))\nprint(open('/proc/self/cgroup').read())")
    isolation._libc()
    group = isolation.memory_cgroup(name, 256 << 20)
    try:
        # the interpreter itself, not the venv's link to it: the private /tmp hides a checkout that lives in /tmp
        result = subprocess.run([os.path.realpath(sys.executable), "-c", code], capture_output=True, text=True,
                                timeout=60,
                                preexec_fn=lambda: isolation.isolate_server(1 << 20, str(group)))
    finally:
        group.rmdir()
    lines = result.stdout.split("\n")
    assert lines[0] == "No space left on device" and lines[1].split()[0] == "-1", result.stdout + result.stderr
    assert int(lines[1].split()[1]) >= 0 and lines[2] != os.readlink("/proc/self/ns/ipc"), result.stdout
    assert f"/{name}\n" in result.stdout, "not in its memory cgroup"
    assert not [place for place in ("/dev/shm", "/tmp", "/run/lock") if Path(place, name).exists()]
    home, image = tmp_path / "home", tmp_path / "home.img"
    home.mkdir()
    (home / "kept.txt").write_text("before")
    for _ in range(2):  # made, then mounted again
        assert isolation.mount_home(home, image, 16 << 20) and (home / "kept.txt").read_text() == "before"
        try:
            with pytest.raises(OSError, match="No space left"):
                (home / "big").write_bytes(bytes(20 << 20))
        finally:
            subprocess.run(["umount", str(home)], check=True)
        assert not (home / "kept.txt").exists(), "the home's files stayed on the machine's disk too"
    course_hub.check_isolation(course_hub.Settings(as_root=True))  # make hub's start-up probe passes here
    course_hub.check_isolation(course_hub.Settings(as_root=True, shm_max="0", memory_max="0", disk_max="0"))  # all off


@ROOT_ONLY
def test_a_learners_files_in_the_shared_temporary_folders_are_removed_and_nobody_elses(tmp_path: Path) -> None:
    uid = 64123  # no account needs to exist: files are removed by owner
    places = [tmp_path / "tmp", tmp_path / "shm"]
    for place in places:
        (place / "folder").mkdir(parents=True)
        for name in ("theirs", "folder/inside", "mine"):
            (place / name).write_text("x")
        (place / "link").symlink_to(tmp_path)
        for name in ("theirs", "folder", "link"):
            os.lchown(place / name, uid, uid)
    removed = isolation.remove_shared_temp_files(uid, tuple(str(place) for place in places))
    assert sorted(Path(path).name for path in removed) == ["folder", "folder", "link", "link", "theirs", "theirs"]
    assert all(sorted(p.name for p in place.iterdir()) == ["mine"] for place in places) and tmp_path.exists()
    with pytest.raises(ValueError):
        isolation.remove_shared_temp_files(0)


def test_make_hub_refuses_a_port_in_use_with_a_clear_message_and_keeps_its_state_private(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        env = {**os.environ, "HUB_PORT": str(port), "HUB_STATE": str(tmp_path / "state")}
        result = subprocess.run([sys.executable, "-m", "tools.hub.serve"], env=env, capture_output=True, text=True,
                                timeout=60, cwd=ROOT)
    assert result.returncode == 2 and f"HUB_PORT={port} is in use" in result.stderr, result.stderr
    assert not (tmp_path / "state").exists(), "nothing is made before the refusal"
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", ".hub/private/jupyterhub.sqlite"])
    assert ignored.returncode == 0, "add /.hub/ to .gitignore"


def test_make_lab_and_every_learners_server_turn_off_the_git_pull_page() -> None:
    """Issue 41.1: nbgitpuller's /git-pull page is off wherever the course starts a server for a learner (make hub's
    servers, make lab's; the recipes: tests below). The attack on a real hub: tests/browser/test_hub.py."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert f"NO_NBGITPULLER = {course_hub.NO_NBGITPULLER[0]}" in makefile
    labs = [line for line in makefile.splitlines() if "/bin/jupyter lab " in line]
    assert len(labs) == 2 and all("$(NO_NBGITPULLER)" in line for line in labs), labs


def test_a_room_in_chinese_gets_the_chinese_workspace_and_messages(tmp_path: Path) -> None:
    c, _ = built_config(tmp_path, as_root=False, lang="zh")
    assert c.Spawner.environment["COURSE_LANG"] == "zh"
    spawner = SimpleNamespace(user=SimpleNamespace(name="ann"), log=logging.getLogger("test"))
    asyncio.run(c.Spawner.pre_spawn_hook(spawner))
    delivered = json.loads((tmp_path / "state" / "homes" / "ann" / "workspace" / "01_tensor_hooks.ipynb").read_text())
    assert delivered["metadata"].get("language_edition", {}).get("lang") == "zh", (
        "the learner got the English workspace")


# --- Binder ---------------------------------------------------------------------------------------------------------

def test_binder_pins_are_the_course_pins_with_cpu_only_torch() -> None:
    lines = [line.strip() for line in (BINDER / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.strip().startswith("#")]
    assert [line for line in lines if line.startswith("-")] == ["--extra-index-url https://download.pytorch.org/whl/cpu"]
    assert parse_pins([re.sub(r"\+cpu$", "", line) for line in lines if not line.startswith("-")]) == read_pins()
    assert "torch==2.14.1+cpu" in lines and f"torchvision=={read_pins()['torchvision']}+cpu" in lines
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
    assert not (BINDER / "environment.yml").exists(), "repo2docker would prefer it and pull the CUDA torch"


def test_binder_postbuild_is_strict_installs_course_utils_and_prepares_the_learner_edition(tmp_path: Path) -> None:
    script = BINDER / "postBuild"
    text = script.read_text()
    assert os.access(script, os.X_OK) and text.startswith("#!/bin/bash\n")
    commands = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert commands[0] == "set -euo pipefail", "set -e must come before any command"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    # Run it here, with a stand-in for pip (never install into the course's venv): pip's call is recorded.
    fake, calls = tmp_path / "bin", tmp_path / "pip-calls"
    fake.mkdir()
    (fake / "python").write_text(
        f'#!/bin/bash\nif [ "$1 $2" = "-m pip" ]; then echo "$@" >> {calls}; exit ${{FAKE_PIP_STATUS:-0}}; fi\n'
        f'exec {sys.executable} "$@"\n')
    (fake / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "HOME": str(tmp_path / "home")}
    result = subprocess.run([str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "install --no-deps --no-build-isolation --editable ." in calls.read_text()
    notebook = tmp_path / "home" / "workspace" / "01_tensor_hooks.ipynb"
    assert "YOUR CODE HERE" in notebook.read_text() and (tmp_path / "home" / "workspace" / "complete").is_dir()
    failing = subprocess.run([str(script)], cwd=ROOT, env={**env, "FAKE_PIP_STATUS": "1"}, capture_output=True)
    assert failing.returncode != 0, "a failed pip install must fail the build (set -e)"


# --- The Littlest JupyterHub ----------------------------------------------------------------------------------------

def tljh_config(monkeypatch: pytest.MonkeyPatch, course: Path = ROOT, prefix: str = "/opt/tljh"):  # type: ignore[no-untyped-def]
    """deploy/tljh/config.yaml and jupyterhub_config.d/course.py as TLJH applies them (tests/recipe_hub.py), with the
    course cloned at ``course``."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # course.py puts the clone on it
    return recipe_hub.tljh_config(Config(), install_prefix=prefix, course=course)


def test_tljh_recipe_has_its_keys_its_certificate_and_a_strict_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """config.yaml as the guide describes it (its own wildcard certificate, https.tls, never TLJH's Let's Encrypt),
    the start page the pull opens, one thread per kernel, make hub's limits, and an install script that stops on the
    first error and installs CPU-only torch; course.py refuses a missing clone."""
    config, values = load(DEPLOY / "tljh" / "config.yaml"), load(DEPLOY / "z2jh" / "values.yaml")
    assert config["auth"] == {"type": "tools.hub.course_auth.CourseNativeAuthenticator"} and config["users"]["admin"]
    assert config["services"]["cull"]["enabled"] is True and config["services"]["cull"]["timeout"] > 0
    assert config["user_environment"]["default_app"] == "jupyterlab" and config["https"]["enabled"] is True
    assert str(config["limits"]["cpu"]) == str(values["singleuser"]["cpu"]["limit"])
    assert config["limits"]["memory"] == values["singleuser"]["memory"]["limit"]  # MemoryMax counts /dev/shm
    https = config["https"]
    recipe = GUIDE.split("**The Littlest JupyterHub, one cloud VM", 1)[1].split("\n\n", 1)[0]
    assert https["tls"]["cert"] and https["tls"]["key"] and "letsencrypt" not in https
    assert "`https.tls`" in recipe and https["tls"]["cert"] in recipe and "wildcard" in recipe
    assert "DNS challenge" in recipe and not re.search(r"gets a Let's Encrypt certificate", recipe)
    script = DEPLOY / "tljh" / "install-course.sh"
    assert os.access(script, os.X_OK) and "set -euo pipefail" in script.read_text()
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert "--index-url https://download.pytorch.org/whl/cpu" in script.read_text()
    c = tljh_config(monkeypatch)
    assert c.Spawner.environment.get_value({})["OMP_NUM_THREADS"] == "1"
    assert c.Spawner.default_url == "/lab/tree/pytorch-hooks-learner/00_start_here.ipynb"  # pulled at start (below)
    assert c.Spawner.cmd[-2:] == ["https://github.com/REPLACE-ME/pytorch-hooks-learner", "pytorch-hooks-learner"]
    assert c.JupyterHub.subdomain_host.startswith("https://"), "one origin per learner, behind TLS"
    with pytest.raises(RuntimeError, match="install-course.sh"):
        tljh_config(monkeypatch, course=ROOT / "not-cloned")


def test_tljh_runs_the_dashboard_and_gives_each_learner_private_tmp_kernel_sockets_and_make_hubs_limits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard for admins on every learner's record; issues 34.2, .4, .5, .6 and 41.4, .5, .8 on TLJH (systemd
    cannot run here: the settings SystemdSpawner turns into unit properties are checked, against
    jupyterhub/systemdspawner's source and systemd's): /tmp, /var/tmp and /run/lock of its own, in memory
    (TemporaryFileSystem, counted in MemoryMax), /tmp holding the runtime folder, so kernels listen on unix sockets
    nobody else can reach; make hub's process limit (TasksMax); System V memory of its own (PrivateIPC) and its
    /dev/shm files removed when the server stops (RemoveIPC)."""
    c = tljh_config(monkeypatch)
    services = {service["name"]: service for service in c.JupyterHub.services}
    assert set(services) == {"cull-idle", "dashboard"}, "TLJH's own services are kept"
    service, env = services["dashboard"], services["dashboard"]["environment"]
    user_env = re.search(r"USER_ENV=\$\{USER_ENV:-(\S+)\}", (DEPLOY / "tljh" / "install-course.sh").read_text())[1]
    assert service["command"] == [f"{user_env}/bin/python", "-m", "tools.hub.dashboard"]
    assert service["url"].startswith("http://127.0.0.1:") and env["PYTHONPATH"] == str(ROOT)
    assert env["COURSE_DASHBOARD_ADMINS"] == "instructor" and env["COURSE_DASHBOARD_SYSTEM_USERS"] == "tljh"
    assert "COURSE_HUB_STATE" not in env  # TLJH's hub runs as root: homes come from the system users
    # the record the dashboard reads is the one a learner's checks write in the folder nbgitpuller pulled
    assert env["COURSE_DASHBOARD_RECORD"] == f"{c.Spawner.cmd[-1]}/.course-progress.jsonl"
    (role,) = c.JupyterHub.load_roles
    assert role["services"] == ["dashboard"] and not any(scope.startswith("access:") for scope in role["scopes"])
    assert dashboard.tljh_system_username("ada") == "jupyter-ada"  # the system user TLJH makes for learner ada
    assert c.SystemdSpawner.isolate_tmp is False  # PrivateTmp's /tmp would be on the VM's disk, past the home's budget
    properties = c.SystemdSpawner.unit_extra_properties
    assert properties == {"TasksMax": str(course_hub.Settings().tasks_max), "RemoveIPC": "yes", "PrivateIPC": "yes",
                          "TemporaryFileSystem": "/tmp:mode=1777 /var/tmp:mode=1777 /run/lock:mode=1777"}
    assert all(isinstance(value, str) and "{" not in value for value in properties.values())  # _expand_user_vars
    assert {*course_hub.KERNELS_ON_UNIX_SOCKETS, *course_hub.KERNELS_WITHOUT_DEBUGGER,
            *course_hub.NO_NBGITPULLER} <= set(c.Spawner.args.get_value([]))  # see test_hub's attacks
    runtime = c.Spawner.environment.get_value({})["JUPYTER_RUNTIME_DIR"]
    assert runtime.startswith("/tmp/") and len(runtime) + len(isolation.KERNEL_SOCKET_NAME) <= isolation.SOCKET_PATH_MAX


@ROOT_ONLY
@pytest.mark.hub
def test_tljh_gives_each_learner_a_home_of_its_own_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41.5 on TLJH: the recipe's pre-spawn hook, run as TLJH's hub runs it (root; TLJH's own ensure_user made
    the account, as tljh/user.py does: useradd --create-home), gives the learner's home a filesystem of DISK_MAX
    (16M here): the learner writing 20 MB there is refused, "No space left on device"."""
    homes = Path(tempfile.mkdtemp(prefix="course-tljh-homes-"))  # a folder the learner may pass through
    homes.chmod(0o755)
    stub = tmp_path / "stub" / "tljh"  # TLJH's tljh.user, as it is, with the homes in that folder
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("")
    (stub / "user.py").write_text("import pwd, subprocess\ndef ensure_user(name):\n    try:\n"
                                  "        pwd.getpwnam(name)\n"
                                  f"    except KeyError:\n        subprocess.check_call(['useradd', '--create-home', "
                                  f"'--base-dir', {str(homes)!r}, name])\n")
    monkeypatch.syspath_prepend(str(stub.parent))
    (tmp_path / "state").mkdir()
    hook = tljh_config(monkeypatch, prefix=str(tmp_path)).Spawner.pre_spawn_hook
    monkeypatch.setitem(hook.__globals__, "DISK_MAX", "16M")
    account = course_auth.tljh_system_username(name := f"t{os.getpid()}")
    try:
        asyncio.run(hook(SimpleNamespace(user=SimpleNamespace(name=name))))
        home = pwd.getpwnam(account).pw_dir
        assert os.path.ismount(home) and (tmp_path / "state" / "homes" / f"{account}.img").exists()
        written = subprocess.run(["runuser", "-u", account, "--", "dd", "if=/dev/zero", f"of={home}/big", "bs=1M",
                                  "count=20"], capture_output=True, text=True, timeout=60)
        assert written.returncode != 0 and "No space left on device" in written.stderr, written
    finally:
        subprocess.run(["umount", f"{homes}/{account}"], capture_output=True)
        subprocess.run(["userdel", "--remove", account], capture_output=True)
        shutil.rmtree(homes, ignore_errors=True)


# --- Zero to JupyterHub ---------------------------------------------------------------------------------------------

def test_z2jh_values_dockerfile_and_guide_agree_on_the_recipe() -> None:
    values = load(DEPLOY / "z2jh" / "values.yaml")
    hub, single = values["hub"]["config"], values["singleuser"]
    assert hub["JupyterHub"]["authenticator_class"] == "course_auth.CourseNativeAuthenticator"
    assert hub["JupyterHub"]["subdomain_host"].startswith("https://"), "one origin per learner, behind TLS"
    assert hub["KubeSpawner"]["args"] == list(course_hub.NO_NBGITPULLER)  # issue 41.1: no /git-pull page
    assert single["image"]["name"] and single["image"]["tag"] and single["extraEnv"]["OMP_NUM_THREADS"] == "1"
    assert 0 < float(single["cpu"]["guarantee"]) <= float(single["cpu"]["limit"])
    assert all(re.fullmatch(r"\d+(\.\d+)?G", single["memory"][key]) for key in ("limit", "guarantee"))
    assert single["storage"]["capacity"] and single["extraResource"]["limits"]["ephemeral-storage"]  # issue 41.5
    command = single["lifecycleHooks"]["postStart"]["exec"]["command"]
    assert command[0] == "gitpuller" and len(command) == 4
    assert single["defaultUrl"] == f"/lab/tree/{command[3]}/00_start_here.ipynb"
    assert values["cull"]["enabled"] is True and values["cull"]["timeout"] > 0
    assert values["proxy"]["https"]["enabled"] is True
    assert values["proxy"]["https"]["type"] == "secret" and values["proxy"]["https"]["secret"]["name"]
    assert "dashboard" not in json.dumps(values["hub"]), "a dashboard on Z2JH needs the homes readable: see the guide"
    seeing = GUIDE.split("### Seeing the room", 1)[1].split("\n### ", 1)[0]
    assert "Zero to JupyterHub" in seeing and "does not run" in seeing
    section = GUIDE.split("## Serving a room with JupyterHub", 1)[1]
    assert f"`cpu.limit: {single['cpu']['limit']}`" in section
    assert f"`memory.limit: {single['memory']['limit']}`" in section
    dockerfile = (DEPLOY / "singleuser" / "Dockerfile").read_text()
    assert re.search(r"^FROM \S+python-3\.11\s*$", dockerfile, re.MULTILINE) and "OMP_NUM_THREADS=1" in dockerfile
    assert "PIP_INDEX_URL=https://download.pytorch.org/whl/cpu" in dockerfile
    assert re.search(r"mamba env update --name base --file environment.yml", dockerfile)


# --- The recipes' sign-in, their pull, their link: the course's own, attacked ---------------------------------------

def test_the_recipes_load_the_course_sign_in_from_the_module_make_hub_uses(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Both recipes end with tools/hub/course_auth.py's authenticator and settings, the ones make hub runs: TLJH
    imports it from the course's clone, Z2JH mounts that very file (helm --set-file) beside its configuration.
    deploy/ holds no copy of it, nor of the approval page."""
    native = course_auth.course_authenticator_class()
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name, c, state in (("tljh", tljh_config(monkeypatch), recipe_hub.TLJH_STATE),
                           ("z2jh", recipe_hub.z2jh_config(Config()), recipe_hub.Z2JH_STATE)):
        made = c.JupyterHub.authenticator_class  # the module's class, as TLJH's package or Z2JH's mounted file
        assert (made.__qualname__, sys.modules[made.__module__].__file__) == (native.__qualname__, course_auth.__file__)
        assert c.JupyterHub.template_paths[0] == str(course_auth.TEMPLATES), name
        assert c.Authenticator.admin_users == {"instructor"}, name
        assert c.NativeAuthenticator.open_signup is False and c.NativeAuthenticator.allowed_failed_logins == 10, name
        assert c.CourseNativeAuthenticator.failed_logins_per_address == course_auth.FAILED_LOGINS_PER_ADDRESS
        assert c.CourseNativeAuthenticator.signups_per_address == course_auth.SIGNUPS_PER_ADDRESS, name
        assert c.CourseNativeAuthenticator.instructor_password_file == f"{state}/instructor-password", name
        assert c.CourseNativeAuthenticator.system_users == ("tljh" if name == "tljh" else ""), name
    # Z2JH: the mounted files are the course's own, given by the guide's helm command (and the values' header)
    extra = load(DEPLOY / "z2jh" / "values.yaml")["hub"]["extraFiles"]
    pattern = r"--set-file hub\.extraFiles\.([\w-]+)\.stringData=(\S+)"
    found = dict(re.findall(pattern, GUIDE))
    assert dict(re.findall(pattern, (DEPLOY / "z2jh" / "values.yaml").read_text(encoding="utf-8"))) == found
    files = {key: ROOT / value.rstrip("\\`") for key, value in found.items()}
    assert files == {"course-auth": Path(course_auth.__file__),
                     "course-approval-page": course_auth.TEMPLATES / "authorization-area.html"}
    for key, source in files.items():
        assert source.is_file() and Path(extra[key]["mountPath"]).name == source.name
        assert not any(k in extra[key] for k in ("stringData", "data", "binaryData")), "the content is --set-file's"
    assert Path(extra["course-auth"]["mountPath"]).parent == Path("/usr/local/etc/jupyterhub")  # on the hub's path
    assert Path(extra["course-approval-page"]["mountPath"]).parent == Path("/usr/local/etc/jupyterhub/templates")
    for path in DEPLOY.rglob("*"):  # no copy in deploy/
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            assert "class " not in text or "Authenticator" not in text, f"{path} defines an authenticator"
            assert "authorize/{{" not in text and "_xsrf" not in text, f"{path} holds an approval page"


@pytest.mark.hub
@pytest.mark.parametrize("recipe", recipe_hub.RECIPES)
def test_a_recipe_hub_withstands_the_sign_in_attacks(recipe: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issues 34.1, .3, .5 and 41.2, .3, .6 against JupyterHub's MockHub with the recipe's own authenticator and
    settings (as TLJH or the Z2JH chart applies them; tests/recipe_hub.py), each client from its own address:

    1. mallory signs up as ``instructor`` before anybody: refused, the account exists from the hub's first start
       with the password in the state folder (0600), and mallory's password does not log in; the instructor's does;
    3. the instructor's browser requests /hub/authorize/eve and /hub/discard/eve (an ``<img>`` sends that GET, with
       the instructor's cookies) and a cross-site form POSTs them without the page's token: eve stays a pending
       sign-up; the page's own POST approves her (so the refusals are not a broken page);
    5. eve logs in once; three wrong passwords (the recipe's ten, checked above, lowered here) block her name for any
       other browser (her right password from a new one is refused), never for hers, which logged in before; from
       the instructor's address, mallory spends its budget of failed logins (five a minute here): the instructor's
       browser still logs in, and wrong passwords for the instructor's name never block it;
    6. a process of another user of the machine (``nobody``, a learner's terminal on TLJH) sends wrong passwords and
       sign-ups to the hub's own port, each claiming another X-Forwarded-For and X-Real-Ip: past its budgets (five a
       minute here) they are refused, no password checked, no account made.

    The hub makes its password hashes with 2^4 bcrypt rounds instead of 2^12 (0.2 s each): who gets in does not
    depend on the cost; make hub's attack tests keep the real one.
    """
    import bcrypt

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(bcrypt, "gensalt", functools.partial(bcrypt.gensalt, rounds=4))

    def quicker(c):  # type: ignore[no-untyped-def]
        c.NativeAuthenticator.allowed_failed_logins = 3
        c.CourseNativeAuthenticator.failed_logins_per_address = c.CourseNativeAuthenticator.signups_per_address = 5

    with recipe_hub.recipe_hub(recipe, tmp_path, quicker) as hub:
        # 1
        mallory = hub.client("127.0.0.2")
        mallory_password = f"mallory-{secrets.token_hex(6)}"
        answer = mallory.sign_up("instructor", mallory_password)
        assert "already in use" in answer.text, f"mallory signed up as the instructor: {answer.text[-500:]}"
        assert "Invalid username or password" in mallory.log_in("instructor", mallory_password).text
        assert ((hub.state / "instructor-password").stat().st_mode & 0o077) == 0, "the password is readable by others"
        password = hub.instructor_password()
        assert len(password) >= course_auth.ADMIN_PASSWORD_LENGTH
        assert hub.db("select is_authorized from users_info where username = 'instructor'") == [(1,)]
        instructor = hub.client("127.0.0.1")
        assert instructor.log_in("instructor", password).status_code == 302, "the instructor's first password"
        assert instructor.get("/hub/authorize").status_code == 200
        # 3
        eve, eve_password = hub.client("127.0.0.3"), f"eve-{secrets.token_hex(6)}"
        assert "sent to the admin" in eve.sign_up("eve", eve_password).text
        for path in ("/hub/authorize/eve", "/hub/discard/eve"):
            assert instructor.get(path).status_code == 302  # back to /hub/authorize, nothing changed
            assert instructor.post(path, {}).status_code == 403  # no token: JupyterHub's XSRF check
            assert hub.db("select is_authorized from users_info where username = 'eve'") == [(0,)], path
        approved = instructor.post("/hub/authorize/eve", {}, xsrf=instructor.xsrf("/hub/authorize"))
        assert approved.status_code == 302, "the approval page's own POST does not approve"
        assert hub.db("select is_authorized from users_info where username = 'eve'") == [(1,)]
        # 5
        assert eve.log_in("eve", eve_password).status_code == 302, "eve's right password"
        for _ in range(3):
            assert "Invalid username or password" in mallory.log_in("eve", "wrong-" + secrets.token_hex(4)).text
        assert hub.client("127.0.0.5").log_in("eve", eve_password).status_code != 302, "eve's name is not blocked"
        eve.get("/hub/logout")  # her session ends; her browser keeps its device cookie
        assert eve.log_in("eve", eve_password).status_code == 302, "eve's own browser is locked out"
        pretender = hub.client("127.0.0.1")
        answers = [pretender.log_in("instructor", "wrong-" + secrets.token_hex(4)) for _ in range(7)]
        assert [a.status_code for a in answers].count(429) >= 2, "the address's budget was never spent"
        instructor.get("/hub/logout")
        assert instructor.log_in("instructor", password).status_code == 302, "the instructor is locked out"
        assert hub.client("127.0.0.4").log_in("instructor", password).status_code == 302, "the name is blocked"
        # 6
        logins = flood_as("nobody", hub.url, hub.host, "login", "instructor", 12)
        signups = flood_as("nobody", hub.url, hub.host, "signup", "learner", 10)
        checked, made = sum(1 for _, was, _ in logins if was), sum(1 for _, _, was in signups if was)
        assert checked <= 6 and made <= 6, f"a local user checked {checked} of 12 passwords and made {made} accounts"


def start_pull(recipe: str, url: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """What ``recipe`` runs in a learner's home as their server starts, with the learner edition at ``url``: the
    chart's postStart gitpuller command, or TLJH's server command (with a stand-in for jupyterhub-singleuser that says
    it started). Returns the folder it pulls into."""
    here = Path(sys.executable).parent
    if recipe == "z2jh":
        command = load(DEPLOY / "z2jh" / "values.yaml")["singleuser"]["lifecycleHooks"]["postStart"]["exec"]["command"]
        command, folder, env = [str(here / command[0]), url, *command[2:]], command[3], None
    else:
        cmd = tljh_config(monkeypatch).Spawner.cmd
        fake = home.parent / "bin"
        fake.mkdir(exist_ok=True)
        (fake / "jupyterhub-singleuser").write_text('#!/bin/sh\necho "serving $*"\n')
        (fake / "jupyterhub-singleuser").chmod(0o755)
        command, folder = [*cmd[:3], url, cmd[4], "--an-argument"], cmd[4]
        env = {**os.environ, "PATH": f"{fake}:{here}:/usr/bin:/bin"}
    result = subprocess.run(command, cwd=home, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0 and (recipe == "z2jh" or "serving --an-argument" in result.stdout), result
    return folder


@pytest.mark.parametrize("recipe", recipe_hub.RECIPES)
def test_the_recipes_pull_the_learner_edition_at_start_and_keep_learners_edits(recipe: str, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo, home, course = tmp_path / "learner-edition", tmp_path / "home", tmp_path / "course"
    home.mkdir()
    shutil.copytree(ROOT / "notebooks", course)
    assert publish_learner_edition.publish(repo, course)
    folder = start_pull(recipe, f"file://{repo}", home, monkeypatch)
    mine = home / folder / "01_tensor_hooks.ipynb"
    # no workspace manifest in the published edition: a learner's checks record beside the pulled notebooks
    assert not (home / folder / ".course-manifest.json").exists()
    assert "YOUR CODE HERE" in mine.read_text() and (home / folder / "complete" / "01_tensor_hooks.ipynb").exists()
    notebook = json.loads(mine.read_text())
    notebook["cells"].append({"cell_type": "markdown", "id": "learner-note", "metadata": {}, "source": "my notes"})
    mine.write_text(json.dumps(notebook, indent=1) + "\n")
    # the course changes another notebook and publishes again; the learner's server starts again
    other = json.loads((course / "02_hook_lifecycle.ipynb").read_text())
    other["cells"][0]["source"] = "".join(other["cells"][0]["source"]) + "\n\nUpdated for the workshop.\n"
    (course / "02_hook_lifecycle.ipynb").write_text(json.dumps(other, indent=1) + "\n")
    assert publish_learner_edition.publish(repo, course)
    start_pull(recipe, f"file://{repo}", home, monkeypatch)
    assert "my notes" in mine.read_text(), "nbgitpuller lost the learner's edit"
    assert "Updated for the workshop." in (home / folder / "02_hook_lifecycle.ipynb").read_text()


@pytest.mark.parametrize("recipe", recipe_hub.RECIPES)
def test_a_recipes_learner_server_pulls_nothing_a_link_asks(recipe: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41.1 on the recipes: a learner's server, started with the arguments the recipe gives it (TLJH's
    Spawner.args, the chart's KubeSpawner.args), is asked with its owner's token what a classmate's link asks:
    nbgitpuller's /git-pull/api, another repository, a targetpath out of the workspace. It has no such page (404) and
    pulls nothing. (Before: it cloned the repository there, on that GET.)"""
    c = tljh_config(monkeypatch) if recipe == "tljh" else recipe_hub.z2jh_config(Config())
    args = c.Spawner.args.get_value([]) if recipe == "tljh" else c.KubeSpawner.args
    repo, work = tmp_path / "theirs", tmp_path / "home" / "workspace"
    work.mkdir(parents=True)
    assert publish_learner_edition.publish(repo, ROOT / "notebooks")
    port, token = recipe_hub.free_port(), secrets.token_hex(16)
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}", "--ServerApp.allow_root=True",
         "--ServerApp.open_browser=False", *args], env={**os.environ, "HOME": str(tmp_path / "home")},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_until_healthy(f"http://127.0.0.1:{port}", server, 120, f"/api/status?token={token}"), "no server"
        answer = requests.get(f"http://127.0.0.1:{port}/git-pull/api", timeout=120, params={
            "repo": f"file://{repo}", "branch": "main", "targetpath": "../escaped", "token": token})
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    assert not (tmp_path / "home" / "escaped").exists(), "the link pulled a repository out of the workspace"
    assert answer.status_code == 404, answer.text[:300]
