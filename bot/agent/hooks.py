"""What the agent runner is given besides the model: the narrow protocols of the parts that
take part in a turn (memory recall, housekeeping before a turn, context management). The
composition root (`bot.app`) passes them to `AgentRunner`'s constructor. (What runs before
a compaction is `bot.context.host.BeforeCompaction`: context asks for it.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from anthropic.types import MessageParam

if TYPE_CHECKING:
    from bot.agent.job import TurnJob
    from bot.errors import ContextOverflow
    from bot.store.base import SessionRow
    from bot.transcript import Entry


class TurnRecall(Protocol):
    """Memory recall: text to attach to a person's turn before it is written, or None."""

    async def recall(self, job: TurnJob, session: SessionRow) -> str | None: ...


class BeforeTurn(Protocol):
    """Housekeeping inside the session's lane before a person's turn (e.g. a memory flush).
    A failure is logged and never blocks the turn."""

    async def before_turn(self, job: TurnJob, session: SessionRow) -> None: ...


class SessionStart(Protocol):
    """Picks the session a new person's turn runs in (`bot.memory.fresh_start`): the
    current one, or a fresh one, with a notice for the reply ("" when unchanged)."""

    async def session_for(self, job: TurnJob, session: SessionRow) -> tuple[SessionRow, str]: ...


class ContextManager(Protocol):
    """Shapes the messages of every model call and makes room after an overflow."""

    async def prepare(
        self,
        session: SessionRow,
        history: list[Entry],
        messages: list[MessageParam],
        model: str | None = None,
    ) -> list[MessageParam]: ...

    async def recover_overflow(
        self, session: SessionRow, error: ContextOverflow, attempt: int
    ) -> bool:
        """Make room and return True to retry, or False to give up."""
        ...
