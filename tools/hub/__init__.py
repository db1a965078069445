"""The classroom server: ``make hub`` (``python -m tools.hub.serve``) and what the ``deploy/`` recipes load from it.
JupyterHub loads ``jupyterhub_config.py`` by path; ``course_auth.py`` is also mounted alone by Zero to JupyterHub.

The hub changes other people's code in two places only, each because the version the course pins does something a
room cannot have, and each pinned by ``tests/test_course_auth.py::test_upstream_still_does_what_the_hub_works_around``
(which fails once upstream changes, so that the patch can go):

- JupyterHub 6.1.1 answers ``/hub/...`` on every host its proxy sends it, a learner's subdomain included:
  ``course_auth.serve_hub_pages_only_on_the_hub_host`` wraps ``BaseHandler.prepare``;
- configurable-http-proxy 0.4.0 (Python) refuses JupyterHub's bare ``--host-routing`` and looks routes up without the
  request's host: ``course_proxy.install`` points its command line's ``PythonProxy`` at a subclass.

NativeAuthenticator 1.3.0's handlers are subclassed, not patched (course_auth.py says what each changes and why).
"""
