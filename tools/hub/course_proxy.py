"""The proxy of ``make hub``: the pure-Python configurable-http-proxy 0.4.0, run by JupyterHub as
``python -m tools.hub.course_proxy`` (``c.ConfigurableHTTPProxy.command``), with

- **host routing that works** (one origin per learner, ``subdomain_host``): JupyterHub passes a bare
  ``--host-routing``, which the port declares as an option *with a value* (it refuses to start), and the port looks
  routes up without the request's host (``target_for_req(None, path)``): :class:`CourseProxy`'s handler puts it first;
- **who is asking**: requests for the hub carry ``X-Course-Client``, the address this proxy saw or ``uid:N`` for
  another local user's process (course_auth.client_address believes it from the hub's own user only);
- **no tokens in its log**: every log record of this process goes through :func:`redact` (tornado logs full URIs).

The one patch (tools/hub/__init__.py lists the hub's): :func:`install` points the port's ``cli.PythonProxy`` at
:class:`CourseProxy`.

Usage (what JupyterHub runs): ``python -m tools.hub.course_proxy --ip 127.0.0.1 --port 8000 ... --host-routing``.
"""

from __future__ import annotations

import logging
import re
import sys
import urllib.parse
from typing import Any

SECRET_KEYS = r"(?:token|auth|key|code|state|_xsrf)"
SECRET_QUERY = re.compile(rf"(?i)([?&]{SECRET_KEYS}=)[^&\s\"'#]*")
# The same inside a URL-encoded URL (``/hub/login?next=%2Fuser%2Fa%3Ftoken%3Dabc``), which JupyterHub's own
# scrubbing misses (found here: its log printed the token of a redirected request in full).
SECRET_QUERY_ENCODED = re.compile(rf"(?i)((?:%3F|%26){SECRET_KEYS}%3D)[^&%\s\"'#]*")


def redact(text: str) -> str:
    """``/user/a/?token=abc&x=1`` -> ``/user/a/?token=[secret]&x=1`` (query values that carry credentials, also
    URL-encoded inside another URL's query)."""
    return SECRET_QUERY_ENCODED.sub(r"\1[secret]", SECRET_QUERY.sub(r"\1[secret]", text))


def redact_logs(names: tuple[str, ...] = ("tornado.access", "tornado.application", "tornado.general",
                                          "JupyterHub", "configurable_http_proxy", "")) -> None:
    """Put :class:`RedactingFilter` on these loggers and on every handler of the root logger (this process)."""
    redacting = RedactingFilter()
    for name in names:
        logging.getLogger(name).addFilter(redacting)
    for handler in logging.root.handlers:
        handler.addFilter(redacting)


class RedactingFilter(logging.Filter):
    """Rewrites each record's message with :func:`redact` before any handler writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def install(argv: list[str]) -> list[str]:
    """Make the port's command line build :class:`CourseProxy`, redact this process's log; returns the command line
    with a value for ``--host-routing``."""
    from configurable_http_proxy import cli, configproxy, handlers
    from tornado.web import Application

    from .course_auth import CLIENT_HEADER, connection_client

    class CourseProxyHandler(handlers.ProxyHandler):
        async def get_target_url(self, path):
            if not self.proxy.host_routing:
                return await super().get_target_url(path)
            host = (self.request.host_name or "").lower()
            self.target = self.proxy.target_for_req(host, "/" + path.lstrip("/"))  # path comes without its "/"
            if self.target is None:
                await self.handle_proxy_error(404, err=None)
                return None
            target = urllib.parse.urlparse(self.target["target"])
            query = "&".join(q for q in (target.query, self.request.query) if q)
            if CLIENT_HEADER in self.request.headers:  # a client's own claim: never passed on
                del self.request.headers[CLIENT_HEADER]
            if self.target["prefix"] == "/":  # the hub: who connected, which the hub believes from this proxy only
                self.request.headers[CLIENT_HEADER] = connection_client(self.request)[0]
            path = target.path.rstrip("/") + "/" + urllib.parse.quote(path).lstrip("/")
            return target._replace(query=query, path=path).geturl()

    class CourseProxy(configproxy.PythonProxy):
        def __init__(self, options: Any = ()) -> None:
            super().__init__(options)
            self.proxy_app = Application([(r"/(.*)", CourseProxyHandler, {"proxy": self})])

    cli.PythonProxy = CourseProxy  # the one patch (see the module's text)
    redact_logs()
    return [("--host-routing=1" if arg == "--host-routing" else arg) for arg in argv]


def main() -> None:
    from configurable_http_proxy import cli  # adds the root log handler that install() filters

    sys.argv = [sys.argv[0], *install(sys.argv[1:])]
    cli.main()


if __name__ == "__main__":
    main()
