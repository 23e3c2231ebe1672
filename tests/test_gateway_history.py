"""A session's history as one person saw it (`bot.gateway.history`)."""

from __future__ import annotations

from bot.gateway.history import person_history
from bot.transcript import (
    AssistantReply,
    ChatLine,
    Entry,
    InternalPrompt,
    PersonTurn,
    PromptPurpose,
    ToolResults,
)
from bot.types import HistoryLine, Speaker


def said(user: str, text: str, at: float) -> Entry:
    return Entry("s", PersonTurn([ChatLine(f"{user}-{at}", "local", user, text, at)]))


def answered(text: str, at: float, tool: bool = False) -> Entry:
    content: list = [{"type": "text", "text": text}]
    if tool:
        content.append({"type": "tool_use", "id": "t1", "name": "x", "input": {}})
    return Entry("s", AssistantReply(content), created_at=at)


def test_own_messages_and_their_replies_oldest_first() -> None:
    entries = [
        said("alice", "hi", 1.0),
        answered("let me look", 2.0, tool=True),
        Entry("s", ToolResults([])),
        answered("found it", 3.0),
        said("bob", "a secret of bob's", 4.0),
        answered("noted, bob", 5.0),
        Entry("s", InternalPrompt("heartbeat", PromptPurpose.HEARTBEAT)),
        answered("internal musing", 6.0),
        said("alice", "thanks", 7.0),
        answered("NO_REPLY", 8.0),
    ]
    assert person_history(entries, "local", "alice") == [
        HistoryLine(Speaker.PERSON, "hi", 1.0),
        HistoryLine(Speaker.ASSISTANT, "let me look\n\nfound it", 3.0),
        HistoryLine(Speaker.PERSON, "thanks", 7.0),
    ]
    assert [line.text for line in person_history(entries, "local", "bob")] == [
        "a secret of bob's",
        "noted, bob",
    ]
    assert person_history(entries, "telegram", "alice") == []
