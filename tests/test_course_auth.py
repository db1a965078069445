"""The course's sign-in (tools/hub/course_auth.py), piece by piece, in this process: the per-address budget, the
client's address, the hub-host rule, and the authenticator on an in-memory database (the hash checked off the event
loop, refusals that cost no hash, instructors made first and never blocked, names retired). The same sign-in on a
real hub, attacked: tests/browser/test_hub.py (make hub) and tests/test_deploy_configs.py (the deploy/ recipes)."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from traitlets.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools" / "hub"))
import course_auth  # noqa: E402

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
            path: str = "/hub/login") -> SimpleNamespace:
    headers = {key: value for key, value in (("X-Forwarded-For", xff), ("X-Real-Ip", real_ip)) if value}
    return SimpleNamespace(headers=headers, remote_ip=real_ip or remote_ip, host_name=host, path=path)


def test_the_client_address_is_the_one_the_proxy_appended_never_what_the_client_claims() -> None:
    assert course_auth.client_address(request(xff=",127.0.0.2")) == "127.0.0.2"  # the course's proxy: ",<peer>"
    assert course_auth.client_address(request(xff="198.51.100.7, 127.0.0.2", real_ip="203.0.113.1")) == "127.0.0.2"
    assert course_auth.client_address(request(remote_ip="10.0.0.5")) == "10.0.0.5"  # no proxy in between


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
    import functools

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


def login(authenticator, name: str, password: str, address: str = "127.0.0.2"):  # type: ignore[no-untyped-def]
    handler = SimpleNamespace(request=request(xff=f",{address}"), status=200)
    handler.set_status = lambda status: setattr(handler, "status", status)
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


def test_the_password_is_checked_off_the_event_loop(authenticator) -> None:  # type: ignore[no-untyped-def]
    """While bcrypt checks a password at its real cost (2^12 rounds, about 0.2 s here), the hub's event loop goes on
    serving: a ticker that wakes every 10 ms keeps ticking. On the loop it would tick once or twice."""
    from nativeauthenticator.orm import UserInfo

    slow = b"$2b$12$e7eA/JBcGv7lxgI.sTiEYeKgWk2Aj63KWHXuG0SrN1kd4VuAUVlEO"  # bcrypt.hashpw(b"cat-password", gensalt(12))
    authenticator.db.add(UserInfo(username="cat", password=slow, is_authorized=True))
    authenticator.db.commit()

    handler = SimpleNamespace(request=request(xff=",127.0.0.9"), set_status=lambda status: None)
    name, ticks = while_ticking(lambda: authenticator.authenticate(handler, {"username": "cat",
                                                                             "password": "cat-password"}))
    assert name == "cat" and ticks >= 5, f"the loop ticked {ticks} times during the check"


def test_the_instructor_is_made_first_never_blocked_and_an_address_is_refused_without_a_check(
        authenticator, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import time

    password = (tmp_path / "instructor-password").read_text().strip()
    assert len(password) >= course_auth.ADMIN_PASSWORD_LENGTH and (tmp_path / "instructor-password").stat().st_mode \
        & 0o077 == 0
    assert authenticator.get_user("instructor").is_authorized
    assert authenticator.create_user("instructor", "mallory-password") is None  # the name is taken
    for _ in range(4):  # more than the block (3): the instructor's name is never blocked
        assert login(authenticator, "instructor", "wrong-password", "127.0.0.3")[0] is None
    assert login(authenticator, "instructor", password, "127.0.0.4")[0] == "instructor"
    for _ in range(3):
        assert login(authenticator, "ann", "wrong-password", "127.0.0.5")[0] is None
    assert login(authenticator, "ann", "ann-password", "127.0.0.6")[0] is None  # ann's name: blocked for a minute
    assert not authenticator.change_password("instructor", "short-but-8")  # never locked, so never guessable
    authenticator.address_budget = course_auth.FailedLoginBudget(2)
    assert login(authenticator, "instructor", "wrong", "127.0.0.7")[1].status == 200
    assert login(authenticator, "instructor", "wrong", "127.0.0.7")[1].status == 200
    started = time.perf_counter()
    name, handler = login(authenticator, "instructor", password, "127.0.0.7")  # even the right one: no check
    assert name is None and handler.status == 429 and re.search(r"try again in \d+ s", handler.course_login_error)
    assert time.perf_counter() - started < 0.05, "a refused login still computed a hash"


def test_a_sign_up_is_hashed_off_the_event_loop_once_and_an_address_gets_its_sign_ups(authenticator,
                                                                                     monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Stock NativeAuthenticator hashes a sign-up's password on the hub's event loop (0.2 s of bcrypt at its real
    cost). The course's sign-up page hashes it off the loop (a ticker that wakes every 10 ms keeps ticking), then
    creates the account with that hash, not a second one; past its budget an address's sign-ups are refused with no
    hash at all."""
    import time

    import bcrypt

    real_cost = b"$2b$12$" + b"e7eA/JBcGv7lxgI.sTiEYe"  # a bcrypt salt of cost 12, as bcrypt.gensalt() makes
    monkeypatch.setattr(bcrypt, "gensalt", lambda *args, **kwargs: real_cost)

    hashed, ticks = while_ticking(lambda: authenticator.hash_for_sign_up("127.0.0.8", "cat-password"))
    assert hashed is not None and bcrypt.checkpw(b"cat-password", hashed)
    assert ticks >= 5, f"the loop ticked {ticks} times while the sign-up's password was hashed"
    token = course_auth._SIGN_UP_HASH.set(("cat-password", hashed))
    try:
        started = time.perf_counter()
        made = authenticator.create_user("cat", "cat-password", email="", has_2fa=False)
        assert time.perf_counter() - started < 0.05, "create_user hashed the password again, on the loop"
        assert made is not None and made.password == hashed and not made.is_authorized  # waits for the instructor
        assert authenticator.create_user("cat", "cat-password") is None  # the name is taken now
        assert authenticator.create_user("dot", "123") is None  # too weak, hash or no hash
    finally:
        course_auth._SIGN_UP_HASH.reset(token)
    assert authenticator.create_user("eve", "eve-password").password != hashed  # outside a sign-up: its own hash
    authenticator.signup_budget = course_auth.FailedLoginBudget(2)
    assert asyncio.run(authenticator.hash_for_sign_up("127.0.0.9", "x-password")) is not None
    assert asyncio.run(authenticator.hash_for_sign_up("127.0.0.9", "x-password")) is not None
    started = time.perf_counter()
    assert asyncio.run(authenticator.hash_for_sign_up("127.0.0.9", "x-password")) is None
    assert 0 < authenticator.signup_budget.wait("127.0.0.9") <= 30  # what the page says: 2 a minute, one per 30 s
    assert time.perf_counter() - started < 0.05, "a refused sign-up still computed a hash"
    assert asyncio.run(authenticator.hash_for_sign_up("127.0.0.10", "x-password")) is not None  # another address
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


def test_a_name_whose_system_account_the_hub_does_not_know_is_refused(authenticator, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    accounts = {"jupyter-cat"}  # left on a TLJH VM by a learner deleted in the hub (home and files included)

    def getpwnam(name: str) -> object:
        if name not in accounts:
            raise KeyError(name)
        return SimpleNamespace(pw_name=name)

    monkeypatch.setattr(course_auth.pwd, "getpwnam", getpwnam)
    authenticator.system_users = "tljh"
    assert not authenticator.validate_username("cat") and authenticator.validate_username("dan")
    accounts.add("jupyter-ann")
    assert authenticator.validate_username("ann")  # the hub knows ann: her own account
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
