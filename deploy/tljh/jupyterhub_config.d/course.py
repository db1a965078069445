# TLJH extra configuration for "PyTorch Hooks, hands-on": copy to /opt/tljh/config/jupyterhub_config.d/course.py.
# TLJH loads it after its own settings (config.yaml). It takes the course's sign-in and limits from the course's clone
# (tools/hub/course_auth.py and course_hub.py, the modules `make hub` runs: no copy here), runs the progress dashboard,
# gives each learner one thread per kernel, and pulls the learner edition with nbgitpuller when a server starts.
import os
import sys

c = get_config()  # noqa: F821
c.Spawner.environment.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
LEARNER_EDITION = "https://github.com/REPLACE-ME/pytorch-hooks-learner"  # tools/hub/publish_learner_edition.py
LEARNER_FOLDER = "pytorch-hooks-learner"  # where nbgitpuller puts it, in each learner's home
c.Spawner.default_url = (
    "/git-pull?repo=" + LEARNER_EDITION.replace(":", "%3A").replace("/", "%2F")
    + f"&branch=main&urlpath=lab%2Ftree%2F{LEARNER_FOLDER}%2F00_start_here.ipynb"
)
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
sys.path.insert(0, os.path.join(COURSE, "tools", "hub"))
import course_auth  # noqa: E402
import course_hub  # noqa: E402
import dashboard  # noqa: E402

# Who gets in: the course's sign-in (instructor guide, "Signing in"), with config.yaml's users.admin as instructors.
# Their account is made when the hub first starts, with a random password in STATE/instructor-password (root's,
# 0600), before anybody can sign up under that name; approving is a POST; wrong passwords block a learner's name
# after ten (never an instructor's) and any address after twenty a minute; a deleted learner's name (and so their
# jupyter-NAME account and home) is never handed to a new sign-up; /hub/ answers only on the hub's own host.
course_auth.configure_sign_in(c, admins=c.Authenticator.admin_users, state=STATE, system_users="tljh")

# Each learner's server, a systemd unit of its own (SystemdSpawner), with make hub's limits where systemd sets them:
# - /tmp and /var/tmp of its own (PrivateTmp), removed when it stops: no learner uses or plants another's
#   /tmp/torchinductor_NAME, and the kernels' sockets lie there (below);
# - at most make hub's HUB_TASKS_MAX processes and threads (TasksMax: a fork bomb stops there);
# - its /dev/shm files removed when it stops (RemoveIPC); while it runs they count in config.yaml's limits.memory
#   (MemoryMax counts shared memory);
# - kernels on unix sockets in that private /tmp, not on TCP ports of the VM's loopback, where every user of the VM
#   could subscribe to another's kernel output; and Python kernels without the debugger, whose debugpy would listen
#   on such a port with no password (any user of the VM could attach and run code as the learner).
LIMITS = course_hub.Settings()  # make hub's defaults
c.SystemdSpawner.isolate_tmp = True
c.SystemdSpawner.unit_extra_properties = {"TasksMax": str(LIMITS.tasks_max), "RemoveIPC": "yes"}
c.Spawner.args.extend([*course_hub.KERNELS_ON_UNIX_SOCKETS, *course_hub.KERNELS_WITHOUT_DEBUGGER])
c.Spawner.environment.update({"JUPYTER_RUNTIME_DIR": "/tmp/jupyter-runtime"})  # the unit's /tmp: short socket paths

# The instructor's dashboard of the room (instructor guide, "Seeing the room"): a JupyterHub service that only admins
# may open, started by the hub (root under TLJH) with the course's Python from TLJH's user environment. It reads
# nothing but each learner's progress record, which their checks write beside the pulled notebooks:
# ~jupyter-NAME/pytorch-hooks-learner/.course-progress.jsonl (owned by the system user jupyter-NAME).
dashboard.configure_dashboard(
    c, python=USER_ENV_PYTHON, port=15011,  # any free port on 127.0.0.1 (TLJH's hub uses 15001)
    admins=c.Authenticator.admin_users, state=None, pythonpath=COURSE,
    record=f"{LEARNER_FOLDER}/.course-progress.jsonl", system_users="tljh",
)
