"""The OpenAI-style provider: any Chat Completions endpoint (OpenAI, OpenRouter, vLLM, Ollama,
llama.cpp's server, LM Studio) through the official `openai` SDK.

The request is translated by `openai_request`; the streamed chunks are put back together
here as an Anthropic-shaped reply (text and `tool_use` blocks, the stop reason, the usage
with cached prompt tokens as cache reads), so the rest of Krill never sees the difference.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, cast

import httpx2
import openai
from anthropic.types import ContentBlockParam
from cachetools import LRUCache
from openai.types.chat import ChatCompletionChunk

from bot.config import ProviderConfig
from bot.errors import (
    ContextOverflow,
    ModelAuthError,
    ModelError,
    ModelStreamInterrupted,
    ModelUnavailable,
)
from bot.providers.base import ModelReply, ModelRequest, TextCallback, ToolStartCallback
from bot.providers.failures import by_status, from_response, interrupted
from bot.providers.openai_request import ChatTranslator, chat_tools, pdf_text
from bot.types import Usage

log = logging.getLogger(__name__)

FAILURES = (openai.APIError, httpx2.HTTPError, OSError)
STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
# OpenAI and vLLM: "This model's maximum context length is 32768 tokens. However, you
# requested 33000 tokens (32000 in the messages, 1000 in the completion)." or "...your
# messages resulted in 40000 tokens."
LIMIT_RE = re.compile(r"maximum context length is (\d+) tokens")
ASKED_RE = re.compile(r"(?:resulted in|requested) (\d+) tokens(?: \((\d+) in the messages)?")
# What an Anthropic request accepts as a tool_use id; other servers' ids may not match.
TOOL_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
OPENAI_HOST = "api.openai.com"
NO_KEY = "no-key"  # the SDK wants some key; a server on the LAN often needs none
PDF_CACHE_SIZE = 32


def overflow(message: str, body: object) -> ContextOverflow | None:
    """A "context length exceeded" answer as Krill's overflow, with the numbers it names."""
    error = body.get("error", body) if isinstance(body, dict) else {}
    error = error if isinstance(error, dict) else {}
    code = str(error.get("code") or error.get("type") or "")
    limit, asked = LIMIT_RE.search(message), ASKED_RE.search(message)
    if limit is None and "context_length_exceeded" not in code and "context_size" not in code:
        return None
    tokens = int(asked[2] or asked[1]) if asked else error.get("n_prompt_tokens")
    window = int(limit[1]) if limit else error.get("n_ctx")
    return ContextOverflow(message, tokens, window)


def map_error(exc: BaseException, provider: str, images: bool) -> ModelError:
    if isinstance(exc, ModelError):
        return exc
    if isinstance(exc, openai.APIStatusError):
        message = f"{type(exc).__name__}: {exc.message}"
        if exc.status_code in (400, 413) and (found := overflow(exc.message, exc.body)):
            return found
        mapped = by_status(exc.status_code, message)
        if isinstance(mapped, ModelAuthError):
            mapped.user_message = (
                f"The model provider {provider} rejected Krill's API key. The operator should "
                f"check providers.{provider}.api_key (or the variable api_key_env names)."
            )
        elif type(mapped) is ModelError and images:
            mapped = ModelError(
                f"{message} (if the model cannot read images, set "
                f'[models."{provider}:…"] images = false)'
            )
        return from_response(mapped, exc.status_code, exc.response.headers)
    if isinstance(exc, openai.APIError):  # an error event mid-stream, a timeout, no connection
        return ModelUnavailable(f"{type(exc).__name__}: {exc}")
    return ModelUnavailable(f"model call failed: {type(exc).__name__}: {exc}")


def usage_of(raw: Any) -> Usage:
    details = getattr(raw, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", 0) or 0
    prompt = getattr(raw, "prompt_tokens", 0) or 0
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=getattr(raw, "completion_tokens", 0) or 0,
        cache_read_tokens=cached,
    )


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class ReplyBuilder:
    """Streamed chunks put back together."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish: str | None = None
    usage: Usage = field(default_factory=Usage)
    request_id: str = ""

    def add(self, chunk: ChatCompletionChunk) -> tuple[str, list[str]]:
        """Take one chunk; returns its text and the names of tool calls it started."""
        self.request_id = self.request_id or chunk.id
        if chunk.usage is not None:
            self.usage = usage_of(chunk.usage)
        text, started = "", []
        for choice in chunk.choices[:1]:
            delta = choice.delta
            text = delta.content or ""
            if text:
                self.text.append(text)
            for piece in delta.tool_calls or []:
                call = self.calls.setdefault(piece.index, _Call())
                call.id = call.id or (piece.id or "")
                if piece.function is not None:
                    if piece.function.name and not call.name:
                        call.name = piece.function.name
                        started.append(call.name)
                    call.arguments += piece.function.arguments or ""
            self.finish = choice.finish_reason or self.finish
        return text, started

    def content(self) -> list[ContentBlockParam]:
        blocks: list[ContentBlockParam] = []
        text = "".join(self.text)
        if text:
            blocks.append({"type": "text", "text": text})
        for _, call in sorted(self.calls.items()):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": _tool_id(call.id),
                    "name": call.name,
                    "input": _args(call),
                }
            )
        return blocks

    def stop_reason(self) -> str:
        if self.calls:  # some servers say "stop" even when the reply calls tools
            return "tool_use"
        return STOP_REASONS.get(self.finish or "stop", "end_turn")


def _tool_id(raw: str) -> str:
    return raw if TOOL_ID_RE.fullmatch(raw) else f"toolu_{secrets.token_hex(12)}"


def _args(call: _Call) -> dict[str, Any]:
    try:
        parsed = json.loads(call.arguments or "{}")
    except ValueError:
        log.warning("tool call %s came with arguments that are not JSON", call.name)
        return {}
    return parsed if isinstance(parsed, dict) else {}


class OpenAIProvider:
    """Owns one AsyncOpenAI client (built on first use)."""

    def __init__(self, name: str, settings: ProviderConfig, *, text_max_chars: int) -> None:
        self.name = name
        self.settings = settings
        self.text_max_chars = text_max_chars
        self._client: openai.AsyncOpenAI | None = None
        self._pdfs: LRUCache[str, str | ValueError] = LRUCache(maxsize=PDF_CACHE_SIZE)

    @property
    def configured(self) -> bool:
        # A server on the LAN often needs no key; one that does answers 401, which names
        # the provider's key to set.
        return True

    @property
    def is_openai(self) -> bool:
        return not self.settings.base_url or OPENAI_HOST in self.settings.base_url

    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = openai.AsyncOpenAI(
                api_key=self.settings.api_key or NO_KEY,
                base_url=self.settings.base_url or None,
                max_retries=0,  # Krill retries (bot.providers.failures)
                timeout=self.settings.timeout,
            )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def read_pdf(self, data: bytes) -> str:
        """The PDF's text, extracted once per file while it is sent again and again."""
        key = hashlib.sha256(data).hexdigest()
        found = self._pdfs.get(key)
        if found is None:
            try:
                found = pdf_text(data, self.text_max_chars)
            except ValueError as exc:
                found = exc
            self._pdfs[key] = found
        if isinstance(found, ValueError):
            raise found
        return found

    def params(self, request: ModelRequest) -> dict[str, Any]:
        translator = ChatTranslator(
            model=f"{self.name}:{request.model}", images=request.images, read_pdf=self.read_pdf
        )
        params: dict[str, Any] = {
            "model": request.model,
            "messages": translator.messages(request.system, request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        # OpenAI's newer models refuse `max_tokens`; most other servers know only it.
        params["max_completion_tokens" if self.is_openai else "max_tokens"] = request.max_tokens
        tools = chat_tools(request.tools)
        if tools:
            params["tools"] = tools
        return params

    async def stream(
        self,
        request: ModelRequest,
        on_text: TextCallback | None = None,
        on_tool_start: ToolStartCallback | None = None,
    ) -> ModelReply:
        client = self.client()
        params = self.params(request)
        images = request.images and _has_images(params["messages"])
        started = time.monotonic()
        built = ReplyBuilder()
        began = False
        try:
            chunks = await client.chat.completions.create(**params)
            async for chunk in chunks:
                began = True
                text, tools = built.add(chunk)
                if text and on_text is not None:
                    await on_text(text)
                for name in tools:
                    if on_tool_start is not None:
                        await on_tool_start(name)
            if built.finish is None:
                raise ModelStreamInterrupted("the reply stream ended without a finish reason")
        except FAILURES as exc:
            mapped = map_error(exc, self.name, images)
            raise (interrupted(mapped) if began else mapped) from exc
        content = built.content()
        return ModelReply(
            content=content,
            stop_reason=built.stop_reason(),
            usage=built.usage,
            model=request.model,
            latency=time.monotonic() - started,
            request_id=built.request_id,
            tool_uses=[cast(Any, b) for b in content if b["type"] == "tool_use"],
        )


def _has_images(messages: list[Any]) -> bool:
    return any(
        isinstance(m.get("content"), list)
        and any(p.get("type") == "image_url" for p in m["content"])
        for m in messages
    )
