"""What the runner is given besides the model and the store: small protocols for memory
recall, work before a person's turn, context preparation, overflow recovery and work before
a compaction. The composition root passes objects that have these methods."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bot.agent.runner import TurnJob
    from bot.errors import ContextOverflow
    from bot.store.base import Entry, SessionRow


class MemoryRecall(Protocol):
    async def recall(self, job: TurnJob, session: SessionRow) -> str | None:
        """Text to attach to the person's turn before it is written (memory snippets)."""
        ...


class BeforeTurn(Protocol):
    async def before_turn(self, job: TurnJob, session: SessionRow) -> None:
        """Work inside the session's lane before a person's turn (a threshold flush)."""
        ...


class ContextPreparer(Protocol):
    async def prepare(
        self, session: SessionRow, history: list[Entry], messages: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The messages to send for the next model call (pruned, compacted)."""
        ...


class OverflowRecovery(Protocol):
    async def recover_overflow(
        self, session: SessionRow, error: ContextOverflow, attempt: int
    ) -> bool:
        """Make room after "prompt is too long"; True to try the call again."""
        ...


class BeforeCompaction(Protocol):
    async def before_compaction(self, session: SessionRow) -> None:
        """Work before history is compacted (a memory flush); run by compaction."""
        ...
