"""`krill schedules list|pause|resume|cancel [ID]`: every scheduled job in the store, for
the operator on the host, who may change any of them. A running service picks the change
up within `storage.lease_seconds`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from bot.cli.store_access import with_store
from bot.config import Config
from bot.scheduler.jobs import service_clock
from bot.scheduler.schedules import ScheduleRefused, Schedules
from bot.store.base import Store
from bot.store.schedules import JobState


def schedules_command(config: Config, args: argparse.Namespace) -> int:
    async def run(store: Store) -> int:
        book = Schedules(config, store, service_clock(config.scheduler))
        if args.action == "list":
            return await _list(book, store, args)
        if args.id is None:
            print(f"krill schedules {args.action}: give the job's ID (krill schedules list)")
            return 2
        try:
            job = await book.operate(args.id, args.action)
        except ScheduleRefused as exc:
            print(f"krill schedules {args.action}: {exc}", file=sys.stderr)
            return 1
        print(book.summary(job) if job.state != JobState.CANCELLED else f"#{job.id} cancelled")
        return 0

    return asyncio.run(with_store(config, run))


async def _list(book: Schedules, store: Store, args: argparse.Namespace) -> int:
    states = tuple(JobState) if args.all else (JobState.ACTIVE, JobState.PAUSED)
    jobs = await store.schedules(states=states)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "id": j.id,
                        "name": j.name,
                        "state": j.state,
                        "cron": j.cron,
                        "timezone": j.timezone,
                        "schedule": book.describe(j),
                        "next_run_at": j.next_run_at,
                        "last_run_at": j.last_run_at,
                        "last_outcome": j.last_outcome,
                        "failures": j.failures,
                        "runs": j.runs,
                        "cost_usd": j.cost_usd,
                        "session_key": j.session_key,
                        "address": j.address.to_dict(),
                        "creator": j.creator,
                        "task": j.task,
                    }
                    for j in jobs
                ],
                ensure_ascii=False,
            )
        )
        return 0
    if not jobs:
        print("No scheduled jobs.")
        return 0
    for job in jobs:
        state = " [cancelled]" if job.state == JobState.CANCELLED else ""
        print(f"{book.summary(job)}{state}")
        print(f"  set up by {job.creator} in {job.session_key}")
        print(f"  task: {job.task}")
    return 0
