"""The classroom's configuration files: make hub's safety rules, Binder, TLJH and Zero to JupyterHub.

What can run here runs: the hub configuration is built (without starting a hub), Binder's postBuild runs with a
stand-in for pip, and the nbgitpuller command of the Helm values pulls a learner edition published by
tools/hub/publish_learner_edition.py from a local repository. What cannot (repo2docker, Docker, TLJH, Kubernetes)
is parsed, and the keys the instructor guide's recipes rely on are checked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from course_utils.machinery.pins import parse_pins, read_pins

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
BINDER = ROOT / "binder"
sys.path.insert(0, str(ROOT / "tools" / "hub"))
import course_hub  # noqa: E402
import publish_learner_edition  # noqa: E402

# nativeauthenticator 1.3.0 calls locale.getdefaultlocale() at import (deprecated in Python 3.11): not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore:'locale.getdefaultlocale' is deprecated:DeprecationWarning")


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
    assert config["auth"]["type"] == "nativeauthenticator.NativeAuthenticator"
    assert config["auth"]["NativeAuthenticator"]["open_signup"] is False
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
    """Run deploy/tljh/jupyterhub_config.d/course.py as TLJH does: after TLJH's own settings (config.yaml's admins,
    its idle culler), with the course cloned at ``course``."""
    from traitlets.config import Config

    c = Config()
    c.Spawner.environment = {}
    c.Authenticator.admin_users = set(load(DEPLOY / "tljh" / "config.yaml")["users"]["admin"])
    c.JupyterHub.services = [{"name": "cull-idle", "admin": True, "command": ["python", "-m", "jupyterhub_idle_culler"]}]
    monkeypatch.setenv("PYTORCH_HOOKS_COURSE", str(course))
    monkeypatch.setattr(sys, "path", list(sys.path))  # course.py puts the clone's tools/hub on it
    exec(compile((DEPLOY / "tljh" / "jupyterhub_config.d" / "course.py").read_text(), "course.py", "exec"),
         {"get_config": lambda: c})
    return c


def test_tljh_extra_config_sets_one_thread_and_the_nbgitpuller_start_page(monkeypatch: pytest.MonkeyPatch) -> None:
    c = tljh_config(monkeypatch)
    assert c.Spawner.environment["OMP_NUM_THREADS"] == "1"
    assert c.Spawner.default_url.startswith("/git-pull?repo=https%3A%2F%2Fgithub.com%2F")
    assert "urlpath=lab%2Ftree%2Fpytorch-hooks-learner%2F00_start_here.ipynb" in c.Spawner.default_url
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
    folder = re.search(r"urlpath=lab%2Ftree%2F([^%]+)%2F", c.Spawner.default_url).group(1)
    assert env["COURSE_DASHBOARD_RECORD"] == f"{folder}/.course-progress.jsonl"
    (role,) = c.JupyterHub.load_roles
    assert role["services"] == ["dashboard"] and not any(scope.startswith("access:") for scope in role["scopes"])
    assert dashboard.tljh_system_username("ada") == "jupyter-ada"  # the system user TLJH makes for learner ada


def test_tljh_extra_config_refuses_a_missing_clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RuntimeError, match="install-course.sh"):
        tljh_config(monkeypatch, course=tmp_path / "not-cloned")


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
    entry_points = {ep.name: ep.value for ep in metadata.entry_points(group="jupyterhub.authenticators")}
    assert entry_points[hub["JupyterHub"]["authenticator_class"]] == "nativeauthenticator:NativeAuthenticator"
    assert hub["NativeAuthenticator"]["open_signup"] is False and hub["Authenticator"]["admin_users"]
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


def git_pull(command: list[str], url: str, home: Path) -> None:
    result = subprocess.run([str(Path(sys.executable).parent / command[0]), url, *command[2:]], cwd=home,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_z2jh_gitpuller_command_pulls_the_learner_edition_and_keeps_learners_edits(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    command = load(DEPLOY / "z2jh" / "values.yaml")["singleuser"]["lifecycleHooks"]["postStart"]["exec"]["command"]
    repo, home = tmp_path / "learner-edition", tmp_path / "home"
    home.mkdir()
    course = tmp_path / "course"
    shutil.copytree(ROOT / "notebooks", course)
    assert publish_learner_edition.publish(repo, course)
    git_pull(command, f"file://{repo}", home)
    mine = home / command[3] / "01_tensor_hooks.ipynb"
    # no workspace manifest in the published edition: a learner's checks record beside the pulled notebooks
    assert not (home / command[3] / ".course-manifest.json").exists()
    assert "YOUR CODE HERE" in mine.read_text() and (home / command[3] / "complete" / "01_tensor_hooks.ipynb").exists()
    notebook = json.loads(mine.read_text())
    notebook["cells"].append({"cell_type": "markdown", "id": "learner-note", "metadata": {}, "source": "my notes"})
    mine.write_text(json.dumps(notebook, indent=1) + "\n")
    # the course changes another notebook and publishes again; the learner pulls again
    other = json.loads((course / "02_hook_lifecycle.ipynb").read_text())
    other["cells"][0]["source"] = "".join(other["cells"][0]["source"]) + "\n\nUpdated for the workshop.\n"
    (course / "02_hook_lifecycle.ipynb").write_text(json.dumps(other, indent=1) + "\n")
    assert publish_learner_edition.publish(repo, course)
    git_pull(command, f"file://{repo}", home)
    assert "my notes" in mine.read_text(), "nbgitpuller lost the learner's edit"
    assert "Updated for the workshop." in (home / command[3] / "02_hook_lifecycle.ipynb").read_text()


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
