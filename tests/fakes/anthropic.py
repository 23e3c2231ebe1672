"""Loopback fake of the Anthropic Messages API that the real `anthropic.AsyncAnthropic` client
talks to over HTTP, with scripted replies, recorded requests and a prompt-cache simulator."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import inspect
import io
import itertools
import json
import math
import re
import secrets
import socket
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest_asyncio
from aiohttp import web
from PIL import Image

__all__ = [
    "CacheControlError",
    "CacheSimulator",
    "CacheUsage",
    "ErrorReply",
    "FakeAnthropic",
    "RecordedRequest",
    "Reply",
    "estimate_tokens",
    "fake_anthropic",
    "fake_anthropic_client",
]

TTL_SECONDS: dict[str, float] = {"5m": 300.0, "1h": 3600.0}
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
DEFAULT_MIN_CACHE_TOKENS = 1024
# The Messages API accepts request bodies up to 32 MB (aiohttp's own default is 1 MB).
MAX_REQUEST_BYTES = 32 * 1024 * 1024
# Long enough that a drop can land mid-reply without the caller supplying text.
_DROP_FILLER = (
    "This reply is going to be cut off part of the way through, as if the connection "
    "to the API had failed while the model was still writing its answer to you. "
) * 4
_MAX_DELTA_CHARS = 40
# Used when an error scripted for a stream meets a non-streaming request.
_STATUS_FOR_ERROR = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


def _compact(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# Scripts past Latin (CJK, Cyrillic, Greek, ...) cost real tokenizers about a token a
# character; the fake charges them so, so CJK conversations overflow when a real model would.
_DENSE = re.compile(r"[^\u0000-\u036f\u2000-\u206f]")


def estimate_tokens(text: str) -> int:
    """The fake's tokenizer: four Latin characters per token, one per character of other
    scripts, never less than one."""
    if text.isascii():
        return max(1, len(text) // 4)
    dense = len(_DENSE.findall(text))
    return max(1, (len(text) - dense) // 4 + dense)


def block_tokens(part: Any, stripped: str) -> int:
    """Tokens of one prompt block: images by their pixels (width x height / 750, as the API
    bills them), PDFs by their decoded size, everything else by its characters."""
    source = part.get("source") if isinstance(part, dict) else None
    if isinstance(source, dict) and source.get("type") == "base64":
        raw = base64.b64decode(source.get("data", ""))
        if part.get("type") == "image":
            with Image.open(io.BytesIO(raw)) as image:
                return max(1, math.ceil(image.width * image.height / 750))
        return max(1, len(raw) // 4)
    return estimate_tokens(stripped)


def _strip_cache_control(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_cache_control(v) for k, v in obj.items() if k != "cache_control"}
    if isinstance(obj, list):
        return [_strip_cache_control(v) for v in obj]
    return obj


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


# --------------------------------------------------------------------------- prompt cache


class CacheControlError(ValueError):
    """The request's cache_control markers break an API rule; the API answers 400."""


@dataclass(frozen=True)
class CacheUsage:
    """How a request's input tokens split between plain input, cache writes and cache reads."""

    input_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def as_usage(self) -> dict[str, Any]:
        """The input half of a Messages API `usage` object."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": self.ephemeral_1h_input_tokens,
            },
        }


@dataclass
class CacheEntry:
    prefix_tokens: int
    ttl: str
    expires_at: float


@dataclass(frozen=True)
class _Block:
    key: str
    tokens: int
    ttl: str | None


class CacheSimulator:
    """Deterministic model of Anthropic prompt caching.

    The prompt is flattened into blocks in the order tools -> system -> messages. Blocks that
    carry `cache_control` (or the last block, for a top-level `cache_control`) are breakpoints;
    each breakpoint looks for a cached prefix at itself or up to `lookback` blocks before it.
    """

    def __init__(
        self,
        *,
        min_tokens: int = DEFAULT_MIN_CACHE_TOKENS,
        clock: Callable[[], float] = time.monotonic,
        lookback: int = LOOKBACK_BLOCKS,
        max_breakpoints: int = MAX_BREAKPOINTS,
    ) -> None:
        self.min_tokens = min_tokens
        self.clock = clock
        self.lookback = lookback
        self.max_breakpoints = max_breakpoints
        self.entries: dict[str, CacheEntry] = {}

    def clear(self) -> None:
        self.entries.clear()

    def __len__(self) -> int:
        self._expire(self.clock())
        return len(self.entries)

    def count_tokens(self, body: dict[str, Any]) -> int:
        """Total input tokens of a request, as `count_tokens` reports them (no cache effects)."""
        return sum(b.tokens for b in self._blocks(body))

    def validate(self, body: dict[str, Any]) -> None:
        """Raise CacheControlError if the markers would make the real API answer 400."""
        self._blocks(body)

    def process(self, body: dict[str, Any]) -> CacheUsage:
        """Account one request against the cache: read hits, write new prefixes, refresh TTLs."""
        blocks = self._blocks(body)
        now = self.clock()
        self._expire(now)
        cumulative = list(itertools.accumulate(b.tokens for b in blocks))
        total = cumulative[-1] if cumulative else 0
        breakpoints = [i for i, b in enumerate(blocks) if b.ttl is not None]
        if not breakpoints:
            return CacheUsage(input_tokens=total)

        # Namespaced by model because caches are never shared between models.
        digest = hashlib.sha256(str(body.get("model", "")).encode())
        prefix_keys: list[str] = []
        for block in blocks:
            digest.update(block.key.encode())
            digest.update(b"\x00")
            prefix_keys.append(digest.hexdigest())

        hit = -1
        for bp in breakpoints:
            for pos in range(bp, max(-1, bp - self.lookback), -1):
                entry = self.entries.get(prefix_keys[pos])
                if entry is not None:
                    # A hit refreshes the entry for free, which keeps hot prefixes alive.
                    entry.expires_at = now + TTL_SECONDS[entry.ttl]
                    hit = max(hit, pos)
                    break

        read = cumulative[hit] if hit >= 0 else 0
        written = {"5m": 0, "1h": 0}
        covered = read
        for bp in breakpoints:
            ttl = blocks[bp].ttl
            assert ttl is not None
            # Below the minimum the API silently caches nothing; those tokens stay plain input.
            if bp <= hit or cumulative[bp] < self.min_tokens:
                continue
            written[ttl] += cumulative[bp] - covered
            covered = cumulative[bp]
            self.entries[prefix_keys[bp]] = CacheEntry(
                prefix_tokens=cumulative[bp], ttl=ttl, expires_at=now + TTL_SECONDS[ttl]
            )
        creation = written["5m"] + written["1h"]
        return CacheUsage(
            input_tokens=total - read - creation,
            cache_creation_input_tokens=creation,
            cache_read_input_tokens=read,
            ephemeral_5m_input_tokens=written["5m"],
            ephemeral_1h_input_tokens=written["1h"],
        )

    def _expire(self, now: float) -> None:
        for key in [k for k, e in self.entries.items() if e.expires_at <= now]:
            del self.entries[key]

    def _blocks(self, body: dict[str, Any]) -> list[_Block]:
        raw: list[tuple[str, Any]] = []
        for tool in body.get("tools") or []:
            raw.append(("tools", tool))
        system = body.get("system")
        if isinstance(system, str):
            if system:
                raw.append(("system", {"type": "text", "text": system}))
        elif isinstance(system, list):
            raw.extend(("system", b) for b in system)
        for msg in body.get("messages") or []:
            if not isinstance(msg, dict):
                continue
            content = msg.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for j, part in enumerate(parts or []):
                # The role and message boundary are part of the prompt, so they are hashed too.
                raw.append((f"{msg.get('role')}:{'start' if j == 0 else 'cont'}", part))

        blocks: list[_Block] = []
        for section, part in raw:
            stripped = _compact(_strip_cache_control(part))
            marker = part.get("cache_control") if isinstance(part, dict) else None
            blocks.append(
                _Block(
                    key=f"{section}|{stripped}",
                    tokens=block_tokens(part, stripped),
                    ttl=self._ttl_of(marker),
                )
            )

        auto = body.get("cache_control")
        if auto is not None and blocks and blocks[-1].ttl is None:
            last = blocks[-1]
            blocks[-1] = _Block(key=last.key, tokens=last.tokens, ttl=self._ttl_of(auto))

        marked = [b.ttl for b in blocks if b.ttl is not None]
        if len(marked) > self.max_breakpoints:
            raise CacheControlError(
                f"A maximum of {self.max_breakpoints} blocks with cache_control may be provided. "
                f"Found {len(marked)}."
            )
        # The API requires longer-lived entries to precede shorter-lived ones.
        if "5m" in marked and "1h" in marked[marked.index("5m") :]:
            raise CacheControlError(
                "cache_control blocks with ttl='1h' must come before blocks with ttl='5m'"
            )
        return blocks

    @staticmethod
    def _ttl_of(marker: Any) -> str | None:
        if marker is None:
            return None
        if not isinstance(marker, dict) or marker.get("type") != "ephemeral":
            raise CacheControlError("cache_control.type: Input should be 'ephemeral'")
        ttl = marker.get("ttl") or "5m"
        if ttl not in TTL_SECONDS:
            raise CacheControlError("cache_control.ttl: Input should be '5m' or '1h'")
        return str(ttl)


# --------------------------------------------------------------------------- scripted replies


@dataclass
class ErrorReply:
    """An HTTP error answer with the API's error body."""

    status: int
    err_type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0

    def body(self, request_id: str) -> dict[str, Any]:
        return _error_body(self.err_type, self.message, request_id)


@dataclass
class Reply:
    """An assistant turn. `drop_after` cuts the connection after that many streamed text chars;
    `stream_error` is sent as an SSE `error` event at that point instead, and with
    `clean_close` the response simply ends there (no `message_stop`), as when a proxy or
    load balancer closes a stream it considers finished."""

    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    delay: float = 0.0
    drop_after: int | None = None
    stream_error: ErrorReply | None = None
    clean_close: bool = False
    chunk_delay: float | None = None

    @classmethod
    def text(cls, text: str, *, stop_reason: str = "end_turn", delay: float = 0.0) -> Reply:
        return cls(content=[{"type": "text", "text": text}], stop_reason=stop_reason, delay=delay)

    @classmethod
    def tool_use(
        cls,
        name: str,
        input: dict[str, Any],
        *,
        tool_id: str | None = None,
        text: str = "",
        delay: float = 0.0,
    ) -> Reply:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content.append(
            {"type": "tool_use", "id": tool_id or _new_id("toolu"), "name": name, "input": input}
        )
        return cls(content=content, stop_reason="tool_use", delay=delay)

    @classmethod
    def web_search(
        cls,
        query: str,
        results: list[tuple[str, str]],
        answer: str,
        *,
        cite: tuple[int, ...] = (0,),
        intro: str = "",
        stop_reason: str = "end_turn",
    ) -> Reply:
        """A turn that ran the server-side web search as the real API returns it: a
        `server_tool_use` block, its `web_search_tool_result` (results as (url, title)), then
        the answer as text citing the results numbered in `cite`."""
        search = server_search_blocks(query, results)
        answer_block: dict[str, Any] = {"type": "text", "text": answer}
        found = search[1]["content"]
        citations = [_citation(found[i], answer) for i in cite if i < len(found)]
        if citations:
            answer_block["citations"] = citations
        content = [{"type": "text", "text": intro}] if intro else []
        return cls(content=[*content, *search, answer_block], stop_reason=stop_reason)


def server_search_blocks(query: str, results: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A `server_tool_use` web search and its `web_search_tool_result` block."""
    tool_id = _new_id("srvtoolu")
    found = [
        {
            "type": "web_search_result",
            "url": url,
            "title": title,
            "encrypted_content": base64.b64encode(f"page:{url}".encode()).decode(),
            "page_age": "April 1, 2026",
        }
        for url, title in results
    ]
    return [
        {"type": "server_tool_use", "id": tool_id, "name": "web_search", "input": {"query": query}},
        {"type": "web_search_tool_result", "tool_use_id": tool_id, "content": found},
    ]


def _citation(result: dict[str, Any], answer: str) -> dict[str, Any]:
    return {
        "type": "web_search_result_location",
        "url": result["url"],
        "title": result["title"],
        "cited_text": answer[:150],
        "encrypted_index": base64.b64encode(f"index:{result['url']}".encode()).decode(),
    }


def search_results_in(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every `search_result` block of a request (in tool results), in the order the API
    numbers them for `search_result_location` citations."""
    found = []
    for msg in body.get("messages") or []:
        for block in msg.get("content") if isinstance(msg.get("content"), list) else []:
            inner = block.get("content") if block.get("type") == "tool_result" else [block]
            for part in inner if isinstance(inner, list) else []:
                if isinstance(part, dict) and part.get("type") == "search_result":
                    found.append(part)
    return found


def citing_search_results(answer: str, cite: tuple[int, ...] = (0,)) -> Handler:
    """A handler answering with `answer`, citing the request's search_result blocks numbered
    in `cite` as the API does (`search_result_location`)."""

    def handler(body: dict[str, Any]) -> ReplyLike:
        results = search_results_in(body)
        citations = [
            {
                "type": "search_result_location",
                "source": results[i]["source"],
                "title": results[i]["title"],
                "cited_text": results[i]["content"][0]["text"][:150],
                "search_result_index": i,
                "start_block_index": 0,
                "end_block_index": 1,
            }
            for i in cite
            if i < len(results)
        ]
        block: dict[str, Any] = {"type": "text", "text": answer}
        if citations:
            block["citations"] = citations
        return Reply(content=[block])

    return handler


ReplyLike = Reply | ErrorReply | str
Handler = Callable[[dict[str, Any]], ReplyLike | Awaitable[ReplyLike]]


def _error_body(err_type: str, message: str, request_id: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": err_type, "message": message},
        "request_id": request_id,
    }


def text_of(content: Any) -> str:
    """The text of a message's content: its text blocks and what its tool results say."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") in ("tool_result", "search_result"):
            parts.append(text_of(block.get("content")))
    return "\n".join(p for p in parts if p)


@dataclass
class RecordedRequest:
    """One request as the fake received it; `usage` and `reply` are filled in when answered."""

    path: str
    method: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes
    usage: dict[str, Any] | None = None
    reply: Reply | ErrorReply | None = None

    @property
    def stream(self) -> bool:
        return self.body.get("stream") is True

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def system_text(self) -> str:
        return text_of(self.body.get("system"))

    @property
    def last_user_text(self) -> str:
        for msg in reversed(self.messages):
            if msg.get("role") == "user":
                return text_of(msg.get("content"))
        return ""

    @property
    def tool_names(self) -> list[str]:
        return [str(t.get("name")) for t in self.body.get("tools") or []]


WEB_SEARCH_TOOL_TYPES = ("web_search_20250305", "web_search_20260209", "web_search_20260318")


def web_search_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The request's server-side web search tool definition, if it offers one."""
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type") in WEB_SEARCH_TOOL_TYPES:
            return tool
    return None


def _validate_tools(body: dict[str, Any]) -> str | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return f"tools.{i}: Input should be an object"
        kind = tool.get("type")
        if kind is None or kind == "custom":
            if not tool.get("name") or not isinstance(tool.get("input_schema"), dict):
                return f"tools.{i}: name and input_schema are required"
            continue
        if kind not in WEB_SEARCH_TOOL_TYPES:
            return f"tools.{i}.type: unknown tool type {kind!r}"
        if tool.get("name") != "web_search":
            return f"tools.{i}.name: Input should be 'web_search'"
        uses = tool.get("max_uses")
        if uses is not None and (not isinstance(uses, int) or isinstance(uses, bool) or uses < 1):
            return f"tools.{i}.max_uses: Input should be greater than 0"
        if tool.get("allowed_domains") and tool.get("blocked_domains"):
            return f"tools.{i}: cannot specify both allowed_domains and blocked_domains"
        location = tool.get("user_location")
        if location is not None and (
            not isinstance(location, dict) or location.get("type") != "approximate"
        ):
            return f"tools.{i}.user_location.type: Input should be 'approximate'"
    return None


def _validate_server_blocks(
    i: int, msg: dict[str, Any], blocks: list[Any], final: bool
) -> str | None:
    """Server tool calls sent back must carry their results (a paused final turn may not
    have them yet); search_result blocks must be whole."""
    if msg["role"] == "assistant":
        calls = [
            b.get("id")
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "server_tool_use"
        ]
        answered = {
            b.get("tool_use_id")
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "web_search_tool_result"
        }
        if not final and any(c not in answered for c in calls):
            return (
                f"messages.{i}: `server_tool_use` blocks must be followed by their "
                "`web_search_tool_result` blocks"
            )
        return None
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        content = block.get("content")
        for part in content if isinstance(content, list) else []:
            if not isinstance(part, dict) or part.get("type") != "search_result":
                continue
            texts = part.get("content")
            if (
                not isinstance(part.get("source"), str)
                or not isinstance(part.get("title"), str)
                or not isinstance(texts, list)
                or not texts
                or any(not isinstance(t, dict) or t.get("type") != "text" for t in texts)
            ):
                return f"messages.{i}: search_result blocks need source, title and text content"
    return None


def _validate(body: Any) -> str | None:
    """The subset of the API's request validation that catches real client bugs."""
    if not isinstance(body, dict):
        return "Request body must be a JSON object"
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    problem = _validate_tools(body)
    if problem is not None:
        return problem
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    messages = body["messages"]
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    prev_tool_ids: set[str] = set()
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = msg.get("content")
        is_final_assistant = i == len(messages) - 1 and msg["role"] == "assistant"
        if not content and not is_final_assistant:
            return (
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        if content is not None and not isinstance(content, str | list):
            return f"messages.{i}.content: Input should be a valid string or list"
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "text":
                text = block.get("text")
                if not isinstance(text, str) or not text:
                    return "messages: text content blocks must be non-empty"
                if not text.strip() and not is_final_assistant:
                    return "messages: text content blocks must contain non-whitespace text"
        problem = _validate_server_blocks(i, msg, blocks, is_final_assistant)
        if problem is not None:
            return problem
        results = [
            (j, b)
            for j, b in enumerate(blocks)
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        result_ids = {str(b.get("tool_use_id")) for _, b in results}
        if prev_tool_ids:
            missing = prev_tool_ids - result_ids
            if msg["role"] != "user" or missing:
                ids = ", ".join(sorted(missing or prev_tool_ids))
                return (
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {ids}. Each `tool_use` block must have a corresponding "
                    "`tool_result` block in the next message."
                )
        for j, b in results:
            if str(b.get("tool_use_id")) not in prev_tool_ids:
                return (
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {b.get('tool_use_id')}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message."
                )
        prev_tool_ids = {
            str(b.get("id"))
            for b in blocks
            if msg["role"] == "assistant" and isinstance(b, dict) and b.get("type") == "tool_use"
        }
    if prev_tool_ids:
        return (
            f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` "
            f"blocks immediately after: {', '.join(sorted(prev_tool_ids))}. Each `tool_use` "
            "block must have a corresponding `tool_result` block in the next message."
        )
    return None


def _split_text(text: str) -> list[str]:
    # Several deltas even for short replies, so tests can observe incremental output.
    size = max(1, min(_MAX_DELTA_CHARS, math.ceil(len(text) / 4)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _split_json(raw: str) -> list[str]:
    # The real API opens with an empty partial_json before the first real fragment.
    size = max(1, math.ceil(len(raw) / 3))
    return ["", *(raw[i : i + size] for i in range(0, len(raw), size))]


def _output_tokens(content: list[dict[str, Any]]) -> int:
    chars = 0
    for block in content:
        if block.get("type") == "text":
            chars += len(block.get("text", ""))
        elif block.get("type") == "tool_use":
            chars += len(block.get("name", "")) + len(_compact(block.get("input", {})))
    return max(1, chars // 4)


def _host_in(url: str, domains: list[str]) -> bool:
    host = (url.split("://", 1)[-1].split("/", 1)[0]).lower()
    return any(host == d.lower() or host.endswith("." + d.lower()) for d in domains)


def _run_server_search(
    content: list[dict[str, Any]], body: dict[str, Any]
) -> tuple[list[dict[str, Any]], int]:
    """Play a scripted reply's server-side searches as the API would under the request's
    tool definition: results from blocked (or not allowed) domains are dropped with the
    citations to them, searches past `max_uses` get the `max_uses_exceeded` error. Returns
    the content and how many searches ran. ValueError: the reply searches, but the request
    offers no web search tool (the real model could not have)."""
    calls = [b for b in content if b.get("type") == "server_tool_use"]
    if not calls:
        return content, 0
    tool = web_search_tool(body)
    if tool is None:
        raise ValueError(
            "fake: the scripted reply searches the web, but the request has no web_search tool"
        )
    allowed = list(tool.get("allowed_domains") or [])
    blocked = list(tool.get("blocked_domains") or [])

    def shown(url: str) -> bool:
        return (not allowed or _host_in(url, allowed)) and not _host_in(url, blocked)

    max_uses = tool.get("max_uses") or len(calls)
    over = {b["id"] for b in calls[max_uses:]}
    dropped: set[str] = set()
    out = []
    for block in content:
        block = dict(block)
        if block.get("type") == "web_search_tool_result" and isinstance(block.get("content"), list):
            if block["tool_use_id"] in over:
                dropped |= {r["url"] for r in block["content"]}
                block["content"] = {
                    "type": "web_search_tool_result_error",
                    "error_code": "max_uses_exceeded",
                }
            else:
                dropped |= {r["url"] for r in block["content"] if not shown(r["url"])}
                block["content"] = [r for r in block["content"] if shown(r["url"])]
        elif block.get("type") == "text" and block.get("citations"):
            kept = [c for c in block["citations"] if c.get("url") not in dropped]
            if kept:
                block["citations"] = kept
            else:
                del block["citations"]
        out.append(block)
    return out, min(len(calls), max_uses)


class _Dropped(Exception):
    """Raised inside the SSE writer to abandon the response mid-stream."""


# --------------------------------------------------------------------------- the server


class FakeAnthropic:
    """The fake API server. Queue replies, point `AsyncAnthropic(base_url=fake.url)` at it and
    inspect `requests` afterwards. Unqueued requests get `default_handler`'s reply."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        cache: CacheSimulator | None = None,
        api_key: str | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.url = ""
        self.requests: list[RecordedRequest] = []
        # `is None`, not `or`: an empty simulator has len() 0 and so is falsy.
        self.cache = cache if cache is not None else CacheSimulator()
        self.cache_enabled = True
        # None accepts any non-empty key; a string demands that exact key.
        self.api_key = api_key
        self.default_handler: Handler = self._echo
        self.delay = 0.0
        self.chunk_delay = 0.0
        self.enforce_max_tokens = True
        self.validate_requests = True
        # Exceptions raised by scripted handlers; the client sees a 500 api_error instead.
        self.handler_errors: list[BaseException] = []
        self.context_window: int | None = None
        self.in_flight = 0
        self.max_in_flight = 0
        self._queue: deque[Handler] = deque()
        self._gate = asyncio.Event()
        self._gate.set()
        self._arrival = asyncio.Event()
        self._runner: web.AppRunner | None = None

    # ----- lifecycle

    async def start(self) -> str:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://{self.host}:{self.port}"
        return self.url

    async def stop(self) -> None:
        self._gate.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeAnthropic:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def env(self, api_key: str = "test") -> dict[str, str]:
        """Environment variables that point a subprocess's SDK client at this fake."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": api_key}

    # ----- scripting

    def queue(self, reply: ReplyLike | Handler, *, times: int = 1) -> None:
        if callable(reply):
            handler: Handler = reply
        else:

            def handler(_body: dict[str, Any], fixed: ReplyLike = reply) -> ReplyLike:
                return fixed

        self._queue.extend([handler] * times)

    def queue_text(self, text: str, *, delay: float = 0.0, stop_reason: str = "end_turn") -> None:
        self.queue(Reply.text(text, stop_reason=stop_reason, delay=delay))

    def queue_tool_use(
        self,
        name: str,
        input: dict[str, Any],
        *,
        tool_id: str | None = None,
        text: str = "",
        delay: float = 0.0,
    ) -> str:
        """Queue an assistant tool call; returns its tool_use id."""
        reply = Reply.tool_use(name, input, tool_id=tool_id, text=text, delay=delay)
        self.queue(reply)
        return str(reply.content[-1]["id"])

    def queue_error(
        self,
        status: int,
        err_type: str,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        times: int = 1,
        should_retry: bool | None = None,
        delay: float = 0.0,
    ) -> None:
        hdrs = dict(headers or {})
        if should_retry is not None:
            hdrs["x-should-retry"] = "true" if should_retry else "false"
        self.queue(ErrorReply(status, err_type, message, hdrs, delay), times=times)

    def queue_handler(self, fn: Handler, *, times: int = 1) -> None:
        self.queue(fn, times=times)

    def queue_drop(self, after_chars: int, *, text: str | None = None) -> None:
        """Start streaming `text` (or filler) and cut the connection after `after_chars` chars.
        A non-streaming request gets its connection closed with no response at all."""
        body = text if text is not None else _DROP_FILLER
        self.queue(Reply(content=[{"type": "text", "text": body}], drop_after=after_chars))

    def queue_clean_close(self, after_chars: int, *, text: str | None = None) -> None:
        """Start streaming `text` (or filler) and end the response cleanly after `after_chars`
        chars, with no `message_delta` or `message_stop`. A non-streaming request gets its
        connection closed with no response at all."""
        body = text if text is not None else _DROP_FILLER
        self.queue(
            Reply(
                content=[{"type": "text", "text": body}], drop_after=after_chars, clean_close=True
            )
        )

    def queue_stream_error(
        self,
        err_type: str = "overloaded_error",
        message: str = "Overloaded",
        *,
        after_chars: int = 0,
        text: str | None = None,
    ) -> None:
        """Start streaming, then send an SSE `error` event, as the API does when it fails
        after the 200 response has begun."""
        body = text if text is not None else _DROP_FILLER
        self.queue(
            Reply(
                content=[{"type": "text", "text": body}],
                drop_after=after_chars,
                stream_error=ErrorReply(200, err_type, message),
            )
        )

    @property
    def pending(self) -> int:
        """Queued replies not yet consumed."""
        return len(self._queue)

    def hold(self) -> None:
        """Make requests wait (after being recorded) until `release()`."""
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    def reset(self) -> None:
        self._queue.clear()
        self.requests.clear()
        self.cache.clear()

    # ----- inspection

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """Recorded POST /v1/messages requests (count_tokens calls excluded)."""
        return [r for r in self.requests if r.path == "/v1/messages"]

    def last_user_text(self, i: int = -1) -> str:
        return self.message_requests[i].last_user_text

    def system_text(self, i: int = -1) -> str:
        return self.message_requests[i].system_text

    async def wait_for_requests(self, n: int, *, within: float = 5.0) -> list[RecordedRequest]:
        """Wait until at least `n` /v1/messages requests have arrived."""
        async with asyncio.timeout(within):
            while len(self.message_requests) < n:
                self._arrival.clear()
                await self._arrival.wait()
        return self.message_requests

    # ----- HTTP handlers

    async def _record(self, request: web.Request) -> RecordedRequest | web.Response:
        raw = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        rec = RecordedRequest(
            path=request.path,
            method=request.method,
            headers=headers,
            body=body if isinstance(body, dict) else {},
            raw=raw,
        )
        self.requests.append(rec)
        self._arrival.set()
        key = headers.get("x-api-key") or _bearer(headers.get("authorization", ""))
        if not key:
            return _error_response(401, "authentication_error", "x-api-key header is required")
        if self.api_key is not None and key != self.api_key:
            return _error_response(401, "authentication_error", "invalid x-api-key")
        if body is None:
            return _error_response(400, "invalid_request_error", "Request body is not valid JSON")
        return rec

    async def _count_tokens(self, request: web.Request) -> web.StreamResponse:
        rec = await self._record(request)
        if isinstance(rec, web.Response):
            return rec
        if "messages" not in rec.body:
            return _error_response(400, "invalid_request_error", "messages: Field required")
        problem = _validate_tools(rec.body)
        if problem is not None:
            return _error_response(400, "invalid_request_error", problem)
        try:
            tokens = self.cache.count_tokens(rec.body)
        except CacheControlError as e:
            return _error_response(400, "invalid_request_error", str(e))
        return web.json_response({"input_tokens": tokens}, headers={"request-id": _new_id("req")})

    async def _not_found(self, request: web.Request) -> web.StreamResponse:
        return _error_response(404, "not_found_error", "Not found")

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        rec = await self._record(request)
        if isinstance(rec, web.Response):
            return rec
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request, rec)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        await self._gate.wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        body = rec.body
        problem = _validate(body) if self.validate_requests else None
        if problem is None:
            try:
                self.cache.validate(body)
            except CacheControlError as e:
                problem = str(e)
        if problem is None and self.context_window is not None:
            total = self.cache.count_tokens(body)
            if total > self.context_window:
                problem = f"prompt is too long: {total} tokens > {self.context_window} maximum"
        if problem is not None:
            return _error_response(400, "invalid_request_error", problem)

        handler = self._queue.popleft() if self._queue else self.default_handler
        try:
            result = handler(body)
            if inspect.isawaitable(result):
                result = await result
        except Exception as e:
            self.handler_errors.append(e)
            # Not retryable, so a broken handler fails the test once instead of eating the queue.
            return _error_response(
                500, "api_error", f"fake handler raised {e!r}", {"x-should-retry": "false"}
            )
        reply = Reply.text(result) if isinstance(result, str) else result
        rec.reply = reply
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if isinstance(reply, ErrorReply):
            return _error_response(reply.status, reply.err_type, reply.message, reply.headers)

        content, stop_reason = self._apply_max_tokens(reply, body)
        try:
            content, searches = _run_server_search(content, body)
        except ValueError as e:
            self.handler_errors.append(e)
            return _error_response(500, "api_error", str(e), {"x-should-retry": "false"})
        cache_usage = (
            self.cache.process(body)
            if self.cache_enabled
            else CacheUsage(input_tokens=self.cache.count_tokens(body))
        )
        usage = {
            **cache_usage.as_usage(),
            "output_tokens": _output_tokens(content),
            "service_tier": "standard",
        }
        if searches:
            usage["server_tool_use"] = {"web_search_requests": searches, "web_fetch_requests": 0}
        rec.usage = usage
        message = {
            "id": _new_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        if not rec.stream:
            if reply.stream_error is not None:
                err = reply.stream_error
                status = _STATUS_FOR_ERROR.get(err.err_type, 500)
                return _error_response(status, err.err_type, err.message)
            if reply.drop_after is not None:
                _abort(request)
                return web.Response(status=500)
            return web.json_response(message, headers={"request-id": _new_id("req")})
        return await self._stream(request, message, reply)

    def _apply_max_tokens(
        self, reply: Reply, body: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], str]:
        content = [dict(b) for b in reply.content]
        limit = body.get("max_tokens")
        if not self.enforce_max_tokens or not isinstance(limit, int):
            return content, reply.stop_reason
        if _output_tokens(content) <= limit or any(b.get("type") != "text" for b in content):
            return content, reply.stop_reason
        budget = limit * 4
        for block in content:
            block["text"] = block["text"][:budget]
            budget -= len(block["text"])
        return [b for b in content if b["text"]] or content[:1], "max_tokens"

    async def _stream(
        self, request: web.Request, message: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            status=200,
            headers={
                "content-type": "text/event-stream; charset=utf-8",
                "cache-control": "no-cache",
                "request-id": _new_id("req"),
            },
        )
        try:
            await resp.prepare(request)
        except ConnectionResetError:
            return resp  # the client gave up (e.g. its timeout fired) before the answer began
        chunk_delay = reply.chunk_delay if reply.chunk_delay is not None else self.chunk_delay
        budget = reply.drop_after

        async def send(event: str, data: dict[str, Any]) -> None:
            await resp.write(f"event: {event}\ndata: {_compact(data)}\n\n".encode())

        async def cut() -> None:
            if reply.stream_error is not None:
                err = reply.stream_error
                await send(
                    "error",
                    {"type": "error", "error": {"type": err.err_type, "message": err.message}},
                )
                raise _Dropped
            if reply.clean_close:
                await resp.write_eof()
                raise _Dropped
            _abort(request)
            raise _Dropped

        usage = message["usage"]
        start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
        start["usage"] = {**usage, "output_tokens": 1}
        try:
            await send("message_start", {"type": "message_start", "message": start})
            if budget == 0:
                await cut()
            for index, block in enumerate(message["content"]):
                if block["type"] == "text":
                    await send(
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                    if index == 0:
                        await send("ping", {"type": "ping"})
                    # As the API does: a cited block's citations arrive before its text.
                    for citation in block.get("citations") or []:
                        await self._delta(send, index, "citations_delta", "citation", citation)
                    for piece in _split_text(block["text"]):
                        if budget is not None and len(piece) >= budget:
                            if budget:
                                await self._delta(send, index, "text_delta", "text", piece[:budget])
                            await cut()
                        if budget is not None:
                            budget -= len(piece)
                        await self._delta(send, index, "text_delta", "text", piece)
                        if chunk_delay:
                            await asyncio.sleep(chunk_delay)
                elif "input" not in block:  # a server tool's result arrives whole
                    await send(
                        "content_block_start",
                        {"type": "content_block_start", "index": index, "content_block": block},
                    )
                else:
                    opening = {**block, "input": {}}
                    await send(
                        "content_block_start",
                        {"type": "content_block_start", "index": index, "content_block": opening},
                    )
                    if index == 0:
                        await send("ping", {"type": "ping"})
                    for piece in _split_json(_compact(block.get("input", {}))):
                        await self._delta(send, index, "input_json_delta", "partial_json", piece)
                        if chunk_delay:
                            await asyncio.sleep(chunk_delay)
                await send("content_block_stop", {"type": "content_block_stop", "index": index})
            if budget is not None:
                await cut()
            await send(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {
                        "input_tokens": usage["input_tokens"],
                        "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
                        "cache_read_input_tokens": usage["cache_read_input_tokens"],
                        "output_tokens": usage["output_tokens"],
                        **(
                            {"server_tool_use": usage["server_tool_use"]}
                            if "server_tool_use" in usage
                            else {}
                        ),
                    },
                },
            )
            await send("message_stop", {"type": "message_stop"})
            await resp.write_eof()
        except _Dropped:
            pass
        except (ConnectionResetError, ConnectionError):
            # The client went away mid-stream (e.g. a test stopped reading); nothing to do.
            pass
        return resp

    @staticmethod
    async def _delta(
        send: Callable[[str, dict[str, Any]], Awaitable[None]],
        index: int,
        kind: str,
        key: str,
        value: Any,
    ) -> None:
        await send(
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": {"type": kind, key: value}},
        )

    @staticmethod
    def _echo(body: dict[str, Any]) -> ReplyLike:
        last = ""
        for msg in reversed(body.get("messages") or []):
            if isinstance(msg, dict) and msg.get("role") == "user":
                last = text_of(msg.get("content"))
                break
        return Reply.text(f"echo: {last}")


def _bearer(value: str) -> str:
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _abort(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        transport.abort()


def _error_response(
    status: int, err_type: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    request_id = _new_id("req")
    return web.json_response(
        _error_body(err_type, message, request_id),
        status=status,
        headers={"request-id": request_id, **(headers or {})},
    )


# --------------------------------------------------------------------------- pytest fixtures


@pytest_asyncio.fixture
async def fake_anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        yield fake


@pytest_asyncio.fixture
async def fake_anthropic_client(fake_anthropic: FakeAnthropic) -> AsyncIterator[Any]:
    """A real `anthropic.AsyncAnthropic` pointed at the fake, with retries off."""
    from anthropic import AsyncAnthropic

    client = AsyncAnthropic(api_key="test", base_url=fake_anthropic.url, max_retries=0)
    try:
        yield client
    finally:
        await client.close()


# --------------------------------------------------------------------------- standalone

# Beside Krill's own 8787, so both run on one machine with their defaults (README, "Trying
# Krill without an Anthropic key").
STANDALONE_PORT = 8790


def plain_echo(body: dict[str, Any]) -> str:
    """Reply with the person's words only (without the untrusted-content markers Krill puts
    around them), so replies are easy to read."""
    text = "".join(b.get("text", "") for b in body["messages"][-1]["content"])
    inner = text.split("\n")[-2] if "<<<END_UNTRUSTED" in text else text
    return f"echo: {inner}"


async def _serve(args: argparse.Namespace) -> None:
    fake = FakeAnthropic(
        host=args.host, port=args.port, cache=CacheSimulator(min_tokens=args.min_cache_tokens)
    )
    fake.default_handler = plain_echo
    fake.delay = args.delay
    fake.chunk_delay = args.chunk_delay
    fake.cache_enabled = not args.no_cache
    async with fake:
        print(f"Fake Anthropic API listening on {fake.url} (set ANTHROPIC_BASE_URL to it)")
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=STANDALONE_PORT)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--chunk-delay", type=float, default=0.02, help="seconds between deltas")
    parser.add_argument("--min-cache-tokens", type=int, default=DEFAULT_MIN_CACHE_TOKENS)
    parser.add_argument("--no-cache", action="store_true", help="disable the cache simulator")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
