"""The model client: one streaming call to the Anthropic Messages API with prompt caching,
mapping the SDK's exceptions to Krill's own so callers can build user-facing messages.

Retries (429, 5xx, 529, connection errors) come from the SDK; what reaches us has exhausted them.
The SDK does not retry a stream that breaks after it began (a dropped connection surfaces as a
raw transport error, an error event as a bare APIStatusError); those are marked `retryable` so
the runner can try once more when nothing was shown yet. A stream that ends cleanly without
`message_stop` is no answer either: the SDK would hand over the part that arrived as if it
were whole, so it is the same interruption.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import anthropic
import httpx2
from anthropic.types import (
    ContentBlockParam,
    MessageParam,
    TextBlockParam,
    ToolUnionParam,
    ToolUseBlockParam,
)

from bot.agent.caching import apply_breakpoints
from bot.config import Config
from bot.errors import (
    ContextOverflow,
    ModelAuthError,
    ModelError,
    ModelNotConfigured,
    ModelOverloaded,
    ModelRateLimited,
    ModelStreamInterrupted,
)
from bot.types import Usage

log = logging.getLogger(__name__)

OVERFLOW_RE = re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum")

# What a failed call raises: the API's answers and the network under it. Anything else (a
# TypeError in Krill's own callbacks, say) is a bug and reaches the caller as it is.
MODEL_FAILURES = (anthropic.APIError, httpx2.HTTPError, OSError)

# The stop reason of a reply the provider paused during its own (server-side) tool use.
PAUSE_TURN = "pause_turn"

TextCallback = Callable[[str], Awaitable[None]]
ToolStartCallback = Callable[[str], Awaitable[None]]


@dataclass(slots=True)
class ModelReply:
    content: list[ContentBlockParam]
    stop_reason: str
    usage: Usage
    model: str
    latency: float = 0.0
    request_id: str = ""
    tool_uses: list[ToolUseBlockParam] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.content if b["type"] == "text")


def _usage_from(raw: Any) -> Usage:
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
    # An SSE `error` event arrives on a 200 response, so its kind is only in the body.
    kind = _error_type(exc.body) if isinstance(exc, anthropic.APIStatusError) else ""
    if isinstance(exc, anthropic.RateLimitError) or kind == "rate_limit_error":
        return ModelRateLimited(str(exc))
    if (
        isinstance(exc, anthropic.OverloadedError)
        or kind == "overloaded_error"
        or (isinstance(exc, anthropic.APIStatusError) and exc.status_code == 529)
    ):
        return ModelOverloaded(str(exc))
    if isinstance(exc, anthropic.APIError):
        return ModelError(f"{type(exc).__name__}: {exc}")
    return ModelError(f"model call failed: {type(exc).__name__}: {exc}")


def _error_type(body: object) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("type", "")) if isinstance(error, dict) else ""


def interrupted(mapped: ModelError) -> ModelError:
    """The same failure seen after the reply had begun streaming: worth one more attempt,
    unless no attempt can fix it (bad key, prompt too long)."""
    if isinstance(mapped, ContextOverflow | ModelAuthError | ModelNotConfigured):
        return mapped
    if type(mapped) is ModelError:  # a transport failure, not an answer from the API
        mapped = ModelStreamInterrupted(str(mapped))
    mapped.retryable = True
    return mapped


class ModelClient:
    """Owns the AsyncAnthropic client; one instance per running service."""

    def __init__(self, config: Config):
        self.config = config
        self._client: anthropic.AsyncAnthropic | None = None

    @property
    def configured(self) -> bool:
        return bool(self.config.anthropic.api_key)

    def _get_client(self) -> anthropic.AsyncAnthropic:
        if not self.configured:
            raise ModelNotConfigured("ANTHROPIC_API_KEY is not set")
        if self._client is None:
            cfg = self.config.anthropic
            self._client = anthropic.AsyncAnthropic(
                api_key=cfg.api_key,
                base_url=cfg.base_url or None,
                max_retries=cfg.max_retries,
                timeout=cfg.timeout,
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def complete(
        self,
        *,
        system: list[TextBlockParam],
        messages: list[MessageParam],
        tools: list[ToolUnionParam] | None = None,
        on_text: TextCallback | None = None,
        on_tool_start: ToolStartCallback | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> ModelReply:
        """Stream one model response, calling `on_text` with each text delta."""
        client = self._get_client()
        system, tool_defs, messages = apply_breakpoints(
            system=system, tools=tools or [], messages=messages, ttl=self.config.anthropic.cache_ttl
        )
        model = model or self.config.agent.model
        max_tokens = max_tokens or self.config.agent.max_tokens
        # Asking for more than the model can write is refused with a 400, not trimmed.
        output_limit = self.config.model_limits(model).max_output_tokens
        kwargs: dict[str, Any] = {
            "model": model,
            "max_tokens": min(max_tokens, output_limit) if output_limit else max_tokens,
            "system": system,
            "messages": messages,
        }
        if tool_defs:
            kwargs["tools"] = tool_defs
        started = time.monotonic()
        began = False  # whether any event arrived, i.e. the SDK will not retry a failure
        stopped = False  # whether `message_stop` arrived: the reply is whole
        try:
            async with client.messages.stream(**kwargs) as stream:
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
        except MODEL_FAILURES as exc:  # only these mean "the model could not be reached"
            mapped = interrupted(map_error(exc)) if began else map_error(exc)
            log.warning("model call failed: %s", mapped)
            raise mapped from exc
        # The JSON boundary: the response's blocks, dumped, are what the next request sends.
        content = [
            cast(ContentBlockParam, block.model_dump(exclude_none=True)) for block in final.content
        ]
        return ModelReply(
            content=content,
            stop_reason=final.stop_reason or "end_turn",
            usage=_usage_from(final.usage),
            model=final.model,
            latency=time.monotonic() - started,
            request_id=getattr(final, "_request_id", "") or "",
            tool_uses=[b for b in content if b["type"] == "tool_use"],
        )
