#!/usr/bin/env bash
# Install the course's pinned environment into TLJH's shared user environment (/opt/tljh/user), CPU-only torch.
# Run on the TLJH VM, from the repository root:  sudo deploy/tljh/install-course.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
USER_ENV=${USER_ENV:-/opt/tljh/user}
version=$("$USER_ENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
case "$version" in 3.11|3.12|3.13) ;; *)
  echo "TLJH's user environment has Python $version; the course runs on 3.11, 3.12 or 3.13. Install a TLJH release" >&2
  echo "whose user environment is one of them, or: sudo $USER_ENV/bin/mamba install -p $USER_ENV python=3.12" >&2
  exit 1;;
esac
# The hub packages (jupyterhub, proxy, authenticator, culler) come with TLJH itself: install the rest of the pins.
grep -v -E '^(jupyterhub|configurable-http-proxy|jupyterhub-nativeauthenticator|jupyterhub-idle-culler)==' requirements.txt > /tmp/course-requirements.txt
"$USER_ENV/bin/pip" install --index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple \
  -r /tmp/course-requirements.txt
"$USER_ENV/bin/pip" install --no-deps --no-build-isolation --editable .  # keep this clone (e.g. /opt/pytorch-hooks-course)
"$USER_ENV/bin/python" -c "import torch, course_utils, nbgitpuller; assert not torch.version.cuda; print('course installed:', torch.__version__)"
