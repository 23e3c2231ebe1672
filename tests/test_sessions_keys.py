"""Session keys: every row of docs/contracts.md section 4, identity links, parsing and
validation."""

from __future__ import annotations

import pytest

from bot.config import SessionConfig
from bot.sessions.keys import (
    conversation_of_key,
    format_session_key,
    linked_identity,
    parse_session_key,
    session_key,
    validate_session_key,
)
from bot.types import Address, ChatType, InboundMessage, SessionOrigin


def msg(
    channel: str,
    chat_type: ChatType,
    chat_id: str,
    user_id: str,
    thread_id: str | None = None,
) -> InboundMessage:
    return InboundMessage(
        channel=channel,
        message_id="m1",
        chat_type=chat_type,
        chat_id=chat_id,
        user_id=user_id,
        text="hi",
        address=Address(channel, chat_id, thread_id),
        thread_id=thread_id,
    )


DEFAULT = SessionConfig()
PER_PEER = SessionConfig(dm_scope="per-peer")
MAIN = SessionConfig(dm_scope="main")
LINKS = {"Alice": ["telegram:123", "SLACK:u1"], "bob": ["slack:U777"]}
LINKED = SessionConfig(dm_scope="per-peer", identity_links=LINKS)


@pytest.mark.parametrize(
    ("message", "config", "expected"),
    [
        # DM, per-channel-peer (the default)
        (msg("telegram", ChatType.DIRECT, "123", "123"), DEFAULT, "agent:main:telegram:direct:123"),
        (msg("slack", ChatType.DIRECT, "D1", "U0ABC"), DEFAULT, "agent:main:slack:direct:u0abc"),
        # DM, per-peer
        (
            msg("telegram", ChatType.DIRECT, "123", "123"),
            PER_PEER,
            "agent:main:direct:telegram:123",
        ),
        (msg("slack", ChatType.DIRECT, "D1", "U0ABC"), PER_PEER, "agent:main:direct:slack:u0abc"),
        # DM, main
        (msg("telegram", ChatType.DIRECT, "123", "123"), MAIN, "agent:main:main"),
        (msg("slack", ChatType.DIRECT, "D1", "U0ABC"), MAIN, "agent:main:main"),
        # Telegram group / supergroup
        (
            msg("telegram", ChatType.GROUP, "-100123", "5"),
            DEFAULT,
            "agent:main:telegram:group:-100123",
        ),
        # Telegram forum topic
        (
            msg("telegram", ChatType.GROUP, "-100123", "5", thread_id="42"),
            DEFAULT,
            "agent:main:telegram:group:-100123:topic:42",
        ),
        # Slack channel / private channel / MPIM
        (msg("slack", ChatType.CHANNEL, "C0ABC", "U1"), DEFAULT, "agent:main:slack:channel:c0abc"),
        (
            msg("slack", ChatType.CHANNEL, "G0PRIV", "U1"),
            DEFAULT,
            "agent:main:slack:channel:g0priv",
        ),
        # Slack thread
        (
            msg("slack", ChatType.CHANNEL, "C0ABC", "U1", thread_id="1712345678.000100"),
            DEFAULT,
            "agent:main:slack:channel:c0abc:thread:1712345678.000100",
        ),
        # local terminal / web chat
        (msg("local", ChatType.DIRECT, "alice", "alice"), DEFAULT, "agent:main:local:direct:alice"),
    ],
)
def test_design_table(message: InboundMessage, config: SessionConfig, expected: str) -> None:
    assert session_key(message, config) == expected


def test_group_scope_does_not_depend_on_dm_scope() -> None:
    m = msg("telegram", ChatType.GROUP, "-100123", "5")
    keys = {session_key(m, cfg) for cfg in (DEFAULT, PER_PEER, MAIN)}
    assert keys == {"agent:main:telegram:group:-100123"}


def test_local_follows_dm_scope() -> None:
    m = msg("local", ChatType.DIRECT, "alice", "alice")
    assert session_key(m, PER_PEER) == "agent:main:direct:local:alice"
    assert session_key(m, MAIN) == "agent:main:main"


def test_slack_dm_thread_keeps_dm_key() -> None:
    m = msg("slack", ChatType.DIRECT, "D1", "U1", thread_id="1712345678.000100")
    assert session_key(m, DEFAULT) == "agent:main:slack:direct:u1"


def test_group_messages_from_different_users_share_a_key() -> None:
    a = msg("telegram", ChatType.GROUP, "-100123", "5")
    b = msg("telegram", ChatType.GROUP, "-100123", "6")
    assert session_key(a, DEFAULT) == session_key(b, DEFAULT)


def test_generic_group_and_channel_on_other_channels() -> None:
    assert (
        session_key(msg("matrix", ChatType.GROUP, "Room1", "u"), DEFAULT)
        == "agent:main:matrix:group:room1"
    )
    assert (
        session_key(msg("telegram", ChatType.CHANNEL, "-100999", "u"), DEFAULT)
        == "agent:main:telegram:channel:-100999"
    )


def test_unsafe_characters_are_replaced() -> None:
    m = msg("local", ChatType.DIRECT, "x", " John Smith:2 ")
    key = session_key(m, DEFAULT)
    assert key == "agent:main:local:direct:john_smith_2"
    assert parse_session_key(key)["peer"] == "john_smith_2"


def test_empty_ids_raise() -> None:
    with pytest.raises(ValueError, match="user id"):
        session_key(msg("telegram", ChatType.DIRECT, "1", ""), DEFAULT)
    with pytest.raises(ValueError, match="chat id"):
        session_key(msg("telegram", ChatType.GROUP, " ", "1"), DEFAULT)


# --- identity links ---------------------------------------------------------------------------


def test_identity_link_matches_principal_form() -> None:
    m = msg("telegram", ChatType.DIRECT, "123", "123")
    assert session_key(m, LINKED) == "agent:main:direct:alice"


def test_identity_link_principal_is_case_insensitive() -> None:
    m = msg("slack", ChatType.DIRECT, "D1", "U1")
    assert session_key(m, LINKED) == "agent:main:direct:alice"


def test_identity_link_matches_case_insensitively() -> None:
    m = msg("slack", ChatType.DIRECT, "D9", "u777")
    assert session_key(m, LINKED) == "agent:main:direct:bob"
    assert session_key(msg("local", ChatType.DIRECT, "u777", "u777"), LINKED) == (
        "agent:main:direct:local:u777"
    )


def test_identity_link_principal_does_not_match_other_channel() -> None:
    # "telegram:123" names a Telegram user; Slack user "123" is someone else.
    m = msg("slack", ChatType.DIRECT, "D1", "123")
    assert session_key(m, LINKED) == "agent:main:direct:slack:123"


def test_unlinked_user_falls_back_to_user_id() -> None:
    m = msg("telegram", ChatType.DIRECT, "999", "999")
    assert session_key(m, LINKED) == "agent:main:direct:telegram:999"


def test_linked_users_share_one_session_across_channels() -> None:
    tg = msg("telegram", ChatType.DIRECT, "123", "123")
    sl = msg("slack", ChatType.DIRECT, "D1", "U1")
    assert session_key(tg, LINKED) == session_key(sl, LINKED)


def test_identity_links_only_apply_to_per_peer() -> None:
    m = msg("telegram", ChatType.DIRECT, "123", "123")
    cfg = SessionConfig(identity_links=LINKS)
    assert session_key(m, cfg) == "agent:main:telegram:direct:123"
    main = SessionConfig(dm_scope="main", identity_links=LINKS)
    assert session_key(m, main) == "agent:main:main"


def test_identity_links_do_not_affect_groups() -> None:
    m = msg("telegram", ChatType.GROUP, "-1", "123")
    assert session_key(m, LINKED) == "agent:main:telegram:group:-1"


def test_unlinked_ids_of_different_channels_never_share_a_session() -> None:
    # A local web user may call themselves "123"; that is not Telegram user 123.
    telegram = msg("telegram", ChatType.DIRECT, "123", "123")
    local = msg("local", ChatType.DIRECT, "123", "123")
    assert session_key(telegram, PER_PEER) != session_key(local, PER_PEER)
    assert session_key(local, LINKED) == "agent:main:direct:local:123"
    assert session_key(telegram, LINKED) == "agent:main:direct:alice"


def test_identity_links_must_name_the_channel() -> None:
    with pytest.raises(ValueError, match=r"must name its channel, e\.g\. 'telegram:123'"):
        SessionConfig(dm_scope="per-peer", identity_links={"alice": ["123"]})
    with pytest.raises(ValueError, match="must name its channel"):
        SessionConfig(identity_links={"alice": [":123"]})


def test_linked_identity_helper() -> None:
    assert linked_identity(msg("telegram", ChatType.DIRECT, "1", "123"), LINKS) == "Alice"
    assert linked_identity(msg("telegram", ChatType.DIRECT, "1", "124"), LINKS) is None
    assert linked_identity(msg("telegram", ChatType.DIRECT, "1", "1"), {}) is None


# --- parsing ----------------------------------------------------------------------------------

ROUND_TRIP = [
    (
        "agent:main:telegram:direct:123",
        {"channel": "telegram", "kind": "direct", "peer": "123"},
    ),
    (
        "agent:main:direct:alice",
        {"channel": None, "kind": "direct", "peer": "alice", "per_peer": True},
    ),
    (
        "agent:main:direct:telegram:123",
        {"channel": "telegram", "kind": "direct", "peer": "123", "per_peer": True},
    ),
    ("agent:main:main", {"channel": None, "kind": "main"}),
    (
        "agent:main:telegram:group:-100123",
        {"channel": "telegram", "kind": "group", "chat_id": "-100123"},
    ),
    (
        "agent:main:telegram:group:-100123:topic:42",
        {"channel": "telegram", "kind": "group", "chat_id": "-100123", "topic": "42"},
    ),
    (
        "agent:main:slack:channel:c0abc",
        {"channel": "slack", "kind": "channel", "chat_id": "c0abc"},
    ),
    (
        "agent:main:slack:channel:c0abc:thread:1712345678.000100",
        {"channel": "slack", "kind": "channel", "chat_id": "c0abc", "thread": "1712345678.000100"},
    ),
    ("agent:main:local:direct:alice", {"channel": "local", "kind": "direct", "peer": "alice"}),
]


@pytest.mark.parametrize(("key", "fields"), ROUND_TRIP)
def test_parse_round_trip(key: str, fields: dict[str, str | None]) -> None:
    parts = parse_session_key(key)
    expected = {
        "agent": "main",
        "channel": None,
        "kind": None,
        "peer": None,
        "chat_id": None,
        "topic": None,
        "thread": None,
        "per_peer": False,
        **fields,
    }
    assert dict(parts) == expected
    assert format_session_key(parts) == key
    assert validate_session_key(key) == key


def test_every_generated_key_parses_back() -> None:
    messages = [
        msg("telegram", ChatType.DIRECT, "1", "1"),
        msg("telegram", ChatType.GROUP, "-1", "1", thread_id="7"),
        msg("slack", ChatType.CHANNEL, "C1", "U1", thread_id="1.2"),
        msg("slack", ChatType.DIRECT, "D1", "U1"),
    ]
    for cfg in (DEFAULT, PER_PEER, MAIN, LINKED):
        for m in messages:
            key = session_key(m, cfg)
            assert format_session_key(parse_session_key(key)) == key


@pytest.mark.parametrize(
    "key",
    [
        "",
        "   ",
        "main",
        "agent",
        "agent:main",
        "agent:main:",
        "session:main:main",
        "agent::main",
        "agent:main:main:extra",
        "agent:main:direct",
        "agent:main:direct:a:b:c",
        "agent:main:telegram",
        "agent:main:telegram:direct",
        "agent:main:telegram:direct:1:thread:2",
        "agent:main:telegram:dm:1",
        "agent:main:telegram:group:",
        "agent:main:telegram:group:-1:topic",
        "agent:main:telegram:group:-1:thread:2",
        "agent:main:slack:channel:c1:topic:2",
        "agent:main:slack:channel:c1:thread:1:extra",
        "agent:main:slack:channel:c 1",
    ],
)
def test_malformed_keys(key: str) -> None:
    with pytest.raises(ValueError, match="session key"):
        parse_session_key(key)
    with pytest.raises(ValueError):
        validate_session_key(key)
    with pytest.raises(ValueError):
        conversation_of_key(key)


def test_validate_normalizes_case_and_whitespace() -> None:
    assert validate_session_key("  agent:main:slack:direct:U0ABC \n") == (
        "agent:main:slack:direct:u0abc"
    )


def test_validate_rejects_other_agents() -> None:
    assert parse_session_key("agent:other:main")["agent"] == "other"
    with pytest.raises(ValueError, match="unknown agent"):
        validate_session_key("agent:other:main")


@pytest.mark.parametrize(
    ("key", "direct"),
    [
        ("agent:main:telegram:direct:1", True),
        ("agent:main:direct:alice", True),
        ("agent:main:main", True),
        ("agent:main:local:direct:alice", True),
        ("agent:main:telegram:group:-1", False),
        ("agent:main:telegram:group:-1:topic:2", False),
        ("agent:main:slack:channel:c1", False),
        ("agent:main:slack:channel:c1:thread:1.2", False),
    ],
)
def test_direct_keys(key: str, direct: bool) -> None:
    assert (conversation_of_key(key, "local").chat_type == ChatType.DIRECT) is direct


def test_origin_of_a_message_names_its_conversation() -> None:
    topic = msg("telegram", ChatType.GROUP, "-100", "5", thread_id="7")
    assert SessionOrigin.of(topic) == SessionOrigin("telegram", ChatType.GROUP, "-100", "7")
    # A thread inside a DM stays on the DM session, as its key does.
    dm = msg("slack", ChatType.DIRECT, "D1", "U1", thread_id="1712345678.000100")
    assert SessionOrigin.of(dm) == SessionOrigin("slack", ChatType.DIRECT, "D1", peer_id="U1")


DIRECT, GROUP = ChatType.DIRECT, ChatType.GROUP


@pytest.mark.parametrize(
    ("key", "origin"),
    [
        ("agent:main:main", SessionOrigin("local", DIRECT, "")),
        ("agent:main:direct:alice", SessionOrigin("local", DIRECT, "", None, "alice")),
        ("agent:main:telegram:direct:42", SessionOrigin("telegram", DIRECT, "", None, "42")),
        ("agent:main:telegram:group:-100:topic:7", SessionOrigin("telegram", GROUP, "-100", "7")),
        ("agent:main:slack:channel:c1", SessionOrigin("slack", ChatType.CHANNEL, "c1")),
    ],
)
def test_conversation_of_a_key(key: str, origin: SessionOrigin) -> None:
    assert conversation_of_key(key, "local") == origin


def test_conversation_of_a_malformed_key_raises() -> None:
    with pytest.raises(ValueError):
        conversation_of_key("agent:main:slack:nope:1", "slack")
