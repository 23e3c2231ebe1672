"""Typed transcript entries: what a session's append-only history is made of.

Every entry has one `EntryKind`, stored in its own column, and a payload dataclass of that
kind. Code decides what an entry is by its kind (or its payload's type), never by looking
inside the stored JSON; `to_payload`/`payload_from` are the only places that know the JSON.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, cast

from anthropic.types import ContentBlockParam, ToolResultBlockParam

from bot.types import Usage


def new_id() -> str:
    return uuid.uuid4().hex


class EntryKind(StrEnum):
    PERSON_TURN = "person_turn"  # what people said: one or more chat messages
    INTERNAL_PROMPT = "internal_prompt"  # Krill's own prompt in a turn (heartbeat, reminder)
    ASSISTANT_REPLY = "assistant_reply"  # one model response (text and tool calls)
    TOOL_RESULTS = "tool_results"  # the results of one response's tool calls
    COMPACTION = "compaction"  # a summary that replaces the history before a kept entry
    MEMORY_FLUSH = "memory_flush"  # the record of a silent memory flush (never sent)
    RESET = "reset"  # the session ended here; the key continues in another session
    COMMAND = "command"  # a chat command run on this session (never sent)


class PromptPurpose(StrEnum):
    FLUSH = "flush"
    HEARTBEAT = "heartbeat"
    REMINDER = "reminder"
    APPROVAL = "approval"  # the outcome of a tool call that waited for approval
    JOB = "job"  # a scheduled job's run (schedule_create)


class MediaForm(StrEnum):
    """How a received file reaches the model."""

    IMAGE = "image"  # an image block (bytes on disk under `sha256`)
    PDF = "pdf"  # a document block (bytes on disk under `sha256`)
    TEXT = "text"  # `text` holds the decoded file, shown as untrusted text
    TRANSCRIPT = "transcript"  # `text` holds a voice note's transcript
    NOTE = "note"  # only `note`: what the file was and why the model cannot open it


@dataclass(frozen=True, slots=True)
class MediaRef:
    """A file in a person's turn as the transcript keeps it: a content hash, never bytes."""

    form: MediaForm
    name: str
    mime: str = ""
    size: int = 0
    sha256: str = ""
    width: int = 0
    height: int = 0
    text: str = ""
    note: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MediaRef:
        return cls(**{**data, "form": MediaForm(data["form"])})


@dataclass(frozen=True, slots=True)
class ChatLine:
    """One chat message inside a person's turn, with what the model is shown about it."""

    message_id: str
    channel: str
    user_id: str
    text: str
    timestamp: float
    user_name: str = ""
    chat_title: str = ""
    media: tuple[MediaRef, ...] = ()


@dataclass(slots=True)
class PersonTurn:
    messages: list[ChatLine]
    # Buffered group chatter and fetched thread history, already labelled "sender: text".
    context_lines: list[str] = field(default_factory=list)
    recall: str | None = None  # memory snippets retrieved for this turn


@dataclass(slots=True)
class InternalPrompt:
    text: str
    purpose: PromptPurpose


@dataclass(slots=True)
class AssistantReply:
    content: list[ContentBlockParam]
    stop_reason: str | None = None
    model: str = ""

    @property
    def text(self) -> str:
        return "".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")

    @property
    def calls_tools(self) -> bool:
        return any(b.get("type") == "tool_use" for b in self.content)


@dataclass(slots=True)
class ToolResults:
    results: list[ToolResultBlockParam]


@dataclass(slots=True)
class Compaction:
    summary: str
    first_kept_entry_id: str
    reason: str
    tokens_before: int = 0
    tokens_after: int = 0
    summarized_messages: int = 0
    omitted_messages: int = 0
    # Set on a truncation branch (overflow recovery): the entry the branch copies from, and
    # the size its tool results were cut to.
    branch_of: str | None = None
    result_cap_chars: int | None = None


@dataclass(slots=True)
class MemoryFlushRecord:
    reason: str
    ok: bool
    error: str | None = None
    appended: int = 0
    model_calls: int = 0
    reply: str = ""
    seconds: float = 0.0


@dataclass(slots=True)
class Reset:
    reason: str
    next_session_id: str


@dataclass(slots=True)
class Command:
    name: str
    args: str
    principal: str


Payload = (
    PersonTurn
    | InternalPrompt
    | AssistantReply
    | ToolResults
    | Compaction
    | MemoryFlushRecord
    | Reset
    | Command
)

KIND_OF: dict[type[Any], EntryKind] = {
    PersonTurn: EntryKind.PERSON_TURN,
    InternalPrompt: EntryKind.INTERNAL_PROMPT,
    AssistantReply: EntryKind.ASSISTANT_REPLY,
    ToolResults: EntryKind.TOOL_RESULTS,
    Compaction: EntryKind.COMPACTION,
    MemoryFlushRecord: EntryKind.MEMORY_FLUSH,
    Reset: EntryKind.RESET,
    Command: EntryKind.COMMAND,
}

# Entries that become part of a model request (a compaction as the summary it carries).
CONVERSATION_KINDS = frozenset(
    {
        EntryKind.PERSON_TURN,
        EntryKind.INTERNAL_PROMPT,
        EntryKind.ASSISTANT_REPLY,
        EntryKind.TOOL_RESULTS,
    }
)


@dataclass(slots=True)
class Entry:
    """One append-only transcript record. Its kind follows from its payload's type."""

    session_id: str
    payload: Payload
    turn_id: str | None = None
    usage: Usage | None = None  # on assistant replies: what the model call cost
    id: str = field(default_factory=new_id)
    parent_id: str | None = None
    created_at: float = field(default_factory=time.time)
    seq: int = 0  # assigned by the store; orders entries within a session

    @property
    def kind(self) -> EntryKind:
        return KIND_OF[type(self.payload)]


def is_person_turn(entry: Entry) -> bool:
    """The one definition of "a person's turn": what history limits and compaction count."""
    return isinstance(entry.payload, PersonTurn)


def to_payload(payload: Payload) -> dict[str, Any]:
    """The JSON-ready form stored for a payload."""
    return asdict(payload)


def _chat_line(data: dict[str, Any]) -> ChatLine:
    media = tuple(MediaRef.from_dict(m) for m in data.get("media") or ())
    return ChatLine(**{**data, "media": media})


def payload_from(kind: EntryKind | str, data: dict[str, Any]) -> Payload:
    """Rebuild a payload from its stored form."""
    match EntryKind(kind):
        case EntryKind.PERSON_TURN:
            return PersonTurn(
                messages=[_chat_line(m) for m in data.get("messages", [])],
                context_lines=list(data.get("context_lines") or []),
                recall=data.get("recall"),
            )
        case EntryKind.INTERNAL_PROMPT:
            return InternalPrompt(data["text"], PromptPurpose(data["purpose"]))
        case EntryKind.ASSISTANT_REPLY:
            return AssistantReply(
                content=cast(list[ContentBlockParam], data.get("content", [])),
                stop_reason=data.get("stop_reason"),
                model=data.get("model", ""),
            )
        case EntryKind.TOOL_RESULTS:
            return ToolResults(cast(list[ToolResultBlockParam], data.get("results", [])))
        case EntryKind.COMPACTION:
            return Compaction(**data)
        case EntryKind.MEMORY_FLUSH:
            return MemoryFlushRecord(**data)
        case EntryKind.RESET:
            return Reset(**data)
        case EntryKind.COMMAND:
            return Command(**data)
