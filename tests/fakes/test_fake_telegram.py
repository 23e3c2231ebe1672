"""Checks the Telegram fake against the real python-telegram-bot, so other tests can trust it."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from telegram import Bot, ReactionTypeEmoji, ReplyParameters, Update
from telegram.error import BadRequest, ChatMigrated, Conflict, InvalidToken, RetryAfter
from telegram.ext import Application, CommandHandler, ContextTypes, MessageHandler, filters

from tests.fakes.flood import SlidingLimit
from tests.fakes.telegram import TINY_PNG, FakeTelegram, utf16_len


@pytest.fixture
async def bot(fake_telegram: FakeTelegram):
    async with fake_telegram.make_bot() as bot:
        yield bot


async def _post(fake: FakeTelegram, method: str, **kwargs) -> tuple[int, dict]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{fake.base_url}{fake.token}/{method}", **kwargs) as resp,
    ):
        return resp.status, await resp.json()


async def test_initialize_calls_get_me(fake_telegram: FakeTelegram) -> None:
    app = fake_telegram.app_builder().build()
    await app.initialize()
    try:
        assert app.bot.username == "krill_bot"
        assert app.bot.id == 999
        assert app.bot.can_read_all_group_messages is False
        assert [m for m, _ in fake_telegram.calls] == ["getMe"]
    finally:
        await app.shutdown()


async def test_wrong_token_is_invalid_token(fake_telegram: FakeTelegram) -> None:
    app = fake_telegram.app_builder(token="123456:WRONG").build()
    with pytest.raises(InvalidToken):
        await app.initialize()
    assert fake_telegram.calls == []


async def test_polling_delivers_pushed_update_and_reply(fake_telegram: FakeTelegram) -> None:
    received: list[Update] = []
    got_one = asyncio.Event()

    async def on_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        received.append(update)
        got_one.set()
        await update.effective_message.reply_text(f"echo: {update.effective_message.text}")

    app: Application = fake_telegram.app_builder().build()
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, on_text))
    await app.initialize()
    await app.start()
    await app.updater.start_polling(timeout=1, poll_interval=0)
    try:
        started = time.monotonic()
        fake_telegram.push_update(fake_telegram.private_message(42, "hello there"))
        await asyncio.wait_for(got_one.wait(), 5)
        # Long poll must return as soon as the update arrives, not after the timeout.
        assert time.monotonic() - started < 0.9
        sent = await fake_telegram.wait_for("sendMessage", successful=True)
    finally:
        await app.updater.stop()
        await app.stop()
        await app.shutdown()

    message = received[0].effective_message
    assert message.text == "hello there"
    assert message.chat.type == "private"
    assert message.from_user.first_name == "Alice"
    assert sent[0]["chat_id"] == 42
    assert sent[0]["text"] == "echo: hello there"
    assert fake_telegram.sent_texts(42) == ["echo: hello there"]
    assert fake_telegram.calls_to("deleteWebhook")
    # The final getUpdates on stop acknowledges the update, so nothing is pending.
    assert fake_telegram.pending_updates == []


async def test_get_updates_long_poll_and_offsets(fake_telegram: FakeTelegram, bot: Bot) -> None:
    started = time.monotonic()
    assert await bot.get_updates(timeout=0) == ()
    assert time.monotonic() - started < 0.5

    first = fake_telegram.push_update(fake_telegram.private_message(1, "a"))
    second = fake_telegram.push_update(fake_telegram.private_message(1, "b"))
    assert second["update_id"] == first["update_id"] + 1
    assert fake_telegram.next_update_id == second["update_id"] + 1

    updates = await bot.get_updates(timeout=0)
    assert [u.message.text for u in updates] == ["a", "b"]
    updates = await bot.get_updates(offset=second["update_id"], timeout=0)
    assert [u.message.text for u in updates] == ["b"]

    async def push_later() -> None:
        await asyncio.sleep(0.2)
        fake_telegram.push_update(fake_telegram.private_message(1, "c"))

    task = asyncio.create_task(push_later())
    started = time.monotonic()
    updates = await bot.get_updates(offset=second["update_id"] + 1, timeout=5)
    await task
    assert [u.message.text for u in updates] == ["c"]
    assert time.monotonic() - started < 2

    started = time.monotonic()
    assert await bot.get_updates(offset=updates[0].update_id + 1, timeout=0.3) == ()
    assert time.monotonic() - started >= 0.25


async def test_getupdates_conflict(fake_telegram: FakeTelegram, bot: Bot) -> None:
    fake_telegram.fail_next_getupdates_conflict()
    with pytest.raises(Conflict, match="terminated by other getUpdates request"):
        await bot.get_updates(timeout=0)
    assert await bot.get_updates(timeout=0) == ()


async def test_send_and_edit_are_recorded(fake_telegram: FakeTelegram, bot: Bot) -> None:
    incoming = fake_telegram.group_message(-1001, 7, "question", thread_id=5, is_forum=True)
    fake_telegram.push_update(incoming)
    first = await bot.send_message(
        -1001,
        "thinking",
        message_thread_id=5,
        reply_parameters=ReplyParameters(message_id=incoming["message"]["message_id"]),
    )
    second = await bot.send_message(-1001, "second")
    assert second.message_id == first.message_id + 1
    assert first.message_thread_id == 5
    assert first.from_user.id == 999
    assert first.reply_to_message.text == "question"

    edited = await bot.edit_message_text("answer", chat_id=-1001, message_id=first.message_id)
    assert edited.text == "answer"
    assert edited.edit_date is not None
    with pytest.raises(BadRequest, match="not modified"):
        await bot.edit_message_text("answer", chat_id=-1001, message_id=first.message_id)

    (params,) = fake_telegram.calls_to("sendMessage")[:1]
    assert params["chat_id"] == -1001
    assert params["reply_parameters"] == {"message_id": incoming["message"]["message_id"]}
    assert fake_telegram.sent_texts() == ["thinking", "second"]
    assert [m["text"] for m in fake_telegram.bot_messages(-1001)] == ["answer", "second"]
    assert [c.ok for c in fake_telegram.calls if c.method == "editMessageText"] == [True, False]


async def test_retry_after_and_migration(fake_telegram: FakeTelegram, bot: Bot) -> None:
    fake_telegram.fail_next("sendMessage", 429, retry_after=3)
    with pytest.raises(RetryAfter, match="Retry in 3"):
        await bot.send_message(1, "hi")
    fake_telegram.fail_next("sendMessage", 400, migrate_to_chat_id=-100555)
    with pytest.raises(ChatMigrated) as info:
        await bot.send_message(-5, "hi")
    assert info.value.new_chat_id == -100555
    await bot.send_message(1, "hi")
    assert fake_telegram.sent_texts() == ["hi"]
    assert len(fake_telegram.calls_to("sendMessage")) == 3


async def test_text_limits_counted_in_utf16(fake_telegram: FakeTelegram, bot: Bot) -> None:
    await bot.send_message(1, "x" * 4096)
    with pytest.raises(BadRequest, match="too long"):
        await bot.send_message(1, "x" * 4097)
    emoji = "😀" * 2049
    assert utf16_len(emoji) == 4098
    with pytest.raises(BadRequest, match="too long"):
        await bot.send_message(1, emoji)
    # Escapes vanish after parsing, so this is 3000 visible characters.
    await bot.send_message(1, "\\." * 3000, parse_mode="MarkdownV2")
    await bot.send_message(1, "<b>" + "y" * 4000 + "</b>", parse_mode="HTML")
    with pytest.raises(BadRequest, match="empty"):
        await bot.send_message(1, "   ")


async def test_markdown_v2_errors_and_entities(fake_telegram: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities: character '\.' is reserved"):
        await bot.send_message(1, "*Done*. Really!", parse_mode="MarkdownV2")
    message = await bot.send_message(1, "*Done*\\. [docs](https://x\\.y)", parse_mode="MarkdownV2")
    assert message.text == "Done. docs"
    assert [(e.type, e.offset, e.length) for e in message.entities] == [
        ("bold", 0, 4),
        ("text_link", 6, 4),
    ]
    assert message.entities[1].url == "https://x.y"
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bot.send_message(1, "<b>x", parse_mode="HTML")


async def test_update_builders_parse_in_ptb(fake_telegram: FakeTelegram, bot: Bot) -> None:
    mention = Update.de_json(fake_telegram.group_message(-100, 7, "hi", mention=True), bot)
    assert mention.message.text == "@krill_bot hi"
    assert mention.message.parse_entities(["mention"]) == {
        mention.message.entities[0]: "@krill_bot"
    }
    assert mention.message.chat.type == "supergroup"

    await bot.send_message(-100, "bot said")
    reply = Update.de_json(fake_telegram.group_message(-100, 7, "ok", reply_to_bot=True), bot)
    assert reply.message.reply_to_message.from_user.id == 999
    assert reply.message.reply_to_message.text == "bot said"

    topic = Update.de_json(
        fake_telegram.group_message(-200, 7, "in topic", thread_id=77, topic_message=True), bot
    )
    assert topic.message.chat.is_forum
    assert topic.message.is_topic_message
    assert topic.message.message_thread_id == 77
    assert topic.message.reply_to_message.forum_topic_created is not None

    photo = Update.de_json(fake_telegram.photo_message(5, 5, caption="look"), bot)
    assert photo.message.caption == "look"
    assert len(photo.message.photo) == 3
    file = await bot.get_file(photo.message.photo[-1].file_id)
    assert bytes(await file.download_as_bytearray()) == TINY_PNG

    assert Update.de_json(fake_telegram.sticker_message(5, 5), bot).message.sticker.emoji == "👍"
    voice = Update.de_json(fake_telegram.voice_message(5, 5), bot).message.voice
    assert voice.mime_type == "audio/ogg"

    original = fake_telegram.private_message(5, "typo")
    edited = Update.de_json(fake_telegram.edited_message(original, "fixed"), bot)
    assert edited.edited_message.text == "fixed"
    assert edited.edited_message.message_id == original["message"]["message_id"]
    assert edited.update_id == original["update_id"] + 1


async def test_commands_route_through_command_handler(fake_telegram: FakeTelegram) -> None:
    seen: list[tuple[str, list[str]]] = []

    async def on_status(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        seen.append((update.effective_chat.type, context.args))

    app = fake_telegram.app_builder().updater(None).build()
    app.add_handler(CommandHandler("status", on_status))
    async with app:
        for raw in (
            fake_telegram.command(5, 5, "/status now"),
            fake_telegram.command(-100, 5, "/status", group=True, with_bot_suffix=True),
        ):
            await app.process_update(Update.de_json(raw, app.bot))
    assert seen == [("private", ["now"]), ("supergroup", [])]


async def test_misc_methods(fake_telegram: FakeTelegram, bot: Bot) -> None:
    incoming = fake_telegram.push_update(fake_telegram.private_message(5, "hey"))
    message_id = incoming["message"]["message_id"]
    assert await bot.send_chat_action(5, "typing")
    with pytest.raises(BadRequest):
        await bot.send_chat_action(5, "dancing")
    assert await bot.send_message_draft(5, 1, "partial")
    with pytest.raises(BadRequest):
        await bot.send_message_draft(-100, 1, "partial")
    assert await bot.set_message_reaction(5, message_id, ReactionTypeEmoji("👀"))
    assert fake_telegram.reactions[(5, message_id)] == [{"type": "emoji", "emoji": "👀"}]
    assert await bot.set_my_commands([("status", "Show status")])
    assert [c.command for c in await bot.get_my_commands()] == ["status"]
    chat = await bot.get_chat(5)
    assert chat.type == "private"
    with pytest.raises(BadRequest, match=r"(?i)chat not found"):
        await bot.get_chat(123456789)
    sent = await bot.send_message(5, "bye")
    assert await bot.delete_message(5, sent.message_id)
    with pytest.raises(BadRequest, match="not found"):
        await bot.delete_message(5, sent.message_id)
    assert await bot.answer_callback_query("abc")


async def test_raw_http_details(fake_telegram: FakeTelegram) -> None:
    status, body = await _post(fake_telegram, "noSuchMethod")
    assert (status, body) == (404, {"ok": False, "error_code": 404, "description": "Not Found"})
    status, body = await _post(fake_telegram, "sendMessage", json={"chat_id": 3, "text": "j"})
    assert status == 200 and body["result"]["text"] == "j"
    status, body = await _post(fake_telegram, "sendMessage", params={"chat_id": "3", "text": "7"})
    assert status == 200 and body["result"]["text"] == "7"
    assert fake_telegram.calls_to("sendMessage")[-1] == {"chat_id": 3, "text": "7"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{fake_telegram.url}/botWRONG/getMe") as resp,
    ):
        assert resp.status == 401
        assert (await resp.json())["description"] == "Unauthorized"


async def test_wait_for_timeout_dumps_calls(fake_telegram: FakeTelegram, bot: Bot) -> None:
    await bot.send_message(1, "only one")
    assert await fake_telegram.wait_for("sendmessage") == [{"chat_id": 1, "text": "only one"}]
    with pytest.raises(AssertionError, match="only one"):
        await fake_telegram.wait_for("sendMessage", count=2, timeout=0.2)


async def test_flood_limits_refuse_what_telegram_would(
    fake_telegram: FakeTelegram, bot: Bot
) -> None:
    flood = fake_telegram.enforce_flood_limits(
        chat=SlidingLimit(10, 1.0), group=SlidingLimit(2, 60.0)
    )
    await bot.send_message(-100, "group 1")
    await bot.send_chat_action(-100, "typing")  # not a message: not counted
    await bot.send_message(-100, "group 2")
    with pytest.raises(RetryAfter):
        await bot.send_message(-100, "group 3, within the minute")
    refusal = fake_telegram.calls[-1].response
    assert refusal is not None and refusal["parameters"] == {"retry_after": 60}
    await bot.send_message(5, "a private chat is not a group")
    assert fake_telegram.sent_texts(-100) == ["group 1", "group 2"]
    assert (flood.refused, flood.accepted) == (1, 3)


async def test_flood_limits_per_chat(fake_telegram: FakeTelegram, bot: Bot) -> None:
    flood = fake_telegram.enforce_flood_limits()
    await bot.send_message(1, "first")
    with pytest.raises(RetryAfter):
        await bot.send_message(1, "second, in the same second")
    await bot.send_message(2, "another chat has its own second")
    assert flood.refused == 1


async def test_a_newer_getupdates_cuts_off_an_older_one_like_the_real_server(
    fake_telegram: FakeTelegram,
) -> None:
    async with fake_telegram.make_bot() as first, fake_telegram.make_bot() as second:
        older = asyncio.create_task(first.get_updates(timeout=5))
        # Answered only when cut off, so there is no call outcome to wait for.
        while not fake_telegram.calls_to("getUpdates"):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        newer = asyncio.create_task(second.get_updates(timeout=5))
        with pytest.raises(Conflict, match="terminated by other getUpdates request"):
            await older
        fake_telegram.push_update(fake_telegram.private_message(1, "for the newer poller"))
        updates = await newer
    assert [u.message.text for u in updates] == ["for the newer poller"]
    assert fake_telegram.poll_conflicts == 1
    assert len(fake_telegram.pollers()) == 2


async def test_one_client_polling_in_a_row_is_one_poller_without_conflicts(
    fake_telegram: FakeTelegram, bot: Bot
) -> None:
    for _ in range(3):
        await bot.get_updates(timeout=0)
    assert len(fake_telegram.pollers()) == 1 and fake_telegram.poll_conflicts == 0


async def test_a_late_answer_comes_after_the_message_is_in_the_chat(
    fake_telegram: FakeTelegram,
) -> None:
    fake_telegram.answer_late("sendMessage", 0.5)
    async with fake_telegram.make_bot() as bot:
        sending = asyncio.ensure_future(bot.send_message(42, "late but there"))
        await fake_telegram.wait_for("sendMessage", successful=True)
        assert [m["text"] for m in fake_telegram.bot_messages(42)] == ["late but there"]
        assert not sending.done()  # carried out, not yet answered
        started = time.monotonic()
        sent = await sending
        assert time.monotonic() - started > 0.3 and sent.text == "late but there"
        await bot.send_message(42, "on time")  # only the next call was late
    assert [c.at for c in fake_telegram.calls] == sorted(c.at for c in fake_telegram.calls)
