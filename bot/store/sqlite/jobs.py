"""Scheduler bookkeeping in SQLite: when each periodic job last ran, so restarts keep its pace
and, with several processes on one store, each due run is claimed by one of them."""

from __future__ import annotations

from bot.store.sqlite.connection import Connection
from bot.store.statements import CLAIM_JOB


class JobTables(Connection):
    async def job_last_run(self, job: str) -> float | None:
        row = await self._fetchone("SELECT last_run_at FROM scheduler_runs WHERE job = ?", (job,))
        return float(row[0]) if row else None

    async def job_claim(self, job: str, due_before: float, at: float) -> bool:
        async with self.transaction() as db:
            cur = await db.execute(CLAIM_JOB, (job, at, due_before))
            return cur.rowcount == 1
