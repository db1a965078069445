# TLJH extra configuration for "PyTorch Hooks, hands-on": copy to /opt/tljh/config/jupyterhub_config.d/course.py.
# One thread per learner's kernel (a room does not oversubscribe the cores); every learner's server pulls the
# learner edition with nbgitpuller when it starts and opens notebook 00.
c = get_config()  # noqa: F821
c.Spawner.environment.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
LEARNER_EDITION = "https://github.com/REPLACE-ME/pytorch-hooks-learner"  # tools/hub/publish_learner_edition.py
c.Spawner.default_url = (
    "/git-pull?repo=" + LEARNER_EDITION.replace(":", "%3A").replace("/", "%2F")
    + "&branch=main&urlpath=lab%2Ftree%2Fpytorch-hooks-learner%2F00_start_here.ipynb"
)
# Each learner's server at NAME.REPLACE-ME.example.org, its own origin: a page one learner serves never runs with
# another's or the instructor's cookies. Needs DNS for *.REPLACE-ME.example.org and a wildcard certificate
# (config.yaml: https.tls with your own certificate; TLJH's Let's Encrypt cannot issue wildcards).
c.JupyterHub.subdomain_host = "https://REPLACE-ME.example.org"
