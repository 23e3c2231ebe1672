"""Scheduled jobs (schedule_create): one row each, holding where the job posts, who set it
up, its cron line and zone, its task, its state, and how its runs went.

`next_run_at` is the due time of the run to do next; it moves on only when a run (or a
skip) is recorded for exactly that due time, in one conditional write, so of several
processes that ran or skipped the same due time one records it, and a run that never got
recorded (a crash) is found still due at the next start."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from bot.store.db import Db, Row
from bot.types import Address


class JobState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    CANCELLED = "cancelled"


@dataclass(slots=True)
class ScheduledJob:
    id: int
    session_key: str  # the session its runs take place in
    address: Address  # where its messages go: the chat, thread or forum topic
    creator: str  # principal, "<channel>:<user_id>"
    creator_name: str
    name: str
    task: str  # what to do at each run, in the creator's words
    cron: str  # five fields, read in `timezone`
    timezone: str
    state: JobState
    next_run_at: float  # the due time of the next run (after downtime: the first missed)
    created_at: float
    last_run_at: float | None = None  # the due time the last recorded run was for
    last_outcome: str = ""
    failures: int = 0  # runs failed in a row
    runs: int = 0
    cost_usd: float = 0.0  # every run's model calls together
    last_cost_usd: float = 0.0
    paused_reason: str = ""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """How the run due at `due_at` went, and what follows it."""

    due_at: float
    next_run_at: float
    outcome: str
    ran: bool = True  # False: skipped (catch_up = "skip"), nothing ran
    cost_usd: float = 0.0
    failures: int = 0  # failed runs in a row, this one included
    state: JobState = JobState.ACTIVE  # PAUSED after too many failures
    paused_reason: str = ""


class ScheduleStore(Protocol):
    """Scheduled jobs: rows every replica's timers are rebuilt from."""

    async def schedule_add(
        self,
        *,
        session_key: str,
        address: Address,
        creator: str,
        creator_name: str,
        name: str,
        task: str,
        cron: str,
        timezone: str,
        next_run_at: float,
        created_at: float,
    ) -> ScheduledJob: ...
    async def schedule_get(self, job_id: int) -> ScheduledJob | None: ...
    async def schedules(
        self,
        *,
        states: tuple[JobState, ...] = (JobState.ACTIVE, JobState.PAUSED),
        creator: str | None = None,
        channel: str | None = None,
        chat_id: str | None = None,
    ) -> list[ScheduledJob]:
        """Ordered by id; None filters nothing."""
        ...

    async def schedule_set_state(
        self,
        job_id: int,
        state: JobState,
        *,
        was: tuple[JobState, ...],
        next_run_at: float | None = None,
        reason: str = "",
    ) -> bool:
        """Move a job in one of the states `was` to `state` (resuming also sets its next
        run and clears its failures); False when it was in none of them."""
        ...

    async def schedule_record_run(self, job_id: int, record: RunRecord) -> bool:
        """Record the run due at `record.due_at` of an active job whose next run is still
        that one; False when another process recorded it first (or the job was paused or
        cancelled meanwhile)."""
        ...


COLUMNS = (
    "id, session_key, address, creator, creator_name, name, task, cron, timezone, state,"
    " next_run_at, created_at, last_run_at, last_outcome, failures, runs, cost_usd,"
    " last_cost_usd, paused_reason"
)


def _job(row: Row) -> ScheduledJob:
    values = list(row)
    return ScheduledJob(
        id=int(values[0]),
        session_key=values[1],
        address=Address.from_json(values[2]),
        creator=values[3],
        creator_name=values[4],
        name=values[5],
        task=values[6],
        cron=values[7],
        timezone=values[8],
        state=JobState(values[9]),
        next_run_at=float(values[10]),
        created_at=float(values[11]),
        last_run_at=None if values[12] is None else float(values[12]),
        last_outcome=values[13],
        failures=int(values[14]),
        runs=int(values[15]),
        cost_usd=float(values[16]),
        last_cost_usd=float(values[17]),
        paused_reason=values[18],
    )


class ScheduleTables:
    db: Db

    async def schedule_add(
        self,
        *,
        session_key: str,
        address: Address,
        creator: str,
        creator_name: str,
        name: str,
        task: str,
        cron: str,
        timezone: str,
        next_run_at: float,
        created_at: float,
    ) -> ScheduledJob:
        row = await self.db.fetchrow(
            "INSERT INTO scheduled_jobs(session_key, address, channel, chat_id, creator,"
            " creator_name, name, task, cron, timezone, state, next_run_at, created_at)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {COLUMNS}",
            session_key,
            address.to_json(),
            address.channel,
            address.chat_id,
            creator,
            creator_name,
            name,
            task,
            cron,
            timezone,
            str(JobState.ACTIVE),
            next_run_at,
            created_at,
        )
        assert row is not None
        return _job(row)

    async def schedule_get(self, job_id: int) -> ScheduledJob | None:
        row = await self.db.fetchrow(f"SELECT {COLUMNS} FROM scheduled_jobs WHERE id = ?", job_id)
        return _job(row) if row else None

    async def schedules(
        self,
        *,
        states: tuple[JobState, ...] = (JobState.ACTIVE, JobState.PAUSED),
        creator: str | None = None,
        channel: str | None = None,
        chat_id: str | None = None,
    ) -> list[ScheduledJob]:
        condition, args = self.db.dialect.one_of("state", [str(s) for s in states])
        where, values = [condition], list[Any](args)
        for column, value in (("creator", creator), ("channel", channel), ("chat_id", chat_id)):
            if value is not None:
                where.append(f"{column} = ?")
                values.append(value)
        rows = await self.db.fetch(
            f"SELECT {COLUMNS} FROM scheduled_jobs WHERE {' AND '.join(where)} ORDER BY id",
            *values,
        )
        return [_job(r) for r in rows]

    async def schedule_set_state(
        self,
        job_id: int,
        state: JobState,
        *,
        was: tuple[JobState, ...],
        next_run_at: float | None = None,
        reason: str = "",
    ) -> bool:
        condition, args = self.db.dialect.one_of("state", [str(s) for s in was])
        resumed = state == JobState.ACTIVE
        changed = await self.db.execute(
            "UPDATE scheduled_jobs SET state = ?, paused_reason = ?,"
            " next_run_at = COALESCE(?, next_run_at),"
            f" failures = CASE WHEN ? THEN 0 ELSE failures END WHERE id = ? AND {condition}",
            str(state),
            reason,
            next_run_at,
            resumed,
            job_id,
            *args,
        )
        return changed == 1

    async def schedule_record_run(self, job_id: int, record: RunRecord) -> bool:
        ran = 1 if record.ran else 0
        changed = await self.db.execute(
            "UPDATE scheduled_jobs SET next_run_at = ?, last_run_at = ?, last_outcome = ?,"
            " failures = ?, runs = runs + ?, cost_usd = cost_usd + ?,"
            " last_cost_usd = CASE WHEN ? = 1 THEN ? ELSE last_cost_usd END,"
            " state = ?, paused_reason = ?"
            " WHERE id = ? AND state = ? AND next_run_at = ?",
            record.next_run_at,
            record.due_at,
            record.outcome,
            record.failures,
            ran,
            record.cost_usd,
            ran,
            record.cost_usd,
            str(record.state),
            record.paused_reason,
            job_id,
            str(JobState.ACTIVE),
            record.due_at,
        )
        return changed == 1
