"""The course's sign-in (tools/hub/course_auth.py) piece by piece, in this process, and what upstream still does that
the hub works around. Attacked over HTTP: tests/test_deploy_configs.py (recipes, MockHub), tests/browser/test_hub.py."""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from traitlets.config import Config

from tools.hub import course_auth

# nativeauthenticator 1.3.0 calls locale.getdefaultlocale() at import (deprecated in Python 3.11): not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore:'locale.getdefaultlocale' is deprecated:DeprecationWarning",
                                        "ignore:The shared database session:DeprecationWarning")


def test_an_address_gets_its_budget_of_failures_then_waits_for_the_refill() -> None:
    now = [0.0]
    budget = course_auth.FailedLoginBudget(20, clock=lambda: now[0])
    assert [budget.take("a") for _ in range(20)] == [0.0] * 20
    assert budget.take("a") == pytest.approx(3.0)  # 20 a minute: one more every 3 s
    assert budget.take("b") == 0.0  # another address has its own
    budget.give_back("a")  # a right password returns what it reserved
    assert budget.take("a") == 0.0 and budget.take("a") > 0
    now[0] = 3.0
    assert budget.take("a") == 0.0 and budget.take("a") == pytest.approx(3.0)
    now[0] = 3600.0
    assert [budget.take("a") for _ in range(20)] == [0.0] * 20 and budget.take("a") > 0  # never above 20
    with pytest.raises(ValueError):
        course_auth.FailedLoginBudget(0)


def request(xff: str = "", real_ip: str = "", remote_ip: str = "127.0.0.1", host: str = "localhost",
            path: str = "/hub/login", **headers: str) -> SimpleNamespace:
    headers.update({key: value for key, value in (("X-Forwarded-For", xff), ("X-Real-Ip", real_ip)) if value})
    return SimpleNamespace(headers=headers, remote_ip=real_ip or remote_ip, host_name=host, path=path,
                           protocol="http")


class Handler(SimpleNamespace):
    """What the authenticator uses of a JupyterHub handler: the request, a status, and signed cookies (tornado's,
    with a test secret), sent back as a browser would."""

    def __init__(self, request: SimpleNamespace, browser: dict[str, str] | None = None) -> None:
        super().__init__(request=request, status=200, browser={} if browser is None else browser,
                         hub=SimpleNamespace(base_url="/hub/"))

    def set_status(self, status: int) -> None:
        self.status = status

    def set_secure_cookie(self, name: str, value: str, **kwargs: Any) -> None:
        from tornado.web import create_signed_value

        self.browser[name] = create_signed_value("test-secret", name, value).decode()

    def get_secure_cookie(self, name: str, max_age_days: int = 31) -> bytes | None:
        from tornado.web import decode_signed_value

        return decode_signed_value("test-secret", name, self.browser.get(name), max_age_days=max_age_days)


def test_the_client_is_who_connected_and_only_the_hubs_own_proxy_says_otherwise() -> None:
    assert course_auth._proc_net_address(("127.0.0.1", 8000)) == "0100007F:1F40"  # as /proc/net/tcp writes it
    with socket.create_server(("127.0.0.1", 0)) as server, socket.create_connection(server.getsockname()) as _mine:
        accepted, _ = server.accept()
        with accepted:
            assert course_auth.socket_owner(accepted.getpeername(), accepted.getsockname()) == os.getuid()
            connection = SimpleNamespace(stream=SimpleNamespace(socket=accepted))
            own = request(xff="198.51.100.7, 127.0.0.2")  # the hub's own user: its proxy, whose word counts
            own.connection = connection
            assert course_auth.client_address(Handler(own)) == "127.0.0.1"  # a loopback client: one, this machine
            own.headers[course_auth.CLIENT_HEADER] = "uid:1002"  # make hub's proxy says who connected to it
            assert course_auth.client_address(Handler(own)) == "uid:1002"
    # without its socket (another user's process is told apart by its socket only: tests/browser/test_hub.py)
    assert course_auth.client_address(Handler(request(xff="198.51.100.7", remote_ip="10.0.0.5"))) == "198.51.100.7"
    assert course_auth.client_address(Handler(request(xff="198.51.100.7", real_ip="203.0.113.1"))) == "198.51.100.7"
    assert course_auth.client_address(Handler(request(xff="198.51.100.7"))) == "127.0.0.1"  # loopback: its own
    assert course_auth.client_address(Handler(request(remote_ip="10.0.0.5"))) == "10.0.0.5"  # no proxy in between


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root, as make hub runs")
def test_a_socket_another_user_closed_is_never_the_hubs_own() -> None:
    """Attack N1 (2026-11-29): a learner sends her request with a made-up CLIENT_HEADER and closes her socket at once;
    closed (FIN_WAIT2), /proc/net/tcp lists it with uid 0, the hub's own. It is ``uid:?``, never the hub's own proxy
    nor 127.0.0.1. (Before: ``("127.0.0.1", True)``, so the hub believed her header.)"""
    "127.0.0.1".encode("idna")  # the codec socket uses, imported before the child cannot read the standard library
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(30)
        child = os.fork()
        if child == 0:  # a learner (nobody): connect, send, close
            try:
                os.setgid(65534), os.setuid(65534)
                with socket.create_connection(server.getsockname()) as learner:
                    learner.sendall(f"POST /hub/login HTTP/1.1\r\n{course_auth.CLIENT_HEADER}: 127.0.0.1\r\n".encode())
            finally:
                os._exit(0)
        accepted, _ = server.accept()
        os.waitpid(child, 0)
        time.sleep(0.5)  # her closed socket becomes the kernel's (a time-wait socket, uid 0)
        with accepted:
            accepted.recv(100)
            own = request()
            own.connection = SimpleNamespace(stream=SimpleNamespace(socket=accepted))
            assert course_auth.connection_client(own) == ("uid:?", False)


def test_the_hub_pages_answer_only_on_the_hub_host() -> None:
    def handler(host: str, path: str, subdomain_host: str = "https://hub.example.org") -> SimpleNamespace:
        return SimpleNamespace(subdomain_host=subdomain_host, base_url="/", request=request(host=host, path=path))

    off = course_auth._off_hub_host
    assert off(handler("mallory.hub.example.org", "/hub/login"))
    assert off(handler("dashboard--service.hub.example.org", "/hub/api/users"))
    assert off(handler("mallory.hub.example.org", "/hub"))
    assert not off(handler("hub.example.org", "/hub/login"))  # the hub's own host
    assert not off(handler("127.0.0.1", "/hub/api/users"))  # servers and services reach the API on loopback
    assert not off(handler("mallory.hub.example.org", "/user/mallory/lab"))  # a stopped server: the hub redirects
    assert not off(handler("mallory.hub.example.org", "/hubx/login"))
    assert not off(handler("mallory.hub.example.org", "/hub/login", subdomain_host=""))  # one origin: nothing to do


@pytest.fixture()
def authenticator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The course's authenticator on an in-memory JupyterHub database, with ann approved (password "ann-password")
    and the instructor made from the password file. Hashes made here cost 2^4 rounds, not bcrypt's 2^12 (0.2 s
    each): what is tested is who may log in, not bcrypt."""
    import bcrypt
    from jupyterhub import orm

    monkeypatch.setattr(bcrypt, "gensalt", functools.partial(bcrypt.gensalt, rounds=4))

    db = orm.new_session_factory("sqlite://")()
    config = Config()
    course_auth.configure_sign_in(config, admins={"instructor"}, state=tmp_path, allowed_failed_logins=3)
    made = config.JupyterHub.authenticator_class(config=config, db=db)
    made.create_user("ann", "ann-password")
    made.get_user("ann").is_authorized = True
    db.commit()
    return made


def login(authenticator, name: str, password: str, address: str = "10.0.0.2",  # type: ignore[no-untyped-def]
          browser: dict[str, str] | None = None):
    """A login from a browser at ``address`` (through a proxy on another host, as on Zero to JupyterHub) that holds
    the cookies ``browser`` (and keeps those the hub sets)."""
    handler = Handler(request(xff=f"{address}", remote_ip="10.9.9.9"), browser)
    return asyncio.run(authenticator.authenticate(handler, {"username": name, "password": password})), handler


def while_ticking(make: Callable[[], Awaitable[Any]]) -> tuple[Any, int]:
    """Run the awaitable ``make()`` gives on an event loop where a ticker wakes every 10 ms: (its result, the ticks
    meanwhile). Work done on the loop holds the ticker; work done off it (a thread) does not."""

    async def run() -> tuple[Any, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.02)
        started = ticks
        result = await make()
        task.cancel()
        return result, ticks - started

    return asyncio.run(run())


def test_a_learners_server_on_another_host_is_its_own_address(authenticator) -> None:  # type: ignore[no-untyped-def]
    """Zero to JupyterHub: a learner's pod reaches the hub's port directly, claiming any X-Forwarded-For; the hub
    counts it as its own address (a running server's), and believes the header from any other host (the proxy's)."""
    from jupyterhub import orm

    authenticator.db.add(orm.Server(ip="10.1.2.3", port=8888))
    authenticator.db.commit()
    pod, proxy = (Handler(request(xff="198.51.100.7", remote_ip=peer)) for peer in ("10.1.2.3", "10.1.2.4"))
    pod.db = proxy.db = authenticator.db
    assert (course_auth.client_address(pod), course_auth.client_address(proxy)) == ("10.1.2.3", "198.51.100.7")


def test_the_password_is_checked_off_the_event_loop(authenticator) -> None:  # type: ignore[no-untyped-def]
    """While bcrypt checks a password at its real cost (2^12 rounds, about 0.2 s here), the hub's event loop goes on
    serving: a ticker that wakes every 10 ms keeps ticking. On the loop it would tick once or twice."""
    from nativeauthenticator.orm import UserInfo

    # bcrypt.hashpw(b"cat-password", gensalt(12))
    slow = b"$2b$12$e7eA/JBcGv7lxgI.sTiEYeKgWk2Aj63KWHXuG0SrN1kd4VuAUVlEO"
    authenticator.db.add(UserInfo(username="cat", password=slow, is_authorized=True))
    authenticator.db.commit()

    handler = Handler(request(xff="10.0.0.9", remote_ip="10.9.9.9"))
    name, ticks = while_ticking(lambda: authenticator.authenticate(handler, {"username": "cat",
                                                                             "password": "cat-password"}))
    assert name == "cat" and ticks >= 5, f"the loop ticked {ticks} times during the check"


def test_a_browser_that_logged_in_is_never_locked_out_by_anybody_else(authenticator) -> None:  # type: ignore[no-untyped-def]
    """OWASP's device cookies: ann logs in from her browser; then mallory's wrong passwords, from ann's address too,
    block ann's name and spend the address's budget: a new browser with ann's right password is refused, hers logs
    in. Her browser has a budget of its own: three wrong passwords from it, and it waits like any other."""
    ann: dict[str, str] = {}
    assert login(authenticator, "ann", "ann-password", "10.0.0.6", ann)[0] == "ann"
    assert ann, "no device cookie for ann's browser"
    for _ in range(3):
        assert login(authenticator, "ann", "wrong-password", "10.0.0.6")[0] is None  # mallory, same address
    assert login(authenticator, "ann", "ann-password", "10.0.0.7")[0] is None  # a new browser: ann's name is blocked
    forged = {name: value.replace("a", "b") for name, value in ann.items()}  # a forged cookie is no cookie
    assert login(authenticator, "ann", "ann-password", "10.0.0.8", forged)[0] is None
    authenticator.address_budget = course_auth.FailedLoginBudget(1)
    assert [login(authenticator, "instructor", "wrong", "10.0.0.6")[1].status for _ in range(2)] == [200, 429]
    started = time.perf_counter()
    name, refused = login(authenticator, "ann", "ann-password", "10.0.0.6")  # even the right one: no check
    assert name is None and refused.status == 429 and re.search(r"try again in \d+ s", refused.course_login_error)
    assert time.perf_counter() - started < 0.05, "a refused login still computed a hash"
    assert login(authenticator, "ann", "ann-password", "10.0.0.6", ann)[0] == "ann", "ann's own browser is locked out"
    for _ in range(2):  # a right password spent one of its 3 too
        assert login(authenticator, "ann", "wrong-password", "10.0.0.9", ann)[1].status == 200
    assert login(authenticator, "ann", "ann-password", "10.0.0.9", ann)[1].status == 429  # its own budget: spent


def test_right_passwords_spend_the_budget_and_a_client_checks_one_at_a_time(authenticator, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Attack N4: a loop of a learner's own right password (login, change-password) costs the hub a bcrypt each,
    with no budget, many at once. Each check spends the client's budget, and its checks run one at a time.
    (Before: right passwords were free, and three checks from one client ran together.)"""
    running, most, lock = 0, 0, threading.Lock()
    matches = course_auth._password_matches

    def slow_matches(password: str, hashed: bytes) -> bool:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return matches(password, hashed)

    monkeypatch.setattr(course_auth, "_password_matches", slow_matches)
    authenticator.address_budget = course_auth.FailedLoginBudget(3)

    async def three_at_once() -> list[Any]:
        handlers = [Handler(request(xff="10.0.0.5", remote_ip="10.9.9.9")) for _ in range(3)]
        return await asyncio.gather(*(authenticator.check_password(h, "ann", "ann-password") for h in handlers))

    assert asyncio.run(three_at_once()) == [True] * 3 and most == 1, f"{most} checks at once from one client"
    assert login(authenticator, "ann", "ann-password", "10.0.0.5")[1].status == 429  # 3 right ones: spent


def test_a_new_password_is_hashed_off_the_event_loop_once(authenticator, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Stock NativeAuthenticator hashes a sign-up's and a new password on the hub's event loop (0.2 s of bcrypt at
    its real cost). The course's pages hash it off the loop (a ticker that wakes every 10 ms keeps ticking), then
    NativeAuthenticator's create_user and change_password store that hash, not a second one; the browser that signed
    up gets the name's device cookie."""
    import bcrypt

    real_cost = b"$2b$12$" + b"e7eA/JBcGv7lxgI.sTiEYe"  # a bcrypt salt of cost 12, as bcrypt.gensalt() makes
    monkeypatch.setattr(bcrypt, "gensalt", lambda *args, **kwargs: real_cost)
    handler = Handler(request(remote_ip="10.0.0.8"))

    async def sign_up() -> tuple[Any, float]:
        async with authenticator.hashed("cat-password", handler):
            started = time.perf_counter()
            return authenticator.create_user("cat", "cat-password", email="", has_2fa=False), started

    (made, started), ticks = while_ticking(sign_up)
    assert time.perf_counter() - started < 0.05, "create_user hashed the password again, on the loop"
    assert ticks >= 5, f"the loop ticked {ticks} times while the sign-up's password was hashed"
    assert made is not None and bcrypt.checkpw(b"cat-password", made.password) and not made.is_authorized
    assert course_auth.DEVICE_COOKIE + "cat" in handler.browser, "the new account's browser has no device cookie"
    assert authenticator.create_user("cat", "cat-password") is None  # the name is taken now

    async def change(name: str, new: str) -> Any:
        async with authenticator.hashed(new):
            started = time.perf_counter()
            return authenticator.change_password(name, new), time.perf_counter() - started

    assert asyncio.run(change("cat", "cat-password-2")) == (True, pytest.approx(0, abs=0.05))
    assert bcrypt.checkpw(b"cat-password-2", authenticator.get_user("cat").password)
    assert not asyncio.run(change("instructor", "short-but-8"))[0]  # never locked, so never guessable
    assert not asyncio.run(change("cat", "123"))[0]  # too weak, hash or no hash
    assert authenticator.could_sign_up("fay", "fay-password") and not authenticator.could_sign_up("cat", "x-password")


def test_a_deleted_learners_name_is_retired_a_discarded_sign_up_is_not(authenticator, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from jupyterhub import orm

    authenticator.db.add(orm.User(name="ann"))  # ann logged in once: a hub user (a server, a home)
    authenticator.db.commit()
    authenticator.create_user("bob", "bob-password")  # bob signed up, was never approved nor logged in
    authenticator.delete_user(SimpleNamespace(name="ann"))
    authenticator.delete_user(SimpleNamespace(name="bob"))
    assert (tmp_path / "retired-names").read_text().split() == ["ann"]
    assert not authenticator.validate_username("ann") and authenticator.validate_username("bob")


def test_a_name_whose_system_account_or_group_the_hub_does_not_know_is_refused(authenticator, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Issue 41.8: a sign-up under the name of a system account or group (sudo, the learners' group) is refused, as is
    one whose account a learner deleted in the hub left behind (TLJH: jupyter-cat); a learner the hub knows keeps
    their own; the instructor's account needs no learners' group."""
    accounts, groups = {"jupyter-cat", "instructor"}, {"sudo", "course-learners"}

    def lookup(names: set[str]):  # type: ignore[no-untyped-def]
        def find(name: str) -> SimpleNamespace:
            if name not in names:
                raise KeyError(name)
            return SimpleNamespace(pw_name=name, gr_mem=[])

        return find

    monkeypatch.setattr(course_auth.pwd, "getpwnam", lookup(accounts))
    monkeypatch.setattr(course_auth.grp, "getgrnam", lookup(groups))
    authenticator.system_users = "tljh"
    assert not authenticator.validate_username("cat") and authenticator.validate_username("dan")
    accounts.add("jupyter-ann")
    assert authenticator.validate_username("ann")  # the hub knows ann: her own account
    authenticator.system_users, authenticator.learner_group = "same", "course-learners"
    assert not any(authenticator.validate_username(name) for name in ("sudo", "course-learners"))
    assert authenticator.validate_username("instructor") and authenticator.validate_username("dan")
    assert course_auth.system_username("x" * 30, "tljh") == course_auth.tljh_system_username("x" * 30)
    assert course_auth.system_username("ada", "same") == "ada" and course_auth.system_username("ada", "") is None


def test_configure_sign_in_refuses_what_would_open_the_hub(tmp_path: Path) -> None:
    for bad in ({}, {"root"}, {"Not A Name"}):
        with pytest.raises(ValueError):
            course_auth.configure_sign_in(Config(), admins=bad, state=tmp_path)
    with pytest.raises(ValueError, match="allowed_failed_logins=0"):
        course_auth.configure_sign_in(Config(), admins={"instructor"}, state=tmp_path, allowed_failed_logins=0)
    config = Config()
    course_auth.configure_sign_in(config, admins={"instructor"}, state=tmp_path, signups_per_address=0)
    with pytest.raises(ValueError, match="signups_per_address must be at least 1"):  # when the hub starts
        from jupyterhub import orm

        config.JupyterHub.authenticator_class(config=config, db=orm.new_session_factory("sqlite://")())
    with pytest.raises(ValueError, match="system_users"):
        course_auth.configure_sign_in(Config(), admins={"instructor"}, state=tmp_path, system_users="ldap")
    with pytest.raises(TypeError):
        course_auth.configure_sign_in(Config(), admins={"instructor"}, state=tmp_path, authenticator=object)


def test_upstream_still_does_what_the_hub_works_around() -> None:
    """The hub's two patches and its subclasses of NativeAuthenticator's handlers (tools/hub/__init__.py) exist
    because the pinned versions do what this reads from their source. When one of these fails, upstream has changed:
    drop (or redo) the part of the hub that works around it."""
    from configurable_http_proxy import cli, handlers
    from jupyterhub.handlers.base import BaseHandler
    from nativeauthenticator import handlers as native

    course_auth.course_authenticator_class()  # installs the patch of BaseHandler.prepare (it keeps the original)
    prepare = inspect.getsource(getattr(BaseHandler.prepare, "__wrapped__", BaseHandler.prepare))
    assert "host" not in prepare, "JupyterHub now checks the host of /hub/ pages: drop serve_hub_pages_only..."
    assert "target_for_req(None" in inspect.getsource(handlers.ProxyHandler.get_target_url), "the proxy routes hosts"
    assert not next(p for p in cli.main.params if p.name == "host_routing").is_flag, "--host-routing is a flag now"
    login = inspect.getsource(native.LoginHandler.post)
    assert "statsd" in login and not hasattr(BaseHandler, "statsd") and "is_valid_password" in login
    assert "sync" not in inspect.signature(native.LoginHandler._render).parameters
    assert "change_authorization" in inspect.getsource(native.ToggleAuthorizationHandler.get)  # a GET changes
    assert "delete_user" in inspect.getsource(native.DiscardHandler.get)
    assert "is_valid_password" in inspect.getsource(native.ChangePasswordHandler.post)  # on the event loop
    from nativeauthenticator import nativeauthenticator as authenticator

    assert "bcrypt.hashpw" in inspect.getsource(authenticator.NativeAuthenticator.create_user)  # on the event loop
    assert "_template_dir_registered" in inspect.getsource(native.LocalBase)  # its templates, once per process
