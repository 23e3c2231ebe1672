"""The optional heartbeat: every `scheduler.heartbeat_minutes`, a silent turn works through
the operator's HEARTBEAT.md checklist in the most recently active DM session (or the one
`scheduler.heartbeat_session` names) and sends what needs the person's attention. With
several replicas, one of them beats each interval."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from bot.agent.job import TurnJob, new_turn_id
from bot.scheduler.jobs import claim_run
from bot.sessions.limits import history_limit_for
from bot.transcript import PromptPurpose

if TYPE_CHECKING:
    from bot.agent.runner import AgentRunner
    from bot.config import Config
    from bot.gateway.lanes import Lanes
    from bot.gateway.replies import Replies
    from bot.scheduler.jobs import Jobs
    from bot.store.base import SessionRow, Store

log = logging.getLogger(__name__)

HEARTBEAT_JOB = "heartbeat"
HEARTBEAT_FILE = "HEARTBEAT.md"
HEARTBEAT_OK = "HEARTBEAT_OK"
HEARTBEAT_PROMPT = (
    "[Heartbeat: a scheduled check, not a message from anyone] Work through the checklist "
    "below, which the operator keeps in HEARTBEAT.md. Do not infer or repeat old tasks from "
    "earlier chats. If something needs the person's attention, write the message for them; "
    f"if nothing does, reply exactly {HEARTBEAT_OK}.\n\n{{checklist}}"
)

_HTML_COMMENT_RE = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
# The token with the punctuation models put around it ("HEARTBEAT_OK." / "HEARTBEAT_OK - ").
_LEADING_OK_RE = re.compile(rf"\A\s*{HEARTBEAT_OK}[\s.:!\-–—]*")
_TRAILING_OK_RE = re.compile(rf"\s*{HEARTBEAT_OK}[\s.!]*\Z")


def heartbeat_checklist(text: str | None) -> str:
    """HEARTBEAT.md without HTML comments; "" when nothing but comments and blanks is left."""
    return _HTML_COMMENT_RE.sub("", text or "").strip()


def heartbeat_message(reply: str) -> str | None:
    """What to send after a heartbeat: None for an acknowledgement (`HEARTBEAT_OK` with
    nothing else), else the reply without a leading or trailing token."""
    text = _TRAILING_OK_RE.sub("", _LEADING_OK_RE.sub("", reply, count=1), count=1).strip()
    return text or None


class Heartbeat:
    def __init__(
        self,
        *,
        config: Config,
        store: Store,
        jobs: Jobs,
        lanes: Lanes,
        runner: AgentRunner,
        replies: Replies,
    ) -> None:
        self.config = config
        self.store = store
        self.jobs = jobs
        self.lanes = lanes
        self.runner = runner
        self.replies = replies

    async def run(self) -> None:
        await self.jobs.guarded(HEARTBEAT_JOB, self._beat)

    async def _beat(self) -> None:
        interval = self.config.scheduler.heartbeat_minutes * 60
        if not await claim_run(self.store, HEARTBEAT_JOB, interval, self.jobs.clock()):
            return
        checklist = heartbeat_checklist(self.runner.workspace.read_text(HEARTBEAT_FILE))
        if not checklist:
            return
        session = await self._session()
        if session is None or session.address is None:
            log.info("heartbeat skipped: no direct-message session to report to yet")
            return
        key = session.session_key
        if self.lanes.busy(key):
            log.info("heartbeat skipped: %s is busy", key)
            return
        address = session.address
        job = TurnJob(
            key,
            new_turn_id(),
            prompt=HEARTBEAT_PROMPT.format(checklist=checklist),
            kind=PromptPurpose.HEARTBEAT,
            history_limit=history_limit_for(self.config, session.origin),
        )

        async def beat() -> None:
            outcome = await self.runner.run(job)
            message = heartbeat_message(outcome.text) if outcome.error is None else None
            if message:
                await self.replies.send_text(address, message)

        await self.lanes.run_in_lane(key, beat)

    async def _session(self) -> SessionRow | None:
        wanted = self.config.scheduler.heartbeat_session.strip().lower()
        if wanted:
            return await self.store.current_session(wanted)
        candidates = [
            s
            for s in await self.store.list_sessions(current_only=True)
            if s.address is not None and s.is_direct
        ]
        return max(candidates, key=lambda s: s.last_activity_at or 0.0, default=None)
