"""End to end: the real `krill run` against a fake Telegram that pushes back (flood control,
5xx storms, refusals) and a kill -9 while replies wait in the outbox. Every reply arrives
exactly once and in order, or the person (and `krill status`) are told.

One Krill process serves the module; each test has its own chat.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from channels.telegram.format import split_markdown
from tests.channel_env import telegram_section
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess, run_cli

pytestmark = pytest.mark.asyncio(loop_scope="module")

TIMEOUT = 20.0
CONSOLE = {"Authorization": "Bearer outbox-console-token-long-enough"}


@dataclass
class Env:
    tg: FakeTelegram
    model: FakeAnthropic
    krill: KrillProcess
    directory: Path
    config: dict[str, Any]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    directory = tmp_path_factory.mktemp("outbox-e2e")
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        config = {
            "anthropic": {"max_retries": 0},
            "admin": {"console_token": CONSOLE["Authorization"].removeprefix("Bearer ")},
            "storage": {"outbox_retry_first_seconds": 0.2, "outbox_retry_max_seconds": 1.0},
            "telegram": telegram_section(tg, mode="polling"),
        }
        krill = await KrillProcess(directory, config, model.env()).start()
        environment = Env(tg, model, krill, directory, config)
        try:
            yield environment
        finally:
            await environment.krill.stop()


async def wait_for_messages(env: Env, chat: int, count: int, last: str) -> list[str]:
    async with asyncio.timeout(TIMEOUT):
        while True:
            texts = [m["text"] for m in env.tg.bot_messages(chat)]
            if len(texts) >= count and last in texts[-1]:
                return texts
            await asyncio.sleep(0.02)


def three_parts(tag: str) -> str:
    answer = "\n\n".join(f"{tag} part {i}. " + "Words to fill it. " * 220 for i in range(3))
    assert len(split_markdown(answer)) == 3
    return answer


async def status(env: Env) -> dict[str, Any]:
    code, out, err = await run_cli(env.directory, "status", "--json", env=env.krill.command_env())
    assert code == 0, err
    return dict(json.loads(out))


async def test_flood_control_is_waited_out_and_the_reply_arrives_once(env: Env) -> None:
    chat = 5001
    env.tg.fail_next("sendMessage", 429, retry_after=1, times=2)
    env.tg.push_update(env.tg.private_message(chat, "through flood control"))
    texts = await wait_for_messages(env, chat, 1, "through flood control")
    assert len(texts) == 1
    tries = [p for p in env.tg.calls_to("sendMessage") if p.get("chat_id") == chat]
    assert len(tries) == 3  # two refused, one accepted


async def test_a_5xx_storm_is_outlasted(env: Env) -> None:
    chat = 5002
    env.tg.fail_next("sendMessage", 502, times=5)
    env.tg.push_update(env.tg.private_message(chat, "through the storm"))
    texts = await wait_for_messages(env, chat, 1, "through the storm")
    assert len(texts) == 1


async def test_part_2_of_3_failing_once_still_arrives_in_order(env: Env) -> None:
    chat = 5003
    env.model.queue_text(three_parts("order"))
    env.tg.fail_next("sendMessage", 500, after=1)
    env.tg.push_update(env.tg.private_message(chat, "long one please"))
    texts = await wait_for_messages(env, chat, 3, "order part 2")
    assert [t.split(".")[0] for t in texts] == ["order part 0", "order part 1", "order part 2"]


async def test_a_dead_part_is_told_in_the_next_part_and_in_status(env: Env) -> None:
    chat = 5004
    env.model.queue_text(three_parts("gone"))
    env.tg.fail_next("sendMessage", 403, "Forbidden: bot was blocked by the user", after=1)
    env.tg.push_update(env.tg.private_message(chat, "another long one"))
    texts = await wait_for_messages(env, chat, 2, "gone part 2")
    assert texts[0].startswith("gone part 0")
    assert texts[1].startswith(
        "⚠️ Part 2 of 3 could not be delivered: Forbidden: bot was blocked by the user"
    )
    outbox = (await status(env))["outbox"]
    assert outbox["dead"] >= 1
    assert any(d["chat_id"] == str(chat) and d["chunk_index"] == 1 for d in outbox["dead_chunks"])
    _, metrics = await env.krill.get("/metrics")
    assert 'krill_outbox_dead_total{channel="telegram"}' in metrics


async def test_a_chunk_telegram_finds_too_long_is_split_and_delivered(env: Env) -> None:
    chat = 5009
    env.tg.fail_next("sendMessage", 400, "Bad Request: message is too long")
    env.tg.push_update(env.tg.private_message(chat, "x " * 100 + "too long for once"))
    texts = await wait_for_messages(env, chat, 2, "too long for once")
    assert len(texts) == 2
    assert "".join(texts).replace(" ", "").replace("\n", "").count("x") >= 100


async def test_a_blocked_bot_marks_the_reply_dead_and_the_turn_is_not_failed(env: Env) -> None:
    chat = 5005
    env.tg.fail_next("sendMessage", 403, "Forbidden: bot was blocked by the user")
    env.tg.push_update(env.tg.private_message(chat, "you are blocked"))
    async with asyncio.timeout(TIMEOUT):
        while True:
            dead = (await status(env))["outbox"]["dead_chunks"]
            if any(d["chat_id"] == str(chat) for d in dead):
                break
            await asyncio.sleep(0.2)
    (chunk,) = [d for d in dead if d["chat_id"] == str(chat)]
    assert chunk["reason"] == "Forbidden: bot was blocked by the user"
    assert env.tg.bot_messages(chat) == []


async def test_a_dead_chunk_retried_from_the_console_health_page_is_delivered(env: Env) -> None:
    chat = 5010
    env.tg.fail_next("sendMessage", 403, "Forbidden: bot was blocked by the user")
    env.tg.push_update(env.tg.private_message(chat, "unblocked later"))
    health = f"{env.krill.url}/admin/health"
    async with aiohttp.ClientSession(headers=CONSOLE) as http, asyncio.timeout(TIMEOUT):
        while True:
            async with http.get(health) as resp:
                page = await resp.text()
            if f"telegram:{chat}</b>" in page:
                break
            await asyncio.sleep(0.2)
        assert "Forbidden: bot was blocked by the user" in page
        assert 'data-testid="outbox-retry"' in page
        row = page.split(f"telegram:{chat}</b>")[1].split('name="row" value="')[1].split('"')[0]
        retry = f"{env.krill.url}/admin/outbox/retry"
        async with http.post(
            retry, data={"row": row}, headers={"Origin": env.krill.url}, allow_redirects=False
        ) as resp:
            assert resp.status == 303
        texts = await wait_for_messages(env, chat, 1, "unblocked later")
        async with http.post(retry, data={"row": row}, headers={"Origin": env.krill.url}) as resp:
            again = await resp.text()
    assert len(texts) == 1  # delivered once, and a second retry finds nothing dead
    assert "no dead chunk" in again and f"telegram:{chat}</b>" not in again


@pytest.mark.hands_krill_to_module  # the restarted process is the module's from now on
async def test_replies_waiting_in_backoff_survive_kill_9(env: Env) -> None:
    chats = [5006, 5007, 5008]
    # Long enough that the kill lands while every reply waits for its retry.
    env.tg.fail_next("sendMessage", 429, retry_after=4, times=len(chats))
    for chat in chats:
        env.tg.push_update(env.tg.private_message(chat, f"survive {chat}"))
    async with asyncio.timeout(TIMEOUT):
        while True:
            refused = [p for p in env.tg.calls_to("sendMessage") if p["chat_id"] in chats]
            if len(refused) == len(chats):
                break
            await asyncio.sleep(0.02)
    await env.krill.kill()
    assert (await status(env))["outbox"]["pending"] >= len(chats)
    env.krill = await KrillProcess(env.directory, env.config, env.model.env()).start()
    for chat in chats:
        texts = await wait_for_messages(env, chat, 1, f"survive {chat}")
        assert len(texts) == 1
    assert (await status(env))["outbox"]["pending"] == 0
