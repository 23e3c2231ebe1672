"""End to end over long polling: the real `krill run` process, python-telegram-bot, the fake
Telegram Bot API and the fake model.

One Krill process serves the whole module (starting one takes about 1.5 s); each test uses
its own chats, so the tests do not see each other's sessions.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from channels.telegram.format import split_markdown
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.telegram import FakeTelegram, utf16_len
from tests.krill_process import KrillProcess, run_cli

pytestmark = pytest.mark.asyncio(loop_scope="module")

ADMIN = 42  # allowed, and an admin
FRIEND = 43  # allowed, with a per-user history limit of 1
STRANGER = 44  # not on allow_from
LONG_USER = 4201  # allowed; gets the long reply
STREAM_USER = 4202  # allowed; gets the streamed reply
REACT_USER = 4203  # allowed; watches the acknowledgement reactions
GROUP_USER = 4204  # only in groups, so the turns here leave ADMIN's per-minute budget alone
BLOCKED_GROUP = -100999
REPLY_TIMEOUT = 10.0


@dataclass
class Env:
    tg: FakeTelegram
    model: FakeAnthropic
    krill: KrillProcess
    directory: Path


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    directory = tmp_path_factory.mktemp("telegram-e2e")
    async with FakeTelegram() as tg, FakeAnthropic() as model:
        config = {
            "anthropic": {"max_retries": 0},
            "admin": {"users": [f"telegram:{ADMIN}"]},
            "telegram": {
                "enabled": True,
                "token": tg.token,
                "api_base_url": tg.url,
                "dm_policy": "pairing",
                "allow_from": [str(u) for u in (ADMIN, FRIEND, LONG_USER, STREAM_USER, REACT_USER)],
                "dms": {str(FRIEND): {"history_limit": 1}},
                "groups": {str(BLOCKED_GROUP): {"allow": False}},
                "stream_interval": 0.2,
            },
        }
        async with KrillProcess(directory, config, model.env()) as krill:
            yield Env(tg, model, krill, directory)


def _said(update: dict[str, Any], bot_username: str) -> str:
    message = update["message"]
    text = message.get("text") or message.get("caption") or ""
    return text.removeprefix(f"@{bot_username}").strip()


async def say(
    env: Env, update: dict[str, Any], count: int = 1, expect: str | None = None
) -> list[str]:
    """Push `update`, then wait until the bot has `count` new messages in that chat and the
    last one (as it reads after any edits) contains `expect`.

    `expect` defaults to what the person said, which the fake model echoes back. Waiting for
    it, rather than for a send, skips over a streaming preview that is still being edited.
    """
    chat = update["message"]["chat"]["id"]
    needle = _said(update, env.tg.bot_username) if expect is None else expect
    before = len(env.tg.bot_messages(chat))
    env.tg.push_update(update)
    async with asyncio.timeout(REPLY_TIMEOUT):
        while True:
            new = [m["text"] for m in env.tg.bot_messages(chat)[before:]]
            if len(new) >= count and needle in new[-1]:
                return new
            await asyncio.sleep(0.02)


async def settle(env: Env) -> None:
    """Wait until every update pushed so far has been handled: the poller handles updates in
    order, so once a later command is answered, everything before it was handled."""
    await say(env, env.tg.private_message(ADMIN, "/whoami"), expect="You are telegram:")


def requests_mentioning(env: Env, needle: str) -> list[str]:
    return [r.last_user_text for r in env.model.message_requests if needle in r.last_user_text]


def sends_to(env: Env, chat: int) -> list[dict[str, Any]]:
    return [p for p in env.tg.calls_to("sendMessage") if p.get("chat_id") == chat]


async def test_dm_is_answered_with_typing_first(env: Env) -> None:
    replies = await say(env, env.tg.private_message(ADMIN, "hello from a DM"))
    assert len(replies) == 1 and "hello from a DM" in replies[0]
    calls = [(c.method, c.params.get("chat_id")) for c in env.tg.calls]
    assert calls.index(("sendChatAction", ADMIN)) < calls.index(("sendMessage", ADMIN))
    assert len(requests_mentioning(env, "hello from a DM")) == 1


async def test_two_users_have_separate_sessions(env: Env) -> None:
    await say(env, env.tg.private_message(ADMIN, "my secret is aubergine"))
    await say(env, env.tg.private_message(FRIEND, "what is the secret?", first_name="Bob"))
    request = env.model.message_requests[-1]
    assert "what is the secret?" in request.last_user_text
    assert "aubergine" not in str(request.messages)


async def test_per_user_history_limit_applies_to_that_user_only(env: Env) -> None:
    for i in range(3):
        await say(env, env.tg.private_message(FRIEND, f"limited {i}", first_name="Bob"))
    limited = env.model.message_requests[-1].messages
    assert [m["role"] for m in limited] == ["user"]  # only the newest user turn is kept
    for i in range(3):
        await say(env, env.tg.private_message(ADMIN, f"unlimited {i}"))
    full = env.model.message_requests[-1].messages
    assert sum(m["role"] == "user" for m in full) >= 3


async def test_group_answers_only_when_mentioned_with_buffered_context(env: Env) -> None:
    group = -100201
    env.tg.push_update(env.tg.group_message(group, ADMIN, "deploy is at noon"))
    env.tg.push_update(
        env.tg.group_message(group, STRANGER, "bring snacks", first_name="Bob", username="bob")
    )
    await settle(env)
    assert sends_to(env, group) == []
    assert requests_mentioning(env, "deploy is at noon") == []

    trigger = env.tg.group_message(group, ADMIN, "when is the deploy?", mention=True)
    await say(env, trigger)
    text = env.model.message_requests[-1].last_user_text
    assert "Alice: deploy is at noon" in text and "Bob: bring snacks" in text
    assert text.index("deploy is at noon") < text.index("when is the deploy?")
    assert "@krill_bot" not in text  # the leading mention is stripped
    reply = sends_to(env, group)[-1]
    assert reply["reply_parameters"]["message_id"] == trigger["message"]["message_id"]

    await say(env, env.tg.group_message(group, ADMIN, "thanks", mention=True))
    assert "deploy is at noon" not in env.model.message_requests[-1].last_user_text  # cleared


async def test_bare_mention_answers_from_the_buffer(env: Env) -> None:
    group = -100202
    env.tg.push_update(env.tg.group_message(group, ADMIN, "pizza or sushi tonight?"))
    await say(env, env.tg.group_message(group, ADMIN, "@krill_bot"))
    assert "pizza or sushi tonight?" in env.model.message_requests[-1].last_user_text


async def test_a_reply_to_a_bot_message_with_no_text_and_a_tap_mention_are_answered(
    env: Env,
) -> None:
    group = -100208
    # A reply to one of the bot's messages that carries neither text nor caption (OpenClaw's
    # vector: a sticker, a captionless photo or a voice note, shown as just the message).
    reply = env.tg.group_message(group, GROUP_USER, "and what about that one?")
    reply["message"]["reply_to_message"] = {
        "message_id": 7,
        "date": 1,
        "chat": reply["message"]["chat"],
        "from": env.tg.bot_user,
    }
    await say(env, reply)
    # A tap-to-mention that arrives as a link to the bot (written tg://user/?id=).
    tapped = env.tg.group_message(group, GROUP_USER, "Krill? please summarise")
    tapped["message"]["text"] = "Bot please summarise"
    tapped["message"]["entities"] = [
        {"type": "text_link", "offset": 0, "length": 3, "url": f"tg://user/?id={env.tg.bot_id}"}
    ]
    await say(env, tapped, expect="please summarise")
    assert len(sends_to(env, group)) == 2


async def test_reply_to_the_bot_and_name_count_as_mentions(env: Env) -> None:
    group = -100203
    await say(env, env.tg.group_message(group, ADMIN, "hello", mention=True))
    await say(env, env.tg.group_message(group, ADMIN, "tell me more", reply_to_bot=True))
    await say(env, env.tg.group_message(group, ADMIN, "Krill, one more thing"))
    assert len(sends_to(env, group)) == 3


async def test_group_blocked_by_override_is_silent(env: Env) -> None:
    # Not an admin: admins are let in everywhere.
    env.tg.push_update(env.tg.group_message(BLOCKED_GROUP, STRANGER, "anyone?", mention=True))
    await settle(env)
    assert sends_to(env, BLOCKED_GROUP) == []
    assert requests_mentioning(env, "anyone?") == []


async def test_forum_topics_are_separate_sessions_and_replies_stay_in_topic(env: Env) -> None:
    forum = -100300
    tg = env.tg
    await say(
        env,
        tg.group_message(
            forum, ADMIN, "my name is Ann", mention=True, topic_message=True, thread_id=7
        ),
    )
    await say(
        env,
        tg.group_message(forum, ADMIN, "who am I?", mention=True, topic_message=True, thread_id=9),
    )
    assert "Ann" not in str(env.model.message_requests[-1].messages)
    await say(
        env,
        tg.group_message(
            forum, ADMIN, "back in seven", mention=True, topic_message=True, thread_id=7
        ),
    )
    assert "my name is Ann" in str(env.model.message_requests[-1].messages)

    replies = sends_to(env, forum)
    assert [r["message_thread_id"] for r in replies] == [7, 9, 7]
    typing = [p for p in tg.calls_to("sendChatAction") if p["chat_id"] == forum]
    assert {p["message_thread_id"] for p in typing} == {7, 9}

    # General topic: no thread id, the group's own session.
    await say(env, tg.group_message(forum, ADMIN, "general question", mention=True, is_forum=True))
    assert "message_thread_id" not in sends_to(env, forum)[-1]
    assert "my name is Ann" not in str(env.model.message_requests[-1].messages)

    # A topic the bot opened: a plain message there is not a reply to the bot.
    opened = tg.group_message(forum, ADMIN, "plain talk", topic_message=True, thread_id=11)
    opened["message"]["reply_to_message"]["from"] = tg.bot_user
    tg.push_update(opened)
    await settle(env)
    assert requests_mentioning(env, "plain talk") == []


async def test_commands_work_in_dm_and_with_bot_suffix_in_groups(env: Env) -> None:
    group = -100204
    calls_before = len(env.model.message_requests)
    (status,) = await say(env, env.tg.command(ADMIN, ADMIN, "/status"), expect="Session:")
    assert "Session: agent:main:telegram:direct:42" in status
    (group_status,) = await say(
        env,
        env.tg.command(group, ADMIN, "/status", group=True, with_bot_suffix=True),
        expect="Session:",
    )
    assert f"Session: agent:main:telegram:group:{group}" in group_status
    (help_text,) = await say(
        env,
        env.tg.command(group, STRANGER, "/help", group=True, with_bot_suffix=True),
        expect="/reset",
    )
    assert "/reset" in help_text
    (refusal,) = await say(
        env,
        env.tg.command(group, STRANGER, "/reset", group=True, with_bot_suffix=True),
        expect="only an admin",
    )
    assert "only an admin" in refusal
    env.tg.push_update(env.tg.command(group, ADMIN, "/status@other_bot", group=True))
    await settle(env)
    assert len(sends_to(env, group)) == 3
    assert len(env.model.message_requests) == calls_before  # commands never reach the model
    registered = env.tg.calls_to("setMyCommands")[0]["commands"]
    assert "status" in {c["command"] for c in registered}


async def test_photos_reach_the_model_as_images_and_stickers_as_placeholders(env: Env) -> None:
    await say(env, env.tg.photo_message(ADMIN, ADMIN, caption="what is in this picture?"))
    request = env.model.message_requests[-1]
    assert "what is in this picture?" in request.last_user_text
    assert "[photo]" not in request.last_user_text
    assert [b["type"] for b in request.messages[-1]["content"]][-1] == "image"
    await say(env, env.tg.sticker_message(ADMIN, ADMIN, emoji="🎉"))
    assert "[sticker 🎉]" in env.model.message_requests[-1].last_user_text


async def test_same_message_delivered_twice_is_answered_once(env: Env) -> None:
    update = env.tg.private_message(ADMIN, "only once please")
    again = {k: v for k, v in update.items() if k != "update_id"}  # a redelivery, new update id
    env.tg.push_update(update)
    env.tg.push_update(again)
    # A later message in the same session is answered only after anything queued before it.
    await say(env, env.tg.private_message(ADMIN, "and this comes after"))
    assert len(requests_mentioning(env, "only once please")) == 1
    assert sum("only once please" in m["text"] for m in env.tg.bot_messages(ADMIN)) == 1


async def test_long_reply_is_split_without_breaking_code(env: Env) -> None:
    user = LONG_USER
    # About 12k characters: over 4,096 several times, under the model's max_tokens.
    code = "\n".join(f"step_{i} = compute({i})  # keep going" for i in range(200))
    prose = "\n\n".join(f"Paragraph {i}. " + "Some explanation here. " * 20 for i in range(10))
    answer = f"{prose}\n\n```python\n{code}\n```\n\nDone."
    expected = len(split_markdown(answer))
    assert expected >= 3
    env.model.queue_text(answer)
    await say(env, env.tg.private_message(user, "write a long answer"), expected, "Done.")
    chunks = [m["text"] for m in env.tg.bot_messages(user)]
    assert len(chunks) == expected
    assert all(utf16_len(c) <= 4096 for c in chunks)
    joined = "\n".join(chunks)
    assert re.findall(r"step_\d+", joined) == [f"step_{i}" for i in range(200)]
    assert chunks[-1].endswith("Done.")
    code_sends = [
        p for p in sends_to(env, user) if "step_1 " in p["text"] or "step_199" in p["text"]
    ]
    assert all(any(e["type"] == "pre" for e in p["entities"]) for p in code_sends)


async def test_reply_streams_by_editing_one_message(env: Env) -> None:
    user = STREAM_USER
    answer = "Streaming answer: " + " ".join(f"word{i}" for i in range(300))
    # About 3 s: edits are paced at 1 a second per chat.
    env.model.queue(Reply(content=[{"type": "text", "text": answer}], chunk_delay=0.06))
    await say(env, env.tg.private_message(user, "stream please"), expect="Streaming answer")
    await env.tg.wait_for(
        "editMessageText",
        predicate=lambda p: p.get("chat_id") == user and p.get("text") == answer,
        timeout=REPLY_TIMEOUT,
    )
    edits = [p for p in env.tg.calls_to("editMessageText") if p["chat_id"] == user]
    assert len(edits) >= 2  # previews grew, then the final text replaced them in place
    assert len(sends_to(env, user)) == 1
    assert [m["text"] for m in env.tg.bot_messages(user)] == [answer]


async def test_flood_control_on_send_is_waited_out(env: Env) -> None:
    # Twice: a streaming preview may take the first 429 (previews are not retried), and the
    # final reply must still wait out the second.
    env.tg.fail_next("sendMessage", 429, retry_after=1, times=2)
    replies = await say(env, env.tg.private_message(ADMIN, "are you rate limited?"))
    assert "are you rate limited?" in replies[0]
    failed = [c for c in env.tg.calls if c.method == "sendMessage" and c.status == 429]
    assert failed
    assert "not accepted (Telegram flood control); retrying in 1.0s" in env.krill.log()


async def test_pairing_code_then_approval(env: Env) -> None:
    user = 7007
    (reply,) = await say(
        env, env.tg.private_message(user, "let me in, secret plan"), expect="pairing code"
    )
    code = re.search(r"pairing code is ([A-Z0-9]{8})", reply)
    assert code, reply
    assert requests_mentioning(env, "secret plan") == []
    status, _out, err = await run_cli(
        env.directory,
        "pairing",
        "approve",
        "telegram",
        code.group(1),
        "--config",
        str(env.krill.config_path),
        env=env.model.env(),
    )
    assert status == 0, err
    replies = await say(env, env.tg.private_message(user, "now am I in?"))
    assert "now am I in?" in replies[0]


async def reactions_on(env: Env, chat: int, message_id: int, count: int) -> list[str]:
    """The first `count` emoji setMessageReaction set on one message ("" for a removal)."""
    calls = await env.tg.wait_for(
        "setMessageReaction",
        count,
        REPLY_TIMEOUT,
        lambda p: p.get("chat_id") == chat and p.get("message_id") == message_id,
    )
    return ["".join(r.get("emoji", "") for r in c.get("reaction") or []) for c in calls]


async def test_message_being_answered_gets_eyes_then_thumbs_up(env: Env) -> None:
    update = env.tg.private_message(REACT_USER, "please look at this")
    await say(env, update)
    message_id = update["message"]["message_id"]
    assert await reactions_on(env, REACT_USER, message_id, 2) == ["👀", "👍"]
    assert env.tg.reactions[(REACT_USER, message_id)] == [{"type": "emoji", "emoji": "👍"}]


async def test_a_refused_reaction_never_blocks_the_reply(env: Env) -> None:
    env.tg.fail_next("setMessageReaction", 400, "Bad Request: REACTION_INVALID", times=2)
    update = env.tg.private_message(REACT_USER, "answer me anyway")
    replies = await say(env, update)
    assert "answer me anyway" in replies[-1]
    # Both the 👀 and the 👍 were tried, and refused; the reply went out regardless.
    await reactions_on(env, REACT_USER, update["message"]["message_id"], 2)
    assert (REACT_USER, update["message"]["message_id"]) not in env.tg.reactions
    assert "could not react to message" in env.krill.log()


async def test_hyperlink_target_reaches_the_model(env: Env) -> None:
    update = env.tg.private_message(REACT_USER, "read the release notes please")
    update["message"]["entities"] = [
        {"type": "text_link", "offset": 9, "length": 13, "url": "https://example.org/notes"}
    ]
    await say(env, update, expect="release notes")
    (said,) = requests_mentioning(env, "https://example.org/notes")
    assert "read the [release notes](https://example.org/notes) please" in said
