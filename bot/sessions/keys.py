"""Session keys: the stable name of the conversation an inbound message belongs to.

Keys follow docs/contracts.md section 4 (`agent:main:<channel>:direct:<user_id>` and friends);
they are built, parsed and validated here with pure functions so every caller agrees on one
format.
"""

from __future__ import annotations

import re
from typing import Literal, TypedDict

from bot.config import SessionConfig
from bot.types import ChatType, InboundMessage, SessionOrigin

AGENT_ID = "main"
KEY_PREFIX = "agent"

KeyKind = Literal["direct", "group", "channel", "main"]

_UNSAFE = re.compile(r"[:\s]+")
_SEGMENT = re.compile(r"\S+")


class SessionKeyParts(TypedDict):
    """A parsed key. Fields that do not apply to the key's kind are None."""

    agent: str
    channel: str | None  # None for the linked per-peer and main DM forms, which span channels
    kind: KeyKind
    peer: str | None  # direct keys: user id or linked identity name
    # The per-peer DM forms (`direct:<linked name>`, `direct:<channel>:<user_id>`), which
    # start with "direct" rather than the channel.
    per_peer: bool
    chat_id: str | None  # group and channel keys
    topic: str | None  # Telegram forum topic (group keys)
    thread: str | None  # Slack thread_ts (channel keys)


def _norm(value: str, what: str) -> str:
    # ":" is the key separator, and whitespace would force quoting on `krill reset KEY`; no
    # Telegram or Slack id contains either, so replacing them only affects odd local names
    # and keeps every key parseable.
    norm = _UNSAFE.sub("_", value.strip()).lower()
    if not norm:
        raise ValueError(f"cannot build a session key: empty {what}")
    return norm


def linked_identity(msg: InboundMessage, identity_links: dict[str, list[str]]) -> str | None:
    """The identity name `msg`'s sender is linked to, or None.

    Entries are `<channel>:<user_id>` and match the sender's principal case-insensitively;
    the first linked name in config order wins. A bare id never matches: a local web user
    may pick any name, including someone's Telegram id.
    """
    return linked_name(msg.principal, identity_links)


def linked_name(principal: str, identity_links: dict[str, list[str]]) -> str | None:
    """The identity name `<channel>:<user_id>` is linked to, or None (see `linked_identity`)."""
    wanted = principal.strip().casefold()
    for name, entries in identity_links.items():
        if any(entry.strip().casefold() == wanted for entry in entries):
            return name
    return None


def session_key(msg: InboundMessage, session: SessionConfig) -> str:
    """The session key for `msg` under the configured DM scope.

    Raises ValueError if the message lacks the ids its key needs (an adapter bug).
    """
    prefix = f"{KEY_PREFIX}:{AGENT_ID}"
    channel = _norm(msg.channel, "channel")

    if msg.chat_type == ChatType.DIRECT:
        # A thread inside a DM (a Slack DM reply thread) stays on the DM key: the person has
        # one conversation with the bot, and splitting it would hide context they expect.
        if session.dm_scope == "main":
            return f"{prefix}:main"
        if session.dm_scope == "per-peer":
            name = linked_identity(msg, session.identity_links)
            if name is not None:
                return f"{prefix}:direct:{_norm(name, 'identity name')}"
            # Unlinked ids stay channel-qualified: equal ids on two channels are two people.
            return f"{prefix}:direct:{channel}:{_norm(msg.user_id, 'user id')}"
        return f"{prefix}:{channel}:direct:{_norm(msg.user_id, 'user id')}"

    kind = "group" if msg.chat_type == ChatType.GROUP else "channel"
    key = f"{prefix}:{channel}:{kind}:{_norm(msg.chat_id, 'chat id')}"
    if msg.thread_id:
        # Groups carry forum topics (Telegram); channels carry reply threads (Slack).
        suffix = "topic" if kind == "group" else "thread"
        key += f":{suffix}:{_norm(msg.thread_id, 'thread id')}"
    return key


def parse_session_key(key: str) -> SessionKeyParts:
    """Split a key into its parts. Raises ValueError naming what is wrong with a malformed key."""
    if not isinstance(key, str) or not key.strip():
        raise ValueError("session key is empty")
    parts = key.split(":")
    if any(not _SEGMENT.fullmatch(p) for p in parts):
        raise ValueError(f"session key {key!r}: empty segment or whitespace")
    if len(parts) < 3 or parts[0] != KEY_PREFIX:
        raise ValueError(f"session key {key!r}: expected 'agent:<agent_id>:...'")
    agent, rest = parts[1], parts[2:]

    def result(
        kind: KeyKind,
        channel: str | None = None,
        peer: str | None = None,
        chat_id: str | None = None,
        topic: str | None = None,
        thread: str | None = None,
        per_peer: bool = False,
    ) -> SessionKeyParts:
        return SessionKeyParts(
            agent=agent,
            channel=channel,
            kind=kind,
            peer=peer,
            per_peer=per_peer,
            chat_id=chat_id,
            topic=topic,
            thread=thread,
        )

    if rest == ["main"]:
        return result("main")
    if rest[0] == "direct":
        if len(rest) == 2:
            return result("direct", peer=rest[1], per_peer=True)
        if len(rest) == 3:
            return result("direct", channel=rest[1], peer=rest[2], per_peer=True)
        raise ValueError(
            f"session key {key!r}: expected 'agent:{agent}:direct:<linked name>' or "
            f"'agent:{agent}:direct:<channel>:<user_id>'"
        )
    if len(rest) < 3:
        raise ValueError(
            f"session key {key!r}: expected 'main', 'direct:<peer>' or "
            "'<channel>:<direct|group|channel>:<id>' after the agent id"
        )

    channel, kind, ident, extra = rest[0], rest[1], rest[2], rest[3:]
    if kind == "direct":
        if extra:
            raise ValueError(f"session key {key!r}: nothing may follow a direct peer id")
        return result("direct", channel=channel, peer=ident)
    if kind not in ("group", "channel"):
        raise ValueError(f"session key {key!r}: unknown kind {kind!r}")
    # Groups carry forum topics and channels carry threads, mirroring `session_key`.
    suffix = "topic" if kind == "group" else "thread"
    if extra and (len(extra) != 2 or extra[0] != suffix):
        raise ValueError(f"session key {key!r}: a {kind} key may only end in ':{suffix}:<id>'")
    sub = extra[1] if extra else None
    if kind == "group":
        return result("group", channel=channel, chat_id=ident, topic=sub)
    return result("channel", channel=channel, chat_id=ident, thread=sub)


def format_session_key(parts: SessionKeyParts) -> str:
    """Rebuild a key from `parse_session_key` output (the inverse of parsing)."""
    head = f"{KEY_PREFIX}:{parts['agent']}"
    kind = parts["kind"]
    if kind == "main":
        return f"{head}:main"
    if kind == "direct":
        if parts["channel"] is None:
            return f"{head}:direct:{parts['peer']}"
        if parts["per_peer"]:
            return f"{head}:direct:{parts['channel']}:{parts['peer']}"
        return f"{head}:{parts['channel']}:direct:{parts['peer']}"
    key = f"{head}:{parts['channel']}:{kind}:{parts['chat_id']}"
    if parts["topic"] is not None:
        key += f":topic:{parts['topic']}"
    if parts["thread"] is not None:
        key += f":thread:{parts['thread']}"
    return key


def validate_session_key(key: str) -> str:
    """Check a key typed by a person (e.g. `krill reset KEY`) and return its canonical form.

    Keys are lower-case, so a pasted Slack id in upper case still names the right session.
    Raises ValueError with a message fit to print.
    """
    parts = parse_session_key(key.strip().lower())
    if parts["agent"] != AGENT_ID:
        raise ValueError(f"session key {key!r}: unknown agent {parts['agent']!r}; use {AGENT_ID!r}")
    return format_session_key(parts)


def conversation_of_key(key: str, channel: str = "") -> SessionOrigin:
    """Where a stored session key's conversation happens. Raises ValueError when malformed.

    The one place that reads channel, chat type, chat id and thread back out of a key; only
    for keys without a session row to read its recorded origin from (the origin backfill
    migration, `krill reset` of a row older than origins).
    `channel` stands in for the DM forms that span channels (per-peer, main); a DM key
    carries the person (`peer_id`), not the platform's chat id, so `chat_id` is "" there.
    """
    parts = parse_session_key(key)
    channel = parts["channel"] or channel
    kind = parts["kind"]
    if kind in ("direct", "main"):
        return SessionOrigin(channel, ChatType.DIRECT, "", peer_id=parts["peer"])
    chat_type = ChatType.GROUP if kind == "group" else ChatType.CHANNEL
    return SessionOrigin(
        channel, chat_type, parts["chat_id"] or "", parts["topic"] or parts["thread"]
    )
