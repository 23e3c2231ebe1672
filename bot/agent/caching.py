"""Where prompt-cache breakpoints go: pure placement over the request the model client sends.

The provider allows four breakpoints. We spend them on the tools, the system prompt, the
newest message and the previous user message, so that each turn reads the prefix the
previous turn wrote even when a tool loop added many blocks in between.
"""

from __future__ import annotations

from typing import Any

MAX_BREAKPOINTS = 4


def cache_marker(ttl: str) -> dict[str, str]:
    # "5m" is the provider default; naming it explicitly keeps requests self-describing.
    return {"type": "ephemeral", "ttl": ttl}


def _marked(message: dict[str, Any], marker: dict[str, str]) -> dict[str, Any] | None:
    """A copy of `message` with a breakpoint on its last block, or None if it takes none."""
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return None
        return {**message, "content": [{"type": "text", "text": content, "cache_control": marker}]}
    if isinstance(content, list) and content:
        block = content[-1]
        if block.get("type") in ("thinking", "redacted_thinking"):
            return None
        return {**message, "content": [*content[:-1], {**block, "cache_control": marker}]}
    return None


def apply_breakpoints(
    *,
    system: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    ttl: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Return system, tools and messages with cache_control markers placed. Inputs are not
    changed; only the few dicts that get a marker are copied (a long history is not)."""
    marker = cache_marker(ttl)
    system, tools, messages = list(system), list(tools), list(messages)
    used = 0
    if tools:
        tools[-1] = {**tools[-1], "cache_control": marker}
        used += 1
    if system:
        system[-1] = {**system[-1], "cache_control": marker}
        used += 1
    if messages and used < MAX_BREAKPOINTS and (last := _marked(messages[-1], marker)):
        messages[-1] = last
        used += 1
    # The previous user message marks where the last turn's prompt ended.
    for index in range(len(messages) - 2, -1, -1):
        if used >= MAX_BREAKPOINTS:
            break
        if messages[index].get("role") == "user" and (prev := _marked(messages[index], marker)):
            messages[index] = prev
            used += 1
            break
    return system, tools, messages
