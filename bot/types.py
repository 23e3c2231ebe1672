"""The typed shapes passed between channel adapters, the core and the store.

Adapters build `InboundMessage`s from platform events and turn `OutboundMessage`s back into
platform calls; nothing else crosses that boundary.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class ChatType(StrEnum):
    DIRECT = "direct"
    GROUP = "group"  # Telegram groups/supergroups (topics ride on thread_id)
    CHANNEL = "channel"  # Slack channels, private channels and MPIMs


@dataclass(frozen=True, slots=True)
class Address:
    """Where a reply goes: a conversation on one platform, optionally a thread/topic in it."""

    channel: str
    chat_id: str
    thread_id: str | None = None
    reply_to: str | None = None  # platform message id to quote/thread under
    private_to: str | None = None  # show only to this user where the platform can (ephemeral)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Address:
        return cls(**data)

    def to_json(self) -> str:
        """The stored form."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, raw: str) -> Address:
        return cls.from_dict(json.loads(raw))


class MediaKind(StrEnum):
    IMAGE = "image"  # photos and image files
    AUDIO = "audio"  # voice notes, audio files, video notes (their sound is transcribed)
    FILE = "file"  # any other file: PDFs, text, the rest (the core decides by its type)


# `Attachment.error` of a file over `media.max_bytes`, which the adapter did not download.
TOO_LARGE = "too large"


@dataclass(slots=True)
class Attachment:
    """One file a person sent, as the adapter fetched it: bytes plus what the platform said.

    `data` lives only in memory until the gateway stores it under `sha256`; `error` says why
    there are no bytes (too large, download failed), in words a person may read. The
    gateway prepares an image when it accepts the message: `sha256`, `mime`, `size`,
    `width` and `height` then describe the copy the model gets, or `refused` says, in words
    a person may read, why there is none (too many pixels, say).
    """

    kind: MediaKind
    name: str
    mime: str = ""
    size: int = 0
    data: bytes | None = None
    sha256: str = ""
    error: str = ""
    width: int = 0
    height: int = 0
    refused: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": str(self.kind),
            "name": self.name,
            "mime": self.mime,
            "size": self.size,
            "sha256": self.sha256,
            "error": self.error,
            "width": self.width,
            "height": self.height,
            "refused": self.refused,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attachment:
        return cls(**{**data, "kind": MediaKind(data["kind"])})


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """One message a person sent, as an adapter understood it; a change is a new message
    (`dataclasses.replace`), so no part of the service edits another's copy."""

    channel: str  # "telegram" | "slack" | "local"
    message_id: str  # platform id, unique per channel; drives dedupe
    chat_type: ChatType
    chat_id: str
    user_id: str
    text: str
    address: Address
    user_name: str = ""
    thread_id: str | None = None  # forum topic id or Slack thread_ts
    mentioned: bool = False  # the bot was @-mentioned, replied to, or otherwise addressed
    chat_title: str = ""  # a group's or channel's title (in a forum topic: "<title> / <topic>")
    topic_title: str = ""  # the forum topic's own name, when the message is in one
    timestamp: float = 0.0  # unix seconds, when the platform says it was sent
    # Extra context the adapter fetched (e.g. earlier Slack thread messages), already labelled.
    context_lines: list[str] = field(default_factory=list)
    is_command_surface: bool = False  # came through a native command route (e.g. Slack /krill)
    meta: dict[str, Any] = field(default_factory=dict)
    # Files sent with the message; `text` is then the caption (possibly empty).
    attachments: list[Attachment] = field(default_factory=list)

    def to_json(self) -> str:
        """The stored form; attachment bytes are left out (the gateway stores them first)."""
        data = asdict(self)
        data["chat_type"] = str(self.chat_type)
        data["attachments"] = [a.to_dict() for a in self.attachments]
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> InboundMessage:
        data = json.loads(raw)
        data["chat_type"] = ChatType(data["chat_type"])
        data["address"] = Address.from_dict(data["address"])
        data["attachments"] = [Attachment.from_dict(a) for a in data.get("attachments") or []]
        return cls(**data)

    @property
    def principal(self) -> str:
        """`<channel>:<user_id>`, the form used by admin lists and identity links."""
        return f"{self.channel}:{self.user_id}"


@dataclass(frozen=True, slots=True)
class SessionOrigin:
    """The conversation a session belongs to, recorded on its row when it is created, so
    later work (flushes, heartbeats, limits) need not re-derive it from the session key."""

    channel: str
    chat_type: ChatType
    chat_id: str
    thread_id: str | None = None  # forum topic id or Slack thread_ts
    peer_id: str | None = None  # direct sessions: the person's user id

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "chat_type": str(self.chat_type)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionOrigin:
        return cls(**{**data, "chat_type": ChatType(data["chat_type"])})

    @classmethod
    def of(cls, msg: InboundMessage) -> SessionOrigin:
        direct = msg.chat_type == ChatType.DIRECT
        # A thread inside a DM stays on the DM session (see bot/sessions/keys.py).
        thread = None if direct else msg.thread_id
        peer = msg.user_id if direct else None
        return cls(msg.channel, msg.chat_type, msg.chat_id, thread, peer)


class CostKind(StrEnum):
    """What a model call was for: how the costs table splits the money."""

    TURN = "turn"  # the first call of a person's turn
    TOOL_FOLLOWUP = "tool_followup"  # a person's turn's later calls, after tool results
    FLUSH = "flush"  # a memory flush
    SUMMARY = "summary"  # compaction (threshold, overflow, warm, idle, /compact)
    CARRYOVER = "carryover"  # the note a fresh session carries from the one before
    JOB = "job"  # a scheduled job's run
    REMINDER = "reminder"
    HEARTBEAT = "heartbeat"


@dataclass(frozen=True, slots=True)
class Payer:
    """Whom a model call is charged to: the session it served, its channel and chat, and
    the person (a linked identity's name, else `<channel>:<user_id>`; "" for work no one
    person asked for, such as a group's flush). `principal` is the platform id the person
    wrote as (their per-person overrides are found by it), `group` says whether the chat's
    group caps apply, and `turn_id` names the turn whose calls these are, if any."""

    session_id: str
    channel: str
    chat: str  # `<channel>:<chat_id>`
    person: str = ""
    principal: str = ""
    group: bool = False
    turn_id: str = ""


@dataclass(frozen=True, slots=True)
class Source:
    """A web page a reply drew on (a search result the model cited), shown to the person
    as a link with the reply."""

    title: str
    url: str


class ButtonStyle(StrEnum):
    PLAIN = "plain"
    PRIMARY = "primary"  # the suggested answer (Slack colours it)
    DANGER = "danger"  # an answer that refuses or throws something away


@dataclass(frozen=True, slots=True)
class Button:
    """One button under a message: what it says, and the data a press of it sends back. The
    data names a choice the core keeps (an id and an option number); nothing else about
    the choice travels to the platform, so nothing a client sends back is trusted."""

    label: str
    data: str
    style: ButtonStyle = ButtonStyle.PLAIN

    def to_dict(self) -> dict[str, str]:
        return {"label": self.label, "data": self.data, "style": str(self.style)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Button:
        return cls(str(data["label"]), str(data["data"]), ButtonStyle(data.get("style", "plain")))


# Buttons in rows, top to bottom.
ButtonRows = tuple[tuple[Button, ...], ...]


@dataclass(frozen=True, slots=True)
class ButtonPress:
    """A person pressed a button, as an adapter understood it."""

    channel: str
    # The platform's id of this press (Telegram's callback query id, Slack's trigger id):
    # the same press delivered twice counts once.
    press_id: str
    data: str  # the pressed button's data as the platform sent it back
    chat_id: str
    user_id: str
    user_name: str = ""
    message_id: str = ""  # the platform message the button is under

    @property
    def principal(self) -> str:
        """`<channel>:<user_id>`, the form used by admin lists."""
        return f"{self.channel}:{self.user_id}"


@dataclass(slots=True)
class OutboundMessage:
    """One chunk of a reply, ready for the adapter to send (or to edit in place)."""

    address: Address
    text: str
    turn_id: str
    chunk_index: int
    edit_of: str | None = None  # platform message id to replace instead of sending anew
    final: bool = True  # False for a streaming preview
    # The outbox row's id, for platforms that can carry it on the message (Slack metadata)
    # and so be asked later whether a send whose outcome is unknown went out.
    chunk_id: str = ""
    # The pages the reply cited, on its last chunk only: each adapter shows them its own
    # way (links at the end, a context block) after the text.
    sources: tuple[Source, ...] = ()
    # Buttons under the message (a reply's last chunk). On an edit, the buttons it has
    # afterwards: () takes them away; None is an edit of a message that never had any.
    buttons: ButtonRows | None = None


@dataclass(frozen=True, slots=True)
class OutboundFile:
    """A file the model asked to send (tool `send_file`), read from disk by the adapter."""

    path: str
    name: str
    mime: str
    caption: str
    turn_id: str
    # Same key, same file: an adapter or outbox sends it once (a retried call in one turn).
    key: str

    @property
    def is_image(self) -> bool:
        return self.mime in ("image/jpeg", "image/png", "image/webp", "image/gif")


class Speaker(StrEnum):
    PERSON = "person"
    ASSISTANT = "assistant"


@dataclass(frozen=True, slots=True)
class HistoryLine:
    """One message of a session's recent history as its person saw it (e.g. to redraw a web
    chat after a reload): what they said, or what Krill answered them, as Markdown."""

    speaker: Speaker
    text: str
    timestamp: float


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    # Server-side web searches the call ran (billed per search, not per token).
    web_search_requests: int = 0

    @property
    def prompt_tokens(self) -> int:
        """Everything the model read: uncached input plus cache reads and writes."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.web_search_requests + other.web_search_requests,
        )

    def to_dict(self) -> dict[str, int]:
        return asdict(self)
