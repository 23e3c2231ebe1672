"""End to end: the real `krill run` against a fake Telegram that enforces flood limits (1
message a second per chat and 30 a second overall, as Telegram; a group's window scaled
from 20 a minute to 5 in 4 seconds so the test is short, with Krill configured the same).
Bursts in one chat, in one forum group and a long streamed reply must all arrive complete,
in order, without a single 429 provoked.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from tests.channel_env import telegram_section
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.flood import FloodControl, SlidingLimit
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess
from tests.paced_replies import assert_complete_and_in_order, is_last_part, long_replies

pytestmark = pytest.mark.asyncio(loop_scope="module")

GROUP_MESSAGES, GROUP_PERIOD = 5, 4.0
PARTS = 3  # chunks in every reply, so a burst of turns makes many more sends
PART_CHARS = 3_000  # a Telegram message holds 4,096
DELIVERY_TIMEOUT = 90.0


@dataclass
class Env:
    tg: FakeTelegram
    flood: FloodControl
    model: FakeAnthropic
    krill: KrillProcess


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    directory: Path = tmp_path_factory.mktemp("pacing-e2e")
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        flood = tg.enforce_flood_limits(group=SlidingLimit(GROUP_MESSAGES, GROUP_PERIOD))
        model.default_handler = long_replies(PARTS, PART_CHARS)
        config = {
            "anthropic": {"max_retries": 0},
            "telegram": telegram_section(tg, mode="polling")
            | {
                "stream_interval": 0.2,  # asks for far more previews than the limits allow
                "pacing": {"group_messages": GROUP_MESSAGES, "group_period": GROUP_PERIOD},
            },
        }
        async with KrillProcess(directory, config, model.env()) as krill:
            yield Env(tg, flood, model, krill)


def replies_in(env: Env, chat: int, thread: int | None = None) -> list[str]:
    return [
        m["text"]
        for m in env.tg.bot_messages(chat)
        if thread is None or m.get("message_thread_id") == thread
    ]


async def until_answered(env: Env, chat: int, tags: list[str], thread: int | None = None) -> None:
    """Wait until every tag has its last part delivered in `chat` (or its topic)."""
    deadline = asyncio.get_running_loop().time() + DELIVERY_TIMEOUT
    while not all(
        any(is_last_part(t, tag, PARTS) for t in replies_in(env, chat, thread)) for tag in tags
    ):
        assert asyncio.get_running_loop().time() < deadline, env.tg.dump_calls()
        await asyncio.sleep(0.05)


async def test_a_burst_in_one_chat_arrives_whole_and_in_order_without_a_429(env: Env) -> None:
    user = 5101
    tags = [f"msg-{n}" for n in range(6)]
    for tag in tags:
        env.tg.push_update(env.tg.private_message(user, f"{tag} tell me everything"))
    await until_answered(env, user, tags)
    assert_complete_and_in_order(replies_in(env, user), tags, PARTS)
    assert env.flood.refused == 0


async def test_a_burst_across_a_groups_topics_shares_its_limit_without_a_429(env: Env) -> None:
    group = -100510
    topics = {10: ["msg-101", "msg-102"], 20: ["msg-201", "msg-202"], 30: ["msg-301"]}
    for topic, tags in topics.items():
        for tag in tags:
            env.tg.push_update(
                env.tg.group_message(
                    group, 5102, f"{tag} please", mention=True, thread_id=topic, topic_message=True
                )
            )
    for topic, tags in topics.items():
        await until_answered(env, group, tags, topic)
    for topic, tags in topics.items():
        assert_complete_and_in_order(replies_in(env, group, topic), tags, PARTS)
    assert env.flood.refused == 0


async def test_a_long_streamed_reply_keeps_previews_under_the_limit(env: Env) -> None:
    user = 5103
    answer = "Streaming answer: " + " ".join(f"word{i}" for i in range(400))
    env.model.queue(
        Reply(content=[{"type": "text", "text": answer}], chunk_delay=0.06)
    )  # about 4 s
    env.tg.push_update(env.tg.private_message(user, "stream please"))
    await env.tg.wait_for(
        "editMessageText",
        predicate=lambda p: p.get("chat_id") == user and p.get("text") == answer,
        timeout=DELIVERY_TIMEOUT,
        successful=True,
    )
    assert replies_in(env, user) == [answer]
    previews = [p for p in env.tg.calls_to("editMessageText") if p["chat_id"] == user]
    assert len(previews) >= 2  # it did stream, at the pace the chat allows
    assert env.flood.refused == 0
