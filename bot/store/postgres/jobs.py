"""Scheduler bookkeeping in PostgreSQL: when each periodic job last ran, so restarts keep
its pace and each due run is claimed by one replica of many."""

from __future__ import annotations

from bot.store.postgres.connection import Connection
from bot.store.postgres.placeholders import numbered, rowcount
from bot.store.statements import CLAIM_JOB


class JobTables(Connection):
    async def job_last_run(self, job: str) -> float | None:
        at = await self._fetchval("SELECT last_run_at FROM scheduler_runs WHERE job = $1", job)
        return None if at is None else float(at)

    async def job_claim(self, job: str, due_before: float, at: float) -> bool:
        return rowcount(await self._execute(numbered(CLAIM_JOB), job, at, due_before)) == 1
