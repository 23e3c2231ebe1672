"""The Telegram adapter in-process against the fake Bot API, with the real python-telegram-bot:
start-up, polling resilience, and how replies are sent, edited and retried."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.channel_contract import SendFailure, SendFailureKind
from bot.config import Config
from bot.errors import ConfigError
from bot.types import Address, OutboundMessage, Source
from channels import telegram as telegram_channel
from channels.telegram import polling
from channels.telegram.adapter import WEBHOOK_PATH, TelegramChannel
from channels.telegram.config import TelegramConfig
from channels.telegram.format import MAX_MESSAGE_UNITS, rendered_units, with_fitting_sources
from channels.timeouts import PlatformTimeouts
from tests.fakes.telegram import FakeTelegram
from tests.stub_gateway import StubGateway

GROUP = -100500


def tg_config(fake: FakeTelegram, **overrides: Any) -> TelegramConfig:
    return TelegramConfig(enabled=True, token=fake.token, api_base_url=fake.url, **overrides)


@pytest.fixture
def core() -> StubGateway:
    return StubGateway()


@pytest.fixture
async def channel(fake_telegram: FakeTelegram, core: StubGateway) -> AsyncIterator[TelegramChannel]:
    channel = TelegramChannel(tg_config(fake_telegram), core)
    await channel.start()
    try:
        yield channel
    finally:
        await channel.stop()


def out(
    text: str, chat_id: int = 42, *, index: int = 0, final: bool = True, **address: Any
) -> OutboundMessage:
    return OutboundMessage(
        Address("telegram", str(chat_id), **address), text, "turn", index, final=final
    )


async def test_start_connects_registers_commands_and_polls(
    fake_telegram: FakeTelegram, core: StubGateway, channel: TelegramChannel
) -> None:
    assert core.bot_usernames == {"telegram": "krill_bot"}
    methods = [c.method for c in fake_telegram.calls]
    assert methods[:3] == ["getMe", "setMyCommands", "deleteWebhook"]
    commands = fake_telegram.calls_to("setMyCommands")[0]["commands"]
    assert {"status", "reset", "new", "help", "whoami"} <= {c["command"] for c in commands}
    assert channel.routes() == []  # no webhook route in polling mode

    fake_telegram.push_update(fake_telegram.private_message(42, "one"))
    fake_telegram.push_update(fake_telegram.private_message(42, "two"))
    got = await core.wait(2)
    assert [m.text for m in got] == ["one", "two"]
    polls = fake_telegram.calls_to("getUpdates")
    assert polls[0]["allowed_updates"] == ["message", "callback_query"]


async def test_stop_confirms_the_handled_offset(
    fake_telegram: FakeTelegram, core: StubGateway
) -> None:
    channel = TelegramChannel(tg_config(fake_telegram), core)
    await channel.start()
    update = fake_telegram.push_update(fake_telegram.private_message(42, "hi"))
    await core.wait(1)
    await channel.stop()
    assert fake_telegram.calls_to("getUpdates")[-1]["offset"] == update["update_id"] + 1
    assert fake_telegram.pending_updates == []


async def test_polling_recovers_from_conflict_and_network_errors(
    fake_telegram: FakeTelegram,
    core: StubGateway,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(polling, "FIRST_BACKOFF", 0.05)
    caplog.set_level(logging.INFO, logger="channels.telegram")
    fake_telegram.fail_next_getupdates_conflict()
    fake_telegram.fail_next("getUpdates", 502)
    channel = TelegramChannel(tg_config(fake_telegram), core)
    await channel.start()
    try:
        fake_telegram.push_update(fake_telegram.private_message(42, "still there?"))
        assert [m.text for m in await core.wait(1)] == ["still there?"]
    finally:
        await channel.stop()
    text = caplog.text
    assert "409 Conflict" in text and "Another process is polling this bot token" in text
    assert "network error" in text
    assert "Telegram polling recovered after 2 failed attempt(s)" in text
    assert fake_telegram.token not in text


async def test_update_is_fetched_again_until_the_core_records_it(
    fake_telegram: FakeTelegram, core: StubGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(polling, "FIRST_BACKOFF", 0.05)
    core.failures = 2
    channel = TelegramChannel(tg_config(fake_telegram), core)
    await channel.start()
    try:
        fake_telegram.push_update(fake_telegram.private_message(42, "keep me"))
        assert [m.text for m in await core.wait(1)] == ["keep me"]
    finally:
        await channel.stop()
    offsets = [c.get("offset") for c in fake_telegram.calls_to("getUpdates")]
    assert offsets[:3] == [None, None, None]  # not confirmed while the core was failing


async def test_group_reply_quotes_first_chunk_and_stays_in_topic(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    trigger = fake_telegram.group_message(GROUP, 42, "q", topic_message=True, thread_id=7)
    mid = trigger["message"]["message_id"]
    first = await channel.deliver(out("**one**", GROUP, index=0, thread_id="7", reply_to=str(mid)))
    await channel.deliver(out("two", GROUP, index=1, thread_id="7", reply_to=str(mid)))
    sends = fake_telegram.calls_to("sendMessage")
    assert sends[0]["reply_parameters"]["message_id"] == mid
    assert sends[0]["message_thread_id"] == 7
    assert sends[0]["text"] == "one"
    assert sends[0]["entities"] == [{"type": "bold", "offset": 0, "length": 3}]
    assert "parse_mode" not in sends[0]
    assert "reply_parameters" not in sends[1] and sends[1]["message_thread_id"] == 7
    assert first == str(fake_telegram.bot_messages(GROUP)[0]["message_id"])


async def test_edit_that_changes_nothing_counts_as_success(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    message_id = await channel.deliver(out("same text", final=False))
    edit = out("same text")
    edit.edit_of = message_id
    assert await channel.deliver(edit) == message_id
    assert not fake_telegram.calls[-1].ok  # Telegram did answer "message is not modified"
    assert fake_telegram.bot_messages(42)[-1]["text"] == "same text"


async def test_rejected_formatting_falls_back_to_plain_text(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    fake_telegram.fail_next(
        "sendMessage", 400, "Bad Request: can't parse entities: unsupported entity"
    )
    await channel.deliver(out("**hello** [x](https://e.org)"))
    sends = fake_telegram.calls_to("sendMessage")
    assert len(sends) == 2
    assert "entities" not in sends[1]
    assert fake_telegram.sent_texts(42) == ["**hello** [x](https://e.org)"]


# PTB itself warns, while building RetryAfter, that retry_after will become a timedelta.
@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
async def test_failed_sends_are_classified_for_the_outbox_not_retried(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    cases = [
        (429, None, 90, SendFailureKind.RETRY_AFTER),
        (502, None, None, SendFailureKind.TRANSIENT),
        (403, "Forbidden: bot was blocked by the user", None, SendFailureKind.PERMANENT),
        (400, "Bad Request: chat not found", None, SendFailureKind.PERMANENT),
        (400, "Bad Request: message is too long", None, SendFailureKind.TOO_LONG),
    ]
    for status, description, retry_after, kind in cases:
        fake_telegram.fail_next("sendMessage", status, description, retry_after=retry_after)
        with pytest.raises(SendFailure) as failure:
            await channel.deliver(out("final answer"))
        assert failure.value.kind == kind
        if retry_after:
            assert failure.value.retry_after == retry_after
    assert len(fake_telegram.calls_to("sendMessage")) == len(cases)  # one try each
    assert fake_telegram.sent_texts(42) == []


async def test_a_send_slower_than_ptbs_own_timeout_is_answered_once(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    fake_telegram.answer_late("sendMessage", 6.0)  # python-telegram-bot alone gives up at 5 s
    await channel.deliver(out("slow but sure"))
    assert [m["text"] for m in fake_telegram.bot_messages(42)] == ["slow but sure"]
    assert len(fake_telegram.calls_to("sendMessage")) == 1


async def test_a_send_unanswered_within_the_read_timeout_is_an_unknown_outcome(
    fake_telegram: FakeTelegram, core: StubGateway
) -> None:
    config = tg_config(fake_telegram, timeouts=PlatformTimeouts(read=1.0))
    channel = TelegramChannel(config, core)
    assert channel.resend_after_timeout is False  # the default: set aside, never repeated
    await channel.start()
    try:
        fake_telegram.answer_late("sendMessage", 2.5)
        with pytest.raises(SendFailure) as failure:
            await channel.deliver(out("may have arrived"))
        # The outbox settles it after waiting the timeout again; nothing is repeated here.
        assert failure.value.kind == SendFailureKind.UNKNOWN
        assert failure.value.retry_after == 1.0
        assert len(fake_telegram.calls_to("sendMessage")) == 1
        assert [m["text"] for m in fake_telegram.bot_messages(42)] == ["may have arrived"]
        # An edit that timed out is a plain transient failure: doing it again changes nothing.
        fake_telegram.answer_late("editMessageText", 2.5)
        edit = out("edited")
        edit.edit_of = str(fake_telegram.bot_messages(42)[0]["message_id"])
        with pytest.raises(SendFailure) as failure:
            await channel.deliver(edit)
        assert failure.value.kind == SendFailureKind.TRANSIENT
    finally:
        await channel.stop()


async def test_final_edit_of_a_deleted_preview_sends_anew(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    edit = out("the answer")
    edit.edit_of = "777"
    message_id = await channel.deliver(edit)
    assert message_id != "777"
    assert fake_telegram.sent_texts(42) == ["the answer"]


async def test_migrated_group_is_followed(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    fake_telegram.fail_next(
        "sendMessage", 400, "Bad Request: group chat was upgraded", migrate_to_chat_id=GROUP
    )
    await channel.deliver(out("hello", -555))
    await channel.deliver(out("again", -555))
    targets = [c["chat_id"] for c in fake_telegram.calls_to("sendMessage")]
    assert targets == [-555, GROUP, GROUP]


async def test_typing_goes_to_the_topic(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    await channel.typing(Address("telegram", str(GROUP), thread_id="7"))
    await channel.typing(Address("telegram", "42"))
    actions = fake_telegram.calls_to("sendChatAction")
    assert actions == [
        {"chat_id": GROUP, "action": "typing", "message_thread_id": 7},
        {"chat_id": 42, "action": "typing"},
    ]


async def test_rejected_token_is_a_config_error(fake_telegram: FakeTelegram) -> None:
    config = TelegramConfig(enabled=True, token="123:WRONG", api_base_url=fake_telegram.url)
    channel = TelegramChannel(config, StubGateway())
    with pytest.raises(ConfigError, match=r"telegram\.token: Telegram rejected the bot token"):
        await channel.start()
    await channel.stop()


async def test_webhook_mode_registers_the_webhook(
    fake_telegram: FakeTelegram, core: StubGateway
) -> None:
    config = tg_config(
        fake_telegram,
        mode="webhook",
        webhook_url="https://bot.example.org/telegram/webhook",
        webhook_secret="s3cret_-",
    )
    channel = TelegramChannel(config, core)
    await channel.start()
    try:
        assert fake_telegram.webhook == {
            "url": "https://bot.example.org/telegram/webhook",
            "secret_token": "s3cret_-",
            "allowed_updates": ["message", "callback_query"],
            "max_connections": 40,
        }
        assert [r.path for r in channel.routes()] == [WEBHOOK_PATH]
        assert fake_telegram.calls_to("getUpdates") == []
    finally:
        await channel.stop()


def test_create_refuses_a_secret_telegram_would_refuse(tmp_path: Path) -> None:
    settings = TelegramConfig(
        enabled=True, token="1:x", mode="webhook", webhook_secret="has spaces!"
    )
    with pytest.raises(ConfigError, match=r"telegram\.webhook_secret"):
        telegram_channel.create(settings, Config(base_dir=tmp_path), StubGateway())


def test_create_reads_the_name_from_identity_md(tmp_path: Path) -> None:
    config = Config(base_dir=tmp_path)
    config.workspace_dir.mkdir(parents=True)
    (config.workspace_dir / "IDENTITY.md").write_text("- Name: Shrimpy\n")
    settings = TelegramConfig(enabled=True, token="1:x")
    channel = telegram_channel.create(settings, config, StubGateway())
    assert channel._names == ("Shrimpy",)


@pytest.mark.parametrize("key", ["ack_reaction", "done_reaction"])
def test_create_refuses_a_reaction_telegram_would_refuse(tmp_path: Path, key: str) -> None:
    config = Config(base_dir=tmp_path)
    refused = TelegramConfig(enabled=True, token="1:x", **{key: "✅"})
    with pytest.raises(ConfigError, match=rf"telegram\.{key}: .*'✅' is not one of them"):
        telegram_channel.create(refused, config, StubGateway())
    # "" turns the reaction off and is fine.
    off = TelegramConfig(enabled=True, token="1:x", **{key: ""})
    assert telegram_channel.create(off, config, StubGateway()) is not None


async def test_group_turn_clears_only_the_messages_it_answered(
    fake_telegram: FakeTelegram, core: StubGateway, channel: TelegramChannel
) -> None:
    group = -100777
    first = fake_telegram.push_update(fake_telegram.group_message(group, 42, "hi", mention=True))
    second = fake_telegram.push_update(
        fake_telegram.group_message(group, 43, "me too", mention=True)
    )
    await core.wait(2)
    first_id, second_id = first["message"]["message_id"], second["message"]["message_id"]

    def on(message_id: int) -> Callable[[dict[str, Any]], bool]:
        return lambda p: p["message_id"] == message_id

    await fake_telegram.wait_for("setMessageReaction", 1, predicate=on(first_id))
    await fake_telegram.wait_for("setMessageReaction", 1, predicate=on(second_id))
    # The turn answering the first message is over; the second waits for its own turn.
    await channel.done_typing(Address("telegram", str(group), reply_to=str(first_id)))
    thumbs = [{"type": "emoji", "emoji": "👍"}]
    # The 👍 goes out in the background once the turn is over: wait for it.
    await fake_telegram.wait_for("setMessageReaction", 2, predicate=on(first_id))
    assert fake_telegram.reactions[(group, first_id)] == thumbs
    assert fake_telegram.reactions[(group, second_id)] == [{"type": "emoji", "emoji": "👀"}]
    await channel.done_typing(Address("telegram", str(group), reply_to=str(second_id)))
    await fake_telegram.wait_for("setMessageReaction", 2, predicate=on(second_id))
    assert fake_telegram.reactions[(group, second_id)] == thumbs


async def test_sources_are_links_at_the_end_of_the_last_message(
    fake_telegram: FakeTelegram, channel: TelegramChannel
) -> None:
    sources = (
        Source("What's New [3.14]", "https://docs.python.org/3.14/whatsnew/"),
        Source("PEP 750 *template*", "https://peps.python.org/pep-0750/"),
    )
    await channel.deliver(replace(out("Template strings arrive."), sources=sources))
    (sent,) = fake_telegram.calls_to("sendMessage")
    assert sent["text"] == (
        "Template strings arrive.\n\nSources: What's New [3.14] · PEP 750 *template*"
    )
    links = [e for e in sent["entities"] if e["type"] == "text_link"]
    assert [(e["url"], e["offset"]) for e in links] == [
        ("https://docs.python.org/3.14/whatsnew/", sent["text"].index("What's")),
        ("https://peps.python.org/pep-0750/", sent["text"].index("PEP 750")),
    ]


def test_sources_that_do_not_fit_the_message_are_left_out() -> None:
    sources = tuple(Source(f"Page {i}", f"https://example.org/{i}") for i in range(5))
    full = "x" * (MAX_MESSAGE_UNITS - 25)  # room for "Sources: Page 0", not one more
    kept = with_fitting_sources(full, sources)
    assert kept.startswith(full + "\n\nSources: [Page 0](https://example.org/0)")
    assert rendered_units(kept) <= MAX_MESSAGE_UNITS and "Page 1" not in kept
    assert with_fitting_sources("x" * MAX_MESSAGE_UNITS, sources) == "x" * MAX_MESSAGE_UNITS
