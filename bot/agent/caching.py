"""Where prompt-cache breakpoints go: pure placement over the request the model client sends.

The provider allows four breakpoints. We spend them on the tools, the system prompt, the
newest message and the previous user message, so that each turn reads the prefix the
previous turn wrote even when a tool loop added many blocks in between.
"""

from __future__ import annotations

import copy
from typing import Any

MAX_BREAKPOINTS = 4


def cache_marker(ttl: str) -> dict[str, str]:
    # "5m" is the provider default; naming it explicitly keeps requests self-describing.
    return {"type": "ephemeral", "ttl": ttl}


def _mark_last_block(message: dict[str, Any], marker: dict[str, str]) -> bool:
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return False
        message["content"] = [{"type": "text", "text": content, "cache_control": marker}]
        return True
    if isinstance(content, list) and content:
        block = content[-1]
        if block.get("type") in ("thinking", "redacted_thinking"):
            return False
        block["cache_control"] = marker
        return True
    return False


def apply_breakpoints(
    *,
    system: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    ttl: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Return copies of system, tools and messages with cache_control markers placed."""
    marker = cache_marker(ttl)
    system = copy.deepcopy(system)
    tools = copy.deepcopy(tools)
    messages = copy.deepcopy(messages)
    used = 0
    if tools:
        tools[-1]["cache_control"] = marker
        used += 1
    if system:
        system[-1]["cache_control"] = marker
        used += 1
    if messages and used < MAX_BREAKPOINTS and _mark_last_block(messages[-1], marker):
        used += 1
    # The previous user message marks where the last turn's prompt ended.
    for message in reversed(messages[:-1]):
        if used >= MAX_BREAKPOINTS:
            break
        if message.get("role") == "user" and _mark_last_block(message, marker):
            used += 1
            break
    return system, tools, messages
