"""What the context pipeline needs from the rest of the service, as narrow protocols.

The composition root (`bot.app`) passes the real objects to `ContextPipeline`. Naming them
here keeps `bot.context` below `bot.agent`: the pipeline and compaction never import the
model client, the workspace or the runner's hooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from anthropic.types import MessageParam, TextBlockParam, ToolUnionParam

from bot.types import Usage

if TYPE_CHECKING:
    from bot.config import Config
    from bot.store.base import SessionRow, Store
    from bot.tools.registry import ToolRegistry


class ModelAnswer(Protocol):
    """The parts of a model reply compaction reads."""

    usage: Usage
    model: str

    @property
    def text(self) -> str: ...


class SummaryModel(Protocol):
    async def serving(self, model: str) -> str:
        """The model a call meant for `model` goes to now (a fallback while it cools down)."""
        ...

    async def complete(
        self,
        *,
        system: list[TextBlockParam],
        messages: list[MessageParam],
        tools: list[ToolUnionParam] | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> ModelAnswer: ...


@dataclass(frozen=True, slots=True)
class CachedPrefix:
    """A session's request as its own turns send it (model, system prompt, tools,
    messages). A summarizer call that extends it reads the conversation's warm prompt cache
    instead of paying for the history again; caches are per model, so the call must name
    the same one."""

    model: str
    system: list[TextBlockParam]
    tools: list[ToolUnionParam]
    messages: list[MessageParam]


class UsageCharger(Protocol):
    """Counts a model call outside the conversation (`bot.agent.accounting.UsageAccountant`)."""

    async def charge(
        self,
        session_id: str,
        usage: Usage,
        model: str,
        *,
        latency: float | None = None,
        read_cache: bool,
        context_tokens: int | None = None,
    ) -> None: ...


class BeforeCompaction(Protocol):
    """Runs before history is compacted (e.g. a memory flush); a failure never blocks it."""

    async def before_compaction(self, session: SessionRow) -> None: ...


class WorkspaceFiles(Protocol):
    """The system prompt as requests carry it, and the workspace's files."""

    def system_blocks(self, *, is_direct: bool) -> list[TextBlockParam]: ...

    def read_text(self, name: str) -> str | None: ...


class ContextHost(Protocol):
    """Everything compaction uses (`bot.context.pipeline.ContextPipeline` provides it);
    read-only: compaction never replaces one."""

    @property
    def config(self) -> Config: ...
    @property
    def store(self) -> Store: ...
    @property
    def model(self) -> SummaryModel: ...
    @property
    def workspace(self) -> WorkspaceFiles: ...
    @property
    def tools(self) -> ToolRegistry: ...
    @property
    def accountant(self) -> UsageCharger: ...
    @property
    def before_compaction(self) -> Sequence[BeforeCompaction]: ...
