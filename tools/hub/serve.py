"""``make hub``: serve the course to a room with JupyterHub, from the course's own pinned environment.

Checks the settings, makes the state folder (``.hub/``, git-ignored), says plainly how learners are isolated and
where the instructor's password is, then becomes the JupyterHub process: Ctrl-C stops the hub, the proxy, the
culler and every learner's server with its kernels.

Usage: ``make hub`` (127.0.0.1:8000), ``sudo make hub HUB_IP=0.0.0.0 HUB_PLAIN_HTTP=1`` for a trusted room network;
all settings are ``HUB_*`` variables (tools/hub/course_hub.py, Settings).
"""

from __future__ import annotations

import grp
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import course_hub  # noqa: E402


def ensure_group(name: str) -> None:
    try:
        grp.getgrnam(name)
    except KeyError:
        subprocess.run(["groupadd", "--system", name], check=True)


def main() -> int:
    settings = course_hub.Settings.from_env()
    try:
        course_hub.check_settings(settings)
    except course_hub.UnsafeHub as refusal:
        print(f"make hub: refusing to start. {refusal}", file=sys.stderr)
        return 2
    course_hub.prepare_state(settings)
    password = course_hub.instructor_password(settings)
    if settings.as_root:
        ensure_group(settings.learner_group)
        isolation = (f"Each learner is a separate system user (created on first login, group "
                     f"{settings.learner_group}, home {settings.home_base}/NAME, mode 0700).")
    else:
        isolation = ("NOT ROOT: every learner runs as this account and can read and change the others' work. "
                     "Serving 127.0.0.1 only. Run as root (sudo make hub) to give each learner their own account.")
    url = f"http://{'127.0.0.1' if settings.ip in ('0.0.0.0', '::') else settings.ip}:{settings.port}/hub/"
    print(f"""
Course hub for PyTorch Hooks, hands-on -- state in {settings.state}/
  {isolation}
  Learners: open {url}signup, choose a name and a password, then log in once you approved them.
  Instructor: log in as '{settings.admin}' with the password in {settings.password_file}
              ({'shown here: ' + password if sys.stdout.isatty() else 'not printed: not a terminal'}),
              approve learners at {url}authorize, change your password at {url}change-password.
  Idle servers are stopped after {settings.cull_idle} s; each kernel uses {settings.threads} thread(s).
  Ctrl-C stops the hub and every learner's server.
""", flush=True)
    env = dict(os.environ)
    env["PATH"] = f"{course_hub.VENV_PYTHON.parent}{os.pathsep}{env.get('PATH', '')}"
    config = Path(__file__).resolve().parent / "jupyterhub_config.py"
    os.chdir(settings.private)  # JupyterHub writes nothing outside the state folder (proxy pid file: private/)
    command = [str(course_hub.VENV_PYTHON), "-m", "jupyterhub", "-f", str(config)]
    os.execve(command[0], command, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
