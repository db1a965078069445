"""Who gets into a course hub, and on which host its pages answer: the course's sign-in, one module for ``make hub``
(tools/hub/course_hub.py) and for the ``deploy/`` recipes (The Littlest JupyterHub, Zero to JupyterHub).

NativeAuthenticator 1.3.0 (learners sign up, the instructor approves), plus what a room needs:

- **the instructor's account exists before anybody can sign up**: made when the hub starts, with a random first
  password in a private file (mode 0600). Stock NativeAuthenticator approves a sign-up under an admin's name at
  once, so whoever signs up first as ``instructor`` would be an admin (on TLJH: passwordless sudo, root on the VM);
- **approving and discarding are POSTs** with the page's XSRF token (``templates/authorization-area.html``); the
  stock ``/hub/authorize/NAME`` and ``/hub/discard/NAME`` change an account on a GET, which an ``<img>`` on any page
  the instructor opens can send;
- **failed logins**: ``allowed_failed_logins`` wrong passwords block a learner's name for a minute, never an
  instructor's (anybody could keep the instructor out); instead each client address has a budget of failed password
  checks (``failed_logins_per_address`` a minute): beyond it a login is refused without computing the hash, so a
  flood costs the hub nothing and guesses nothing. Every password hash is checked off the hub's event loop;
- **sign-ups**: each client address may sign up ``signups_per_address`` times a minute (beyond it a sign-up is
  refused, 429, before its password is hashed), and a sign-up's password is hashed off the event loop: stock
  NativeAuthenticator hashes it on the loop (0.2 s of bcrypt), so a flood of sign-ups held every page of the hub;
- **names are never handed down**: the name of a learner deleted in the hub is retired (``retired_names_file``), and
  a name whose system account exists without the hub knowing that name is refused (``system_users``), so no new
  sign-up gets a former learner's home and files;
- **the hub's pages answer only on the hub's own host**: with ``JupyterHub.subdomain_host`` every learner's server
  (and every service) has its own origin ``NAME.<host>``; a request for ``/hub/...`` on such a host is sent to the
  hub's host (GET) or refused, so the instructor never logs in on a learner's origin, whose page could then read
  the hub's pages with the instructor's cookie.

It imports only JupyterHub, NativeAuthenticator, bcrypt, tornado, traitlets and the standard library (what each
recipe's hub environment has): Zero to JupyterHub mounts this very file beside its configuration.

Usage (a JupyterHub config file)::

    import course_auth
    course_auth.configure_sign_in(c, admins={"instructor"}, state="/srv/jupyterhub")
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import math
import os
import pwd
import re
import secrets
import time
from collections.abc import Callable, Iterable
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
ALLOWED_FAILED_LOGINS = 10  # wrong passwords in a row that block a learner's name for a minute
FAILED_LOGINS_PER_ADDRESS = 20  # failed password checks a minute from one client address
SIGNUPS_PER_ADDRESS = 30  # sign-ups a minute from one client address (a room behind one NAT address shares them)
BCRYPT_MAX_BYTES = 72  # bcrypt hashes at most 72 bytes of a password; bcrypt 5 refuses a longer one
# A sign-up's password and its bcrypt hash, made off the event loop by the sign-up page before NativeAuthenticator's
# create_user runs (in the same request's context), so that create_user does not hash it on the loop.
_SIGN_UP_HASH: contextvars.ContextVar[tuple[str, bytes]] = contextvars.ContextVar("course_sign_up_hash")
HUB_HOST_ONLY = "_course_hub_host_only"  # marks BaseHandler.prepare once it refuses /hub/ on other hosts


def tljh_system_username(name: str) -> str:
    """The system user that The Littlest JupyterHub runs hub user ``name`` as.

    TLJH's spawner (``tljh/user_creating_spawner.py``) uses ``jupyter-NAME``; when that has 26 characters or more,
    ``tljh/normalize.py`` keeps its first 26, then ``-`` and the first 5 hex digits of its SHA-256.
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


def instructor_password(path: str | Path) -> str:
    """The instructor's first password, in ``path``: made once (16 random characters, mode 0600), then kept.

    Usage: ``instructor_password("/opt/tljh/state/instructor-password")``
    """
    path = Path(path)
    if not path.exists():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(12) + "\n")
    return path.read_text(encoding="utf-8").strip()


def client_address(request: Any) -> str:
    """Where a request comes from: the last address in ``X-Forwarded-For`` (the one the hub's proxy appended: the
    course's proxy and configurable-http-proxy append the peer they saw, TLJH's Traefik replaces the header), else the
    peer. Not tornado's ``remote_ip``: it prefers ``X-Real-Ip``, which any client can send through the proxy.
    (A process on the hub's own machine can reach the hub's port directly and claim any address.)"""
    forwarded = [part.strip() for part in request.headers.get("X-Forwarded-For", "").split(",") if part.strip()]
    return forwarded[-1] if forwarded else str(request.remote_ip or "")


class FailedLoginBudget:
    """Failed password checks (or sign-ups) per client address: at most ``per_minute`` at once, refilled at
    ``per_minute`` a minute. :meth:`take` reserves one before a check (or says how long to wait); :meth:`give_back`
    returns it when the check succeeded or was not made.

    Usage::

        budget = FailedLoginBudget(20)
        wait = budget.take("203.0.113.7")   # 0.0: go on and check the password; else refuse, try again in `wait` s
        ...
        budget.give_back("203.0.113.7")     # the password was right (or no check was made)
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
    """True for a request for the hub's own pages (``/hub/...``) on a host below ``subdomain_host``'s (a learner's
    server, a service): those pages answer only on the hub's host."""
    from urllib.parse import urlparse

    subdomain_host = handler.subdomain_host
    if not subdomain_host:
        return False
    hub_host = (urlparse(subdomain_host).hostname or "").lower()
    host = (handler.request.host_name or "").lower()
    hub_prefix = handler.base_url.rstrip("/") + "/hub"
    path = handler.request.path
    return bool(hub_host) and host.endswith("." + hub_host) and (path == hub_prefix or path.startswith(hub_prefix + "/"))


def serve_hub_pages_only_on_the_hub_host() -> None:
    """From now on (in this process: the hub), every JupyterHub page refuses a request for ``/hub/...`` on a
    learner's or a service's host: a GET or HEAD is redirected to the same path on the hub's host, anything else
    gets 404. JupyterHub itself (6.1.1) answers ``/hub/*`` on every host its proxy routes to it, which with
    ``subdomain_host`` is every learner's host (found by reading ``mallory.localhost:8000/hub/login``: 200).

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
def course_authenticator_class() -> type:
    """``CourseNativeAuthenticator``: NativeAuthenticator 1.3.0 with what a course needs (see the module's text).

    Made on first use (it imports JupyterHub), once per process. Usage: ``c.JupyterHub.authenticator_class =
    course_authenticator_class()`` -- or :func:`configure_sign_in`, which also sets what it reads."""
    import bcrypt
    from jupyterhub import orm
    from jupyterhub.scopes import needs_scope
    from nativeauthenticator import NativeAuthenticator
    from nativeauthenticator.handlers import DiscardHandler, ToggleAuthorizationHandler
    from nativeauthenticator.handlers import LoginHandler as NativeLoginHandler
    from nativeauthenticator.handlers import SignUpHandler
    from nativeauthenticator.orm import UserInfo
    from tornado.escape import url_escape
    from tornado.httputil import url_concat
    from traitlets import Integer, Unicode

    class CourseLoginHandler(NativeLoginHandler):
        """NativeAuthenticator 1.3.0's login page without its faults: its error page fails on JupyterHub 6
        ("_render() got an unexpected keyword 'sync'"), its POST times itself with a statsd client JupyterHub 6 no
        longer has (AttributeError), and after every failed login it checks the password a second time, on the
        event loop, to choose its message. Here the authenticator leaves the message on the handler instead."""

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
        """/hub/authorize/NAME: a GET changes nothing; the change is a POST, which JupyterHub accepts only with the
        form's XSRF token (templates/authorization-area.html)."""

        async def get(self, slug: str) -> None:  # type: ignore[override]
            self.redirect(self.hub.base_url + "authorize")

        @needs_scope("admin:users")
        async def post(self, slug: str) -> None:
            UserInfo.change_authorization(self.db, slug)  # what NativeAuthenticator 1.3.0 does on its GET
            self.redirect(self.hub.base_url + "authorize#" + slug)

    class PostOnlyDiscard(DiscardHandler):
        """/hub/discard/NAME: the same, for discarding a sign-up that was not approved."""

        async def get(self, user_name: str) -> None:  # type: ignore[override]
            self.redirect(self.hub.base_url + "authorize")

        @needs_scope("admin:users")
        async def post(self, user_name: str) -> None:
            info = self.authenticator.get_user(user_name)  # what NativeAuthenticator 1.3.0 does on its GET
            if info is not None and not info.is_authorized:
                self.authenticator.delete_user(type("User", (), {"name": user_name}))
                if self.users.get(user_name) is not None:
                    self.users.delete(user_name)
            self.redirect(self.hub.base_url + "authorize")

    class CourseSignUpHandler(SignUpHandler):
        """/hub/signup: NativeAuthenticator 1.3.0's page, with the address's sign-up budget taken first (429 beyond
        it, nothing hashed) and the password hashed off the event loop before NativeAuthenticator creates the
        account. A sign-up that cannot succeed (name taken or refused, weak password, confirmation that differs)
        spends nothing: NativeAuthenticator refuses it with its own message, before any hash."""

        async def post(self) -> None:
            authenticator = self.authenticator
            username = self.get_body_argument("username", "", strip=False)
            password = self.get_body_argument("signup_password", "", strip=False)
            confirmation = self.get_body_argument("signup_password_confirmation", "", strip=False)
            if authenticator.enable_signup and len(password.encode("utf-8", "surrogatepass")) > BCRYPT_MAX_BYTES:
                # bcrypt refuses a longer password (ValueError: a 500 page in stock NativeAuthenticator)
                await self._refuse(f"Your password is longer than {BCRYPT_MAX_BYTES} bytes, the most a password can "
                                   f"have here (a Chinese character takes 3): choose a shorter one.")
                return
            if not (authenticator.enable_signup and password == confirmation
                    and authenticator.could_sign_up(username, password)):
                await super().post()
                return
            address = client_address(self.request)
            hashed = await authenticator.hash_for_sign_up(address, password)
            if hashed is None:
                self.set_status(429)
                wait = max(1, math.ceil(authenticator.signup_budget.wait(address)))
                await self._refuse(f"Too many sign-ups from your address: try again in {wait} s.")
                return
            token = _SIGN_UP_HASH.set((password, hashed))
            try:
                await super().post()
            finally:
                _SIGN_UP_HASH.reset(token)

        async def _refuse(self, message: str) -> None:
            """The sign-up page again, with ``message`` in its alert (as NativeAuthenticator shows its own)."""
            authenticator = self.authenticator
            self.finish(await self.render_template(
                "signup.html", ask_email=authenticator.ask_email_on_signup, alert="alert-danger",
                result_message=message, two_factor_auth=authenticator.allow_2fa,
                recaptcha_key=authenticator.recaptcha_key, tos=authenticator.tos))

    replaced = {NativeLoginHandler: CourseLoginHandler, ToggleAuthorizationHandler: PostOnlyToggleAuthorization,
                DiscardHandler: PostOnlyDiscard, SignUpHandler: CourseSignUpHandler}

    class CourseNativeAuthenticator(NativeAuthenticator):
        """Sign-up with instructor approval, the instructor's account made first, failed logins limited per name and
        per address, names never handed down, the hub's pages on its own host only."""

        instructor_password_file = Unicode("", config=True, help="The instructors' first password (made if absent).")
        retired_names_file = Unicode("", config=True, help="Names never given out again (deleted learners), one a line.")
        system_users = Unicode("", config=True, help="How hub names map to system accounts: '', 'same' or 'tljh'.")
        learner_group = Unicode("", config=True, help="make hub as root: the system group of the accounts it made.")
        failed_logins_per_address = Integer(FAILED_LOGINS_PER_ADDRESS, config=True,
                                            help="Failed password checks a minute from one client address.")
        signups_per_address = Integer(SIGNUPS_PER_ADDRESS, config=True,
                                      help="Sign-ups a minute from one client address.")

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            for budget in ("failed_logins_per_address", "signups_per_address"):
                if getattr(self, budget) < 1:
                    raise ValueError(f"{budget} must be at least 1")
            system_username("x", self.system_users)  # refuses an unknown mapping now, not at the first sign-up
            self.address_budget = FailedLoginBudget(self.failed_logins_per_address)
            self.signup_budget = FailedLoginBudget(self.signups_per_address)
            self._refused_addresses: dict[str, float] = {}
            self._ensure_instructors()
            serve_hub_pages_only_on_the_hub_host()

        def get_handlers(self, app: Any) -> list[tuple[str, Any]]:
            return [(path, replaced.get(handler, handler)) for path, handler in super().get_handlers(app)]

        # -- logging in ----------------------------------------------------------------------------------------
        async def authenticate(self, handler: Any, data: dict[str, Any]) -> str | None:
            """NativeAuthenticator's check, with the address's budget first and the hash off the event loop."""
            username = self.normalize_username(data.get("username", ""))
            password = data.get("password", "")
            address = client_address(handler.request) if handler is not None else ""
            wait = self.address_budget.take(address)
            if wait:
                self._refuse(handler, address, wait)
                return None
            failed = False
            try:
                info = self.get_user(username)
                if info is None or (self.allowed_failed_logins and self.is_blocked(username)):
                    return None  # no password was checked: nothing guessed, nothing spent
                valid = await asyncio.get_running_loop().run_in_executor(None, _password_matches, password,
                                                                         info.password)
                if valid and info.is_authorized and (not info.has_2fa or info.is_valid_token(data.get("2fa"))):
                    self.successful_login(username)
                    return username
                if valid and not info.is_authorized and handler is not None:
                    handler.course_login_error = f"User {username} has not been authorized by an administrator yet."
                self.add_login_attempt(username)
                failed = True
                self.log.warning("Failed login for %r from %s", username[:32], address)
                return None
            finally:
                if not failed:
                    self.address_budget.give_back(address)

        def _refuse(self, handler: Any, address: str, wait: float) -> None:
            seconds = math.ceil(wait)
            if handler is not None:
                handler.set_status(429)
                handler.course_login_error = (f"Too many failed logins from your address: try again in {seconds} s.")
            now = time.monotonic()
            if now - self._refused_addresses.get(address, -60.0) >= 60:  # one line a minute per address
                self._refused_addresses[address] = now
                self.log.warning("Refusing logins from %s for %d s: more than %d failed logins a minute", address,
                                 seconds, int(self.address_budget.capacity))

        def is_blocked(self, username: str) -> bool:
            """``allowed_failed_logins`` wrong passwords block a learner's name for a minute; never an instructor's
            (anybody could keep the instructor out by failing on purpose): the address budget and a long password
            protect it instead."""
            if self.normalize_username(username) in self.admin_users:
                return False
            return super().is_blocked(username)

        def change_password(self, username: str, new_password: str) -> bool:
            if self.normalize_username(username) in self.admin_users and len(new_password) < ADMIN_PASSWORD_LENGTH:
                return False  # never locked out, so never guessable: an instructor's password stays long
            return super().change_password(username, new_password)

        # -- signing up ------------------------------------------------------------------------------------------
        def could_sign_up(self, username: str, password: str) -> bool:
            """Whether NativeAuthenticator's create_user would make this account (its checks before the hash)."""
            username = self.normalize_username(username)
            return (not self.user_exists(username) and self.validate_username(username)
                    and self.is_password_strong(password))

        async def hash_for_sign_up(self, address: str, password: str) -> bytes | None:
            """The bcrypt hash of a sign-up's password, made off the event loop; None, with nothing hashed, when the
            client ``address`` has used its ``signups_per_address`` of the minute.

            Usage: ``hashed = await authenticator.hash_for_sign_up("203.0.113.7", password)``"""
            wait = self.signup_budget.take(address)
            if wait:
                now = time.monotonic()
                if now - self._refused_addresses.get("signup " + address, -60.0) >= 60:  # a line a minute
                    self._refused_addresses["signup " + address] = now
                    self.log.warning("Refusing sign-ups from %s for %d s: more than %d a minute", address,
                                     math.ceil(wait), int(self.signup_budget.capacity))
                return None
            return await asyncio.get_running_loop().run_in_executor(None, _hash_password, password)

        def create_user(self, username: str, password: str, **kwargs: Any) -> Any:
            """NativeAuthenticator 1.3.0's create_user; during a sign-up whose password the page hashed off the
            event loop (:meth:`hash_for_sign_up`), the same steps with that hash instead of a hash on the loop."""
            given = _SIGN_UP_HASH.get(None)
            if given is None or given[0] != password:
                return super().create_user(username, password, **kwargs)
            username = self.normalize_username(username)
            if not (self.enable_signup and self.could_sign_up(username, password)):
                return None
            pre_authorized = self.open_signup or username in self.get_authed_users()
            infos = {**kwargs, "username": username, "password": given[1]}
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
            """A learner deleted in the hub (who had logged in: a hub user with a server, a home) keeps their name:
            it is retired, so a later sign-up cannot get their home, files or volume. A discarded sign-up (never
            approved, never logged in) is not retired."""
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
            if account is not None:
                try:
                    pwd.getpwnam(account)
                except KeyError:
                    pass
                else:  # the account exists: only the hub's own learner may use it
                    if self.learner_group and not _in_group(account, self.learner_group):
                        return False  # a system account the hub did not make (e.g. 'postgres')
                    if UserInfo.find(self.db, username) is None and orm.User.find(self.db, username) is None:
                        return False  # left by a learner deleted in the hub: a sign-up must not claim it
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
    """``course_auth.CourseNativeAuthenticator`` names the class (made on first use), so that a recipe can give it
    as a string (TLJH's ``auth.type``, Z2JH's ``authenticator_class``): without this file, the hub refuses to start."""
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
    except ValueError:  # not a bcrypt hash
        return False


def _in_group(account: str, group: str) -> bool:
    import grp

    try:
        return account in grp.getgrnam(group).gr_mem
    except KeyError:
        return False


def configure_sign_in(c: Any, *, admins: Iterable[str], state: str | Path, system_users: str = "",
                      authenticator: type | None = None, allowed_failed_logins: int = ALLOWED_FAILED_LOGINS,
                      failed_logins_per_address: int = FAILED_LOGINS_PER_ADDRESS,
                      signups_per_address: int = SIGNUPS_PER_ADDRESS) -> None:
    """Set the course's sign-in on JupyterHub config ``c``: the authenticator (``authenticator``, a subclass of
    :func:`course_authenticator_class`, or that class), its settings, and the approval page's template.

    ``state``: a folder only the hub can read, for ``instructor-password`` (made at the hub's first start) and
    ``retired-names``. ``system_users``: see :data:`SYSTEM_USERS`.
    Usage: ``configure_sign_in(c, admins={"instructor"}, state="/opt/tljh/state", system_users="tljh")``
    """
    admins = {str(name).lower() for name in admins}
    if not admins:
        raise ValueError("configure_sign_in: name the instructor (admins), whose account is made before sign-up opens")
    for name in admins:
        if not re.match(USERNAME_PATTERN, name) or name in NEVER_LEARNERS:
            raise ValueError(f"{name!r} is not a usable instructor name: lower-case letters, digits, '-' or '_', "
                             "2-32 characters, starting with a letter, and not a system account.")
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
    paths = list(c.JupyterHub.template_paths) if "template_paths" in c.JupyterHub else []
    c.JupyterHub.template_paths = [str(TEMPLATES), *(p for p in paths if p != str(TEMPLATES))]
