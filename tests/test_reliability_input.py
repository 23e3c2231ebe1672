"""Bad input through the real endpoints of one real `krill run` (Telegram webhook, Slack over
HTTP): each kind gets a defined outcome, and the process never falls over.

Outcomes: broken encodings and bodies a platform would never send are refused with a 4xx;
unknown update and event types, the bot's own messages, edits and deletions are
acknowledged and ignored; lone surrogates, huge texts and odd Unicode are answered, the
first two in a cleaned-up form the person can see.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.inbound import MAX_MESSAGE_CHARS
from tests.channel_env import ChannelKrill, channel_config, start_channel_krill
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.asyncio(loop_scope="module")

MAX_BODY = 1_048_576


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ChannelKrill]:
    directory = tmp_path_factory.mktemp("reliability-input")
    async with FakeTelegram() as tg, FakeSlack() as slack, FakeAnthropic() as model:
        env = await start_channel_krill(directory, tg, slack, model, channel_config(tg, slack))
        try:
            yield env
        finally:
            await env.krill.stop()


def asked(env: ChannelKrill, needle: str) -> int:
    """How many model requests carried `needle` in the person's newest turn."""
    return sum(needle in r.last_user_text for r in env.model.message_requests)


async def settle_telegram(env: ChannelKrill, chat: int, tag: str) -> None:
    """A normal message after the odd ones, answered: everything before it was handled
    (a chat's messages are handled in order)."""
    assert (await env.telegram(env.tg.private_message(chat, f"plain {tag}")))[0] == 200
    await env.telegram_reply(chat, f"plain {tag}")


async def settle_slack(env: ChannelKrill, channel: str, tag: str) -> None:
    event = env.slack.im_message(f"U{channel}", f"plain {tag}", channel=channel)
    assert (await env.slack_event(event))[0] == 200
    await env.slack_reply(channel, f"plain {tag}")


def with_text(payload: dict[str, Any], text: str) -> bytes:
    """`payload` as JSON with a placeholder swapped for raw JSON text (e.g. escapes)."""
    return json.dumps(payload).replace("PLACEHOLDER", text).encode()


async def test_lone_surrogates_are_replaced_and_the_message_answered(env: ChannelKrill) -> None:
    update = env.tg.private_message(5101, "PLACEHOLDER")
    assert (await env.telegram(with_text(update, r"half a pair \ud83d here")))[0] == 200
    assert "half a pair \ufffd here" in await env.telegram_reply(5101, "half a pair")

    event = env.slack.im_message("U5102", "PLACEHOLDER", channel="D5102")
    status, _ = await env.slack_event(None, raw_body=with_text(event, r"lone \udc00 low"))
    assert status == 200
    assert "lone \ufffd low" in await env.slack_reply("D5102", "lone")


async def test_invalid_utf8_is_refused(env: ChannelKrill) -> None:
    update = with_text(env.tg.private_message(5201, "PLACEHOLDER"), "bad").replace(
        b"bad", b"bad \xff\xfe bytes"
    )
    assert (await env.telegram(update))[0] == 400
    event = with_text(env.slack.im_message("U5202", "PLACEHOLDER", channel="D5202"), "bad")
    status, _ = await env.slack_event(None, raw_body=event.replace(b"bad", b"bad \xff bytes"))
    assert status == 400  # a fault in the body, not a bad signature
    await settle_telegram(env, 5201, "after the broken body")
    assert asked(env, "bad") == 0


async def test_unknown_update_and_event_types_are_acknowledged_and_ignored(
    env: ChannelKrill,
) -> None:
    before = len(env.model.message_requests)
    future = {"update_id": env.tg.next_update_id, "some_future_update": {"id": 1}}
    assert (await env.telegram(future))[0] == 200
    emoji = env.slack.event_callback({"type": "emoji_changed", "subtype": "add", "name": "x"})
    assert (await env.slack_event(emoji))[0] == 200
    rate_limited = {"type": "app_rate_limited", "team_id": "T1", "minute_rate_limited": 1}
    assert (await env.slack_event(rate_limited))[0] == 200  # not a 404 Slack would retry
    await settle_telegram(env, 5301, "after unknown types")
    assert len(env.model.message_requests) == before + 1


@pytest.mark.parametrize(
    "message",
    [{"message_id": 1, "chat": {"id": 5401, "type": "private"}}, "just a string"],
    ids=["message-without-date", "message-not-an-object"],
)
async def test_updates_the_library_cannot_read_get_a_400(env: ChannelKrill, message: Any) -> None:
    update = {"update_id": env.tg.next_update_id, "message": message}
    assert (await env.telegram(update))[0] == 400


async def test_the_bots_own_messages_are_ignored(env: ChannelKrill) -> None:
    update = env.tg.private_message(5501, "from myself on telegram")
    update["message"]["from"] = env.tg.bot_user
    assert (await env.telegram(update))[0] == 200
    own_bot = env.slack.bot_message(
        "D5502", "from myself as a bot", bot_id=env.slack.bot_id, channel_type="im"
    )
    own_user = env.slack.im_message(env.slack.bot_user_id, "from myself as a user", channel="D5502")
    assert (await env.slack_event(own_bot))[0] == 200
    assert (await env.slack_event(own_user))[0] == 200
    await settle_telegram(env, 5501, "after own message")
    await settle_slack(env, "D5502", "after own messages")
    assert asked(env, "from myself") == 0


async def test_edits_and_deletions_are_ignored(env: ChannelKrill) -> None:
    original = env.tg.private_message(5601, "first version")
    assert (await env.telegram(env.tg.edited_message(original, "edited version")))[0] == 200
    post = env.slack.im_message("U5602", "slack first version", channel="D5602")
    ts = post["event"]["ts"]
    changed = env.slack.message_changed("D5602", ts, "slack edited version", channel_type="im")
    deleted = env.slack.message_deleted("D5602", ts, channel_type="im")
    assert (await env.slack_event(changed))[0] == 200
    assert (await env.slack_event(deleted))[0] == 200
    await settle_telegram(env, 5601, "after an edit")
    await settle_slack(env, "D5602", "after an edit")
    assert asked(env, "edited version") == 0


async def test_a_huge_message_is_cut_with_a_note_and_an_oversized_body_gets_413(
    env: ChannelKrill,
) -> None:
    text = "huge " + "y" * (MAX_MESSAGE_CHARS + 50_000)
    env.model.queue_text("that was a lot of y")
    assert (await env.telegram(env.tg.private_message(5701, text)))[0] == 200
    await env.telegram_reply(5701, "a lot of y")
    seen = env.model.message_requests[-1].last_user_text
    assert f"message cut: it had {len(text):,} characters" in seen
    assert len(seen) < MAX_MESSAGE_CHARS + 2_000

    too_big = env.tg.private_message(5701, "z" * (MAX_BODY + 1))
    assert (await env.telegram(too_big))[0] == 413


async def test_odd_unicode_is_answered_intact(env: ChannelKrill) -> None:
    odd = "مرحبا \u202etxet desrever\u202c zero\u200bwidth 👩\u200d👩\u200d👧 cafe\u0301 ✓"
    assert (await env.telegram(env.tg.private_message(5801, odd)))[0] == 200
    assert odd in await env.telegram_reply(5801, "zero")
    assert (await env.slack_event(env.slack.im_message("U5802", odd, channel="D5802")))[0] == 200
    assert odd in await env.slack_reply("D5802", "zero")


async def raw_post(env: ChannelKrill, path: str, headers: bytes, body: bytes) -> int:
    """POST with header bytes exactly as given (a client library would refuse some)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", env.krill.port)
    writer.write(
        b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n"
        + headers
        + b"\r\n"
        + body
    )
    await writer.drain()
    status_line = await reader.readline()
    writer.close()
    return int(status_line.split()[1])


DEEP_JSON = b"[" * 5000 + b"]" * 5000


async def test_malformed_requests_get_a_4xx_never_a_500(env: ChannelKrill) -> None:
    """Each of these was a 500 with a traceback, some before authentication."""
    update = json.dumps(env.tg.private_message(6101, "bad secret bytes")).encode()
    bad_secret = b"X-Telegram-Bot-Api-Secret-Token: \xff\xfe\xfd\r\n"
    assert await raw_post(env, "/telegram/webhook", bad_secret, update) == 403
    secret = f"X-Telegram-Bot-Api-Secret-Token: {env.webhook_secret}\r\n".encode()
    assert await raw_post(env, "/telegram/webhook", secret, DEEP_JSON) == 400

    event = env.slack.im_message("U6102", "a huge timestamp", channel="D6102")
    status, _ = await env.slack_event(event, timestamp=int("9" * 400))
    assert status == 401
    listed = env.slack.event_callback({"type": "message"}) | {"event": [{"type": "message"}]}
    assert (await env.slack_event(None, raw_body=json.dumps(listed).encode()))[0] == 400
    assert (await env.slack_event(None, raw_body=DEEP_JSON))[0] == 400

    assert await raw_post(env, "/api/chat", b"", DEEP_JSON) == 400
    for message_id in ({"a": 1}, [1, 2], True):
        chat = {"user": "odd-id", "text": "hello", "message_id": message_id}
        assert await raw_post(env, "/api/chat", b"", json.dumps(chat).encode()) == 400
    await settle_telegram(env, 6101, "after malformed requests")
    assert asked(env, "huge timestamp") == 0 and asked(env, "bad secret bytes") == 0


async def test_the_process_stayed_up_without_a_traceback(env: ChannelKrill) -> None:
    status, _ = await env.krill.get("/healthz")
    assert status == 200
    assert env.krill.proc is not None and env.krill.proc.returncode is None
    assert "Traceback" not in env.krill.log()


@pytest.mark.asyncio(loop_scope="function")  # its own polling process, not the module's
async def test_an_update_the_library_cannot_read_does_not_stop_polling(tmp_path: Path) -> None:
    async with FakeTelegram() as tg, FakeSlack() as slack, FakeAnthropic() as model:
        config = channel_config(tg, slack, telegram_mode="polling")
        env = await start_channel_krill(tmp_path, tg, slack, model, config)
        try:
            broken = {"message_id": 1, "chat": {"id": 5901, "type": "private"}}  # no date
            tg.push_update({"update_id": tg.next_update_id, "message": broken})
            tg.push_update(tg.private_message(5901, "right behind the broken one"))
            await env.telegram_reply(5901, "right behind the broken one", within=15)
            assert "skipping Telegram update" in env.krill.log()
            async with asyncio.timeout(5):  # the broken one is confirmed, not fetched forever
                while tg.pending_updates:  # noqa: ASYNC110 (the fake has no event for this)
                    await asyncio.sleep(0.05)
        finally:
            await env.krill.stop()
