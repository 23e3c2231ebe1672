"""The shapes that cross the provider edge: one request as the core builds it, the reply as
the core reads it, and what every provider adapter offers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from anthropic.types import (
    ContentBlockParam,
    MessageParam,
    TextBlockParam,
    ToolUnionParam,
    ToolUseBlockParam,
)

from bot.types import Usage

# The stop reason of a reply the provider paused during its own (server-side) tool use.
PAUSE_TURN = "pause_turn"

TextCallback = Callable[[str], Awaitable[None]]
ToolStartCallback = Callable[[str], Awaitable[None]]


@dataclass(slots=True)
class ModelRequest:
    """One model call, Anthropic-shaped (cache breakpoints included)."""

    model: str  # the provider's own name for the model (no provider prefix)
    system: list[TextBlockParam]
    messages: list[MessageParam]
    tools: list[ToolUnionParam]
    max_tokens: int
    images: bool = True  # False: the model cannot read images, it gets a note instead


@dataclass(slots=True)
class ModelReply:
    content: list[ContentBlockParam]
    stop_reason: str
    usage: Usage
    model: str  # the model id as the config names it (provider prefix included)
    latency: float = 0.0
    request_id: str = ""
    tool_uses: list[ToolUseBlockParam] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.content if b["type"] == "text")


class Provider(Protocol):
    """One configured provider: streams a request, raising a `bot.errors.ModelError` for
    every failure of the API or the network under it (one attempt: the caller retries)."""

    @property
    def configured(self) -> bool:
        """Whether it has what a call needs (a key, where one is required)."""
        ...

    async def stream(
        self,
        request: ModelRequest,
        on_text: TextCallback | None = None,
        on_tool_start: ToolStartCallback | None = None,
    ) -> ModelReply: ...

    async def close(self) -> None: ...
