"""What the context pipeline needs from the running service, as narrow protocols.

`bot.app.App` provides them. Naming them here keeps `bot.context` below `bot.agent`: the
pipeline and compaction never import the runner, the model client or the workspace.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from anthropic.types import MessageParam, TextBlockParam

from bot.types import Usage

if TYPE_CHECKING:
    from bot.config import Config
    from bot.metrics import Metrics
    from bot.store.base import SessionRow, Store
    from bot.tools.registry import ToolRegistry


class ModelAnswer(Protocol):
    """The parts of a model reply compaction reads."""

    usage: Usage
    model: str

    @property
    def text(self) -> str: ...


class SummaryModel(Protocol):
    async def complete(
        self,
        *,
        system: list[TextBlockParam],
        messages: list[MessageParam],
        max_tokens: int | None = None,
    ) -> ModelAnswer: ...


class TurnRunner(Protocol):
    """The runner's system prompt, its clock and the hooks that run before a compaction."""

    before_compaction: list[Callable[[SessionRow], Awaitable[None]]]
    clock: Callable[[], float]

    def system_blocks(self, *, is_direct: bool) -> list[TextBlockParam]: ...


class WorkspaceFiles(Protocol):
    def read_text(self, name: str) -> str | None: ...


class ContextHost(Protocol):
    """Everything the pipeline and compaction use (read-only: they never replace one)."""

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
    def runner(self) -> TurnRunner: ...
    @property
    def metrics(self) -> Metrics: ...
