"""Console logins (bot/console/logins.py, bot/console/auth.py) against the real `krill run`:
every login gets its own random cookie, kept in the store (a restart keeps it), ended by
logout on the server too; the cookie is `Secure` when a trusted proxy says the browser
used HTTPS, and only then; a login ends after 12 h idle or 7 days, or when the token
changes."""

from __future__ import annotations

from http.cookies import SimpleCookie
from pathlib import Path

import aiohttp

from bot.console.auth import COOKIE
from bot.console.logins import IDLE_SECONDS, LIFETIME_SECONDS, Logins
from bot.store.sqlite import SQLiteStore
from tests.krill_process import KrillProcess
from tests.test_shared_state import Clock

TOKEN = "console-token-for-logins-0123"
HOUR = 3600.0


def console(**server: object) -> dict[str, dict[str, object]]:
    return {"admin": {"console_token": TOKEN}, "server": dict(server)}


async def log_in(
    http: aiohttp.ClientSession, krill: KrillProcess, **headers: str
) -> tuple[str, SimpleCookie]:
    """Post the login form; the cookie's value and the whole Set-Cookie header parsed."""
    async with http.post(
        f"{krill.url}/admin/login",
        data={"token": TOKEN},
        headers={"Origin": krill.url, **headers},
        allow_redirects=False,
    ) as resp:
        assert resp.status == 303, await resp.text()
        cookie: SimpleCookie = SimpleCookie(resp.headers["Set-Cookie"])
    return cookie[COOKIE].value, cookie


async def status_with(http: aiohttp.ClientSession, krill: KrillProcess, login: str) -> int:
    async with http.get(f"{krill.url}/admin", headers={"Cookie": f"{COOKIE}={login}"}) as resp:
        return resp.status


async def test_each_login_is_its_own_and_logout_ends_it_on_the_server(tmp_path: Path) -> None:
    async with KrillProcess(tmp_path, console()) as krill, aiohttp.ClientSession() as http:
        first, _ = await log_in(http, krill)
        second, _ = await log_in(http, krill)
        before = [await status_with(http, krill, first), await status_with(http, krill, second)]
        async with http.post(
            f"{krill.url}/admin/logout",
            headers={"Origin": krill.url, "Cookie": f"{COOKIE}={first}"},
            allow_redirects=False,
        ) as resp:
            logout = resp.status
        # The browser forgets the cookie; a copy of it kept elsewhere is refused as well.
        after_logout = await status_with(http, krill, first)
    async with KrillProcess(tmp_path, console()) as krill, aiohttp.ClientSession() as http:
        after_restart = [
            await status_with(http, krill, first),
            await status_with(http, krill, second),
        ]
    assert first != second and TOKEN not in first + second
    assert before == [200, 200] and logout == 303
    assert after_logout == 401
    assert after_restart == [401, 200]  # kept in the store, not in the process


async def test_the_cookie_is_secure_when_a_trusted_proxy_says_https(tmp_path: Path) -> None:
    config = console(trusted_proxies=["127.0.0.2"])
    https = {"X-Forwarded-Proto": "https"}
    async with KrillProcess(tmp_path, config) as krill:
        proxy = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
        async with aiohttp.ClientSession(connector=proxy) as via_proxy:
            _, behind_tls = await log_in(via_proxy, krill, **https)
            _, behind_plain = await log_in(via_proxy, krill, **{"X-Forwarded-Proto": "http"})
        async with aiohttp.ClientSession() as direct:  # 127.0.0.1: not a trusted proxy here
            _, forged = await log_in(direct, krill, **https)
    assert behind_tls[COOKIE]["secure"] is True
    assert not behind_plain[COOKIE]["secure"]
    assert not forged[COOKIE]["secure"]
    for cookie in (behind_tls, behind_plain, forged):
        assert cookie[COOKIE]["httponly"] and cookie[COOKIE]["samesite"] == "Strict"


async def test_a_login_ends_when_idle_at_its_age_limit_or_with_a_new_token(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "krill.db")
    await store.open()
    clock = Clock()
    try:
        logins = Logins(store, TOKEN, clock=clock)
        idle = await logins.start()
        busy = await logins.start()
        clock.now += IDLE_SECONDS - HOUR
        assert await logins.valid(idle) and await logins.valid(busy)
        clock.now += IDLE_SECONDS - HOUR  # idle's last use moved its deadline too
        assert await logins.valid(busy)
        clock.now += IDLE_SECONDS + 1
        assert not await logins.valid(idle)

        kept = await logins.start()
        started = clock.now
        while clock.now + IDLE_SECONDS / 2 < started + LIFETIME_SECONDS:
            clock.now += IDLE_SECONDS / 2
            assert await logins.valid(kept)
        clock.now = started + LIFETIME_SECONDS + 1  # used all along, but a week is the most
        assert not await logins.valid(kept)

        fresh = await logins.start()
        assert not await Logins(store, TOKEN + "-rotated", clock=clock).valid(fresh)
        assert not await logins.valid("made-up") and not await logins.valid("")
    finally:
        await store.close()
