"""Scheduler bookkeeping in PostgreSQL: when each periodic job last ran, so restarts keep
its pace."""

from __future__ import annotations

from bot.store.postgres.connection import Connection


class JobTables(Connection):
    async def job_last_run(self, job: str) -> float | None:
        at = await self._fetchval("SELECT last_run_at FROM scheduler_runs WHERE job = $1", job)
        return None if at is None else float(at)

    async def job_record_run(self, job: str, at: float) -> None:
        await self._execute(
            "INSERT INTO scheduler_runs(job, last_run_at) VALUES ($1, $2)"
            " ON CONFLICT (job) DO UPDATE SET last_run_at = EXCLUDED.last_run_at",
            job,
            at,
        )
