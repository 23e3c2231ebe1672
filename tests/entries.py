"""Builders of typed transcript entries for tests, so each test says only what matters."""

from __future__ import annotations

from typing import Any, cast

from anthropic.types import ContentBlockParam, ToolResultBlockParam

from bot.store.costs import CostLine, SpendKey
from bot.transcript import (
    AssistantReply,
    ChatLine,
    Compaction,
    Entry,
    InternalPrompt,
    PersonTurn,
    PromptPurpose,
    ToolResults,
)
from bot.types import CostKind, Payer, Usage


def line(text: str, *, user_id: str = "1", user_name: str = "Al", timestamp: float = 0) -> ChatLine:
    return ChatLine(f"m-{text[:20]}", "local", user_id, text, timestamp, user_name=user_name)


def person(text: str, session_id: str = "s", **fields: Any) -> Entry:
    """A person's turn of one message; `fields` go to the Entry or, for context_lines and
    recall, to the PersonTurn."""
    turn = PersonTurn(
        [line(text)], fields.pop("context_lines", []), recall=fields.pop("recall", None)
    )
    return Entry(session_id, turn, **fields)


def prompt(
    text: str,
    session_id: str = "s",
    *,
    purpose: PromptPurpose = PromptPurpose.HEARTBEAT,
    **fields: Any,
) -> Entry:
    return Entry(session_id, InternalPrompt(text, purpose), **fields)


def reply(
    *blocks: dict[str, Any], session_id: str = "s", usage: Usage | None = None, **fields: Any
) -> Entry:
    content = cast(list[ContentBlockParam], list(blocks))
    return Entry(session_id, AssistantReply(content), usage=usage, **fields)


def results(*blocks: dict[str, Any], session_id: str = "s", **fields: Any) -> Entry:
    return Entry(session_id, ToolResults(cast(list[ToolResultBlockParam], list(blocks))), **fields)


def summary(text: str, first_kept: str = "", session_id: str = "s", **fields: Any) -> Entry:
    return Entry(session_id, Compaction(text, first_kept, "test"), **fields)


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def cost(
    session_id: str,
    usd: float,
    *,
    kind: CostKind = CostKind.TURN,
    person: str = "",
    chat: str = "local:x",
    day: str = "2026-05-04",
    at: float = 0.0,
    turn_id: str = "",
    sums: tuple[SpendKey, ...] = (),
) -> CostLine:
    """A model call's ledger row (what the accountant writes beside the counters)."""
    channel = chat.partition(":")[0]
    payer = Payer(session_id, channel, chat, person, turn_id=turn_id)
    return CostLine(at, day, kind, payer, "claude-sonnet-4-6", usd, sums)
