"""The proxy of ``make hub``: the pure-Python configurable-http-proxy 0.4.0, run by JupyterHub as
``python -m tools.hub.course_proxy`` (``c.ConfigurableHTTPProxy.command``), with

- **host routing that works.** With ``JupyterHub.subdomain_host`` every learner's server has its own origin
  (``http://NAME.localhost:8000``), which is what keeps one learner's pages from running script with another's
  cookies. JupyterHub then passes a bare ``--host-routing`` flag, which the port's command line declares as an option
  *with a value* (so the proxy refuses to start: here it gets a value), and the port looks routes up without the
  request's host (``target_for_req(None, path)``, so no host route ever matches): here, :class:`CourseProxy`'s
  handler puts the request's host first, as the Node proxy does. Both found by reading its source;
- **who is asking.** The hub counts failed logins and sign-ups per client (tools/hub/course_auth.py). Requests for the
  hub carry ``X-Course-Client``: the address this proxy saw, or ``uid:N`` for a process of another user on this
  machine, which could bind any 127.x address. The hub believes it only from a process of its own user;
- **no tokens in its log.** Tornado logs every failed request with its full URI (``?token=...``); every log record of
  this process goes through :func:`redact` first.

The one patch (tools/hub/__init__.py lists the hub's): the port's command line builds its proxy from the name
``PythonProxy`` of its module, which :func:`install` points at :class:`CourseProxy`.

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
