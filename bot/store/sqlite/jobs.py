"""Scheduler bookkeeping in SQLite: when each periodic job last ran, so restarts keep its pace."""

from __future__ import annotations

from bot.store.sqlite.connection import Connection


class JobTables(Connection):
    async def job_last_run(self, job: str) -> float | None:
        row = await self._fetchone("SELECT last_run_at FROM scheduler_runs WHERE job = ?", (job,))
        return float(row[0]) if row else None

    async def job_record_run(self, job: str, at: float) -> None:
        async with self.transaction() as db:
            await db.execute(
                "INSERT OR REPLACE INTO scheduler_runs(job, last_run_at) VALUES (?, ?)", (job, at)
            )
