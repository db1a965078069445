"""The proxy of ``make hub``: the pure-Python configurable-http-proxy, with host routing that works and no tokens in
its log.

JupyterHub starts it as ``configurable-http-proxy`` (``c.ConfigurableHTTPProxy.command``). Two things in
configurable-http-proxy 0.4.0 (the pure-Python port) are fixed here, both found by reading its source, and one added:

- **Host routing.** With ``JupyterHub.subdomain_host`` every learner's server has its own origin
  (``http://NAME.localhost:8000``), which is what keeps one learner's pages from running script with another's
  cookies. JupyterHub then passes a bare ``--host-routing`` flag, which the port's command line declares as an option
  *with a value* (so the proxy refuses to start), and the port looks routes up without the request's host
  (``target_for_req(None, path)``), so no host route ever matches. Here ``--host-routing`` is a flag and the lookup
  puts the request's host name first, as the Node proxy does.
- **Who is asking.** The hub counts failed logins and sign-ups per client (tools/hub/course_auth.py). Requests for the
  hub carry ``X-Course-Client``: the address this proxy saw, or ``uid:N`` for a process of another user on this
  machine, which could bind any 127.x address. The hub believes it only from a process of its own user.
- **Tokens in the log.** Tornado logs every failed request with its full URI (``?token=...``); every log record of
  this process goes through :func:`redact` first.

Usage (what JupyterHub runs): ``python tools/hub/course_proxy.py --ip 127.0.0.1 --port 8000 ... --host-routing``.
"""

from __future__ import annotations

import logging
import re
import sys
import urllib.parse

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
    """Patch the proxy (host routing, redaction); returns the command line without the bare ``--host-routing``."""
    from configurable_http_proxy import configproxy, handlers

    from course_auth import CLIENT_HEADER, connection_client  # run as a script: its folder is on the path

    host_routing = "--host-routing" in argv
    argv = [arg for arg in argv if arg != "--host-routing"]

    class HostRoutingProxyHandler(handlers.ProxyHandler):
        async def get_target_url(self, path):  # type: ignore[no-untyped-def]
            if not self.proxy.host_routing:
                return await super().get_target_url(path)
            host = (self.request.host_name or "").lower()
            self.target = self.proxy.target_for_req(host, "/" + path.lstrip("/"))  # path comes without its "/"
            if self.target is None:
                await self.handle_proxy_error(404, err=None)
                return None
            target = urllib.parse.urlparse(self.target["target"])
            query = "&".join(q for q in (target.query, self.request.query) if q)
            proxy_path = urllib.parse.quote(path)
            if CLIENT_HEADER in self.request.headers:  # a client's own claim: never passed on
                del self.request.headers[CLIENT_HEADER]
            if self.target["prefix"] == "/":  # the hub: who connected, which the hub believes from this proxy only
                self.request.headers[CLIENT_HEADER] = connection_client(self.request)[0]
            return target._replace(query=query, path=target.path.rstrip("/") + "/" + proxy_path.lstrip("/")).geturl()

    original_init = configproxy.PythonProxy.__init__

    def init(self, options=()):  # type: ignore[no-untyped-def]
        options = dict(options)
        options["host_routing"] = host_routing
        original_init(self, options)

    configproxy.ProxyHandler = HostRoutingProxyHandler
    configproxy.PythonProxy.__init__ = init
    redact_logs()
    return argv


def main() -> None:
    from configurable_http_proxy import cli  # adds the root log handler that install() filters

    sys.argv = [sys.argv[0], *install(sys.argv[1:])]
    cli.main()


if __name__ == "__main__":
    main()
