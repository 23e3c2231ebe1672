"""Scheduler bookkeeping in SQLite: when each periodic job last ran, so restarts keep its pace
and, with several processes on one store, each due run is claimed by one of them."""

from __future__ import annotations

from bot.store.sqlite.connection import Connection

# Inserted for a job never run; otherwise updated only when the last run is old enough, so
# of several processes claiming the same due moment exactly one write takes effect.
_CLAIM = (
    "INSERT INTO scheduler_runs(job, last_run_at) VALUES (?, ?)"
    " ON CONFLICT(job) DO UPDATE SET last_run_at = excluded.last_run_at"
    " WHERE scheduler_runs.last_run_at <= ?"
)


class JobTables(Connection):
    async def job_last_run(self, job: str) -> float | None:
        row = await self._fetchone("SELECT last_run_at FROM scheduler_runs WHERE job = ?", (job,))
        return float(row[0]) if row else None

    async def job_claim(self, job: str, due_before: float, at: float) -> bool:
        async with self.transaction() as db:
            cur = await db.execute(_CLAIM, (job, at, due_before))
            return cur.rowcount == 1
