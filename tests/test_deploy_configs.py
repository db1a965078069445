"""The classroom's configuration files: make hub's safety rules, Binder, TLJH and Zero to JupyterHub.

What can run here runs: the hub configuration is built (without starting a hub), JupyterHub is started with each
deploy/ recipe's own sign-in and settings and attacked (tests/recipe_hub.py: as TLJH and the Z2JH chart apply them,
a local spawner in place of SystemdSpawner and KubeSpawner), Binder's postBuild runs with a stand-in for pip, and the
nbgitpuller command of the Helm values pulls a learner edition published by tools/hub/publish_learner_edition.py
from a local repository. What cannot (repo2docker, Docker, systemd, Kubernetes) is parsed, and the keys the
instructor guide's recipes rely on are checked.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import requests
import yaml

from course_utils.machinery.pins import parse_pins, read_pins
from hub_client import flood_as, wait_until_healthy

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
BINDER = ROOT / "binder"
sys.path.insert(0, str(ROOT / "tools" / "hub"))
import course_auth  # noqa: E402
import course_hub  # noqa: E402
import publish_learner_edition  # noqa: E402
import recipe_hub  # noqa: E402  (tests/)

# nativeauthenticator 1.3.0 calls locale.getdefaultlocale() at import (deprecated in Python 3.11): not ours to fix
pytestmark = [pytest.mark.filterwarnings("ignore:'locale.getdefaultlocale' is deprecated:DeprecationWarning"),
              pytest.mark.reads("requirements.txt", "environment.yml", "binder/*", "deploy/*")]  # make check


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


# --- make hub: never an open hub, never learners exposed ---------------------------------------------------------

def settings(**changes: object) -> course_hub.Settings:
    s = course_hub.Settings()
    for key, value in changes.items():
        setattr(s, key, value)
    return s


def test_make_hub_serves_loopback_by_default_and_refuses_the_network_without_root_or_tls() -> None:
    assert course_hub.Settings.from_env({}).ip == "127.0.0.1"
    course_hub.check_settings(settings(as_root=False))  # loopback, not root: allowed (one shared account, said plainly)
    with pytest.raises(course_hub.UnsafeHub, match="share this account"):
        course_hub.check_settings(settings(ip="0.0.0.0", as_root=False, plain_http=True))
    with pytest.raises(course_hub.UnsafeHub, match="own origin"):  # on the network: subdomains need a name
        course_hub.check_settings(settings(ip="192.168.1.10", as_root=True, plain_http=True))
    with pytest.raises(course_hub.UnsafeHub, match="no subdomains"):
        course_hub.check_settings(settings(ip="192.168.1.10", as_root=True, public_url="http://192.168.1.10:8000"))
    with pytest.raises(course_hub.UnsafeHub, match="TLS"):
        course_hub.check_settings(settings(ip="192.168.1.10", as_root=True, public_url="http://hub.lan:8000"))
    course_hub.check_settings(settings(ip="192.168.1.10", as_root=True, plain_http=True,
                                       public_url="http://hub.lan:8000"))  # said explicitly
    with pytest.raises(course_hub.UnsafeHub, match="instructor name"):
        course_hub.check_settings(settings(admin="root"))


def test_the_login_block_is_ten_by_default_and_never_switched_off() -> None:
    assert course_hub.Settings.from_env({}).allowed_failed_logins == 10
    assert course_hub.Settings.from_env({}).failed_logins_per_address == 20
    assert course_hub.Settings.from_env({}).signups_per_address == 30
    with pytest.raises(course_hub.UnsafeHub, match="HUB_SIGNUPS_PER_ADDRESS=0"):
        course_hub.check_settings(course_hub.Settings.from_env({"HUB_SIGNUPS_PER_ADDRESS": "0"}))
    assert course_hub.Settings.from_env({}).shm_max == "512M"
    assert (course_hub.Settings.from_env({}).memory_max, course_hub.Settings.from_env({}).disk_max) == ("4G", "2G")
    assert course_hub.Settings.from_env({"HUB_DISK_MAX": "0"}).disk_max == "0"
    with pytest.raises(course_hub.UnsafeHub, match="HUB_FAILED_LOGINS_PER_ADDRESS=0"):
        course_hub.check_settings(course_hub.Settings.from_env({"HUB_FAILED_LOGINS_PER_ADDRESS": "0"}))
    assert course_hub.Settings.from_env({"HUB_ALLOWED_FAILED_LOGINS": "3"}).allowed_failed_logins == 3
    with pytest.raises(course_hub.UnsafeHub, match="HUB_ALLOWED_FAILED_LOGINS=0: give at least 1"):
        course_hub.check_settings(course_hub.Settings.from_env({"HUB_ALLOWED_FAILED_LOGINS": "0"}))


def built_config(tmp_path: Path, as_root: bool):  # type: ignore[no-untyped-def]
    from traitlets.config import Config

    c = Config()
    s = settings(state=tmp_path / "state", as_root=as_root, learner_python=sys.executable)
    course_hub.configure(c, s)
    return c, s


@pytest.mark.parametrize("as_root", [True, False])
def test_make_hub_configuration(tmp_path: Path, as_root: bool) -> None:
    from nativeauthenticator import NativeAuthenticator

    c, s = built_config(tmp_path, as_root)
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
    assert (s.private.stat().st_mode & 0o077) == 0 and (s.password_file.stat().st_mode & 0o077) == 0
    from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner

    spawner = LocalProcessSpawner if as_root else SimpleLocalProcessSpawner
    assert issubclass(c.JupyterHub.spawner_class, spawner)
    assert c.JupyterHub.subdomain_host == "http://localhost:8000"  # every learner's server: its own origin
    assert "course_proxy.py" in c.ConfigurableHTTPProxy.command[1]
    course_hub.refuse_unsafe(c, s)  # the configuration as built is accepted
    c.JupyterHub.subdomain_host = ""  # an extra configuration that puts every learner on the hub's origin
    with pytest.raises(course_hub.UnsafeHub, match="origin"):
        course_hub.refuse_unsafe(c, s)


def test_the_proxy_redacts_credentials_from_urls_in_its_log() -> None:
    import course_proxy

    assert course_proxy.redact("404 GET /user/a/x?token=abc123&y=1 (127.0.0.1)") == \
        "404 GET /user/a/x?token=[secret]&y=1 (127.0.0.1)"
    assert "s3cr3t" not in course_proxy.redact("/hub/api/oauth2/authorize?code=s3cr3t&state=s3cr3t&_xsrf=s3cr3t")
    assert course_proxy.redact("/hub/login?next=%2Fuser%2Fa%3Ftoken%3Ds3cr3t%26x%3D1") == \
        "/hub/login?next=%2Fuser%2Fa%3Ftoken%3D[secret]%26x%3D1"  # inside an encoded URL: JupyterHub misses it


def test_private_folders_are_under_the_learners_home_and_sizes_parse() -> None:
    env = course_hub.private_environment("/home/ann")
    assert {"TMPDIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"} <= set(env)
    assert all(value.startswith("/home/ann/") for value in env.values())
    assert course_hub.parse_size("2.5G") == int(2.5 * 2**30) and course_hub.parse_size("800M") == 800 * 2**20
    with pytest.raises(course_hub.UnsafeHub, match="size"):
        course_hub.check_settings(settings(memory_max="lots"))


def test_make_hub_runs_kernels_on_unix_sockets_with_a_path_that_fits(tmp_path: Path) -> None:
    c, s = built_config(tmp_path, as_root=True)
    assert "--KernelManager.transport=ipc" in c.Spawner.args  # issue 34.2: no kernel on the loopback's TCP ports
    runtime = course_hub.private_environment("/home/" + "n" * 32)["JUPYTER_RUNTIME_DIR"]
    assert len(runtime) + len(course_hub.KERNEL_SOCKET_NAME) <= course_hub.SOCKET_PATH_MAX  # the longest name fits


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces, cgroups and mounts need root")
def test_a_learners_server_is_isolated_as_the_spawner_isolates_it(tmp_path: Path) -> None:
    """Issues 34.4, 41.4, 41.5's mechanisms, as the spawner runs them before a learner's server (the attacks on a real
    hub: tests/browser/test_hub.py): a child with private temporary folders of 1 MiB cannot write 2 MiB to /dev/shm or
    /tmp, its files there are not the machine's, its IPC namespace is its own (System V segments up to 1 MiB), and it
    runs in the memory cgroup it was given; a home of 16 MiB of its own refuses 20 MiB, keeps what it held, and
    mounts again after an unmount."""
    name = f"course-isolation-test-{os.getpid()}"
    code = (f"import ctypes, os\nfor place in ('/dev/shm', '/tmp', '/run/lock'):\n    open(f'{{place}}/{name}', 'w')\n"
            f"try:\n    open('/tmp/{name}-big', 'wb').write(b'0' * (2 << 20))\n    print('wrote 2 MiB')\n"
            "except OSError as error:\n    print(error.strerror)\n"
            "libc = ctypes.CDLL(None)\nprint(libc.shmget(0, 2 << 20, 0o1600), libc.shmget(0, 1 << 20, 0o1600))\n"
            "print(os.readlink('/proc/self/ns/ipc'))\nprint(open('/proc/self/cgroup').read())")
    course_hub._libc()
    group = course_hub.memory_cgroup(name, 256 << 20)
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                                preexec_fn=lambda: course_hub.isolate_server(1 << 20, str(group)))
    finally:
        group.rmdir()
    lines = result.stdout.split("\n")
    assert lines[0] == "No space left on device" and lines[1].split()[0] == "-1", result.stdout + result.stderr
    assert int(lines[1].split()[1]) >= 0 and lines[2] != os.readlink("/proc/self/ns/ipc"), result.stdout
    assert f"/{name}" in result.stdout.split("memory", 1)[1].split("\n")[0], "not in its memory cgroup"
    assert not [place for place in ("/dev/shm", "/tmp", "/run/lock") if Path(place, name).exists()]
    home, image = tmp_path / "home", tmp_path / "home.img"
    home.mkdir()
    (home / "kept.txt").write_text("before")
    assert course_hub.mount_home(home, image, 16 << 20) and os.path.ismount(home)
    try:
        assert (home / "kept.txt").read_text() == "before"
        with pytest.raises(OSError, match="No space left"):
            (home / "big").write_bytes(bytes(20 << 20))
    finally:
        subprocess.run(["umount", str(home)], check=True)
    assert not (home / "kept.txt").exists(), "the home's files stayed on the machine's disk too"
    assert course_hub.mount_home(home, image, 16 << 20) and (home / "kept.txt").read_text() == "before"
    subprocess.run(["umount", str(home)], check=True)
    course_hub.check_isolation(settings(as_root=True))  # make hub's start-up probe passes here
    course_hub.check_isolation(settings(as_root=True, shm_max="0", memory_max="0", disk_max="0"))  # all off


@pytest.mark.skipif(os.geteuid() != 0, reason="files of another user need root")
def test_a_learners_files_in_the_shared_temporary_folders_are_removed_and_nobody_elses(tmp_path: Path) -> None:
    uid = 64123  # no account needs to exist: files are removed by owner
    places = [tmp_path / "tmp", tmp_path / "shm"]
    for place in places:
        place.mkdir()
        (place / "theirs").write_text("x")
        (place / "folder").mkdir()
        (place / "folder" / "inside").write_text("x")
        os.chown(place / "theirs", uid, uid)
        os.chown(place / "folder", uid, uid)
        (place / "link").symlink_to(tmp_path)
        os.lchown(place / "link", uid, uid)
        (place / "mine").write_text("root's")
    removed = course_hub.remove_shared_temp_files(uid, tuple(str(place) for place in places))
    assert sorted(Path(path).name for path in removed) == ["folder", "folder", "link", "link", "theirs", "theirs"]
    assert all(sorted(p.name for p in place.iterdir()) == ["mine"] for place in places) and tmp_path.exists()
    with pytest.raises(ValueError):
        course_hub.remove_shared_temp_files(0)


def test_make_hub_refuses_a_port_in_use_with_a_clear_message(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        env = {**os.environ, "HUB_PORT": str(port), "HUB_STATE": str(tmp_path / "state")}
        result = subprocess.run([sys.executable, str(ROOT / "tools" / "hub" / "serve.py")], env=env,
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and f"HUB_PORT={port} is in use" in result.stderr, result.stderr
    assert not (tmp_path / "state").exists(), "nothing is made before the refusal"


def test_make_hub_refuses_an_open_hub_whatever_the_extra_configuration(tmp_path: Path) -> None:
    c, s = built_config(tmp_path, as_root=False)
    c.NativeAuthenticator.open_signup = True
    with pytest.raises(course_hub.UnsafeHub, match="open hub"):
        course_hub.refuse_unsafe(c, s)
    c, s = built_config(tmp_path, as_root=False)
    c.JupyterHub.authenticator_class = "dummy"
    with pytest.raises(course_hub.UnsafeHub, match="anybody"):
        course_hub.refuse_unsafe(c, s)


def test_the_instructor_password_is_made_once_and_kept_private(tmp_path: Path) -> None:
    s = settings(state=tmp_path / "state", as_root=False)
    course_hub.prepare_state(s)
    first = course_hub.instructor_password(s)
    assert len(first) >= 12 and course_hub.instructor_password(s) == first
    assert oct(s.password_file.stat().st_mode & 0o777) == "0o600"


def test_make_lab_and_every_learners_server_turn_off_the_git_pull_page() -> None:
    """Issue 41.1: nbgitpuller's /git-pull page is off wherever the course starts a server for a learner (make hub's
    servers, make lab's; the recipes: tests below). The attack on a real server: tests/browser/test_hub.py."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert f"NO_NBGITPULLER = {course_hub.NO_NBGITPULLER[0]}" in makefile
    labs = [line for line in makefile.splitlines() if "/bin/jupyter lab " in line]
    assert len(labs) == 2 and all("$(NO_NBGITPULLER)" in line for line in labs), labs


def test_the_hub_state_folder_is_git_ignored() -> None:
    result = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", ".hub/private/jupyterhub.sqlite"])
    assert result.returncode == 0, "add /.hub/ to .gitignore"


# --- Binder ---------------------------------------------------------------------------------------------------------

def binder_lines() -> list[str]:
    return [line.strip() for line in (BINDER / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.strip().startswith("#")]


def test_binder_pins_are_the_course_pins_with_cpu_only_torch() -> None:
    lines = binder_lines()
    options = [line for line in lines if line.startswith("-")]
    assert options == ["--extra-index-url https://download.pytorch.org/whl/cpu"]
    pins = parse_pins([re.sub(r"\+cpu$", "", line) for line in lines if not line.startswith("-")])
    assert pins == read_pins()
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
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "pip-calls"
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

def test_tljh_config_has_the_keys_of_the_recipe() -> None:
    config = load(DEPLOY / "tljh" / "config.yaml")
    assert config["auth"]["type"] == "course_auth.CourseNativeAuthenticator" and set(config["auth"]) == {"type"}
    assert config["users"]["admin"]
    assert config["services"]["cull"]["enabled"] is True and config["services"]["cull"]["timeout"] > 0
    assert config["user_environment"]["default_app"] == "jupyterlab"
    assert config["https"]["enabled"] is True
    values = load(DEPLOY / "z2jh" / "values.yaml")
    assert str(config["limits"]["cpu"]) == str(values["singleuser"]["cpu"]["limit"])
    assert config["limits"]["memory"] == values["singleuser"]["memory"]["limit"]


def test_the_tljh_docs_describe_the_certificate_the_recipe_uses() -> None:
    """The recipe serves its own wildcard certificate (https.tls), not TLJH's Let's Encrypt: the guide says so."""
    https = load(DEPLOY / "tljh" / "config.yaml")["https"]
    assert https["tls"]["cert"] and https["tls"]["key"] and "letsencrypt" not in https
    guide = (ROOT / "notebooks" / "instructor_guide.md").read_text(encoding="utf-8")
    recipe = guide.split("**The Littlest JupyterHub, one cloud VM", 1)[1].split("\n\n", 1)[0]
    assert "`https.tls`" in recipe and https["tls"]["cert"] in recipe and "wildcard" in recipe
    assert not re.search(r"gets a Let's Encrypt certificate", recipe), "the recipe has no https.letsencrypt"
    assert "DNS challenge" in recipe  # how to get the wildcard certificate the recipe needs


def tljh_config(monkeypatch: pytest.MonkeyPatch, course: Path = ROOT):  # type: ignore[no-untyped-def]
    """deploy/tljh/config.yaml and jupyterhub_config.d/course.py as TLJH applies them (tests/recipe_hub.py), with the
    course cloned at ``course``."""
    from traitlets.config import Config

    monkeypatch.setattr(sys, "path", list(sys.path))  # course.py puts the clone's tools/hub on it
    return recipe_hub.tljh_config(Config(), course=course)


def test_tljh_extra_config_sets_one_thread_and_opens_the_pulled_edition(monkeypatch: pytest.MonkeyPatch) -> None:
    c = tljh_config(monkeypatch)
    assert c.Spawner.environment.get_value({})["OMP_NUM_THREADS"] == "1"
    assert c.Spawner.default_url == "/lab/tree/pytorch-hooks-learner/00_start_here.ipynb"  # pulled at start (below)
    assert c.Spawner.cmd[-2:] == ["https://github.com/REPLACE-ME/pytorch-hooks-learner", "pytorch-hooks-learner"]
    assert c.JupyterHub.subdomain_host.startswith("https://"), "one origin per learner, behind TLS"
    assert load(DEPLOY / "tljh" / "config.yaml")["https"]["tls"]["cert"], "subdomains need a wildcard certificate"


def test_tljh_runs_the_dashboard_for_admins_on_every_learners_record(monkeypatch: pytest.MonkeyPatch) -> None:
    import dashboard

    c = tljh_config(monkeypatch)
    services = {service["name"]: service for service in c.JupyterHub.services}
    assert set(services) == {"cull-idle", "dashboard"}, "TLJH's own services are kept"
    service = services["dashboard"]
    user_env = re.search(r"USER_ENV=\$\{USER_ENV:-(\S+)\}", (DEPLOY / "tljh" / "install-course.sh").read_text()).group(1)
    assert service["command"] == [f"{user_env}/bin/python", str(ROOT / "tools" / "hub" / "dashboard.py")]
    assert service["url"].startswith("http://127.0.0.1:") and service["environment"]["PYTHONPATH"] == str(ROOT)
    env = service["environment"]
    assert env["COURSE_DASHBOARD_ADMINS"] == "instructor" and env["COURSE_DASHBOARD_SYSTEM_USERS"] == "tljh"
    assert "COURSE_HUB_STATE" not in env  # TLJH's hub runs as root: homes come from the system users
    # the record the dashboard reads is the one a learner's checks write in the folder nbgitpuller pulled
    folder = re.search(r"^/lab/tree/([^/]+)/", c.Spawner.default_url).group(1)
    assert env["COURSE_DASHBOARD_RECORD"] == f"{folder}/.course-progress.jsonl"
    (role,) = c.JupyterHub.load_roles
    assert role["services"] == ["dashboard"] and not any(scope.startswith("access:") for scope in role["scopes"])
    assert dashboard.tljh_system_username("ada") == "jupyter-ada"  # the system user TLJH makes for learner ada


def test_tljh_extra_config_refuses_a_missing_clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RuntimeError, match="install-course.sh"):
        tljh_config(monkeypatch, course=tmp_path / "not-cloned")


def test_tljh_gives_each_learner_private_tmp_kernel_sockets_and_make_hubs_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issues 34.2, .4, .5, .6 and 41.4, .5, .8 on TLJH (systemd cannot run here: the settings SystemdSpawner turns
    into unit properties are checked, against jupyterhub/systemdspawner's source and systemd's): /tmp, /var/tmp and
    /run/lock of its own, in memory (TemporaryFileSystem, counted in MemoryMax), /tmp holding the runtime folder, so
    kernels listen on unix sockets nobody else can reach; make hub's process limit (TasksMax); System V memory of its
    own (PrivateIPC) and its /dev/shm files removed when the server stops (RemoveIPC)."""
    c = tljh_config(monkeypatch)
    assert c.SystemdSpawner.isolate_tmp is False  # PrivateTmp's /tmp would be on the VM's disk, past the home's budget
    properties = c.SystemdSpawner.unit_extra_properties
    assert properties == {"TasksMax": str(course_hub.Settings().tasks_max), "RemoveIPC": "yes", "PrivateIPC": "yes",
                          "TemporaryFileSystem": "/tmp:mode=1777 /var/tmp:mode=1777 /run/lock:mode=1777"}
    assert all(isinstance(value, str) and "{" not in value for value in properties.values())  # _expand_user_vars
    assert {*course_hub.KERNELS_ON_UNIX_SOCKETS, *course_hub.KERNELS_WITHOUT_DEBUGGER,
            *course_hub.NO_NBGITPULLER} <= set(c.Spawner.args.get_value([]))  # see test_hub's attacks
    runtime = c.Spawner.environment.get_value({})["JUPYTER_RUNTIME_DIR"]
    assert runtime.startswith("/tmp/") and len(runtime) + len(course_hub.KERNEL_SOCKET_NAME) <= course_hub.SOCKET_PATH_MAX
    assert load(DEPLOY / "tljh" / "config.yaml")["limits"]["memory"], "MemoryMax, which counts /dev/shm, needs a limit"


@pytest.mark.skipif(os.geteuid() != 0, reason="system accounts and mounts need root")
def test_tljh_gives_each_learner_a_home_of_its_own_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41.5 on TLJH: the recipe's pre-spawn hook, run as TLJH's hub runs it (root; TLJH's own ensure_user made
    the account, as tljh/user.py does: useradd --create-home), gives the learner's home a filesystem of DISK_MAX
    (16M here): the learner writing 20 MB there is refused, "No space left on device"."""
    import asyncio
    import pwd
    from types import SimpleNamespace

    from traitlets.config import Config

    import tempfile

    homes = Path(tempfile.mkdtemp(prefix="course-tljh-homes-"))  # a folder the learner may pass through
    homes.chmod(0o755)
    stub = tmp_path / "stub" / "tljh"  # TLJH's tljh.user, as it is, with the homes in that folder
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("")
    (stub / "user.py").write_text(f"import pwd, subprocess\ndef ensure_user(name):\n    try:\n        pwd.getpwnam(name)\n"
                                  f"    except KeyError:\n        subprocess.check_call(['useradd', '--create-home', "
                                  f"'--base-dir', {str(homes)!r}, name])\n")
    monkeypatch.syspath_prepend(str(stub.parent))
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "state").mkdir()
    hook = recipe_hub.tljh_config(Config(), install_prefix=str(tmp_path)).Spawner.pre_spawn_hook
    monkeypatch.setitem(hook.__globals__, "DISK_MAX", "16M")
    name = f"t{os.getpid()}"
    account = course_auth.tljh_system_username(name)
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


def test_tljh_install_script_is_strict_and_installs_cpu_torch() -> None:
    script = DEPLOY / "tljh" / "install-course.sh"
    text = script.read_text()
    assert os.access(script, os.X_OK) and "set -euo pipefail" in text
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert "--index-url https://download.pytorch.org/whl/cpu" in text and "requirements.txt" in text


# --- Zero to JupyterHub ---------------------------------------------------------------------------------------------

def test_z2jh_values_have_the_keys_of_the_recipe() -> None:
    values = load(DEPLOY / "z2jh" / "values.yaml")
    hub = values["hub"]["config"]
    assert hub["JupyterHub"]["authenticator_class"] == "course_auth.CourseNativeAuthenticator"
    single = values["singleuser"]
    assert single["image"]["name"] and single["image"]["tag"]
    assert single["extraEnv"]["OMP_NUM_THREADS"] == "1"
    assert 0 < float(single["cpu"]["guarantee"]) <= float(single["cpu"]["limit"])
    assert re.fullmatch(r"\d+(\.\d+)?G", single["memory"]["limit"]) and re.fullmatch(r"\d+(\.\d+)?G", single["memory"]["guarantee"])
    command = single["lifecycleHooks"]["postStart"]["exec"]["command"]
    assert command[0] == "gitpuller" and len(command) == 4
    assert single["defaultUrl"] == f"/lab/tree/{command[3]}/00_start_here.ipynb"
    assert values["cull"]["enabled"] is True and values["cull"]["timeout"] > 0
    assert values["proxy"]["https"]["enabled"] is True
    assert hub["JupyterHub"]["subdomain_host"].startswith("https://"), "one origin per learner, behind TLS"
    assert values["proxy"]["https"]["type"] == "secret" and values["proxy"]["https"]["secret"]["name"]


# --- The recipes' sign-in: the course's own, attacked on a real JupyterHub ------------------------------------------

def z2jh_set_files() -> dict[str, Path]:
    """The files the guide's helm command gives with --set-file, by hub.extraFiles key."""
    guide = (ROOT / "notebooks" / "instructor_guide.md").read_text(encoding="utf-8")
    found = dict(re.findall(r"--set-file hub\.extraFiles\.([\w-]+)\.stringData=(\S+)", guide))
    header = (DEPLOY / "z2jh" / "values.yaml").read_text(encoding="utf-8")
    assert dict(re.findall(r"--set-file hub\.extraFiles\.([\w-]+)\.stringData=(\S+)", header)) == found
    return {key: ROOT / value.rstrip("\\`") for key, value in found.items()}


def test_the_recipes_load_the_course_sign_in_from_the_module_make_hub_uses(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Both recipes end with tools/hub/course_auth.py's authenticator and settings, the ones make hub runs: TLJH
    imports it from the course's clone, Z2JH mounts that very file (helm --set-file) beside its configuration.
    deploy/ holds no copy of it, nor of the approval page."""
    from traitlets.config import Config

    native = course_auth.course_authenticator_class()
    made_hub, _ = built_config(tmp_path, as_root=True)
    assert issubclass(made_hub.JupyterHub.authenticator_class, native)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name, c, state in (("tljh", tljh_config(monkeypatch), recipe_hub.TLJH_STATE),
                           ("z2jh", recipe_hub.z2jh_config(Config()), recipe_hub.Z2JH_STATE)):
        assert c.JupyterHub.authenticator_class is native, name
        assert c.JupyterHub.template_paths[0] == str(course_auth.TEMPLATES), name
        assert c.Authenticator.admin_users == {"instructor"}, name
        assert c.NativeAuthenticator.open_signup is False and c.NativeAuthenticator.allowed_failed_logins == 10, name
        assert c.CourseNativeAuthenticator.failed_logins_per_address == course_auth.FAILED_LOGINS_PER_ADDRESS
        assert c.CourseNativeAuthenticator.signups_per_address == course_auth.SIGNUPS_PER_ADDRESS, name
        assert c.CourseNativeAuthenticator.instructor_password_file == f"{state}/instructor-password", name
        assert c.CourseNativeAuthenticator.system_users == ("tljh" if name == "tljh" else ""), name
    # the string name each recipe gives for the authenticator is that class too (and fails without course_auth)
    assert load(DEPLOY / "tljh" / "config.yaml")["auth"]["type"] == "course_auth.CourseNativeAuthenticator"
    assert course_auth.CourseNativeAuthenticator is native
    # Z2JH: the mounted files are the course's own, given by the guide's helm command
    extra = load(DEPLOY / "z2jh" / "values.yaml")["hub"]["extraFiles"]
    files = z2jh_set_files()
    assert files == {"course-auth": ROOT / "tools" / "hub" / "course_auth.py",
                     "course-approval-page": course_auth.TEMPLATES / "authorization-area.html"}
    for key, source in files.items():
        assert source.is_file() and Path(extra[key]["mountPath"]).name == source.name
        assert not any(k in extra[key] for k in ("stringData", "data", "binaryData")), "the content is --set-file's"
    assert Path(extra["course-auth"]["mountPath"]).parent == Path("/usr/local/etc/jupyterhub")  # on the hub's path
    assert Path(extra["course-approval-page"]["mountPath"]).parent == Path("/usr/local/etc/jupyterhub/templates")
    # no copy in deploy/
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            assert "class " not in text or "Authenticator" not in text, f"{path} defines an authenticator"
            assert "authorize/{{" not in text and "_xsrf" not in text, f"{path} holds an approval page"


@pytest.mark.parametrize("recipe", recipe_hub.RECIPES)
def test_a_recipe_hub_withstands_the_sign_in_attacks(recipe: str, tmp_path: Path) -> None:
    """Issues 34.1, .3, .5 and 41.2, .3, .6, .8 against JupyterHub started with the recipe's own authenticator and
    settings (as TLJH or the Z2JH chart applies them; tests/recipe_hub.py), each client from its own address:

    1. mallory signs up as ``instructor`` before anybody: refused, the account exists from the hub's first start
       with the password in the state folder (0600), and mallory's password does not log in; the instructor's does;
    3. the instructor's browser requests /hub/authorize/eve and /hub/discard/eve (an ``<img>`` sends that GET, with
       the instructor's cookies) and a cross-site form POSTs them without the page's token: eve stays a pending
       sign-up; the page's own POST approves her (so the refusals are not a broken page);
    5. eve logs in once; three wrong passwords (the recipe's ten, checked above, lowered here) block her name for any
       other browser (her right password from a new one is refused), never for hers, which logged in before; from
       the instructor's address, mallory spends its budget of failed logins (five a minute here): the instructor's
       browser still logs in, and four wrong passwords for the instructor's name never block it;
    6. a process of another user of the machine (``nobody``, a learner's terminal on TLJH) sends wrong passwords and
       sign-ups to the hub's own port, each claiming another X-Forwarded-For and X-Real-Ip: past its budgets (five a
       minute here) they are refused, no password checked, no account made.

    The hub makes its password hashes with 2^4 bcrypt rounds instead of 2^12 (0.2 s each, twelve of them per hub):
    who gets in does not depend on the cost; make hub's attack tests keep the real one.
    """
    quicker = ("c.NativeAuthenticator.allowed_failed_logins = 3",
               "c.CourseNativeAuthenticator.failed_logins_per_address = 5",
               "c.CourseNativeAuthenticator.signups_per_address = 5",
               "import bcrypt, functools; bcrypt.gensalt = functools.partial(bcrypt.gensalt, rounds=4)")
    with recipe_hub.RecipeHub(recipe, tmp_path, overrides=quicker) as hub:
        hub.start()
        # 1
        mallory = hub.client("127.0.0.2")
        mallory_password = f"mallory-{secrets.token_hex(6)}"
        answer = mallory.sign_up("instructor", mallory_password)
        said = re.search(r'role="alert">\s*(?:<[^>]*>\s*)*([^<]+)', answer.text)
        assert "already in use" in answer.text, f"mallory signed up as the instructor: {said and said.group(1).strip()}"
        assert "Invalid username or password" in mallory.log_in("instructor", mallory_password).text
        password_file = hub.state / "instructor-password"
        assert (password_file.stat().st_mode & 0o077) == 0, "the instructor's first password is readable by others"
        password = hub.instructor_password()
        assert len(password) >= course_auth.ADMIN_PASSWORD_LENGTH
        assert hub.db("select is_authorized from users_info where username = 'instructor'") == [(1,)]
        instructor = hub.client("127.0.0.1")
        assert instructor.log_in("instructor", password).status_code == 302, "the instructor's first password"
        assert instructor.get("/hub/authorize").status_code == 200
        # 3
        eve = hub.client("127.0.0.3")
        eve_password = f"eve-{secrets.token_hex(6)}"
        assert "sent to the admin" in eve.sign_up("eve", eve_password).text
        pending = [(0,)]
        for path in ("/hub/authorize/eve", "/hub/discard/eve"):
            assert instructor.get(path).status_code == 302  # back to /hub/authorize, nothing changed
            assert instructor.post(path, {}).status_code == 403  # no token: JupyterHub's XSRF check
            assert hub.db("select is_authorized from users_info where username = 'eve'") == pending, path
        approved = instructor.post("/hub/authorize/eve", {}, xsrf=instructor.xsrf("/hub/authorize"))
        assert approved.status_code == 302 and hub.db("select is_authorized from users_info where username = 'eve'") \
            == [(1,)], "the approval page's own POST does not approve"
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


def test_z2jh_runs_no_dashboard_and_the_guide_says_so() -> None:
    values = load(DEPLOY / "z2jh" / "values.yaml")
    assert "dashboard" not in json.dumps(values["hub"]), "a dashboard on Z2JH needs the homes readable: see the guide"
    guide = (ROOT / "notebooks" / "instructor_guide.md").read_text(encoding="utf-8")
    section = guide.split("### Seeing the room", 1)[1].split("\n### ", 1)[0]
    assert "Zero to JupyterHub" in section and "does not run" in section


def test_singleuser_dockerfile_builds_from_environment_yml_with_cpu_torch() -> None:
    text = (DEPLOY / "singleuser" / "Dockerfile").read_text()
    assert re.search(r"^FROM \S+python-3\.11\s*$", text, re.MULTILINE)
    assert "PIP_INDEX_URL=https://download.pytorch.org/whl/cpu" in text
    assert re.search(r"mamba env update --name base --file environment.yml", text)
    assert "OMP_NUM_THREADS=1" in text


def test_the_guide_limits_are_the_deploy_limits() -> None:
    guide = (ROOT / "notebooks" / "instructor_guide.md").read_text()
    section = guide.split("## Serving a room with JupyterHub", 1)[1]
    values = load(DEPLOY / "z2jh" / "values.yaml")["singleuser"]
    assert f"`cpu.limit: {values['cpu']['limit']}`" in section and f"`memory.limit: {values['memory']['limit']}`" in section


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
    repo, home = tmp_path / "learner-edition", tmp_path / "home"
    home.mkdir()
    course = tmp_path / "course"
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
    from traitlets.config import Config

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


def test_a_room_in_chinese_gets_the_chinese_workspace_and_messages(tmp_path: Path) -> None:
    import asyncio
    import logging
    from types import SimpleNamespace

    from traitlets.config import Config

    with pytest.raises(course_hub.UnsafeHub, match="HUB_LANG"):
        course_hub.check_settings(settings(lang="fr"))
    assert course_hub.Settings.from_env({"HUB_LANG": "zh"}).lang == "zh"
    c = Config()
    s = settings(state=tmp_path / "state", as_root=False, learner_python=sys.executable, lang="zh")
    course_hub.configure(c, s)
    assert c.Spawner.environment["COURSE_LANG"] == "zh"
    spawner = SimpleNamespace(user=SimpleNamespace(name="ann"), log=logging.getLogger("test"))
    asyncio.run(c.Spawner.pre_spawn_hook(spawner))
    delivered = json.loads((s.state / "homes" / "ann" / "workspace" / "01_tensor_hooks.ipynb").read_text())
    assert delivered["metadata"].get("language_edition", {}).get("lang") == "zh", "the learner got the English workspace"
