"""One visitor of a test hub over HTTP, for attacks that need no page: their own cookies, their own loopback address,
and the ``Host`` a browser would send.

Every address of 127.0.0.0/8 reaches a server listening on 127.0.0.1, so a client bound to 127.0.0.2 is, to the hub,
another machine of the room (the proxy appends the address it saw to ``X-Forwarded-For``). Nothing is followed:
each answer comes back as it is (status, headers, body).

Usage::

    mallory = HubClient("http://127.0.0.1:8000", host="localhost:8000", source="127.0.0.2")
    answer = mallory.log_in("instructor", "guess")
    answer.status_code, answer.text
"""

from __future__ import annotations

import http.cookies
import json
import re
import sqlite3
import subprocess
import time
import urllib.request
from typing import Any

import requests
from requests.adapters import HTTPAdapter

XSRF_FIELD = re.compile(r'name="_xsrf"\s+value="([^"]+)"')


def wait_until_healthy(url: str, process: subprocess.Popen, timeout: float, path: str = "/hub/health") -> bool:
    """Poll ``{url}{path}`` until it answers 200 (True), or until ``process`` exits or ``timeout`` seconds pass
    (False; the caller raises with its log).

    Usage: ``if not wait_until_healthy("http://127.0.0.1:8000", process, 120): raise RuntimeError(log)``
    """
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}{path}", timeout=5) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def read_db(path: object, query: str, *args: object) -> list[tuple]:
    """Rows of ``query`` on the hub's SQLite database at ``path``, opened read-only."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute(query, args).fetchall()


class SourceAddressAdapter(HTTPAdapter):
    """Connections from one local address."""

    def __init__(self, source: str, **kwargs: Any) -> None:
        self.source = source
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (self.source, 0)
        super().init_poolmanager(*args, **kwargs)


class HubClient:
    def __init__(self, base: str, host: str, source: str = "127.0.0.1", timeout: float = 60) -> None:
        self.base, self.host, self.source, self.timeout = base.rstrip("/"), host, source, timeout
        self.session = requests.Session()
        self.session.mount("http://", SourceAddressAdapter(source))
        # name -> (value, path). Kept by hand: the client connects to 127.0.0.1 but names the hub's host, for which
        # JupyterHub sets its session id with Domain=localhost, a cookie Python's jar files under another host.
        self.cookies: dict[str, tuple[str, str]] = {}

    def request(self, method: str, path: str, host: str | None = None, **kwargs: Any) -> requests.Response:
        cookie = "; ".join(f"{name}={value}" for name, (value, where) in self.cookies.items() if path.startswith(where))
        headers = {"Host": host or self.host, "User-Agent": f"course-test/{self.source}",
                   **({"Cookie": cookie} if cookie else {}), **kwargs.pop("headers", {})}
        answer = self.session.request(method, self.base + path, headers=headers, allow_redirects=False,
                                      timeout=self.timeout, **kwargs)
        self.session.cookies.clear()
        for line in answer.raw.headers.getlist("Set-Cookie"):
            parsed = http.cookies.SimpleCookie()
            parsed.load(line)
            for name, morsel in parsed.items():
                self.cookies[name] = (morsel.coded_value, morsel["path"] or "/")
        return answer

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def xsrf(self, path: str = "/hub/login", **kwargs: Any) -> str:
        """The XSRF token of the form on ``path`` (its cookie comes with it), as a browser that opened the page has."""
        page = self.get(path, **kwargs)
        found = XSRF_FIELD.search(page.text)
        if not found:
            raise AssertionError(f"no _xsrf field on {path}: HTTP {page.status_code} {page.text[:300]}")
        return found.group(1)

    def post(self, path: str, form: dict[str, str], xsrf: str | None = None, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, data={**form, **({"_xsrf": xsrf} if xsrf else {})}, **kwargs)

    def log_in(self, name: str, password: str, xsrf: str | None = None) -> requests.Response:
        """The login form's POST (302 and a session cookie when it worked, the form again when not)."""
        return self.post("/hub/login", {"username": name, "password": password}, xsrf=xsrf or self.xsrf())

    def sign_up(self, name: str, password: str) -> requests.Response:
        return self.post("/hub/signup", {"username": name, "signup_password": password,
                                         "signup_password_confirmation": password}, xsrf=self.xsrf("/hub/signup"))


# What a learner runs from their terminal (any Python, the standard library only): COUNT logins (for NAME, a wrong
# password each) or sign-ups (as NAME0, NAME1, ...) at BASE (the hub's own port, which is in every learner's
# JUPYTERHUB_API_URL, or the room's), each claiming another X-Forwarded-For and X-Real-Ip; with SOURCE=rotate each
# from another 127.0.0.x address, with SOURCE=an address from that one. Prints a JSON list: [status, a password was
# checked, an account was made] per attempt.
FLOOD = r"""
import http.client, json, re, secrets, sys, urllib.parse
base, host, what, name, count, source = sys.argv[1:7]
where = urllib.parse.urlsplit(base)
page = "/hub/signup" if what == "signup" else "/hub/login"


def ask(i, method, body=None, cookie=""):
    bind = (f"127.0.0.{2 + i % 250}" if source == "rotate" else source, 0) if source else None
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=60, source_address=bind)
    headers = {"Host": host, "Cookie": cookie, "X-Forwarded-For": f"198.51.100.{i % 250}",
               "X-Real-Ip": f"203.0.113.{i % 250}", "Content-Type": "application/x-www-form-urlencoded"}
    connection.request(method, page, body=body, headers=headers)
    answer = connection.getresponse()
    text, cookies = answer.read().decode(errors="replace"), answer.headers.get_all("Set-Cookie") or []
    connection.close()
    return answer.status, text, "; ".join(c.split(";")[0] for c in cookies)


results = []
for i in range(int(count)):
    _, text, cookie = ask(i, "GET")
    form = {"_xsrf": re.search(r'name="_xsrf"\s+value="([^"]+)"', text).group(1)}
    password = secrets.token_urlsafe(12)
    form.update({"username": f"{name}{i}", "signup_password": password, "signup_password_confirmation": password}
                if what == "signup" else {"username": name, "password": password})
    status, text, _ = ask(i, "POST", urllib.parse.urlencode(form), cookie)
    results.append([status, "Invalid username or password" in text, "sent to the admin" in text])
print(json.dumps(results))
"""


def flood_as(user: str, base: str, host: str, what: str, name: str, count: int, source: str = "") -> list[list]:
    """Run :data:`FLOOD` as the system user ``user`` (``runuser``, with the system's Python). Usage:
    ``flood_as("mallory", "http://127.0.0.1:8081", "localhost:8000", "login", "instructor", 30)``"""
    done = subprocess.run(["runuser", "-u", user, "--", "/usr/bin/python3", "-c", FLOOD, base, host, what, name,
                           str(count), source], capture_output=True, text=True, timeout=600, cwd="/")
    if done.returncode:
        raise AssertionError(f"the flood as {user} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
