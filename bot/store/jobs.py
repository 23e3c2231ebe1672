"""Scheduler bookkeeping: when each periodic job last ran, so restarts keep its pace and,
with several processes on one store, each due run is claimed by one of them."""

from __future__ import annotations

from typing import Protocol

from bot.store.db import Db


class JobStore(Protocol):
    """When each periodic scheduler job last ran."""

    async def job_last_run(self, job: str) -> float | None: ...
    async def job_claim(self, job: str, due_before: float, at: float) -> bool:
        """Record a run of `job` at `at` unless one was recorded after `due_before`; whether
        this caller won the run (one conditional write, so one replica of many does)."""
        ...


class JobTables:
    db: Db

    async def job_last_run(self, job: str) -> float | None:
        at = await self.db.fetchval("SELECT last_run_at FROM scheduler_runs WHERE job = ?", job)
        return None if at is None else float(at)

    async def job_claim(self, job: str, due_before: float, at: float) -> bool:
        # Inserted for a job never run; otherwise updated only when the last run is old
        # enough, so of several processes claiming the same due moment one write counts.
        claimed = await self.db.execute(
            "INSERT INTO scheduler_runs(job, last_run_at) VALUES (?, ?)"
            " ON CONFLICT(job) DO UPDATE SET last_run_at = excluded.last_run_at"
            " WHERE scheduler_runs.last_run_at <= ?",
            job,
            at,
            due_before,
        )
        return claimed == 1
