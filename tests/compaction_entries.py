"""Transcript entries for the compaction tests: turns, tool calls, results, internal prompts."""

from __future__ import annotations

from bot.store.base import Entry, EntryType, Role


def user(text: str, turn: str = "") -> Entry:
    msg = {"text": text, "user_id": "1", "user_name": "Al", "timestamp": 0}
    return Entry("s", EntryType.MESSAGE, {"messages": [msg]}, role=Role.USER, turn_id=turn)


def internal(text: str, turn: str) -> Entry:
    return Entry(
        "s", EntryType.MESSAGE, {"text": text, "kind": "flush"}, role=Role.USER, turn_id=turn
    )


def reply(text: str, turn: str = "") -> Entry:
    payload = {"content": [{"type": "text", "text": text}]}
    return Entry("s", EntryType.MESSAGE, payload, role=Role.ASSISTANT, turn_id=turn)


def call(call_id: str, name: str = "fetch") -> Entry:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {"q": 1}}
    return Entry("s", EntryType.MESSAGE, {"content": [block]}, role=Role.ASSISTANT)


def result(call_id: str, text: str, error: bool = False) -> Entry:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": error}
    return Entry("s", EntryType.MESSAGE, {"content": [block]}, role=Role.TOOL)


def turns(n: int) -> list[Entry]:
    history: list[Entry] = []
    for i in range(n):
        history += [user(f"question {i}"), call(f"c{i}"), result(f"c{i}", f"data {i}")]
        history.append(reply(f"answer {i}"))
    return history
