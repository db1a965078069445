# JupyterHub configuration for `make hub` (read by `jupyterhub -f tools/hub/jupyterhub_config.py`).
# All settings come from HUB_* environment variables (tools/hub/course_hub.py, Settings). A site's own additions go
# in a file named by HUB_EXTRA_CONFIG, loaded last -- and the safety checks run after it, so no addition can open the
# hub. JupyterHub loads this file by path: the one place that puts the checkout on the path, for the hub and for its
# proxy (python -m tools.hub.course_proxy).
import os
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
sys.path.insert(0, ROOT)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))

from tools.hub import course_hub  # noqa: E402

c = get_config()  # type: ignore[name-defined]  # noqa: F821 -- provided by JupyterHub when it loads this file
settings = course_hub.Settings.from_env()
note = course_hub.configure(c, settings)
if settings.extra_config:
    load_subconfig(settings.extra_config)  # type: ignore[name-defined]  # noqa: F821
course_hub.refuse_unsafe(c, settings)
print(f"[course hub] {note}", flush=True)
