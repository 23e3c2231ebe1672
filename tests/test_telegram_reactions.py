"""Acknowledgement reactions a stopped process left: after `kill -9` mid-turn the restarted
Krill answers the message and swaps its 👀 for 👍; one whose turn had ended before the stop
is cleared at start, without waiting for a turn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from telegram import Bot
from telegram.request import HTTPXRequest

from channels.telegram import reactions
from channels.telegram.adapter import TelegramChannel
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.krill_process import KrillProcess
from tests.stub_gateway import StubGateway
from tests.test_e2e_local import plain_echo
from tests.test_telegram_adapter import tg_config

USER = 5151
TIMEOUT = 30.0
EYES = [{"type": "emoji", "emoji": "👀"}]
THUMBS = [{"type": "emoji", "emoji": "👍"}]


async def test_an_acknowledgement_left_by_kill_9_is_cleared_after_the_restart(
    tmp_path: Path, fake_anthropic: FakeAnthropic, fake_telegram: FakeTelegram
) -> None:
    fake_anthropic.default_handler = plain_echo
    fake_anthropic.delay = 60.0  # the model is still thinking when the process dies
    config = {
        "telegram": {
            "enabled": True,
            "token": fake_telegram.token,
            "api_base_url": fake_telegram.url,
            "dm_policy": "open",
        }
    }
    update = fake_telegram.private_message(USER, "are you there?")
    message = (USER, update["message"]["message_id"])
    krill = await KrillProcess(tmp_path, config, fake_anthropic.env()).start()
    try:
        fake_telegram.push_update(update)
        await fake_telegram.wait_for(
            "setMessageReaction", timeout=TIMEOUT, predicate=lambda p: p["chat_id"] == USER
        )
        await fake_anthropic.wait_for_requests(1, within=TIMEOUT)
    finally:
        await krill.kill()
    assert fake_telegram.reactions[message] == EYES
    fake_anthropic.delay = 0.0
    async with KrillProcess(tmp_path, config, fake_anthropic.env()):
        await fake_telegram.wait_for(
            "sendMessage",
            timeout=TIMEOUT,
            predicate=lambda p: "echo: are you there?" in p.get("text", ""),
        )
        await fake_telegram.wait_for(
            "setMessageReaction",
            timeout=TIMEOUT,
            predicate=lambda p: (
                (p["chat_id"], p["message_id"]) == message and p.get("reaction") == THUMBS
            ),
        )
    assert fake_telegram.reactions[message] == THUMBS


async def test_an_acknowledgement_whose_turn_had_ended_is_cleared_at_start(
    fake_telegram: FakeTelegram,
) -> None:
    core = StubGateway()  # the store both processes share
    first = TelegramChannel(tg_config(fake_telegram), core)
    await first.start()
    try:
        update = fake_telegram.push_update(fake_telegram.private_message(USER, "hello"))
        await core.wait(1)
        message_id = update["message"]["message_id"]
        await fake_telegram.wait_for(
            "setMessageReaction", predicate=lambda p: p["message_id"] == message_id
        )
    finally:
        await first.stop()
    # The process stopped after the turn ended and before its done reaction went out: the
    # record says so.
    record = json.loads(core.state[(reactions.CHANNEL, reactions.RECORD_KEY)])
    assert record == {f"{USER}|": {reactions.WAITING: [message_id]}}
    record = {f"{USER}|": {reactions.ANSWERED: [message_id]}}
    core.state[(reactions.CHANNEL, reactions.RECORD_KEY)] = json.dumps(record)
    assert fake_telegram.reactions[(USER, message_id)] == EYES

    second = TelegramChannel(tg_config(fake_telegram), core)
    await second.start()
    try:
        await fake_telegram.wait_for(
            "setMessageReaction",
            predicate=lambda p: p["message_id"] == message_id and p.get("reaction") == THUMBS,
        )
        assert fake_telegram.reactions[(USER, message_id)] == THUMBS
        async with asyncio.timeout(TIMEOUT):  # and the record forgets it
            while json.loads(core.state.get((reactions.CHANNEL, reactions.RECORD_KEY), "{}")):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
    finally:
        await second.stop()


async def test_a_turn_ends_without_waiting_for_another_chats_slow_acknowledgement(
    fake_telegram: FakeTelegram,
) -> None:
    """Under load the Bot API answers some calls slowly; one chat's slow 👀 must not keep
    another chat's turn from ending (its lane held, its 👍 given up)."""
    bot = Bot(
        fake_telegram.token,
        base_url=f"{fake_telegram.url}/bot",
        request=HTTPXRequest(read_timeout=60.0),
    )
    tracker = reactions.Reactions(bot, "👀", "👍", StubGateway())
    slow_chat, other_chat = USER, USER + 1
    slow, other = (
        fake_telegram.push_update(fake_telegram.private_message(chat, "hi"))["message"]
        for chat in (slow_chat, other_chat)
    )
    async with bot:
        fake_telegram.answer_late("setMessageReaction", 40.0)  # the next one: slow_chat's 👀
        tracker.acknowledge(slow_chat, None, slow["message_id"])
        await fake_telegram.wait_for(
            "setMessageReaction", predicate=lambda p: p["chat_id"] == slow_chat
        )
        tracker.acknowledge(other_chat, None, other["message_id"])
        try:
            await tracker.finish(other_chat, None, None)
            await fake_telegram.wait_for(
                "setMessageReaction",
                timeout=TIMEOUT,
                predicate=lambda p: p["chat_id"] == other_chat and p.get("reaction") == THUMBS,
            )
            assert fake_telegram.reactions[(other_chat, other["message_id"])] == THUMBS
            assert (
                fake_telegram.reactions[(slow_chat, slow["message_id"])] == EYES
            )  # still under way
        finally:
            await tracker.stop()
