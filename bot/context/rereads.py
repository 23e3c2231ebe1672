"""Repeated reads: the same stored result page, the same memory file range or the same URL
read more than once. Once the cache is cold, older copies give way to the newest one (a
one-line note says where it is), so a conversation that keeps re-reading a long page does
not carry every copy.

Pure functions over the request's messages; the decisions go into the context plan.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from anthropic.types import MessageParam

from bot.context.blocks import content_blocks
from bot.tools.results import READ_TOOL_NAME

# Reads whose result depends only on these inputs (the tool names are contracts:
# docs/contracts.md section 7 and docs/tools.md). A later read of the same thing is at least
# as current.
READ_INPUTS: dict[str, tuple[str, ...]] = {
    READ_TOOL_NAME: ("id", "from_line", "lines"),
    "memory_get": ("path", "from_line", "lines"),
    "web_fetch": ("url", "max_chars"),
}
SUPERSEDED_NOTE = (
    "[Read again later: {what} is repeated in the result of tool call {newer}, further "
    "on; this older copy was removed.]"
)


def read_key(name: str, tool_input: Mapping[str, Any]) -> str | None:
    """What a call reads, as a comparable key; None for calls that are not plain reads."""
    fields = READ_INPUTS.get(name)
    if fields is None:
        return None
    return json.dumps([name, *(tool_input.get(f) for f in fields)], ensure_ascii=False)


def describe(key: str) -> str:
    name, *values = json.loads(key)
    shown = ", ".join(str(v) for v in values if v is not None)
    return f"{name}({shown})"


def read_calls(messages: list[MessageParam]) -> dict[str, str]:
    """tool_use id -> what it reads, for every plain read in `messages`, oldest first."""
    calls: dict[str, str] = {}
    for message in messages:
        for block in content_blocks(message):
            if block["type"] == "tool_use":
                raw = block.get("input")
                key = read_key(block["name"], raw if isinstance(raw, Mapping) else {})
                if key is not None:
                    calls[block["id"]] = key
    return calls


def superseded_reads(messages: list[MessageParam], eligible: Collection[str]) -> dict[str, str]:
    """Older copies among `eligible` tool_use ids -> the id of the newest successful read
    of the same thing. A newer read that failed supersedes nothing."""
    failed = {
        block["tool_use_id"]
        for message in messages
        for block in content_blocks(message)
        if block["type"] == "tool_result" and block.get("is_error")
    }
    calls = list(read_calls(messages).items())
    newest: dict[str, int] = {}  # key -> position of its newest successful read
    for position, (call_id, key) in enumerate(calls):
        if call_id not in failed:
            newest[key] = position
    return {
        call_id: calls[newest[key]][0]
        for position, (call_id, key) in enumerate(calls)
        if call_id in eligible and key in newest and position < newest[key]
    }


def superseded_note(key: str | None, newer: str) -> str:
    """The note that replaces an older copy of the read `key`, naming the newer one's call."""
    what = describe(key) if key is not None else "the same read"
    return SUPERSEDED_NOTE.format(what=what, newer=newer)
