"""Transcript entries for the compaction tests: turns, tool calls, results, internal prompts
(thin shorthands over the shared builders in tests/entries.py)."""

from __future__ import annotations

from bot.transcript import Entry, PersonTurn, PromptPurpose
from tests import entries as build


def user(text: str, turn: str = "") -> Entry:
    return build.person(text, turn_id=turn)


def internal(text: str, turn: str) -> Entry:
    return build.prompt(text, purpose=PromptPurpose.FLUSH, turn_id=turn)


def reply(text: str, turn: str = "") -> Entry:
    return build.reply(build.text(text), turn_id=turn)


def call(call_id: str, name: str = "fetch") -> Entry:
    return build.reply({"type": "tool_use", "id": call_id, "name": name, "input": {"q": 1}})


def result(call_id: str, text: str, error: bool = False) -> Entry:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": error}
    return build.results(block)


def first_text(entry: Entry) -> str:
    assert isinstance(entry.payload, PersonTurn)
    return entry.payload.messages[0].text


def turns(n: int) -> list[Entry]:
    history: list[Entry] = []
    for i in range(n):
        history += [user(f"question {i}"), call(f"c{i}"), result(f"c{i}", f"data {i}")]
        history.append(reply(f"answer {i}"))
    return history
