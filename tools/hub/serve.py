"""``make hub``: checks the settings, makes the state folder (``.hub/``), says how learners are isolated and where
the instructor's password is, then becomes the JupyterHub process (Ctrl-C stops every learner's server and kernel).

Usage: ``make hub`` (``python -m tools.hub.serve``: http://localhost:8000, learners at http://NAME.localhost:8000),
``sudo make hub HUB_IP=0.0.0.0 HUB_PLAIN_HTTP=1 HUB_PUBLIC_URL=http://hub.lan:8000`` for a trusted room network with
wildcard DNS; all settings are ``HUB_*`` variables (tools/hub/course_hub.py, Settings). ``make hub-remove-learner
LEARNER=NAME`` (``python -m tools.hub.serve remove-learner NAME``) archives a learner's home, removes their system
account and retires the name.
"""

from __future__ import annotations

import grp
import os
import subprocess
import sys
from pathlib import Path

from tools.hub import course_auth, course_hub, isolation


def ensure_group(name: str) -> None:
    try:
        grp.getgrnam(name)
    except KeyError:
        subprocess.run(["groupadd", "--system", name], check=True)


def remove_learner(settings: course_hub.Settings, name: str) -> int:
    """Archive NAME's home into ``private/archive/``, end their processes, remove their temporary files, delete the
    system account and retire the name (so nobody inherits their uid, home or files)."""
    import pwd
    import tarfile
    import time

    try:
        members = grp.getgrnam(settings.learner_group).gr_mem
        account = pwd.getpwnam(name)
    except KeyError:
        members, account = [], None
    if account is None or name not in members:
        print(f"remove-learner: {name!r} is not a learner account this hub created (group {settings.learner_group}); "
              "nothing changed.", file=sys.stderr)
        return 2
    course_hub.prepare_state(settings)
    ended = isolation.end_learner_processes(account.pw_uid)
    temporary = isolation.remove_shared_temp_files(account.pw_uid)
    archive_dir = settings.private / "archive"
    archive_dir.mkdir(mode=0o700, exist_ok=True)
    archive = archive_dir / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.tar.gz"
    if Path(account.pw_dir).is_dir():
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(account.pw_dir, arcname=name)
        archive.chmod(0o600)
    if os.path.ismount(account.pw_dir):  # the home's own filesystem (HUB_DISK_MAX): archived above
        subprocess.run(["umount", account.pw_dir], check=True)
    (settings.home_images / f"{name}.img").unlink(missing_ok=True)
    with open(settings.retired_names, "a", encoding="utf-8") as handle:
        handle.write(name + "\n")
    result = subprocess.run(["userdel", "--remove", name], capture_output=True, text=True)
    if result.returncode not in (0, 12):  # 12: the home could not be removed (reported below)
        print(f"remove-learner: userdel {name} failed: {result.stderr.strip()}", file=sys.stderr)
        return 1
    print(f"{name}: {len(ended)} process(es) ended, {len(temporary)} file(s) in the shared temporary folders removed, "
          f"home archived in {archive if archive.exists() else '(no home)'}, system account removed, name retired "
          f"(listed in {settings.retired_names}).")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["remove-learner"]:
        settings = course_hub.Settings.from_env()
        if len(argv) != 2 or not settings.as_root:
            print("usage (as root): python -m tools.hub.serve remove-learner NAME", file=sys.stderr)
            return 2
        return remove_learner(settings, argv[1].lower())
    try:
        settings = course_hub.Settings.from_env()
        settings.check()
        course_hub.check_isolation(settings)
    except course_hub.UnsafeHub as refusal:
        print(f"make hub: refusing to start. {refusal}", file=sys.stderr)
        return 2
    for what, port in (("HUB_PORT", settings.port), ("HUB_HUB_PORT", settings.hub_port),
                       ("HUB_PROXY_API_PORT", settings.proxy_api_port)):
        if port and course_hub.port_in_use(settings.ip if what == "HUB_PORT" else course_hub.LOOPBACK, port):
            print(f"make hub: refusing to start. {what}={port} is in use (another hub, or a program left running?). "
                  f"Stop it, or choose another: make hub {what}=...", file=sys.stderr)
            return 2
    course_hub.prepare_state(settings)
    password = course_auth.instructor_password(settings.password_file)
    if settings.as_root:
        ensure_group(settings.learner_group)
        if settings.admin in grp.getgrnam(settings.learner_group).gr_mem:  # put there by an earlier make hub
            subprocess.run(["gpasswd", "--delete", settings.admin, settings.learner_group], capture_output=True)
        accounts = (f"Each learner is a separate system user (created on first login, group "
                    f"{settings.learner_group}, home {settings.home_base}/NAME, mode 0700).")
    else:
        accounts = ("NOT ROOT: every learner runs as this account and can read and change the others' work. "
                    "Serving 127.0.0.1 only. Run as root (sudo make hub) to give each learner their own account.")
    url = f"{settings.hub_url}/hub/"
    size = course_hub.parse_size
    limits = ", ".join(text for value, text in (
        (settings.memory_max, f"{settings.memory_max} of memory (shared memory included)"),
        (settings.disk_max, f"a home of {settings.disk_max}"),
        (settings.shm_max, f"private /dev/shm, /tmp, /var/tmp, /run/lock of {settings.shm_max} each")) if
        settings.as_root and size(value)) or "none but the process count (not root)"
    origin = settings.hub_url.replace("://", "://NAME.")
    print(f"""
Course hub for PyTorch Hooks, hands-on -- state in {settings.state}/
  {accounts}
  Learners: open {url}signup, choose a name and a password, then log in once you approved them.
  Instructor: log in as '{settings.admin}' with the password in {settings.password_file}
              ({'shown here: ' + password if sys.stdout.isatty() else 'not printed: not a terminal'}),
              approve learners at {url}authorize, change your password at {url}change-password.
  Each learner's server has its own origin ({origin}); server logs in {settings.logs}/.
  Idle servers are stopped after {settings.cull_idle} s; each kernel uses {settings.threads} thread(s).
  Limits per learner: {settings.tasks_max} processes, {limits}.
  Ctrl-C stops the hub and every process of every learner.
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
