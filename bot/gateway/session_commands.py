"""What the session commands do (/reset, /stop, /compact and the facts /status shows), for
the chat commands (`bot.commands.CommandHost`), `krill reset`, the scheduler and the
operator console (which queues its resets and compactions in the session's lane).

Each collaborator comes in through a small protocol: the compactor, the flush that runs
before a reset, and the sources of extra /status lines (MCP servers, the scheduler).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from bot.gateway.lanes import inbound_ids
from bot.sessions import access
from bot.sessions.keys import conversation_of_key
from bot.store.base import InboundStatus, SessionRow
from bot.types import InboundMessage, SessionOrigin

if TYPE_CHECKING:
    from bot.config import Config
    from bot.gateway.lanes import Lanes
    from bot.skills.catalog import SkillCatalog
    from bot.store.base import Store

log = logging.getLogger(__name__)

COMPACTION_FAILED = "Sorry, compaction failed; the history is unchanged."
COMPACTION_UNAVAILABLE = "Compaction is not available in this build."


class Compactor(Protocol):
    async def compact(self, session_key: str, focus: str) -> str:
        """Compact a session now (the caller holds its lane); returns what to tell the person."""
        ...


class BeforeReset(Protocol):
    async def before_reset(self, key: str) -> None:
        """Runs in the session's lane before a new session starts (e.g. a memory flush)."""
        ...


class ToolNames(Protocol):
    def names(self) -> list[str]: ...


class StatusSource(Protocol):
    def status_line(self, key: str) -> str | None: ...


class SessionCommands:
    """Implements `bot.commands.CommandHost` over the store and the lanes."""

    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        lanes: Lanes,
        model_configured: bool,
        tools: ToolNames,
        skills: SkillCatalog | None = None,
        compactor: Compactor | None = None,
        before_reset: BeforeReset | None = None,
        status_sources: Sequence[StatusSource] = (),
    ) -> None:
        self.config = config
        self.store = store
        self.lanes = lanes
        self.model_configured = model_configured
        self.tools = tools
        self.skills = skills
        self.compactor = compactor
        self.before_reset = before_reset
        self.status_sources = tuple(status_sources)

    def is_admin(self, msg: InboundMessage) -> bool:
        return access.is_admin(msg.principal, self.config.admin)

    async def current_session(self, key: str) -> SessionRow | None:
        return await self.store.current_session(key)

    def waiting(self, key: str) -> int:
        return self.lanes.queue.depth(key)

    def running(self, key: str) -> bool:
        return self.lanes.queue.busy(key)

    def tool_names(self) -> list[str]:
        return self.tools.names()

    def status_lines(self, key: str) -> list[str]:
        return [line for source in self.status_sources if (line := source.status_line(key))]

    async def reset(self, key: str, origin: SessionOrigin, *, reason: str) -> SessionRow:
        """Start a new session under `key`, after the pre-reset flush (a failed flush is
        logged and the reset goes ahead). The caller holds the session's lane, or is
        `krill reset`."""
        if self.before_reset is not None:
            try:
                await self.before_reset.before_reset(key)
            except Exception:
                log.exception("pre-reset flush failed for %s; resetting anyway", key)
        return await self.store.start_new_session(key, origin, reason)

    async def choose_model(self, key: str, origin: SessionOrigin, model: str) -> SessionRow:
        """Persist `model` as the session's choice; its next request uses it."""
        session = await self.store.get_or_create_session(key, origin)
        await self.store.choose_model(session.session_id, model)
        return session

    async def previous_session(self, session: SessionRow) -> SessionRow | None:
        """The session `session`'s key had before it (after /reset or a fresh start)."""
        earlier = [
            s
            for s in await self.store.sessions_for_key(session.session_key)
            if s.created_at < session.created_at
        ]
        return earlier[-1] if earlier else None

    async def stop(self, key: str) -> int:
        """Cancel the running turn and drop queued messages; returns how many were dropped.
        The turn and the queue may be in another process too: it is asked to stop, and the
        messages it holds are cancelled in the store, so it skips them."""
        running, waiting = self.lanes.stop(key)
        here = inbound_ids(running) + inbound_ids(waiting)
        await self.lanes.leases.request_stop(key)
        elsewhere = [row for row in await self.store.unfinished_in(key) if row.id not in here]
        dropped = inbound_ids(waiting) + [
            row.id for row in elsewhere if row.status == InboundStatus.PENDING
        ]
        await self.store.set_inbound_status(
            here + [row.id for row in elsewhere], InboundStatus.CANCELLED
        )
        return len(dropped)

    async def compact(self, key: str, focus: str) -> str:
        """Compact `key`'s history; the caller holds the session's lane. A failure is
        logged and the person gets a short message, not the exception."""
        if self.compactor is None:
            return COMPACTION_UNAVAILABLE
        try:
            return await self.compactor.compact(key, focus)
        except Exception:
            log.exception("compaction of %s failed", key)
            return COMPACTION_FAILED

    async def reset_in_lane(self, key: str, *, reason: str) -> str:
        """Reset `key` behind the work in its lane; what to tell the operator."""
        current = await self.store.current_session(key)
        if current is None:
            return f"no session with key {key}"
        origin = current.origin or conversation_of_key(key, current.channel)
        session = await self.lanes.run_in_lane(key, lambda: self.reset(key, origin, reason=reason))
        if session is None:
            return f"the reset of {key} did not run (stopped, or it failed: see the log)"
        return f"new session {session.session_id} (old {current.session_id} kept)"

    async def compact_in_lane(self, key: str, focus: str = "") -> str:
        """Compact `key` behind the work in its lane; what to tell the operator."""
        said = await self.lanes.run_in_lane(key, lambda: self.compact(key, focus))
        return said or COMPACTION_FAILED
