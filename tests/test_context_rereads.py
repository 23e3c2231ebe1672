"""Repeated reads: older copies of the same read give way to the newest one once cold."""

from __future__ import annotations

from typing import Any

from bot.config import ContextConfig
from bot.context.plan import ContextPlan
from bot.context.pruning import apply_pruning
from bot.context.rereads import read_key, superseded_reads


def ask() -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": "question"}]}


def call(call_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}
    return {"role": "assistant", "content": [block]}


def answer(call_id: str, text: str, *, error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": error}
    return {"role": "user", "content": [block]}


def reads(*rounds: tuple[str, str, dict[str, Any], str]) -> list[dict[str, Any]]:
    messages = [ask()]
    for call_id, name, tool_input, text in rounds:
        messages += [call(call_id, name, **tool_input), answer(call_id, text)]
    return messages


def test_the_same_page_path_range_or_url_is_one_read() -> None:
    assert read_key("memory_get", {"path": "MEMORY.md"}) == read_key(
        "memory_get", {"path": "MEMORY.md"}
    )
    assert read_key("memory_get", {"path": "MEMORY.md", "from_line": 40}) != read_key(
        "memory_get", {"path": "MEMORY.md"}
    )
    page = {"id": "0123456789ab", "from_line": 201, "lines": 200}
    assert read_key("read_tool_result", page) != read_key(
        "read_tool_result", {**page, "from_line": 401}
    )
    assert read_key("web_fetch", {"url": "https://example.com/a"}) is not None
    assert read_key("fetch_report", {"turn": 3}) is None  # not a plain read


def test_older_copies_point_at_the_newest_and_only_eligible_ones_go() -> None:
    url = {"url": "https://example.com/changelog"}
    messages = reads(
        ("a", "web_fetch", url, "v1 " * 2000),
        ("b", "memory_get", {"path": "memory/notes.md"}, "notes"),
        ("c", "web_fetch", url, "v2 " * 2000),
        ("d", "web_fetch", url, "v3 " * 2000),
    )
    assert superseded_reads(messages, {"a", "b", "c", "d"}) == {"a": "d", "c": "d"}
    # A copy among the protected recent results stays whole.
    assert superseded_reads(messages, {"c"}) == {"c": "d"}
    pruned = apply_pruning(messages, ContextPlan(superseded={"a": "d"}), ContextConfig())
    note = pruned[2]["content"][0]["content"]
    assert (
        note.startswith("[Read again later:") and "web_fetch(https://example.com/changelog)" in note
    )
    assert "tool call d" in note and "\n" not in note
    assert pruned[6] is messages[6] and pruned[8] is messages[8]  # the newer copies stay


def test_a_failed_newer_read_supersedes_nothing() -> None:
    page = {"id": "0123456789ab", "from_line": 1, "lines": 200}
    messages = reads(("a", "read_tool_result", page, "lines 1-200"))
    messages += [call("b", "read_tool_result", **page), answer("b", "not found", error=True)]
    assert superseded_reads(messages, {"a", "b"}) == {}
