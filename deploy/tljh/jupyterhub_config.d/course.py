# TLJH extra configuration for "PyTorch Hooks, hands-on": copy to /opt/tljh/config/jupyterhub_config.d/course.py.
# TLJH loads it after its own settings (config.yaml). It takes the course's sign-in and limits from the course's clone
# (tools/hub/course_auth.py and course_hub.py, the modules `make hub` runs: no copy here), runs the progress dashboard,
# gives each learner one thread per kernel, and pulls the learner edition with nbgitpuller when a server starts.
import asyncio
import os
import pwd
import sys
from pathlib import Path

c = get_config()  # noqa: F821
c.Spawner.environment.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
LEARNER_EDITION = "https://github.com/REPLACE-ME/pytorch-hooks-learner"  # tools/hub/publish_learner_edition.py
LEARNER_FOLDER = "pytorch-hooks-learner"  # where nbgitpuller puts it, in each learner's home
DISK_MAX = "2G"  # each learner's home is a filesystem of this size (make hub's HUB_DISK_MAX)
# Each learner's server first pulls the course's learner edition (nbgitpuller's command: clone on the first start,
# merge course updates later, keep the learner's edits), then starts, on the notebook. The pull is this command, not
# nbgitpuller's /git-pull page, which is off (below): that page pulls any repository into any folder on a GET, so a
# classmate's link could put their code in your kernel spec (issue 41).
c.Spawner.cmd = ["/bin/sh", "-c", 'gitpuller "$0" main "$1" || echo "could not pull $0" >&2; shift; '
                 'exec jupyterhub-singleuser "$@"', LEARNER_EDITION, LEARNER_FOLDER]
c.Spawner.default_url = f"/lab/tree/{LEARNER_FOLDER}/00_start_here.ipynb"
# Each learner's server at NAME.REPLACE-ME.example.org, its own origin: a page one learner serves never runs with
# another's or the instructor's cookies. Needs DNS for *.REPLACE-ME.example.org and a wildcard certificate
# (config.yaml: https.tls with your own certificate; TLJH's https.letsencrypt cannot get a wildcard one).
c.JupyterHub.subdomain_host = "https://REPLACE-ME.example.org"

COURSE = os.environ.get("PYTORCH_HOOKS_COURSE", "/opt/pytorch-hooks-course")  # the clone install-course.sh installed
STATE = os.path.join(os.environ.get("TLJH_INSTALL_PREFIX", "/opt/tljh"), "state")  # TLJH's hub state (root only)
USER_ENV_PYTHON = "/opt/tljh/user/bin/python"  # TLJH's user environment (install-course.sh's USER_ENV)
if not os.path.isfile(os.path.join(COURSE, "tools", "hub", "course_auth.py")):
    raise RuntimeError(f"course.py: the course's clone is not at {COURSE} (tools/hub/course_auth.py is missing): clone "
                       "the course there and run deploy/tljh/install-course.sh from it, as the instructor guide says")
sys.path.insert(0, COURSE)  # a JupyterHub config file: the one kind of file that puts the course on the path
from tools.hub import course_auth, course_hub, dashboard, isolation  # noqa: E402

# Who gets in: the course's sign-in (instructor guide, "Signing in"; tools/hub/course_auth.py), with config.yaml's
# users.admin as instructors, whose first password is made in STATE/instructor-password (root's, 0600).
course_auth.configure_sign_in(c, admins=c.Authenticator.admin_users, state=STATE, system_users="tljh")

# Each learner's server, a systemd unit of its own (SystemdSpawner), with make hub's limits where systemd sets them:
# /tmp, /var/tmp and /run/lock of its own in memory (counted in limits.memory), /dev/shm files removed at stop
# (RemoveIPC), System V memory of its own (PrivateIPC), HUB_TASKS_MAX processes (TasksMax); kernels on unix sockets
# in that /tmp and without the debugger (both would listen on the VM's loopback for any user); no /git-pull page;
# a home that is a filesystem of DISK_MAX of its own (isolation.mount_home).
LIMITS = course_hub.Settings()  # make hub's defaults
c.SystemdSpawner.isolate_tmp = False  # /tmp is TemporaryFileSystem's, in memory, not PrivateTmp's, on the VM's disk
c.SystemdSpawner.unit_extra_properties = {
    "TasksMax": str(LIMITS.tasks_max), "RemoveIPC": "yes", "PrivateIPC": "yes",
    "TemporaryFileSystem": "/tmp:mode=1777 /var/tmp:mode=1777 /run/lock:mode=1777",
}
c.Spawner.args.extend([*course_hub.KERNELS_ON_UNIX_SOCKETS, *course_hub.KERNELS_WITHOUT_DEBUGGER,
                       *course_hub.NO_NBGITPULLER])
c.Spawner.environment.update({"JUPYTER_RUNTIME_DIR": "/tmp/jupyter-runtime"})  # the unit's /tmp: short socket paths
HOME_IMAGES = Path(STATE, "homes")  # jupyter-NAME.img: each learner's home
isolation.mount_learner_homes(HOME_IMAGES)  # after a reboot, before anybody logs in (the dashboard reads them)


async def learner_home(spawner):  # the pre-spawn hook
    from tljh.user import ensure_user  # TLJH's own, which its spawner calls next: the account and its home

    account = course_auth.tljh_system_username(spawner.user.name)
    ensure_user(account)
    HOME_IMAGES.mkdir(mode=0o700, exist_ok=True)
    await asyncio.get_running_loop().run_in_executor(None, isolation.mount_home, Path(pwd.getpwnam(account).pw_dir),
                                                     HOME_IMAGES / f"{account}.img", isolation.parse_size(DISK_MAX))


c.Spawner.pre_spawn_hook = learner_home

# The instructor's dashboard of the room (instructor guide, "Seeing the room"), admins only, run with TLJH's user
# environment: it reads each learner's ~jupyter-NAME/pytorch-hooks-learner/.course-progress.jsonl.
dashboard.configure_dashboard(
    c, python=USER_ENV_PYTHON, port=15011,  # any free port on 127.0.0.1 (TLJH's hub uses 15001)
    admins=c.Authenticator.admin_users, state=None, pythonpath=COURSE,
    record=f"{LEARNER_FOLDER}/.course-progress.jsonl", system_users="tljh",
)
