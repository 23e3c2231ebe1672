"""The owner's first DM: `krill init --owner` (or its question on a terminal) makes them an
admin of a config where strangers pair; a refused person learns their id and what the owner
can do, and so does the log; start-up and `krill doctor` warn when a channel would refuse
everyone's DMs, and doctor fails when no one could ever reach the bot."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import sys
import tomllib
from pathlib import Path

from bot.config import load_config
from channels.registry import CHANNELS
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, run_cli, write_config
from tests.test_e2e_local import plain_echo

OWNER, STRANGER = 333, 444
TIMEOUT = 30.0


async def replies_to(tg: FakeTelegram, chat: int, needle: str) -> str:
    sent = await tg.wait_for(
        "sendMessage",
        predicate=lambda p: p.get("chat_id") == chat and needle in p.get("text", ""),
        timeout=TIMEOUT,
    )
    return str(sent[-1]["text"])


async def test_init_with_an_owner_lets_the_owner_in_and_strangers_pair(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_telegram: FakeTelegram
) -> None:
    fake_anthropic.default_handler = plain_echo
    # README's way: `krill init` in a folder, then `krill run` there (no --config).
    env = fake_anthropic.env() | {
        "TELEGRAM_BOT_TOKEN": fake_telegram.token,
        "KRILL_TELEGRAM__ENABLED": "true",
        "KRILL_TELEGRAM__API_BASE_URL": fake_telegram.url,
    }
    krill = KrillProcess(tmp_path, {}, env, bare=True)
    code, out, err = await run_cli(
        tmp_path, "init", str(tmp_path), "--owner", f"telegram:{OWNER}", "--owner", "slack:u0abc"
    )
    assert code == 0, err
    assert "admins: telegram:333, slack:U0ABC" in out
    written = tomllib.loads((tmp_path / "krill.toml").read_text())
    assert written["admin"]["users"] == ["telegram:333", "slack:U0ABC"]
    assert written["telegram"]["dm_policy"] == written["slack"]["dm_policy"] == "pairing"
    async with krill:
        fake_telegram.push_update(fake_telegram.private_message(OWNER, "hello from the owner"))
        await replies_to(fake_telegram, OWNER, "echo: hello from the owner")
        fake_telegram.push_update(fake_telegram.private_message(STRANGER, "let me in"))
        reply = await replies_to(fake_telegram, STRANGER, "pairing code")
        code_found = re.search(r"pairing code is ([A-Z0-9]{8})", reply)
        assert code_found is not None
        assert f"Telegram id is {STRANGER}" in reply
        assert f"krill pairing approve telegram {code_found.group(1)}" in reply
        await krill.logged(f"approve with: krill pairing approve telegram {code_found[1]}")
        assert "no one can DM" not in krill.log()


async def test_a_refused_person_learns_their_id_and_the_log_says_how_to_let_them_in(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_telegram: FakeTelegram
) -> None:
    # What deploy/krill.toml and compose used to lead to: only enabled and the token.
    telegram = {"enabled": True, "token": fake_telegram.token, "api_base_url": fake_telegram.url}
    async with KrillProcess(tmp_path, {"telegram": telegram}, fake_anthropic.env()) as krill:
        assert "no one can DM the bot on telegram, not even its owner" in krill.log()
        fake_telegram.push_update(fake_telegram.private_message(OWNER, "/whoami"))
        reply = await replies_to(fake_telegram, OWNER, "private")
        await krill.logged("to let them in")
    assert f"Telegram id is {OWNER}" in reply
    assert f'add "{OWNER}" to telegram.allow_from' in reply
    assert f'to let them in, add "{OWNER}" to telegram.allow_from' in krill.log()
    assert f'"telegram:{OWNER}" to admin.users' in krill.log()


async def test_doctor_warns_when_no_one_can_dm_and_fails_when_no_one_can_get_in(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_telegram: FakeTelegram
) -> None:
    telegram = {"enabled": True, "token": fake_telegram.token, "api_base_url": fake_telegram.url}
    results = []
    for extra in ({}, {"group_policy": "disabled"}, {"dm_policy": "pairing"}):
        config = write_config(tmp_path, {"telegram": telegram | extra})
        code, out, _ = await run_cli(
            tmp_path, "doctor", "--config", str(config), env=fake_anthropic.env()
        )
        (line,) = [line for line in out.splitlines() if line.split(":")[0].endswith("access")]
        results.append((code, line))
    (code, warn), (failed_code, fail), (ok_code, ok) = results
    assert code == 0 and warn.startswith("[warn]") and "not even its owner" in warn
    assert "admin.users" in warn and 'dm_policy = "pairing"' in warn
    assert failed_code == 1 and fail.startswith("[FAIL]") and "no one can ever talk" in fail
    assert ok_code == 0 and ok.startswith("[ok]") and "dm_policy pairing" in ok


async def test_init_asks_for_the_owner_on_a_terminal(tmp_path: Path) -> None:
    terminal, keyboard = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "init",
        str(tmp_path),
        # All three on the terminal: input() shows its prompt on stderr there.
        stdin=keyboard,
        stdout=keyboard,
        stderr=keyboard,
        env={k: v for k, v in os.environ.items() if not k.startswith("KRILL_")},
    )
    os.close(keyboard)
    seen = b""
    try:
        loop = asyncio.get_running_loop()

        async def read_until(needle: bytes) -> None:
            nonlocal seen
            while needle not in seen:
                seen += await asyncio.wait_for(
                    loop.run_in_executor(None, os.read, terminal, 1024), 30
                )

        await read_until(b"owner> ")
        os.write(terminal, b"telegram:abc\n")  # not an id: asked again
        await read_until(b"is not an owner")
        await read_until(b"owner> ")
        os.write(terminal, b"telegram:555\n")
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        os.close(terminal)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    loaded = load_config(str(tmp_path / "krill.toml"), {}, channels=CHANNELS)
    assert loaded.admin.users == ["telegram:555"]


async def test_a_bad_owner_is_refused(tmp_path: Path) -> None:
    code, _, err = await run_cli(tmp_path, "init", str(tmp_path), "--owner", "telegram:@ann")
    assert code == 2 and "--owner" in err and "telegram:<numeric user id>" in err
    assert not (tmp_path / "krill.toml").exists()
