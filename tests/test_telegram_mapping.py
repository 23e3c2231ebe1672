"""Telegram update -> InboundMessage: session ids, topics, mentions, placeholders, skips."""

from __future__ import annotations

from typing import Any

import pytest
from telegram import Update

from bot.config import SessionConfig
from bot.sessions.keys import session_key
from bot.types import ChatType, InboundMessage
from channels.telegram.mapping import (
    BotIdentity,
    identity_name,
    names_from,
    strip_leading_mention,
    update_to_inbound,
)
from tests.fakes.telegram import FakeTelegram

BOT = BotIdentity(999, "krill_bot", ("Krill",))
GROUP = -100123


@pytest.fixture
def tg() -> FakeTelegram:
    return FakeTelegram()  # builders only; the server is never started


def inbound(update: dict[str, Any], bot: BotIdentity = BOT) -> InboundMessage | None:
    return update_to_inbound(Update.de_json(update, None), bot)


def mapped(update: dict[str, Any]) -> InboundMessage:
    msg = inbound(update)
    assert msg is not None
    return msg


def key(msg: InboundMessage) -> str:
    return session_key(msg, SessionConfig())


def test_private_message_is_a_direct_session(tg: FakeTelegram) -> None:
    msg = mapped(tg.private_message(42, "hello", first_name="Alice"))
    assert msg.chat_type == ChatType.DIRECT
    assert (msg.chat_id, msg.user_id, msg.user_name, msg.text) == ("42", "42", "Alice", "hello")
    assert msg.message_id == "42:1"
    assert msg.address.reply_to is None  # no quoting in a one-to-one chat
    assert key(msg) == "agent:main:telegram:direct:42"


def test_group_message_is_a_group_session_and_is_quoted(tg: FakeTelegram) -> None:
    msg = mapped(tg.group_message(GROUP, 42, "just chatting", title="Team"))
    assert msg.chat_type == ChatType.GROUP
    assert not msg.mentioned
    assert msg.thread_id is None
    assert msg.address.reply_to == msg.message_id.split(":")[1]
    assert msg.chat_title == "Team"
    assert key(msg) == f"agent:main:telegram:group:{GROUP}"


def test_message_ids_are_stable_per_chat_message(tg: FakeTelegram) -> None:
    update = tg.group_message(GROUP, 42, "hi")
    assert mapped(update).message_id == mapped(dict(update)).message_id == f"{GROUP}:1"


def test_at_mention_addresses_the_bot_and_is_stripped(tg: FakeTelegram) -> None:
    msg = mapped(tg.group_message(GROUP, 42, "what time is it?", mention=True))
    assert msg.mentioned
    assert msg.text == "what time is it?"


def test_bare_mention_keeps_its_text(tg: FakeTelegram) -> None:
    msg = mapped(tg.group_message(GROUP, 42, "@krill_bot"))
    assert msg.mentioned and msg.text == "@krill_bot"


@pytest.mark.parametrize(
    ("text", "mentioned"),
    [
        ("@other_bot do this", False),
        ("hey @KRILL_BOT, help", True),
        ("Krill, are you there?", True),
        ("I love krill oil", True),  # the name is a whole word, any case
        ("krillfish are tiny", False),
        ("ask @krill please", False),  # someone else's handle
        ("/krill", False),
        ("nothing to see", False),
    ],
)
def test_mentions_by_handle_or_name(tg: FakeTelegram, text: str, mentioned: bool) -> None:
    assert mapped(tg.group_message(GROUP, 42, text)).mentioned is mentioned


def test_text_mention_of_the_bot_counts(tg: FakeTelegram) -> None:
    update = tg.group_message(GROUP, 42, "Bot please help")
    update["message"]["entities"] = [
        {"type": "text_mention", "offset": 0, "length": 3, "user": tg.bot_user}
    ]
    assert mapped(update).mentioned


def test_reply_to_a_bot_message_counts(tg: FakeTelegram) -> None:
    assert mapped(tg.group_message(GROUP, 42, "and then?", reply_to_bot=True)).mentioned


def test_reply_to_someone_else_does_not(tg: FakeTelegram) -> None:
    first = tg.group_message(GROUP, 43, "earlier")["message"]
    update = tg.group_message(GROUP, 42, "agreed")
    update["message"]["reply_to_message"] = first
    assert not mapped(update).mentioned


def test_commands_addressed_to_us_or_others(tg: FakeTelegram) -> None:
    ours = mapped(tg.command(GROUP, 42, "/status", group=True, with_bot_suffix=True))
    assert ours.mentioned and ours.text == "/status@krill_bot"
    other = tg.command(GROUP, 42, "/status@other_bot", group=True)
    assert not mapped(other).mentioned


def test_forum_topic_messages_get_their_own_thread(tg: FakeTelegram) -> None:
    a = mapped(tg.group_message(GROUP, 42, "in topic", topic_message=True, thread_id=7))
    b = mapped(tg.group_message(GROUP, 42, "other topic", topic_message=True, thread_id=9))
    assert (a.thread_id, a.address.thread_id) == ("7", "7")
    assert key(a) == f"agent:main:telegram:group:{GROUP}:topic:7"
    assert key(a) != key(b)
    assert a.chat_title == "Test Group / Topic 7"


def test_general_topic_maps_to_the_group_key(tg: FakeTelegram) -> None:
    msg = mapped(tg.group_message(GROUP, 42, "general chatter", is_forum=True))
    assert msg.thread_id is None and msg.address.thread_id is None
    assert key(msg) == f"agent:main:telegram:group:{GROUP}"


def test_reply_thread_in_an_ordinary_supergroup_is_not_a_topic(tg: FakeTelegram) -> None:
    msg = mapped(tg.group_message(GROUP, 42, "a reply", thread_id=5))
    assert msg.thread_id is None


def test_topic_opened_by_the_bot_is_not_a_reply_to_it(tg: FakeTelegram) -> None:
    update = tg.group_message(GROUP, 42, "hello topic", topic_message=True, thread_id=7)
    update["message"]["reply_to_message"]["from"] = tg.bot_user  # the bot created the topic
    assert not mapped(update).mentioned


def test_real_reply_to_the_bot_inside_a_topic_counts(tg: FakeTelegram) -> None:
    tg.group_message(GROUP, 42, "first", topic_message=True, thread_id=7)
    update = tg.group_message(
        GROUP, 42, "follow-up", topic_message=True, thread_id=7, reply_to_bot=True
    )
    msg = mapped(update)
    assert msg.mentioned and msg.thread_id == "7"


def test_photo_with_caption_becomes_placeholder_plus_caption(tg: FakeTelegram) -> None:
    msg = mapped(tg.photo_message(GROUP, 42, caption="@krill_bot what is this?", group=True))
    assert msg.text == "[photo]\n@krill_bot what is this?"
    assert msg.mentioned  # caption entities count like text entities


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda tg: tg.photo_message(42, 42), "[photo]"),
        (lambda tg: tg.sticker_message(42, 42, emoji="👍"), "[sticker 👍]"),
        (lambda tg: tg.voice_message(42, 42), "[voice message]"),
    ],
)
def test_media_placeholders(tg: FakeTelegram, build: Any, expected: str) -> None:
    assert mapped(build(tg)).text == expected


def test_document_and_location_placeholders(tg: FakeTelegram) -> None:
    update = tg.private_message(42, "x")
    message = update["message"]
    del message["text"]
    message["document"] = {"file_id": "F", "file_unique_id": "U", "file_name": "report.pdf"}
    assert mapped(update).text == "[document: report.pdf]"
    del message["document"]
    message["location"] = {"latitude": 52.5, "longitude": 13.4}
    assert mapped(update).text == "[location: 52.50000, 13.40000]"


def test_edits_service_messages_bots_and_channels_are_skipped(tg: FakeTelegram) -> None:
    original = tg.private_message(42, "helo")
    assert inbound(tg.edited_message(original, "hello")) is None
    joined = tg.group_message(GROUP, 42, "x")
    del joined["message"]["text"]
    joined["message"]["new_chat_members"] = [{"id": 43, "is_bot": False, "first_name": "Bo"}]
    assert inbound(joined) is None
    from_bot = tg.group_message(GROUP, 42, "beep")
    from_bot["message"]["from"] = {"id": 555, "is_bot": True, "first_name": "Other"}
    assert inbound(from_bot) is None
    post = tg.group_message(GROUP, 42, "news", chat_type="channel")
    assert inbound(post) is None


def test_anonymous_admin_speaks_as_the_group(tg: FakeTelegram) -> None:
    update = tg.group_message(GROUP, 42, "@krill_bot hi", title="Team")
    update["message"]["from"] = {"id": 1087968824, "is_bot": True, "first_name": "Group"}
    update["message"]["sender_chat"] = {"id": GROUP, "type": "supergroup", "title": "Team"}
    msg = mapped(update)
    assert (msg.user_id, msg.user_name, msg.text) == (str(GROUP), "Team", "hi")


def test_strip_leading_mention() -> None:
    assert strip_leading_mention("@krill_bot, hi", "krill_bot") == "hi"
    assert strip_leading_mention("  @Krill_Bot: hi", "krill_bot") == "hi"
    assert strip_leading_mention("@krill_botty hi", "krill_bot") == "@krill_botty hi"
    assert strip_leading_mention("hi @krill_bot", "krill_bot") == "hi @krill_bot"


def test_identity_name_and_names() -> None:
    assert identity_name("# Identity\n\n- Name: Krill\n- Emoji: 🦐") == "Krill"
    assert identity_name("**Name:** Shrimpy") == "Shrimpy"
    assert identity_name("no name here") is None
    assert names_from(["Krill", None, "krill", " Shrimpy "]) == ("Krill", "Shrimpy")
    assert not BotIdentity(1, "zz", ("AI",)).name_in("AI and zz")  # too short to match


def test_text_link_reaches_the_model_with_its_url(tg: FakeTelegram) -> None:
    update = tg.private_message(42, "see 😀 the docs and this")
    # Offsets count UTF-16 units: the emoji before "the docs" takes two.
    update["message"]["entities"] = [
        {"type": "text_link", "offset": 7, "length": 8, "url": "https://example.com/docs"},
        {"type": "bold", "offset": 20, "length": 4},
    ]
    assert mapped(update).text == "see 😀 [the docs](https://example.com/docs) and this"


def test_caption_links_are_kept_too(tg: FakeTelegram) -> None:
    update = tg.photo_message(42, 42, caption="source")
    update["message"]["caption_entities"] = [
        {"type": "text_link", "offset": 0, "length": 6, "url": "https://example.com/a.png"}
    ]
    assert mapped(update).text == "[photo]\n[source](https://example.com/a.png)"


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        (
            {
                "type": "user",
                "date": 1,
                "sender_user": {"id": 7, "is_bot": False, "first_name": "Bob", "username": "bobby"},
            },
            "[forwarded from Bob (@bobby)]",
        ),
        ({"type": "hidden_user", "date": 1, "sender_user_name": "Carol"}, "[forwarded from Carol]"),
        (
            {
                "type": "channel",
                "date": 1,
                "message_id": 5,
                "author_signature": "Dan",
                "chat": {"id": -1005, "type": "channel", "title": "News", "username": "news"},
            },
            "[forwarded from News (@news), signed Dan]",
        ),
    ],
)
def test_forwarded_messages_say_where_they_came_from(
    tg: FakeTelegram, origin: dict[str, Any], expected: str
) -> None:
    update = tg.private_message(42, "the meeting moved to 3pm")
    update["message"]["forward_origin"] = origin
    assert mapped(update).text == f"{expected}\nthe meeting moved to 3pm"


def test_tap_to_mention_link_to_the_bot_counts(tg: FakeTelegram) -> None:
    update = tg.group_message(GROUP, 42, "Bot please help")
    update["message"]["entities"] = [
        {"type": "text_link", "offset": 0, "length": 3, "url": f"tg://user?id={BOT.id}"}
    ]
    assert mapped(update).mentioned
    other = tg.group_message(GROUP, 42, "Bob please help")
    other["message"]["entities"] = [
        {"type": "text_link", "offset": 0, "length": 3, "url": "tg://user?id=12345"}
    ]
    assert not mapped(other).mentioned


def test_reply_to_the_bots_service_message_is_not_addressed(tg: FakeTelegram) -> None:
    update = tg.group_message(GROUP, 42, "ok then", topic_message=True, thread_id=7)
    closed = {
        "message_id": 3,
        "date": 1,
        "chat": update["message"]["chat"],
        "from": tg.bot_user,
        "message_thread_id": 7,
        "is_topic_message": True,
        "forum_topic_closed": {},
    }
    update["message"]["reply_to_message"] = closed
    assert not mapped(update).mentioned


def reply_to(tg: FakeTelegram, target_fields: dict[str, Any]) -> dict[str, Any]:
    """A group message replying to a bot message that carries `target_fields`."""
    update = tg.group_message(GROUP, 42, "and this one?")
    update["message"]["reply_to_message"] = {
        "message_id": 5,
        "date": 1,
        "chat": update["message"]["chat"],
        "from": tg.bot_user,
        **target_fields,
    }
    return update


@pytest.mark.parametrize(
    "fields",
    [
        {},  # OpenClaw's vector: neither text nor caption nor anything else
        {
            "sticker": {
                "file_id": "s",
                "file_unique_id": "s1",
                "type": "regular",
                "width": 512,
                "height": 512,
                "is_animated": False,
                "is_video": False,
            }
        },
        {"photo": [{"file_id": "p", "file_unique_id": "p1", "width": 90, "height": 90}]},
        {"voice": {"file_id": "v", "file_unique_id": "v1", "duration": 2}},
        {"game": {"title": "Snake", "description": "eat", "photo": []}},  # no stand-in for it
    ],
    ids=["bare", "sticker", "photo", "voice", "game"],
)
def test_a_reply_to_any_bot_message_without_text_addresses_it(
    tg: FakeTelegram, fields: dict[str, Any]
) -> None:
    assert mapped(reply_to(tg, fields)).mentioned


@pytest.mark.parametrize(
    "fields",
    [
        {"forum_topic_closed": {}},
        {"pinned_message": {"message_id": 4, "date": 1, "chat": {"id": GROUP, "type": "group"}}},
        {"new_chat_title": "Renamed"},
    ],
    ids=["topic closed", "pin", "title"],
)
def test_a_reply_to_a_service_message_of_the_bot_does_not(
    tg: FakeTelegram, fields: dict[str, Any]
) -> None:
    assert not mapped(reply_to(tg, fields)).mentioned


@pytest.mark.parametrize(
    ("text", "url", "mentioned"),
    [
        # OpenClaw's vectors: the link's text is the bot's handle, whatever the id.
        ("@krill_bot hello", "tg://user?id=123456789", True),
        ("@krill_bot hello", "https://t.me/krill_bot", True),
        ("Bot hello", "tg://user/?id=999", True),  # the other way to write a user link
        ("Bot hello", "tg://openmessage?user_id=999", True),
        ("Bot hello", "tg://resolve?domain=Krill_Bot", True),
        ("Bot hello", "https://t.me/krill_bot", True),
        ("Bot hello", "https://t.me/other_bot", False),
        ("Bot hello", "tg://user?id=12345", False),
        ("Bot hello", "https://example.com/krill_bot", False),
    ],
)
def test_tap_to_mention_links(tg: FakeTelegram, text: str, url: str, mentioned: bool) -> None:
    update = tg.group_message(GROUP, 42, text)
    update["message"]["entities"] = [{"type": "text_link", "offset": 0, "length": 3, "url": url}]
    assert mapped(update).mentioned is mentioned


def test_a_typed_handle_counts_without_an_entity_but_not_a_longer_one(tg: FakeTelegram) -> None:
    typed = tg.group_message(GROUP, 42, "what do you think, @Krill_Bot?")
    typed["message"].pop("entities", None)
    assert mapped(typed).mentioned
    longer = tg.group_message(GROUP, 42, "ask @krill_bot_fan or mail me@krill_bot")
    longer["message"].pop("entities", None)
    assert not mapped(longer).mentioned


def test_a_text_mention_of_the_bot_in_a_caption_counts(tg: FakeTelegram) -> None:
    update = tg.photo_message(GROUP, 42, caption="Bot look", group=True)
    update["message"]["caption_entities"] = [
        {"type": "text_mention", "offset": 0, "length": 3, "user": tg.bot_user}
    ]
    assert mapped(update).mentioned
