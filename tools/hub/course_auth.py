"""Who gets into a course hub, and on which host its pages answer: the sign-in of ``make hub`` (course_hub.py) and
of the ``deploy/`` recipes (TLJH, Z2JH). NativeAuthenticator 1.3.0 (learners sign up, the instructor approves), plus:

- **the instructor's account exists before sign-up opens** (random first password in a 0600 file): stock
  NativeAuthenticator approves a sign-up under an admin's name at once (on TLJH: sudo, root on the VM);
- **approving and discarding are POSTs** with the XSRF token (``templates/authorization-area.html``): stock changes
  an account on a GET, which an ``<img>`` on any page the instructor opens can send;
- **password budgets nobody can turn against the right password** (OWASP's device cookies,
  https://owasp.org/www-community/Slow_Down_Online_Guessing_Attacks_with_Device_Cookies): a browser that logged in
  as NAME before spends its own budget; any other client its address's and, for a learner's name, the name's (never
  an instructor's: its password is long instead). Every check spends one, right or wrong, one at a time per client,
  off the event loop; past a budget: 429, no hash computed;
- **a client cannot choose its address** (:func:`client_address`): a local process is its user (``uid:N``); only the
  hub's own proxy says who it saw;
- **sign-ups** have a budget per client (429 before any hash);
- **names are never handed down**: a learner deleted in the hub is retired, and a name whose system account or group
  the hub does not know is refused, so nobody gets a former learner's home or a system group;
- **the hub's pages answer only on the hub's own host**: with ``subdomain_host`` a request for ``/hub/...`` on a
  learner's origin is redirected (GET) or refused, so the instructor never logs in where a learner's page can read.

It imports only JupyterHub, NativeAuthenticator, bcrypt, tornado, traitlets and the standard library: Zero to
JupyterHub mounts this very file beside its configuration.

Usage (a JupyterHub config file)::

    import course_auth
    course_auth.configure_sign_in(c, admins={"instructor"}, state="/srv/jupyterhub")
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import grp
import hashlib
import ipaddress
import math
import os
import pwd
import re
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

# A name that is a valid system user name and a valid JupyterHub name; lower case (NativeAuthenticator lowers).
USERNAME_PATTERN = r"^[a-z][a-z0-9_-]{1,31}$"
NEVER_LEARNERS = frozenset({"root", "nobody", "daemon", "bin", "sys", "sync", "games", "man", "mail", "www-data"})
# The instructor's name is never blocked after failed logins, so its password must be out of guessing range.
ADMIN_PASSWORD_LENGTH = 16
TEMPLATES = Path(__file__).resolve().parent / "templates"  # authorization-area.html: approve and discard by POST
PASSWORD_FILE = "instructor-password"
RETIRED_FILE = "retired-names"
# How the hub's names map to system accounts: "" none (one shared account, or a pod per learner), "same" (make hub
# as root: learner NAME is the system user NAME), "tljh" (The Littlest JupyterHub: the system user jupyter-NAME).
SYSTEM_USERS = ("", "same", "tljh")
ALLOWED_FAILED_LOGINS = 10  # wrong passwords a minute for a learner's name (from unknown browsers), or from one browser
FAILED_LOGINS_PER_ADDRESS = 20  # failed password checks a minute from one client (unknown browsers)
SIGNUPS_PER_ADDRESS = 30  # sign-ups a minute from one client (a room behind one NAT address shares them)
BCRYPT_MAX_BYTES = 72  # bcrypt hashes at most 72 bytes of a password; bcrypt 5 refuses a longer one
TOO_LONG = (f"Your password is longer than {BCRYPT_MAX_BYTES} bytes, the most a password can have here (a Chinese "
            "character takes 3): choose a shorter one.")
DEVICE_COOKIE = "course-device-"  # + the name: a browser that logged in (or signed up) as that name before
DEVICE_DAYS = 30
CLIENT_HEADER = "X-Course-Client"  # who make hub's proxy saw (tools/hub/course_proxy.py): believed from it only
# A password and its bcrypt hash made off the event loop, with the request's handler, while NativeAuthenticator's
# create_user or change_password runs in that request's context: they use that hash instead of hashing on the loop.
_HASHED: contextvars.ContextVar[tuple[str, bytes, Any]] = contextvars.ContextVar("course_hashed")
HUB_HOST_ONLY = "_course_hub_host_only"  # marks BaseHandler.prepare once it refuses /hub/ on other hosts


def tljh_system_username(name: str) -> str:
    """TLJH's system user for hub user ``name``: ``jupyter-NAME``, from 26 characters on its first 26, ``-`` and 5 hex
    digits of its SHA-256 (``tljh/normalize.py``).
    Usage: ``tljh_system_username("ada")`` -> ``"jupyter-ada"``
    """
    wanted = f"jupyter-{name}"
    if len(wanted) < 26:
        return wanted
    return f"{wanted[:26]}-{hashlib.sha256(wanted.encode('utf-8')).hexdigest()[:5]}"


def system_username(name: str, system_users: str) -> str | None:
    """The system account behind hub user ``name`` (see :data:`SYSTEM_USERS`), or None when there is none."""
    if system_users not in SYSTEM_USERS:
        raise ValueError(f"system_users is one of {SYSTEM_USERS}, got {system_users!r}")
    if system_users == "tljh":
        return tljh_system_username(name)
    return name if system_users == "same" else None


def instructor_name(name: str) -> str:
    """``name`` in lower case; ValueError when it cannot be an instructor's (a system account, say)."""
    if not re.match(USERNAME_PATTERN, str(name).lower()) or str(name).lower() in NEVER_LEARNERS:
        raise ValueError(f"{name!r} is not a usable instructor name: lower-case letters, digits, '-' or '_', 2-32 "
                         "characters, starting with a letter, and not a system account")
    return str(name).lower()


def instructor_password(path: str | Path) -> str:
    """The instructor's first password in ``path``: made once (16 random characters, mode 0600), then kept.

    Usage: ``instructor_password("/opt/tljh/state/instructor-password")``
    """
    path = Path(path)
    if not path.exists():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(12) + "\n")
    return path.read_text(encoding="utf-8").strip()


# -- who is asking -------------------------------------------------------------------------------------------------
def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def _proc_net_address(address: tuple[str, int]) -> str:
    """``("127.0.0.1", 8000)`` as /proc/net/tcp writes it: ``0100007F:1F40`` (each 32-bit word in host order)."""
    host, port = address[0], address[1]
    packed = socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    return "".join(packed[i:i + 4][::-1].hex() for i in range(0, len(packed), 4)).upper() + f":{port:04X}"


def socket_owner(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the ESTABLISHED local TCP connection ``client`` -> ``server`` (/proc/net/tcp), or None: a
    closed socket (FIN_WAIT2, TIME_WAIT) is listed with uid 0 whoever opened it (attack N1).

    Usage: ``socket_owner(sock.getpeername(), sock.getsockname())`` on a socket accepted from 127.0.0.1"""
    want = (_proc_net_address(client), _proc_net_address(server))
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 7 and (fields[1], fields[2], fields[3]) == (*want, "01"):  # 01: ESTABLISHED
                return int(fields[7])
    return None


def connection_client(request: Any) -> tuple[str, bool]:
    """Who opened ``request``'s connection, and whether it is this process's own user: another local user's process
    is ``uid:N`` (it may bind any 127.x address), one whose socket is not found ``uid:?``; else its address."""
    try:
        sock = request.connection.stream.socket
        peer, local = sock.getpeername()[:2], sock.getsockname()[:2]
    except (AttributeError, OSError, TypeError):
        return str(getattr(request, "remote_ip", "") or ""), False
    if not is_loopback(peer[0]):
        return peer[0], False
    uid = socket_owner(peer, local)
    if uid == os.getuid():
        return peer[0], True
    return f"uid:{uid if uid is not None else '?'}", False


def client_address(handler: Any) -> str:
    """Who a request comes from, as the budgets count it, never what the client claims: another local user's process
    (a learner's terminal, even at the hub's own port) is ``uid:N``; the hub's own proxy (make hub's, TLJH's Traefik)
    says who it saw (:data:`CLIENT_HEADER`, else the last ``X-Forwarded-For``, every loopback address one client); a
    learner's server on another host (a Z2JH pod) is its own address; anything else (Z2JH's proxy pod) the last
    ``X-Forwarded-For``. Not tornado's ``remote_ip``: it prefers ``X-Real-Ip``, which any client can send."""
    request = handler.request
    peer, own = connection_client(request)
    forwarded = [part.strip() for part in request.headers.get("X-Forwarded-For", "").split(",") if part.strip()]
    if own:
        if CLIENT_HEADER in request.headers:
            return request.headers[CLIENT_HEADER]
        return ("127.0.0.1" if is_loopback(forwarded[-1]) else forwarded[-1]) if forwarded else peer
    if peer.startswith("uid:") or is_loopback(peer) or peer in _server_addresses(handler):
        return peer
    return forwarded[-1] if forwarded else peer


def _server_addresses(handler: Any) -> set[str]:
    """The addresses of the learners' running servers (a Z2JH pod's address; 127.0.0.1 on one machine)."""
    from jupyterhub import orm

    db = getattr(handler, "db", None)
    return {server.ip for server in db.query(orm.Server) if server.ip} if db is not None else set()


class FailedLoginBudget:
    """Password checks (or sign-ups) per client: ``per_minute`` at once, refilled at ``per_minute`` a minute.

    Usage::

        budget = FailedLoginBudget(20)
        wait = budget.take("203.0.113.7")   # 0.0: go on and check; else refuse, try again in `wait` s
        budget.give_back("203.0.113.7")     # no check was made
    """

    def __init__(self, per_minute: int = FAILED_LOGINS_PER_ADDRESS, clock: Callable[[], float] = time.monotonic):
        if per_minute < 1:
            raise ValueError(f"a budget per address must be at least 1 a minute, got {per_minute}")
        self.capacity = float(per_minute)
        self.refill_s = 60.0 / per_minute
        self.clock = clock
        self._level: dict[str, tuple[float, float]] = {}  # address -> (tokens left, when counted)

    def _tokens(self, address: str, now: float) -> float:
        tokens, then = self._level.get(address, (self.capacity, now))
        return min(self.capacity, tokens + (now - then) / self.refill_s)

    def take(self, address: str) -> float:
        now = self.clock()
        tokens = self._tokens(address, now)
        if tokens < 1:
            self._level[address] = (tokens, now)
            return (1 - tokens) * self.refill_s
        self._level[address] = (tokens - 1, now)
        if len(self._level) > 10_000:  # forget the addresses whose budget is full again
            self._level = {a: v for a, v in self._level.items() if self._tokens(a, now) < self.capacity}
        return 0.0

    def give_back(self, address: str) -> None:
        now = self.clock()
        self._level[address] = (min(self.capacity, self._tokens(address, now) + 1), now)

    def wait(self, address: str) -> float:
        """Seconds until ``address`` has one again (0.0: it has one now). Takes nothing."""
        return max(0.0, (1 - self._tokens(address, self.clock())) * self.refill_s)


def _off_hub_host(handler: Any) -> bool:
    """True for a request for ``/hub/...`` on a host below ``subdomain_host``'s (a learner's server, a service)."""
    from urllib.parse import urlparse

    subdomain_host = handler.subdomain_host
    if not subdomain_host:
        return False
    hub_host = (urlparse(subdomain_host).hostname or "").lower()
    host = (handler.request.host_name or "").lower()
    hub_prefix = handler.base_url.rstrip("/") + "/hub"
    path = handler.request.path
    return (bool(hub_host) and host.endswith("." + hub_host)
            and (path == hub_prefix or path.startswith(hub_prefix + "/")))


def serve_hub_pages_only_on_the_hub_host() -> None:
    """The patch of ``BaseHandler.prepare`` (in this process: the hub): ``/hub/...`` on a learner's or a service's
    host is redirected to the hub's host (GET, HEAD) or gets 404. JupyterHub 6.1.1 answers ``/hub/*`` on every host
    its proxy routes to it (``mallory.localhost:8000/hub/login``: 200).

    Usage: called by :class:`CourseNativeAuthenticator` when the hub creates it; idempotent."""
    from jupyterhub.handlers.base import BaseHandler

    if getattr(BaseHandler.prepare, HUB_HOST_ONLY, False):
        return
    original = BaseHandler.prepare

    @functools.wraps(original)
    async def prepare(self: Any) -> Any:
        if _off_hub_host(self):
            self.log.warning("Refused %s %s on %s: the hub answers on its own host only", self.request.method,
                             self.request.path, self.request.host_name)
            if self.request.method in ("GET", "HEAD") and "/hub/api/" not in self.request.path + "/":
                self.redirect(self.subdomain_host.rstrip("/") + self.request.uri)
            else:
                self.set_status(404)
                self.set_header("Content-Type", "text/plain; charset=utf-8")
                self.finish("The hub answers on its own host only.\n")
            return None
        return await original(self)

    setattr(prepare, HUB_HOST_ONLY, True)
    BaseHandler.prepare = prepare


@functools.cache
def course_authenticator_class() -> type:  # noqa: C901 -- ruff counts the branches of the class it builds
    """``CourseNativeAuthenticator`` (the module's text), made once per process on first use (it imports JupyterHub).

    Usage: ``c.JupyterHub.authenticator_class = course_authenticator_class()`` (or :func:`configure_sign_in`)"""
    import bcrypt
    from jupyterhub import orm
    from jupyterhub.scopes import needs_scope
    from nativeauthenticator import NativeAuthenticator
    from nativeauthenticator.handlers import (
        ChangePasswordAdminHandler,
        ChangePasswordHandler,
        DiscardHandler,
        SignUpHandler,
        ToggleAuthorizationHandler,
    )
    from nativeauthenticator.handlers import LoginHandler as NativeLoginHandler
    from nativeauthenticator.orm import UserInfo
    from tornado import web
    from tornado.escape import url_escape
    from tornado.httputil import url_concat
    from traitlets import Integer, Unicode

    class CourseLoginHandler(NativeLoginHandler):
        """NativeAuthenticator 1.3.0's login page without its faults on JupyterHub 6: ``_render()`` lacks ``sync``,
        its POST uses a statsd client JupyterHub 6 no longer has, and it checks a failed password a second time, on
        the event loop, to choose its message (here the authenticator leaves it on the handler)."""

        def _render(self, login_error: str | None = None, username: str | None = None, sync: bool = False,
                    **kwargs: Any) -> Any:
            return self.render_template(
                "native-login.html", sync=sync,
                next=url_escape(self.get_argument("next", default="")), username=username, login_error=login_error,
                custom_html=self.authenticator.custom_html, login_url=self.settings["login_url"],
                enable_signup=self.authenticator.enable_signup, two_factor_auth=self.authenticator.allow_2fa,
                authenticator_login_url=url_concat(self.authenticator.login_url(self.hub.base_url),
                                                   {"next": self.get_argument("next", "")}),
            )

        def get_next_url(self, user: Any = None, default: Any = None) -> str:
            """JupyterHub's, but only to the hub or the user's own server: never to a learner's page (attack N6)."""
            from posixpath import normpath
            from urllib.parse import unquote, urlparse

            url = urlparse(super().get_next_url(user, default))
            path = normpath(unquote(url.path)) + "/"  # as the browser will resolve it (``/hub/%2e%2e/user/bob``)
            own = [(urlparse(self.subdomain_host).netloc, self.hub.base_url)]
            if user is not None:
                own.append((urlparse(user.url).netloc, user.prefix))
            if any(url.netloc in ("", host) and path.startswith(prefix) for host, prefix in own):
                return url.geturl()
            return self.hub.base_url + "home"

        async def post(self) -> None:
            data = {argument: self.get_argument(argument, strip=False) for argument in self.request.arguments}
            user = await self.login_user(data)
            if user:
                self._jupyterhub_user = user
                self.redirect(self.get_next_url(user))
                return
            error = getattr(self, "course_login_error", "") or "Invalid username or password."
            self.finish(await self._render(login_error=error, username=data.get("username", "")))

    class PostOnlyToggleAuthorization(ToggleAuthorizationHandler):
        """/hub/authorize/NAME: the change on a POST only (with the form's XSRF token); a GET changes nothing."""

        post = ToggleAuthorizationHandler.get

        async def get(self, slug: str) -> None:
            self.redirect(self.hub.base_url + "authorize")

    class PostOnlyDiscard(DiscardHandler):
        """/hub/discard/NAME: the same, for discarding a sign-up that was not approved."""

        post = DiscardHandler.get

        async def get(self, user_name: str) -> None:
            self.redirect(self.hub.base_url + "authorize")

    class CourseSignUpHandler(SignUpHandler):
        """/hub/signup: the client's sign-up budget first (429, nothing hashed), then the password hashed off the
        event loop (stock: 0.2 s of bcrypt on it, holding every page). A sign-up that cannot succeed spends nothing:
        NativeAuthenticator refuses it with its own message, before any hash."""

        async def post(self) -> None:
            authenticator = self.authenticator
            username = self.get_body_argument("username", "", strip=False)
            password = self.get_body_argument("signup_password", "", strip=False)
            confirmation = self.get_body_argument("signup_password_confirmation", "", strip=False)
            if authenticator.enable_signup and len(password.encode("utf-8", "surrogatepass")) > BCRYPT_MAX_BYTES:
                await self._refuse(TOO_LONG)  # bcrypt refuses it (ValueError: a 500 page in stock NativeAuthenticator)
                return
            if not (authenticator.enable_signup and password == confirmation
                    and authenticator.could_sign_up(username, password)):
                await super().post()
                return
            address = client_address(self)
            if authenticator.signup_budget.take(address):
                self.set_status(429)
                wait = max(1, math.ceil(authenticator.signup_budget.wait(address)))
                authenticator.refused(address, wait, "sign-ups")
                await self._refuse(f"Too many sign-ups from your address: try again in {wait} s.")
                return
            async with authenticator.hashed(password, self):
                await super().post()

        async def _refuse(self, message: str) -> None:
            """The sign-up page again, with ``message`` in its alert (as NativeAuthenticator shows its own)."""
            authenticator = self.authenticator
            self.finish(await self.render_template(
                "signup.html", ask_email=authenticator.ask_email_on_signup, alert="alert-danger",
                result_message=message, two_factor_auth=authenticator.allow_2fa,
                recaptcha_key=authenticator.recaptcha_key, tos=authenticator.tos))

    class CourseChangePassword(ChangePasswordHandler):
        """/hub/change-password: stock's page and messages, the current password checked within a login's budgets
        and both hashes off the loop (stock's, on it: three loops of posts held the hub's login page 0.76 s)."""

        @web.authenticated
        async def post(self) -> None:
            user = await self.get_current_user()
            old, new, confirmation = (self.get_body_argument(name, "", strip=False) for name in (
                "old_password", "new_password", "new_password_confirmation"))
            changed = False
            if not await self.authenticator.check_password(self, user.name, old):
                message = getattr(self, "course_login_error", "") or ("Your current password was incorrect. Please "
                                                                       "try again.")
            elif new != confirmation:
                message = "Your new password didn't match the confirmation. Please try again."
            elif len(new.encode("utf-8", "surrogatepass")) > BCRYPT_MAX_BYTES:
                message = TOO_LONG
            else:
                async with self.authenticator.hashed(new):
                    changed = bool(self.authenticator.change_password(user.name, new))
                message = "Your password has been changed successfully!" if changed else (
                    f"Something went wrong!\nBe sure your new password has at least "
                    f"{self.authenticator.minimum_password_length} characters and is not too common.")
            self.finish(await self.render_template("change-password.html", user_name=user.name, result_message=message,
                                                   alert="alert-success" if changed else "alert-danger"))

    class CourseChangePasswordAdmin(ChangePasswordAdminHandler):
        """/hub/change-password/NAME (admins): the new password hashed off the loop."""

        @needs_scope("admin:users")
        async def post(self, user_name: str) -> None:
            new = self.get_body_argument("new_password", "", strip=False)
            async with self.authenticator.hashed(new):
                await super().post(user_name)

    replaced = {NativeLoginHandler: CourseLoginHandler, ToggleAuthorizationHandler: PostOnlyToggleAuthorization,
                DiscardHandler: PostOnlyDiscard, SignUpHandler: CourseSignUpHandler,
                ChangePasswordHandler: CourseChangePassword, ChangePasswordAdminHandler: CourseChangePasswordAdmin}

    class CourseNativeAuthenticator(NativeAuthenticator):
        """NativeAuthenticator with what a course needs (the module's text)."""

        instructor_password_file = Unicode("", config=True, help="The instructors' first password (made if absent).")
        retired_names_file = Unicode("", config=True,
                                     help="Names never given out again (deleted learners), one a line.")
        system_users = Unicode("", config=True, help="How hub names map to system accounts: '', 'same' or 'tljh'.")
        learner_group = Unicode("", config=True, help="make hub as root: the system group of the accounts it made.")
        failed_logins_per_address = Integer(FAILED_LOGINS_PER_ADDRESS, config=True,
                                            help="Failed password checks a minute from one client (unknown browsers).")
        signups_per_address = Integer(SIGNUPS_PER_ADDRESS, config=True,
                                      help="Sign-ups a minute from one client.")

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            for budget in ("failed_logins_per_address", "signups_per_address", "allowed_failed_logins"):
                if getattr(self, budget) < 1:
                    raise ValueError(f"{budget} must be at least 1")
            system_username("x", self.system_users)  # refuses an unknown mapping now, not at the first sign-up
            self.address_budget = FailedLoginBudget(self.failed_logins_per_address)
            self.device_budget = FailedLoginBudget(self.allowed_failed_logins)
            self.signup_budget = FailedLoginBudget(self.signups_per_address)
            self._refusals_logged: dict[str, float] = {}
            self._checking: dict[str, list[Any]] = {}  # client -> [its lock, checks waiting or running]
            self._ensure_instructors()
            serve_hub_pages_only_on_the_hub_host()

        def get_handlers(self, app: Any) -> list[tuple[str, Any]]:
            return [(path, replaced.get(handler, handler)) for path, handler in super().get_handlers(app)]

        # -- checking a password -----------------------------------------------------------------------------------
        async def check_password(self, handler: Any, username: str, password: str) -> bool:
            """Whether ``password`` is ``username``'s, checked off the event loop, one at a time per client, within
            the budgets (the module's text). Past a budget: False, nothing checked, a 429 and the wait on
            ``handler.course_login_error``."""
            username = self.normalize_username(username)
            device = self._device(handler, username)
            budget, key = (self.device_budget, device) if device else (self.address_budget, client_address(handler))
            wait = budget.take(key)
            if wait:
                handler.set_status(429)
                handler.course_login_error = f"Too many failed logins: try again in {math.ceil(wait)} s."
                self.refused("a browser of " + username if device else key, math.ceil(wait), "logins")
                return False
            info = self.get_user(username)
            if info is None or (device is None and self.is_blocked(username)):
                budget.give_back(key)  # no password was checked: nothing guessed, nothing spent
                return False
            checking = self._checking.setdefault(key, [asyncio.Lock(), 0])
            checking[1] += 1
            try:
                async with checking[0]:  # one bcrypt at a time per client
                    matches = await asyncio.get_running_loop().run_in_executor(None, _password_matches, password,
                                                                               info.password)
            finally:
                checking[1] -= 1
                if not checking[1]:
                    del self._checking[key]
            if matches:  # spent too: a loop of right passwords is bounded like any other (attack N4)
                return True
            if device is None:
                self.add_login_attempt(username)
            self.log.warning("Failed login for %r from %s", username[:32], "a known browser" if device else key)
            return False

        async def authenticate(self, handler: Any, data: dict[str, Any]) -> str | None:
            """NativeAuthenticator's, within the budgets; a login that succeeds gives its browser a device cookie."""
            username = self.normalize_username(data.get("username", ""))
            if not await self.check_password(handler, username, data.get("password", "")):
                return None
            info = self.get_user(username)
            if not info.is_authorized:
                handler.course_login_error = f"User {username} has not been authorized by an administrator yet."
                return None
            if info.has_2fa and not info.is_valid_token(data.get("2fa")):
                self.add_login_attempt(username)
                return None
            self.successful_login(username)
            self.trust_device(handler, username)
            return username

        def _device(self, handler: Any, username: str) -> str | None:
            """This browser's key when it holds ``username``'s device cookie (signed with the hub's cookie secret)."""
            nonce = handler.get_secure_cookie(DEVICE_COOKIE + username, max_age_days=DEVICE_DAYS)
            return f"{username} {nonce.decode()}" if nonce else None

        def trust_device(self, handler: Any, username: str) -> None:
            """A device cookie for ``username`` (hub pages only), unless it has one: a new one would be a new budget."""
            if self._device(handler, username):
                return
            handler.set_secure_cookie(DEVICE_COOKIE + username, secrets.token_urlsafe(16), expires_days=DEVICE_DAYS,
                                      path=handler.hub.base_url, httponly=True, samesite="Strict",
                                      secure=handler.request.protocol == "https")

        def refused(self, who: str, seconds: int, what: str) -> None:
            """One log line a minute for each client that is refused."""
            now = time.monotonic()
            if now - self._refusals_logged.get(what + who, -60.0) >= 60:
                self._refusals_logged[what + who] = now
                self.log.warning("Refusing %s from %s for %d s: past its budget", what, who, seconds)

        def is_blocked(self, username: str) -> bool:
            """Never an instructor's (anybody could keep them out by failing on purpose): long passwords instead."""
            if self.normalize_username(username) in self.admin_users:
                return False
            return super().is_blocked(username)

        # -- hashing off the event loop ----------------------------------------------------------------------------
        @contextlib.asynccontextmanager
        async def hashed(self, password: str, handler: Any = None) -> AsyncIterator[None]:
            """Inside, create_user and change_password use ``password``'s hash made here, off the event loop;
            create_user also gives ``handler``'s browser a device cookie.

            Usage: ``async with authenticator.hashed(password, handler): await super().post()``"""
            digest = b""
            if len(password.encode("utf-8", "surrogatepass")) <= BCRYPT_MAX_BYTES:
                digest = await asyncio.get_running_loop().run_in_executor(None, _hash_password, password)
            token = _HASHED.set((password, digest, handler))
            try:
                yield
            finally:
                _HASHED.reset(token)

        def _given_hash(self, password: str) -> bytes | None:
            given = _HASHED.get(None)
            return given[1] if given is not None and given[0] == password and given[1] else None

        def change_password(self, username: str, new_password: str) -> bool | None:
            if self.normalize_username(username) in self.admin_users and len(new_password) < ADMIN_PASSWORD_LENGTH:
                return False  # never locked out, so never guessable: an instructor's password stays long
            if len(new_password.encode("utf-8", "surrogatepass")) > BCRYPT_MAX_BYTES:
                return None  # bcrypt refuses it
            digest = self._given_hash(new_password)
            if digest is None:
                return super().change_password(username, new_password)
            info = self.get_user(username)
            if info is None or not self.is_password_strong(new_password):
                return None
            info.password = digest
            self.db.commit()
            return True

        # -- signing up ------------------------------------------------------------------------------------------
        def could_sign_up(self, username: str, password: str) -> bool:
            """Whether NativeAuthenticator's create_user would make this account (its checks before the hash)."""
            username = self.normalize_username(username)
            return (not self.user_exists(username) and self.validate_username(username)
                    and self.is_password_strong(password))

        def create_user(self, username: str, password: str, **kwargs: Any) -> Any:
            """NativeAuthenticator 1.3.0's; inside :meth:`hashed`, its steps with that hash, not one on the loop."""
            digest = self._given_hash(password)
            if digest is None:
                return super().create_user(username, password, **kwargs)
            username = self.normalize_username(username)
            if not (self.enable_signup and self.could_sign_up(username, password)):
                return None
            pre_authorized = self.open_signup or username in self.get_authed_users()
            infos = {**kwargs, "username": username, "password": digest}
            if pre_authorized:
                infos["is_authorized"] = True
            try:
                user_info = UserInfo(**infos)
            except AssertionError:  # e.g. an e-mail address that is not one
                return None
            if self.allow_self_approval_for and not pre_authorized and re.match(self.allow_self_approval_for,
                                                                                user_info.email):
                self.send_approval_email(user_info.email, self.generate_approval_url(username))
                user_info.login_email_sent = True
            self.db.add(user_info)
            self.db.commit()
            handler = _HASHED.get()[2]
            if handler is not None:
                self.trust_device(handler, username)
            return user_info

        # -- names -----------------------------------------------------------------------------------------------
        def retired(self) -> set[str]:
            path = Path(self.retired_names_file) if self.retired_names_file else None
            return set(path.read_text(encoding="utf-8").split()) if path and path.exists() else set()

        def retire(self, name: str) -> None:
            if self.retired_names_file:
                descriptor = os.open(self.retired_names_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                with os.fdopen(descriptor, "a", encoding="utf-8") as handle:
                    handle.write(name + "\n")

        def delete_user(self, user: Any) -> Any:
            """A learner deleted in the hub (who had logged in) has their name retired, so no later sign-up gets their
            home or files; a discarded sign-up (never logged in) is not."""
            if orm.User.find(self.db, user.name) is not None:
                self.retire(user.name)
                self.log.info("Retired the name %s (deleted in the hub)", user.name)
            return super().delete_user(user)

        def validate_username(self, username: str) -> bool:
            if not re.match(USERNAME_PATTERN, username) or username in NEVER_LEARNERS:
                return False
            if username in self.retired():
                return False
            account = system_username(username, self.system_users)
            if account is not None and (_entry(pwd.getpwnam, account) or _entry(grp.getgrnam, account)):
                # a system account or group of that name: only the hub's own learner (or instructor) may have it
                if UserInfo.find(self.db, username) is None and orm.User.find(self.db, username) is None:
                    return False  # a system account or group the hub did not make (postgres, sudo), or a deleted one
                learners = getattr(_entry(grp.getgrnam, self.learner_group), "gr_mem", [])
                if self.learner_group and username not in self.admin_users and account not in learners:
                    return False
            return super().validate_username(username)

        def _ensure_instructors(self) -> None:
            """Every admin's account exists before anybody can sign up under that name (and become an admin)."""
            if not self.instructor_password_file:
                return
            hashed: bytes | None = None
            for name in sorted(self.admin_users):
                if UserInfo.find(self.db, name) is None:
                    if hashed is None:
                        password = instructor_password(self.instructor_password_file).encode()
                        hashed = bcrypt.hashpw(password, bcrypt.gensalt())
                    self.db.add(UserInfo(username=name, password=hashed, is_authorized=True))
                    self.db.commit()
                    self.log.info("Created the instructor account %s (first password in %s)", name,
                                  self.instructor_password_file)

    return CourseNativeAuthenticator


def __getattr__(name: str) -> Any:
    """``course_auth.CourseNativeAuthenticator`` (made on first use), for a recipe that names it as a string."""
    if name == "CourseNativeAuthenticator":
        return course_authenticator_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _hash_password(password: str) -> bytes:
    import bcrypt

    return bcrypt.hashpw(password.encode(), bcrypt.gensalt())


def _password_matches(password: str, hashed: bytes | str) -> bool:
    import bcrypt

    try:
        return bcrypt.checkpw(password.encode(), hashed if isinstance(hashed, bytes) else hashed.encode())
    except ValueError:  # not a bcrypt hash, or a password bcrypt refuses (over 72 bytes)
        return False


def _entry(lookup: Callable[[str], Any], name: str) -> Any:
    """``lookup(name)`` (``pwd.getpwnam``, ``grp.getgrnam``), or None where there is no such name."""
    try:
        return lookup(name)
    except KeyError:
        return None


def configure_sign_in(c: Any, *, admins: Iterable[str], state: str | Path, system_users: str = "",
                      authenticator: type | None = None, allowed_failed_logins: int = ALLOWED_FAILED_LOGINS,
                      failed_logins_per_address: int = FAILED_LOGINS_PER_ADDRESS,
                      signups_per_address: int = SIGNUPS_PER_ADDRESS) -> None:
    """Set the course's sign-in on JupyterHub config ``c``: ``authenticator`` (a subclass of
    :func:`course_authenticator_class`, or that class), its settings and templates. ``state``: a folder only the hub
    reads (``instructor-password``, ``retired-names``); ``system_users``: see :data:`SYSTEM_USERS`.
    Usage: ``configure_sign_in(c, admins={"instructor"}, state="/opt/tljh/state", system_users="tljh")``
    """
    admins = {instructor_name(name) for name in admins}
    if not admins:
        raise ValueError("configure_sign_in: name the instructor (admins), whose account is made before sign-up opens")
    if allowed_failed_logins < 1:  # NativeAuthenticator reads 0 as "never block": guessing without end
        raise ValueError(f"allowed_failed_logins={allowed_failed_logins}: give at least 1")
    system_username("x", system_users)
    native = course_authenticator_class()
    authenticator = authenticator or native
    if not issubclass(authenticator, native):
        raise TypeError(f"{authenticator} is not the course's authenticator (course_auth.course_authenticator_class)")
    state = Path(state)
    c.JupyterHub.authenticator_class = authenticator
    c.Authenticator.admin_users = admins
    c.Authenticator.allow_all = True  # NativeAuthenticator lets in only the accounts the instructor approved
    c.NativeAuthenticator.open_signup = False
    c.NativeAuthenticator.enable_signup = True
    c.NativeAuthenticator.minimum_password_length = 8
    c.NativeAuthenticator.check_common_password = True
    c.NativeAuthenticator.allowed_failed_logins = allowed_failed_logins
    c.NativeAuthenticator.seconds_before_next_try = 60
    c.CourseNativeAuthenticator.instructor_password_file = str(state / PASSWORD_FILE)
    c.CourseNativeAuthenticator.retired_names_file = str(state / RETIRED_FILE)
    c.CourseNativeAuthenticator.system_users = system_users
    c.CourseNativeAuthenticator.failed_logins_per_address = failed_logins_per_address
    c.CourseNativeAuthenticator.signups_per_address = signups_per_address
    from nativeauthenticator.handlers import TEMPLATE_DIR  # its pages' own (it adds them once per process only)

    ours = [str(TEMPLATES), TEMPLATE_DIR]
    paths = list(c.JupyterHub.template_paths) if "template_paths" in c.JupyterHub else []
    c.JupyterHub.template_paths = [*ours, *(p for p in paths if p not in ours)]
