"""Loopback fake of an OpenAI-compatible Chat Completions server (OpenAI, OpenRouter, vLLM,
Ollama all speak it) that the real `openai.AsyncOpenAI` client talks to over HTTP: scripted
replies, recorded requests, and the server's behaviour where Krill relies on it.

- `POST /v1/chat/completions`, streamed as `chat.completion.chunk` events: text deltas,
  `tool_calls` deltas (the first names the call and its id, later ones carry pieces of the
  arguments), a last chunk with the finish reason, then, when the request asks with
  `stream_options.include_usage`, a chunk with no choices and the usage; `data: [DONE]`.
- Usage with `prompt_tokens_details.cached_tokens` from a simulated automatic prefix cache
  (as OpenAI's: prompts of 1,024 tokens or more, cached in steps of 128 tokens, a prefix
  matched exactly, kept for `ttl` seconds after its last use).
- Errors in OpenAI's shapes and wording: 401 for a wrong key, 400 for an unknown model,
  400 `context_length_exceeded` ("This model's maximum context length is N tokens.
  However, your messages resulted in M tokens."), 400 for an image sent to a text-only
  model, 400 for a malformed conversation (a tool message without its call), scripted 429
  with `retry-after` and 5xx.
- `GET /v1/models`: the models it serves.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import inspect
import io
import itertools
import json
import math
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

from tests.fakes.anthropic import estimate_tokens

__all__ = [
    "ChatError",
    "ChatReply",
    "FakeOpenAI",
    "ModelSpec",
    "PrefixCache",
    "Recorded",
    "fake_openai",
]

MIN_CACHED_TOKENS = 1024
CACHE_STEP = 128
CACHE_TTL = 600.0  # OpenAI keeps an idle prefix 5 to 10 minutes
_MAX_DELTA_CHARS = 24


def _compact(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


# --------------------------------------------------------------------------- tokens


def image_tokens(url: str) -> int:
    """What a data-URL image costs: 85 + 170 per 512-pixel tile (OpenAI's high detail)."""
    data = base64.b64decode(url.split(",", 1)[1])
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
    return 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)


def message_tokens(message: dict[str, Any]) -> int:
    content = message.get("content")
    tokens = 4  # the role and separators
    if isinstance(content, str):
        tokens += estimate_tokens(content) if content else 0
    for part in content if isinstance(content, list) else []:
        if part.get("type") == "text":
            tokens += estimate_tokens(part.get("text", ""))
        elif part.get("type") == "image_url":
            tokens += image_tokens(part["image_url"]["url"])
    for call in message.get("tool_calls") or []:
        tokens += estimate_tokens(_compact(call))
    return tokens


# --------------------------------------------------------------------------- prefix cache


class PrefixCache:
    """Automatic prefix caching: the longest earlier prompt prefix (tools, then messages,
    compared whole) still kept is read from the cache, in steps of `step` tokens, when the
    prompt has at least `min_tokens`."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        ttl: float = CACHE_TTL,
        min_tokens: int = MIN_CACHED_TOKENS,
        step: int = CACHE_STEP,
    ) -> None:
        self.clock = clock
        self.ttl = ttl
        self.min_tokens = min_tokens
        self.step = step
        self.kept: dict[bytes, float] = {}  # prefix digest -> expiry

    def process(self, body: dict[str, Any]) -> tuple[int, int]:
        """(prompt tokens, cached tokens) of a request, remembering its prefixes."""
        now = self.clock()
        self.kept = {k: t for k, t in self.kept.items() if t > now}
        digest = hashlib.sha256(str(body.get("model")).encode())
        digest.update(_compact(body.get("tools") or []).encode())
        segments = [(digest.copy().digest(), estimate_tokens(_compact(body.get("tools") or [])))]
        for message in body.get("messages") or []:
            digest.update(_compact(message).encode())
            segments.append((digest.copy().digest(), message_tokens(message)))
        cumulative = list(itertools.accumulate(tokens for _, tokens in segments))
        total = cumulative[-1]
        cached = 0
        for (key, _), upto in zip(segments, cumulative, strict=True):
            if key in self.kept:
                cached = upto
        for (key, _), upto in zip(segments, cumulative, strict=True):
            if upto >= self.min_tokens:
                self.kept[key] = now + self.ttl
        cached = cached // self.step * self.step if total >= self.min_tokens else 0
        return total, min(cached, total)


# --------------------------------------------------------------------------- scripting


@dataclass
class ChatReply:
    """An assistant message: text and/or tool calls (name, arguments, id)."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    finish_reason: str = ""  # "" = "tool_calls" when there are calls, else "stop"
    delay: float = 0.0
    drop_after: int | None = None  # cut the connection after this many streamed chars

    @classmethod
    def calling(cls, name: str, arguments: dict[str, Any], *, text: str = "") -> ChatReply:
        return cls(text=text, tool_calls=[(name, arguments, _new_id("call_"))])


@dataclass
class ChatError:
    """An HTTP error in OpenAI's shape."""

    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def response(self) -> web.Response:
        return _error(self.status, self.message, self.type, self.code, self.headers)


ReplyLike = ChatReply | ChatError | str
Handler = Callable[[dict[str, Any]], ReplyLike | Awaitable[ReplyLike]]


@dataclass
class ModelSpec:
    context_window: int = 128_000
    images: bool = True


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    usage: dict[str, Any] | None = None  # what the server answered with, when it answered
    reply: ReplyLike | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    def text(self) -> str:
        """Every text the request carries, in order."""
        out = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str):
                out.append(content)
            for part in content if isinstance(content, list) else []:
                out.append(part.get("text", ""))
        return "\n".join(out)


def _error(
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    code: str | None = None,
    headers: dict[str, str] | None = None,
    param: str | None = None,
) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return web.json_response(body, status=status, headers=headers or {})


def _validate(body: dict[str, Any], spec: ModelSpec, model: str) -> str | None:
    """What the real server would refuse with a 400, or None."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"Invalid value for 'messages[{index}].role': {role!r}"
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                return (
                    f"Invalid parameter: messages with role 'tool' must be a response to a "
                    f"preceeding message with 'tool_calls' (messages[{index}])"
                )
            open_calls.discard(message["tool_call_id"])
            continue
        if open_calls:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {', '.join(sorted(open_calls))}"
            )
        open_calls = {c["id"] for c in message.get("tool_calls") or []}
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image_url":
                if not spec.images:
                    return f"{model} does not support image input"
                url = part.get("image_url", {}).get("url", "")
                if not url.startswith("data:image/") or ";base64," not in url:
                    return f"Invalid image URL in messages[{index}]"
                try:
                    image_tokens(url)
                except Exception:
                    return f"Invalid image data in messages[{index}]: not a decodable image"
            elif part.get("type") != "text":
                return f"Invalid content part type in messages[{index}]: {part.get('type')!r}"
    for tool in body.get("tools") or []:
        function = tool.get("function") or {}
        if tool.get("type") != "function" or not function.get("name"):
            return "Invalid 'tools': each must be {type: function, function: {name, ...}}"
    return None


class FakeOpenAI:
    """The fake server. Point `AsyncOpenAI(base_url=fake.url)` (it ends in /v1) at it, queue
    replies, inspect `requests`. Unqueued requests get `default_handler`'s reply."""

    def __init__(
        self,
        *,
        models: dict[str, ModelSpec] | None = None,
        api_key: str | None = "sk-test",
        cache: PrefixCache | None = None,
    ) -> None:
        self.models = models or {"gpt-test": ModelSpec()}
        self.api_key = api_key  # None: any key (or none) is accepted, as a LAN server does
        self.cache = cache if cache is not None else PrefixCache()
        self.requests: list[Recorded] = []
        self.default_handler: Handler = self._echo
        self.chunk_delay = 0.0  # seconds between streamed chunks
        self.handler_errors: list[BaseException] = []
        self._queue: deque[Handler] = deque()
        self._arrival = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAI:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ----- scripting

    def queue(self, reply: ReplyLike | Handler, *, times: int = 1) -> None:
        if callable(reply):
            handler: Handler = reply
        else:

            def handler(_body: dict[str, Any], fixed: ReplyLike = reply) -> ReplyLike:
                return fixed

        self._queue.extend([handler] * times)

    def queue_error(
        self,
        status: int,
        message: str,
        *,
        kind: str = "server_error",
        headers: dict[str, str] | None = None,
        times: int = 1,
    ) -> None:
        self.queue(ChatError(status, message, kind, None, dict(headers or {})), times=times)

    @property
    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    async def wait_for_requests(self, n: int, *, within: float = 10.0) -> list[Recorded]:
        async with asyncio.timeout(within):
            while len(self.chat_requests) < n:
                self._arrival.clear()
                await self._arrival.wait()
        return self.chat_requests

    # ----- HTTP

    def _auth(self, request: web.Request) -> web.Response | None:
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        if self.api_key is None:
            return None
        if scheme.lower() != "bearer" or not key.strip():
            return _error(401, "You didn't provide an API key.", code="invalid_api_key")
        if key.strip() != self.api_key:
            shown = key[:3] + "*" * 6 + key[-4:] if len(key) > 8 else "*" * len(key)
            return _error(
                401,
                f"Incorrect API key provided: {shown}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                code="invalid_api_key",
            )
        return None

    async def _models(self, request: web.Request) -> web.Response:
        self.requests.append(Recorded(request.path, dict(request.headers), {}))
        refused = self._auth(request)
        if refused is not None:
            return refused
        data = [
            {"id": name, "object": "model", "created": 1_700_000_000, "owned_by": "fake"}
            for name in self.models
        ]
        return web.json_response({"object": "list", "data": data})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        rec = Recorded(request.path, dict(request.headers), body if isinstance(body, dict) else {})
        self.requests.append(rec)
        self._arrival.set()
        refused = self._auth(request)
        if refused is not None:
            return refused
        if not isinstance(body, dict):
            return _error(400, "We could not parse the JSON body of your request.")
        model = str(body.get("model", ""))
        spec = self.models.get(model)
        if spec is None:
            return _error(
                400,
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
                param="model",
            )
        problem = _validate(body, spec, model)
        if problem is not None:
            return _error(400, problem, param="messages")
        total = sum(message_tokens(m) for m in body["messages"])
        if total > spec.context_window:
            return _error(
                400,
                f"This model's maximum context length is {spec.context_window} tokens. "
                f"However, your messages resulted in {total} tokens. Please reduce the length "
                "of the messages.",
                code="context_length_exceeded",
                param="messages",
            )
        handler = self._queue.popleft() if self._queue else self.default_handler
        try:
            result = handler(body)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            self.handler_errors.append(exc)
            return _error(500, f"fake handler raised {exc!r}", "server_error")
        reply = ChatReply(text=result) if isinstance(result, str) else result
        rec.reply = reply
        if isinstance(reply, ChatError):
            return reply.response()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        prompt, cached = self.cache.process(body)
        output = estimate_tokens(reply.text + _compact(reply.tool_calls)) if reply else 0
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }
        rec.usage = usage
        if body.get("stream"):
            return await self._stream(request, body, reply, usage)
        return web.json_response(self._completion(body, reply, usage))

    @staticmethod
    def _finish(reply: ChatReply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _completion(
        self, body: dict[str, Any], reply: ChatReply, usage: dict[str, Any]
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": n, "arguments": _compact(a)}}
                for n, a, cid in reply.tool_calls
            ]
        return {
            "id": _new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish(reply)}],
            "usage": usage,
        }

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: ChatReply, usage: dict[str, Any]
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            status=200, headers={"content-type": "text/event-stream", "cache-control": "no-cache"}
        )
        await resp.prepare(request)
        base = {
            "id": _new_id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body["model"],
        }
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            chunk = {**base, "choices": [choice]}
            if with_usage:
                chunk["usage"] = None
            await resp.write(f"data: {_compact(chunk)}\n\n".encode())

        sent = 0
        try:
            await send({"role": "assistant", "content": ""})
            text = reply.text
            for start in range(0, len(text), _MAX_DELTA_CHARS):
                piece = text[start : start + _MAX_DELTA_CHARS]
                if reply.drop_after is not None and sent + len(piece) > reply.drop_after:
                    await send({"content": piece[: reply.drop_after - sent]})
                    if request.transport is not None:
                        request.transport.abort()
                    return resp
                sent += len(piece)
                await send({"content": piece})
                if self.chunk_delay:
                    await asyncio.sleep(self.chunk_delay)
            for index, (name, arguments, call_id) in enumerate(reply.tool_calls):
                opening = {"index": index, "id": call_id, "type": "function"}
                opening["function"] = {"name": name, "arguments": ""}
                await send({"tool_calls": [opening]})
                raw = _compact(arguments)
                for start in range(0, len(raw), 10):
                    piece = {"index": index, "function": {"arguments": raw[start : start + 10]}}
                    await send({"tool_calls": [piece]})
            await send({}, self._finish(reply))
            if with_usage:
                await resp.write(
                    f"data: {_compact({**base, 'choices': [], 'usage': usage})}\n\n".encode()
                )
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        return resp

    @staticmethod
    def _echo(body: dict[str, Any]) -> ReplyLike:
        """`echo: ` and the person's last words (the line inside Krill's untrusted block)."""
        for message in reversed(body.get("messages") or []):
            if message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, list):
                    content = " ".join(p.get("text", "") for p in content)
                text = str(content)
                return f"echo: {text.split(chr(10))[-2] if '<<<END_UNTRUSTED' in text else text}"
        return "echo: "


@pytest_asyncio.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as fake:
        yield fake
