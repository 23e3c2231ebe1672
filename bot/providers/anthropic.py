"""The Anthropic provider: one streaming call to the Messages API with the official SDK.

A stream that breaks after it began surfaces as a raw transport error (a dropped
connection) or a bare APIStatusError (an SSE `error` event); both are marked `retryable` so
the agent loop can try once more when nothing was shown yet. A stream that ends cleanly
without `message_stop` is no answer either: the SDK would hand over the part that arrived
as if it were whole, so it is the same interruption.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any, cast

import anthropic
import httpx2
from anthropic.lib.streaming import AsyncMessageStreamManager
from anthropic.types import ContentBlockParam, Message, MessageParam, RawMessageStreamEvent

from bot.config import ProviderConfig
from bot.errors import (
    ContextOverflow,
    ModelAuthError,
    ModelError,
    ModelNotConfigured,
    ModelOverloaded,
    ModelRateLimited,
    ModelStreamInterrupted,
    ModelUnavailable,
)
from bot.providers.base import ModelReply, ModelRequest, TextCallback, ToolStartCallback
from bot.providers.failures import by_status, from_response, interrupted
from bot.types import Usage

log = logging.getLogger(__name__)

OVERFLOW_RE = re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum")

# What a failed call raises: the API's answers and the network under it. Anything else (a
# TypeError in Krill's own callbacks, say) is a bug and reaches the caller as it is.
FAILURES = (anthropic.APIError, httpx2.HTTPError, OSError)


def usage_from(raw: Any) -> Usage:
    server = getattr(raw, "server_tool_use", None)
    return Usage(
        input_tokens=getattr(raw, "input_tokens", 0) or 0,
        output_tokens=getattr(raw, "output_tokens", 0) or 0,
        cache_read_tokens=getattr(raw, "cache_read_input_tokens", 0) or 0,
        cache_write_tokens=getattr(raw, "cache_creation_input_tokens", 0) or 0,
        web_search_requests=getattr(server, "web_search_requests", 0) or 0,
    )


def map_error(exc: BaseException) -> ModelError:
    """Translate an SDK exception into the matching Krill exception."""
    if isinstance(exc, ModelError):
        return exc
    if isinstance(exc, anthropic.BadRequestError | anthropic.ContentTooLargeError):
        message = str(exc)
        match = OVERFLOW_RE.search(message)
        if match or "prompt is too long" in message:
            tokens, limit = (int(match[1]), int(match[2])) if match else (None, None)
            return ContextOverflow(message, tokens, limit)
        return ModelError(f"model rejected the request: {message}")
    if isinstance(exc, anthropic.AuthenticationError | anthropic.PermissionDeniedError):
        return ModelAuthError(str(exc))
    if isinstance(exc, anthropic.APIStatusError):
        # An SSE `error` event arrives on a 200 response, so its kind is only in the body.
        kind = _error_type(exc.body)
        mapped: ModelError
        if kind == "rate_limit_error":
            mapped = ModelRateLimited(str(exc))
        elif kind == "overloaded_error":
            mapped = ModelOverloaded(str(exc))
        elif kind == "api_error" or exc.status_code == 200:
            mapped = ModelUnavailable(f"{type(exc).__name__}: {exc}")
        else:
            mapped = by_status(exc.status_code, f"{type(exc).__name__}: {exc}")
        return from_response(mapped, exc.status_code, exc.response.headers)
    if isinstance(exc, anthropic.APIError):
        return ModelUnavailable(f"{type(exc).__name__}: {exc}")
    return ModelUnavailable(f"model call failed: {type(exc).__name__}: {exc}")


def _error_type(body: object) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("type", "")) if isinstance(error, dict) else ""


# The SDK's own JSON encoding of a request body.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
# Encoded messages kept by object, up to this many characters in all: a session's requests
# carry the same message objects turn after turn (`bot.context.messages` keeps and extends
# them) and nothing changes a message in place, so only new messages are encoded.
ENCODED_CHARS = 64_000_000


class _MessageJson:
    """`_encode(message)`, kept per message object while it is that object."""

    def __init__(self, limit: int) -> None:
        self.limit, self.chars = limit, 0
        self.held: dict[int, tuple[MessageParam, str]] = {}

    def __call__(self, message: MessageParam) -> str:
        held = self.held.get(id(message))
        if held is not None and held[0] is message:
            return held[1]
        text = _encode(message)
        if self.chars + len(text) > self.limit:
            self.held.clear()
            self.chars = 0
        self.held[id(message)] = (message, text)
        self.chars += len(text)
        return text


_message_json = _MessageJson(ENCODED_CHARS)


def request_body(request: ModelRequest) -> bytes:
    """The JSON a streamed Messages request sends, written once: `messages.stream` would
    first copy the whole request tree (`copy_tree`), a cost that grows with the history on
    every call. Keys, order and encoding are the SDK's own, so the bytes are the same."""
    rest: dict[str, Any] = {"model": request.model, "system": request.system}
    if request.tools:
        rest["tools"] = request.tools
    rest["stream"] = True
    messages = ",".join(_message_json(m) for m in request.messages)
    head = f'{{"max_tokens":{_encode(request.max_tokens)},"messages":[{messages}],'
    return (head + _encode(rest)[1:]).encode()


def _message_stream(
    client: anthropic.AsyncAnthropic, request: ModelRequest
) -> AsyncMessageStreamManager[None]:
    """`client.messages.stream(...)` over a body serialised once (`request_body`)."""
    return AsyncMessageStreamManager(
        client.post(
            "/v1/messages",
            content=request_body(request),
            cast_to=Message,
            stream=True,
            stream_cls=anthropic.AsyncStream[RawMessageStreamEvent],
        )
    )


class AnthropicProvider:
    """Owns one AsyncAnthropic client (built on first use)."""

    def __init__(self, name: str, settings: ProviderConfig) -> None:
        self.name = name
        self.settings = settings
        self._client: anthropic.AsyncAnthropic | None = None

    @property
    def configured(self) -> bool:
        return bool(self.settings.api_key)

    def client(self) -> anthropic.AsyncAnthropic:
        if not self.configured:
            raise ModelNotConfigured(f"provider {self.name} has no API key")
        if self._client is None:
            self._client = anthropic.AsyncAnthropic(
                api_key=self.settings.api_key,
                base_url=self.settings.base_url or None,
                max_retries=0,  # Krill retries (bot.providers.failures)
                timeout=self.settings.timeout,
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def stream(
        self,
        request: ModelRequest,
        on_text: TextCallback | None = None,
        on_tool_start: ToolStartCallback | None = None,
    ) -> ModelReply:
        client = self.client()
        started = time.monotonic()
        began = False  # whether any event arrived: a failure now may have shown text
        stopped = False  # whether `message_stop` arrived: the reply is whole
        try:
            async with _message_stream(client, request) as stream:
                async for event in stream:
                    began = True
                    stopped = event.type == "message_stop"
                    if event.type == "text" and on_text is not None:
                        await on_text(event.text)
                    elif event.type == "content_block_start" and on_tool_start is not None:
                        block = event.content_block
                        if block.type == "tool_use":
                            await on_tool_start(block.name)
                if not stopped:
                    raise ModelStreamInterrupted("the reply stream ended before message_stop")
                final = await stream.get_final_message()
        except FAILURES as exc:  # only these mean "the model could not be reached"
            raise (interrupted(map_error(exc)) if began else map_error(exc)) from exc
        # The JSON boundary: the response's blocks, dumped, are what the next request sends.
        content = [
            cast(ContentBlockParam, block.model_dump(exclude_none=True)) for block in final.content
        ]
        return ModelReply(
            content=content,
            stop_reason=final.stop_reason or "end_turn",
            usage=usage_from(final.usage),
            model=request.model,
            latency=time.monotonic() - started,
            request_id=getattr(final, "_request_id", "") or "",
            tool_uses=[b for b in content if b["type"] == "tool_use"],
        )
