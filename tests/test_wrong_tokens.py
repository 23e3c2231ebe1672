"""Guessing the console token or the web chat's token, against the real `krill run`
(bot/wrong_tokens.py): a few wrong tokens a minute per address and a few more in total,
however many addresses guess (also with forged X-Forwarded-For), 429 with Retry-After
beyond them, and the right token accepted all along, even from an address that was just
refused. A console token too short to resist guessing stops every command at start."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from bot.config.sections import CONSOLE_TOKEN_MIN_CHARS
from bot.wrong_tokens import PER_ADDRESS, TOTAL
from tests.krill_process import KrillProcess, run_cli, write_config

TOKEN = "console-token-guess-me-not-0123456789"
CHAT_TOKEN = "web-chat-token-4242"
ADDRESSES = [f"127.0.0.{n}" for n in range(2, 13)]  # 11 clients


async def admin_status(krill: KrillProcess, token: str, source: str, **headers: str) -> int:
    connector = aiohttp.TCPConnector(local_addr=(source, 0))
    bearer = {"Authorization": f"Bearer {token}", **headers}
    async with (
        aiohttp.ClientSession(connector=connector) as http,
        http.get(f"{krill.url}/admin", headers=bearer) as resp,
    ):
        if resp.status == 429:
            assert int(resp.headers["Retry-After"]) >= 1
        return resp.status


async def test_eleven_addresses_get_few_answers_and_the_right_token_always_works(
    tmp_path: Path,
) -> None:
    async with KrillProcess(tmp_path, {"admin": {"console_token": TOKEN}}) as krill:
        answers = []
        for source in ADDRESSES:
            for guess in range(PER_ADDRESS + 1):
                answers.append(await admin_status(krill, f"guess-{guess}", source))
        forged = [
            await admin_status(krill, "guess", "127.0.0.1", **{"X-Forwarded-For": f"10.0.0.{n}"})
            for n in range(1, 6)
        ]
        right = [await admin_status(krill, TOKEN, source) for source in ADDRESSES]
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            async with http.post(
                f"{krill.url}/admin/login",
                data={"token": TOKEN},
                headers={"Origin": krill.url},
                allow_redirects=False,
            ) as resp:
                login = resp.status
            async with http.get(f"{krill.url}/admin") as resp:
                with_cookie = resp.status
        logged = krill.log().count("console: a wrong token from")
    assert answers.count(401) == TOTAL < len(ADDRESSES) * PER_ADDRESS
    assert set(answers) == {401, 429}
    assert forged == [429] * 5
    assert right == [200] * len(ADDRESSES)
    assert (login, with_cookie) == (303, 200)
    assert logged == TOTAL  # refused guesses do not fill the log


async def test_the_web_chat_token_has_the_same_limit(tmp_path: Path) -> None:
    async with (
        KrillProcess(tmp_path, {"local": {"token": CHAT_TOKEN}}) as krill,
        aiohttp.ClientSession() as http,
    ):

        async def history(token: str | None) -> int:
            params = {"name": "web"} | ({"token": token} if token is not None else {})
            async with http.get(f"{krill.url}/api/history", params=params) as resp:
                return resp.status

        without = [await history(None) for _ in range(PER_ADDRESS + 2)]
        wrong = [await history(f"guess-{n}") for n in range(PER_ADDRESS + 2)]
        right = await history(CHAT_TOKEN)
        async with http.post(
            f"{krill.url}/api/chat",
            json={"text": "hi"},
            headers={"Authorization": "Bearer guess-again"},
        ) as resp:
            chat_guess, retry = resp.status, resp.headers.get("Retry-After")
    assert without == [403] * (PER_ADDRESS + 2)  # no token is not a guess
    assert wrong == [403] * PER_ADDRESS + [429, 429]
    assert right == 200
    assert chat_guess == 429 and retry is not None and int(retry) >= 1


async def test_a_short_console_token_stops_every_command(tmp_path: Path) -> None:
    short = "x" * (CONSOLE_TOKEN_MIN_CHARS - 1)
    config = str(write_config(tmp_path, {"admin": {"console_token": short}}))
    for command in (["run"], ["status"]):
        code, out, err = await run_cli(tmp_path, *command, "--config", config)
        assert code == 2, err
        assert "admin.console_token" in err and f"at least {CONSOLE_TOKEN_MIN_CHARS}" in err
        assert short not in out + err and "Traceback" not in err
    code, out, _ = await run_cli(tmp_path, "doctor", "--config", config)
    assert code == 1 and "[FAIL] config:" in out and "admin.console_token" in out, out

    bare = str(write_config(tmp_path, {}))
    code, _, err = await run_cli(
        tmp_path, "status", "--config", bare, env={"KRILL_ADMIN_TOKEN": short}
    )
    assert code == 2 and "KRILL_ADMIN_TOKEN" in err and short not in err, err
