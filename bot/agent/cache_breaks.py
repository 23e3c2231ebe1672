"""Prompt-cache breaks: a request of a session that reads much less from the cache than the
previous one left there (read + written), while that cache should still be warm. Each break
is logged with the first block that differed (tools, system, message N) and counted in
`/metrics` as `krill_cache_breaks_total{block}`, so an operator can tell why a bill went up.

Fingerprints are cheap on purpose (a hash of tools and system, and per message its role,
size and the edges of its text): they run on every model call, and only locate a break the
provider's own numbers have already shown. A session's messages are mostly the very objects
its previous request sent (its history is kept and extended), so each message object's
print is kept from one request to the next and only new messages are hashed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anthropic.types import MessageParam, TextBlockParam, ToolUnionParam
from cachetools import LRUCache

from bot.context.blocks import content_blocks
from bot.types import Usage

if TYPE_CHECKING:
    from bot.metrics import Metrics

log = logging.getLogger(__name__)

# A request reading more than this share less than the previous one cached is a break.
BREAK_SHORTFALL = 0.05
# Characters of each text block's start and end that go into its message's fingerprint.
EDGE_CHARS = 48
MAX_TRACKED_SESSIONS = 10_000
# Sessions whose message prints are kept (each holds its last request's message objects).
PRINTED_SESSIONS = 256
UNKNOWN_BLOCK = "unknown"  # nothing in the request changed: the provider dropped the entry


@dataclass(frozen=True, slots=True)
class RequestPrint:
    """What one request sent, compactly, and how much of it the cache held afterwards."""

    tools: int
    system: int
    messages: tuple[int, ...]
    cached: int  # read + written: what the next request may read
    at: float


def _block_print(block: Mapping[str, Any]) -> tuple[Any, ...]:
    kind = block.get("type")
    if kind == "text":
        text = block.get("text", "")
        return kind, len(text), text[:EDGE_CHARS], text[-EDGE_CHARS:]
    if kind == "tool_result":
        content = block.get("content")
        inner = [content] if isinstance(content, str) else content or []
        parts = [
            (len(b), b[:EDGE_CHARS], b[-EDGE_CHARS:]) if isinstance(b, str) else _block_print(b)
            for b in inner
        ]
        return kind, block.get("tool_use_id"), tuple(parts)
    if kind == "tool_use":
        return kind, block.get("id"), block.get("name")
    return (kind,)


def _message_print(message: MessageParam) -> int:
    return hash((message["role"], tuple(_block_print(b) for b in content_blocks(message))))


def _hash_json(value: Iterable[Any]) -> int:
    return hash(json.dumps(list(value), sort_keys=True, ensure_ascii=False))


def fingerprint(
    *,
    system: list[TextBlockParam],
    tools: list[ToolUnionParam],
    messages: list[MessageParam],
    usage: Usage,
    at: float,
    message_print: Callable[[MessageParam], int] = _message_print,
) -> RequestPrint:
    return RequestPrint(
        tools=_hash_json(tools),
        system=_hash_json(system),
        messages=tuple(message_print(m) for m in messages),
        cached=usage.cache_read_tokens + usage.cache_write_tokens,
        at=at,
    )


def first_difference(before: RequestPrint, after: RequestPrint) -> str:
    """The first block of `after` that differs from `before`, in cache order."""
    if before.tools != after.tools:
        return "tools"
    if before.system != after.system:
        return "system"
    for index, (old, new) in enumerate(zip(before.messages, after.messages, strict=False)):
        if old != new:
            return f"message {index}"
    if len(after.messages) < len(before.messages):
        return f"message {len(after.messages)}"
    return UNKNOWN_BLOCK


def is_break(previous: RequestPrint, usage: Usage, now: float, ttl_seconds: float) -> bool:
    """The cache should have been warm, and the request read much less than was cached."""
    if now - previous.at >= ttl_seconds or previous.cached == 0:
        return False
    return usage.cache_read_tokens < previous.cached * (1 - BREAK_SHORTFALL)


class CacheWatch:
    """Remembers each session's last request and reports breaks. The runner's turns call
    `observe`; anything that rewrites a conversation on purpose (compaction) calls
    `forget`, so the next request is not taken for a break."""

    def __init__(self, *, metrics: Metrics, ttl_seconds: float, clock: Callable[[], float]) -> None:
        self.metrics = metrics
        self.ttl = ttl_seconds
        self.clock = clock
        self._last: LRUCache[str, RequestPrint] = LRUCache(MAX_TRACKED_SESSIONS)
        # session -> id(message) -> (the message object, its print)
        self._prints: LRUCache[str, dict[int, tuple[MessageParam, int]]] = LRUCache(
            PRINTED_SESSIONS
        )

    def observe(
        self,
        session_id: str,
        session_key: str,
        *,
        system: list[TextBlockParam],
        tools: list[ToolUnionParam],
        messages: list[MessageParam],
        usage: Usage,
    ) -> str | None:
        """Record this request; returns the first differing block when it broke the cache."""
        now = self.clock()
        held = self._prints.get(session_id, {})
        prints: dict[int, tuple[MessageParam, int]] = {}

        def message_print(message: MessageParam) -> int:
            hit = held.get(id(message))
            value = hit[1] if hit is not None and hit[0] is message else _message_print(message)
            prints[id(message)] = (message, value)
            return value

        current = fingerprint(
            system=system,
            tools=tools,
            messages=messages,
            usage=usage,
            at=now,
            message_print=message_print,
        )
        self._prints[session_id] = prints
        previous = self._last.get(session_id)
        self._last[session_id] = current
        if previous is None or not is_break(previous, usage, now, self.ttl):
            return None
        block = first_difference(previous, current)
        self.metrics.cache_breaks.labels(block.split(" ")[0]).inc()
        log.warning(
            "prompt cache break in %s: read %d tokens, the previous request (%.0f s ago) "
            "cached %d; first difference: %s",
            session_key,
            usage.cache_read_tokens,
            now - previous.at,
            previous.cached,
            block,
        )
        return block

    def forget(self, session_id: str) -> None:
        self._last.pop(session_id, None)
        self._prints.pop(session_id, None)
