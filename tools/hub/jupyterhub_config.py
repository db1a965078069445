# JupyterHub configuration for `make hub` (read by `jupyterhub -f tools/hub/jupyterhub_config.py`).
# All settings come from HUB_* environment variables (see tools/hub/course_hub.py, Settings); tools/hub/serve.py
# sets them. A site's own additions go in a file named by HUB_EXTRA_CONFIG, loaded last -- and the safety checks
# run after it, so no addition can open the hub.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import course_hub  # noqa: E402

c = get_config()  # noqa: F821 -- provided by JupyterHub when it loads this file
settings = course_hub.Settings.from_env()
note = course_hub.configure(c, settings)
if settings.extra_config:
    load_subconfig(settings.extra_config)  # noqa: F821
course_hub.refuse_unsafe(c, settings)
print(f"[course hub] {note}", flush=True)
