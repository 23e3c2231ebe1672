"""Where prompt-cache breakpoints go: pure placement over the request the model client sends.

The provider allows four breakpoints. We spend them on the tools, the system prompt, the
newest message and the previous user message, so that each turn reads the prefix the
previous turn wrote even when a tool loop added many blocks in between.
"""

from __future__ import annotations

from typing import Literal

from anthropic.types import (
    CacheControlEphemeralParam,
    MessageParam,
    TextBlockParam,
    ToolUnionParam,
)

from bot.context.blocks import content_blocks, make_message

MAX_BREAKPOINTS = 4
CacheTTL = Literal["5m", "1h"]


def cache_marker(ttl: CacheTTL) -> CacheControlEphemeralParam:
    # "5m" is the provider default; naming it explicitly keeps requests self-describing.
    return {"type": "ephemeral", "ttl": ttl}


def _marked(message: MessageParam, marker: CacheControlEphemeralParam) -> MessageParam | None:
    """A copy of `message` with a breakpoint on its last block, or None if it takes none."""
    blocks = content_blocks(message)
    if not blocks:
        return None
    block = blocks[-1]
    if block["type"] == "thinking" or block["type"] == "redacted_thinking":
        return None
    marked = block.copy()
    marked["cache_control"] = marker
    return make_message(message["role"], [*blocks[:-1], marked])


def apply_breakpoints(
    *,
    system: list[TextBlockParam],
    tools: list[ToolUnionParam],
    messages: list[MessageParam],
    ttl: CacheTTL,
) -> tuple[list[TextBlockParam], list[ToolUnionParam], list[MessageParam]]:
    """Return system, tools and messages with cache_control markers placed. Inputs are not
    changed; only the few dicts that get a marker are copied (a long history is not)."""
    marker = cache_marker(ttl)
    system, tools, messages = list(system), list(tools), list(messages)
    used = 0
    if tools:
        tools[-1] = tools[-1].copy()
        tools[-1]["cache_control"] = marker
        used += 1
    if system:
        system[-1] = system[-1].copy()
        system[-1]["cache_control"] = marker
        used += 1
    if messages and used < MAX_BREAKPOINTS and (last := _marked(messages[-1], marker)):
        messages[-1] = last
        used += 1
    # The previous user message marks where the last turn's prompt ended.
    for index in range(len(messages) - 2, -1, -1):
        if used >= MAX_BREAKPOINTS:
            break
        if messages[index]["role"] == "user" and (prev := _marked(messages[index], marker)):
            messages[index] = prev
            used += 1
            break
    return system, tools, messages
