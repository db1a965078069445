# TLJH extra configuration for "PyTorch Hooks, hands-on": copy to /opt/tljh/config/jupyterhub_config.d/course.py.
# One thread per learner's kernel (a room does not oversubscribe the cores); every learner's server pulls the
# learner edition with nbgitpuller when it starts and opens notebook 00.
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

# The instructor's dashboard of the room (instructor guide, "Seeing the room"): a JupyterHub service that only admins
# may open, started by the hub (root under TLJH) with the course's Python from TLJH's user environment. It reads
# nothing but each learner's progress record, which their checks write beside the pulled notebooks:
# ~jupyter-NAME/pytorch-hooks-learner/.course-progress.jsonl (owned by the system user jupyter-NAME).
COURSE = os.environ.get("PYTORCH_HOOKS_COURSE", "/opt/pytorch-hooks-course")  # the clone install-course.sh installed
USER_ENV_PYTHON = "/opt/tljh/user/bin/python"  # TLJH's user environment (install-course.sh's USER_ENV)
if not os.path.isfile(os.path.join(COURSE, "tools", "hub", "dashboard.py")):
    raise RuntimeError(f"course.py: the course's clone is not at {COURSE} (tools/hub/dashboard.py is missing): clone "
                       "the course there and run deploy/tljh/install-course.sh from it, as the instructor guide says")
sys.path.insert(0, os.path.join(COURSE, "tools", "hub"))
import dashboard  # noqa: E402

dashboard.configure_dashboard(
    c, python=USER_ENV_PYTHON, port=15011,  # any free port on 127.0.0.1 (TLJH's hub uses 15001)
    admins=c.Authenticator.admin_users if "admin_users" in c.Authenticator else (),
    state=None, pythonpath=COURSE, record=f"{LEARNER_FOLDER}/.course-progress.jsonl", system_users="tljh",
)
